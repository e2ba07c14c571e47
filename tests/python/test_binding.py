# SPDX-License-Identifier: BSD-3-Clause
"""The ctypes binding (python/tally) against a real tallyd.

Two clients in this process are the two local ranks of a daemon with
--local-size 2, so every all-reduce has two members.  Inputs are small
integers, exact in every dtype, so results are compared bit for bit.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

import numpy as np
import torch

import tally
from tally import TallyError
from tallyd_fixture import Tallyd

PYTHON_DIR = str(Path(__file__).resolve().parents[2] / "python")
SIZES = (1, 7, 4095, 4097, 300001)


def values(rank, n):
    i = np.arange(n, dtype=np.int64)
    return ((i * 31 + rank * 7) % 23 - 11).astype(np.float64)


class TwoClients(unittest.TestCase):
    def setUp(self):
        self.daemon = Tallyd(local_size=2)
        self.a = tally.Client(self.daemon.sock)
        self.b = tally.Client(self.daemon.sock)
        self.killed = False

    def tearDown(self):
        self.a.close()
        self.b.close()
        status = self.daemon.stop()
        if not self.killed:
            self.assertEqual(status, 0, self.daemon.log_text())

    def both(self, make, **kw):
        """All-reduce make(client, rank) on both clients; the results."""
        bufs = [make(c, r) for r, c in enumerate((self.a, self.b))]
        reqs = [c.allreduce(x, **kw) for c, x in zip((self.a, self.b),
                                                      bufs)]
        for r in reqs:
            r.wait(10)
        return bufs


class TestAllreduce(TwoClients):
    def test_numpy_dtypes_ops_sizes_exact(self):
        it = 0
        for dtype in ("float32", "float16", "int32"):
            for op in (tally.SUM, tally.AVG):
                for n in SIZES:
                    if op == tally.AVG and dtype == "int32":
                        continue    # integer division: its own test
                    def make(c, r):
                        a = c.alloc(n * 4).numpy(dtype, count=n)
                        a[:] = values(r, n)
                        return a
                    it += 1
                    out = self.both(make, key=1, iteration=it, op=op)
                    want = values(0, n) + values(1, n)
                    if op == tally.AVG:
                        want = want / 2
                    for o in out:
                        np.testing.assert_array_equal(
                            o.astype(np.float64), want,
                            err_msg="%s op %d n %d" % (dtype, op, n))

    def test_torch_bfloat16_exact(self):
        n = 4097

        def make(c, r):
            t = c.alloc(n * 2).torch(torch.bfloat16, count=n)
            t.copy_(torch.from_numpy(values(r, n)))
            return t
        out = self.both(make, key=2, iteration=1, op=tally.SUM)
        want = torch.from_numpy(values(0, n) + values(1, n))
        for o in out:
            self.assertTrue(torch.equal(o.double(), want))

    def test_out_of_place(self):
        n = 1000
        sends, recvs, reqs = [], [], []
        for r, c in enumerate((self.a, self.b)):
            buf = c.alloc(8 * n)
            s, d = buf.numpy("int32", n, 0), buf.numpy("int32", n, 4 * n)
            s[:] = values(r, n)
            d[:] = 99
            sends.append(s)
            recvs.append(d)
            reqs.append(c.allreduce(s, d, key=3, iteration=1))
        for q in reqs:
            q.wait(10)
        for r in range(2):
            np.testing.assert_array_equal(sends[r], values(r, n))
            np.testing.assert_array_equal(recvs[r],
                                          values(0, n) + values(1, n))

    def test_views_share_memory(self):
        buf = self.a.alloc(4096)
        t = buf.torch(torch.float32)
        a = buf.numpy("float32")
        t[5] = 3.5
        self.assertEqual(a[5], 3.5)
        self.assertIs(self.a.buffer_of(t.data_ptr() + 16, 64), buf)
        self.assertIsNone(self.a.buffer_of(t.data_ptr() + 4000, 200))
        self.assertIsNone(self.a.buffer_of(np.zeros(4).ctypes.data, 8))

    def test_more_than_max_inflight(self):
        """300 operations in flight, more than the 256 the rings hold:
        submission waits for room, nothing is lost."""
        n, ops = 16, 300
        bufs = [c.alloc(ops * n * 4).numpy("int32") for c in
                (self.a, self.b)]
        results = {}

        def submit(c, rank, buf):
            reqs = []
            for i in range(ops):
                v = buf[i * n:(i + 1) * n]
                v[:] = i + rank
                reqs.append(c.allreduce(v, key=i, iteration=7))
            results[rank] = reqs
        threads = [threading.Thread(target=submit, args=(c, r, b))
                   for r, (c, b) in enumerate(zip((self.a, self.b),
                                                  bufs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for rank in (0, 1):
            for q in results[rank]:
                q.wait(10)
            for i in range(ops):
                np.testing.assert_array_equal(
                    bufs[rank][i * n:(i + 1) * n], 2 * i + 1)

    def test_callbacks(self):
        seen = []
        x = [c.alloc(64).numpy("int32", 4) for c in (self.a, self.b)]
        ra = self.a.allreduce(x[0], key=5, iteration=1)
        ra.add_done_callback(lambda r: seen.append(("early", r.result)))
        self.assertFalse(ra.done())
        rb = self.b.allreduce(x[1], key=5, iteration=1)
        rb.wait(10)
        ra.wait(10)
        ra.add_done_callback(lambda r: seen.append(("late", r.result)))
        self.assertEqual(seen, [("early", 0), ("late", 0)])


class TestErrors(TwoClients):
    def test_buffer_outside_shared_memory(self):
        with self.assertRaises(TallyError) as cm:
            self.a.allreduce(np.zeros(8, np.float32), key=1, iteration=1)
        self.assertEqual(cm.exception.name, "TALLY_ERANGE")
        self.assertIn("TALLY_ERANGE", str(cm.exception))

    def test_bad_arguments(self):
        buf = self.a.alloc(64)
        with self.assertRaises(TypeError):
            self.a.allreduce(buf.numpy("float64"), key=1, iteration=1)
        with self.assertRaises(TallyError) as cm:
            self.a.allreduce(buf, key=1, iteration=1, dtype="int32",
                             count=17)
        self.assertEqual(cm.exception.name, "TALLY_EINVAL")
        with self.assertRaises(TypeError):
            self.a.allreduce([1.0, 2.0], key=1, iteration=1)

    def test_mismatch_fails_both(self):
        x = self.a.alloc(64).numpy("int32", 8)
        y = self.b.alloc(64).numpy("int32", 4)
        ra = self.a.allreduce(x, key=9, iteration=1)
        rb = self.b.allreduce(y, key=9, iteration=1)
        for r in (ra, rb):
            with self.assertRaises(TallyError) as cm:
                r.wait(10)
            self.assertEqual(cm.exception.name, "TALLY_EMISMATCH")

    def test_compression(self):
        """compression= reaches the daemon: on one host nothing crosses
        the network, so a float tensor stays exact; a lossy method for
        an int32 tensor fails; the processes must agree on it (like the
        dtype); a name tally does not know fails in Python"""
        def make(c, r):
            a = c.alloc(64).numpy("float32", 16)
            a[:] = np.arange(16) * (r + 1)
            return a
        out = self.both(make, key=11, iteration=1, compression="int8")
        for o in out:
            np.testing.assert_array_equal(o, np.arange(16) * 3.0)
        x = self.a.alloc(64).numpy("int32", 8)
        with self.assertRaises(TallyError) as cm:
            self.a.allreduce(x, key=12, iteration=1,
                             compression="int16").wait(10)
        self.assertEqual(cm.exception.name, "TALLY_EINVAL")
        with self.assertRaises(ValueError):
            self.a.allreduce(x, key=12, iteration=1, compression="fp8")
        x = self.a.alloc(64).numpy("float32", 8)
        y = self.b.alloc(64).numpy("float32", 8)
        ra = self.a.allreduce(x, key=13, iteration=1, compression="int16")
        rb = self.b.allreduce(y, key=13, iteration=1)
        for r in (ra, rb):
            with self.assertRaises(TallyError) as cm:
                r.wait(10)
            self.assertEqual(cm.exception.name, "TALLY_EMISMATCH")

    def test_sign_ef(self):
        """compression="sign_ef": on one host the library still sends
        g + residual from its own buffer, the sum is exact, so the
        residual stays 0 and a second round is exact too; ef_reset()
        knows the key afterwards, not another; int32 refused"""
        def make(c, r):
            a = c.alloc(64).numpy("float32", 16)
            a[:] = (np.arange(16) - 7.5) * (r + 1)
            return a
        for it in (1, 2):
            out = self.both(make, key=21, iteration=it,
                            compression="sign_ef")
            for o in out:
                np.testing.assert_array_equal(o,
                                              (np.arange(16) - 7.5) * 3.0)
        self.assertTrue(self.a.ef_reset(21))
        self.assertFalse(self.a.ef_reset(22))
        self.a.ef_reset_all()
        x = self.a.alloc(64).numpy("int32", 8)
        with self.assertRaises(TallyError) as cm:
            self.a.allreduce(x, key=23, iteration=1,
                             compression="sign_ef").wait(10)
        self.assertEqual(cm.exception.name, "TALLY_EINVAL")

    def test_block_topk_ef(self):
        """compression="block_topk10_ef" / "block_topk1_ef": on one host
        the sum is exact (no engine), the residual stays 0; int32 and an
        unknown level refused"""
        def make(c, r):
            a = c.alloc(4096).numpy("float32", 1000)
            a[:] = (np.arange(1000) - 499.5) * (r + 1)
            return a
        for it, m in ((1, "block_topk10_ef"), (2, "block_topk1_ef")):
            out = self.both(make, key=31, iteration=it, compression=m)
            for o in out:
                np.testing.assert_array_equal(
                    o, (np.arange(1000) - 499.5) * 3.0)
        self.assertTrue(self.a.ef_reset(31))
        x = self.a.alloc(64).numpy("int32", 8)
        with self.assertRaises(TallyError) as cm:
            self.a.allreduce(x, key=33, iteration=1,
                             compression="block_topk10_ef").wait(10)
        self.assertEqual(cm.exception.name, "TALLY_EINVAL")
        with self.assertRaises(ValueError):
            self.a.allreduce(x, key=34, iteration=1,
                             compression="block_topk5_ef")

    def test_wait_timeout_then_completion(self):
        x = [c.alloc(64).numpy("int32", 4) for c in (self.a, self.b)]
        ra = self.a.allreduce(x[0], key=4, iteration=1)
        with self.assertRaises(TallyError) as cm:
            ra.wait(0.05)
        self.assertEqual(cm.exception.name, "TALLY_ETIMEDOUT")
        self.b.allreduce(x[1], key=4, iteration=1).wait(10)
        ra.wait(10)

    def test_peer_leaves_mid_operation(self):
        x = self.a.alloc(64).numpy("int32", 4)
        ra = self.a.allreduce(x, key=6, iteration=1)
        self.b.close()
        with self.assertRaises(TallyError) as cm:
            ra.wait(10)
        self.assertEqual(cm.exception.name, "TALLY_EPEERLOST")

    def test_daemon_dies_mid_operation(self):
        x = self.a.alloc(64).numpy("int32", 4)
        ra = self.a.allreduce(x, key=8, iteration=1)
        t0 = time.monotonic()
        self.daemon.kill()
        self.killed = True
        with self.assertRaises(TallyError) as cm:
            ra.wait(10)
        self.assertEqual(cm.exception.name, "TALLY_EDAEMONLOST")
        self.assertLess(time.monotonic() - t0, 5)
        with self.assertRaises(TallyError) as cm:
            self.a.allreduce(x, key=8, iteration=2)
        self.assertEqual(cm.exception.name, "TALLY_EDAEMONLOST")

    def test_close_fails_pending_and_is_idempotent(self):
        x = self.a.alloc(64).numpy("int32", 4)
        ra = self.a.allreduce(x, key=7, iteration=1)
        self.a.close()
        self.a.close()
        with self.assertRaises(TallyError):
            ra.wait(1)
        with self.assertRaises(TallyError):
            self.a.alloc(64)


class TestSetup(unittest.TestCase):
    def test_no_daemon(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(TallyError) as cm:
                tally.Client(os.path.join(d, "none.sock"))
        self.assertEqual(cm.exception.name, "TALLY_ECONNECT")

    def test_rank_and_size(self):
        d = Tallyd(local_size=1)
        try:
            with tally.Client(d.sock) as c:
                self.assertEqual((c.rank, c.size), (0, 1))
        finally:
            d.stop()

    def test_job_of_a_host_service(self):
        """A tallyd started without a job serves the jobs its clients
        name: two of them here, isolated (same key, own sums)."""
        d = Tallyd(extra=("--set", "service.enabled=true"))
        clients = []
        try:
            for job, ranks in (("py-a", 2), ("py-b", 2)):
                for r in range(ranks):
                    clients.append((job, tally.Client(d.sock, env=False,
                        job=dict(id=job, local_size=ranks, local_rank=r))))
            self.assertEqual([(c.rank, c.size) for _, c in clients],
                             [(0, 2), (1, 2), (0, 2), (1, 2)])
            bufs, reqs = [], []
            for i, (job, c) in enumerate(clients):
                x = c.alloc(20).numpy(np.float32)
                x[:] = i + (10 if job == "py-b" else 0)
                bufs.append(x)
                reqs.append(c.allreduce(x, key=1, iteration=0))
            for r in reqs:
                r.wait(10)
            # py-a: 0 + 1; py-b: 12 + 13, the same key in another job
            self.assertEqual([float(b[0]) for b in bufs],
                             [1.0, 1.0, 25.0, 25.0])
            # the job layer's refusals, as TallyErrors
            with self.assertRaises(TallyError) as cm:
                tally.Client(d.sock, env=False,
                             job=dict(id="py-a", local_size=2, local_rank=0))
            self.assertEqual(cm.exception.name, "TALLY_EDENIED")
            with self.assertRaises(TallyError) as cm:
                tally.Client(d.sock, env=False)       # names no job
            self.assertEqual(cm.exception.name, "TALLY_EDENIED")
            with self.assertRaises(TallyError) as cm:
                tally.Client(d.sock, env=False,
                             job=dict(id="py-c", local_size=1, local_rank=3))
            self.assertEqual(cm.exception.name, "TALLY_EINVAL")
            with self.assertRaises(TypeError):
                tally.Client(d.sock, job=dict(name="x"))
        finally:
            for _, c in clients:
                c.close()
            status = d.stop()
        self.assertEqual(status, 0, d.log_text())

    def test_library_not_found_says_how(self):
        env = dict(os.environ, TALLY_LIBRARY="/nonexistent/libtally.so",
                   PYTHONPATH=PYTHON_DIR)
        p = subprocess.run([sys.executable, "-c", "import tally"],
                           env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("set TALLY_LIBRARY", p.stderr)

    def test_pip_install(self):
        """pip install ./python gives a package that works outside the
        checkout (with the library named by TALLY_LIBRARY)."""
        from tally import _lib
        with tempfile.TemporaryDirectory() as target, \
                tempfile.TemporaryDirectory() as src:
            # build from a copy: pip leaves build/ and egg-info behind
            import shutil
            shutil.copytree(PYTHON_DIR, os.path.join(src, "python"))
            p = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--no-deps",
                 "--no-build-isolation", "--no-index", "--quiet",
                 "--target", target, os.path.join(src, "python")],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            d = Tallyd(local_size=1)
            try:
                env = dict(os.environ, PYTHONPATH=target,
                           TALLY_LIBRARY=_lib.lib._name)
                env.pop("TALLY_BUILD", None)
                code = ("import tally, tally.torch, sys; "
                        "c = tally.Client(sys.argv[1]); "
                        "b = c.alloc(64).numpy('int32', 4); b[:] = 3; "
                        "c.allreduce(b, key=1, iteration=1).wait(10); "
                        "assert tally.__file__.startswith(sys.argv[2]); "
                        "print(int(b.sum()))")
                p = subprocess.run([sys.executable, "-c", code, d.sock,
                                    target], env=env, capture_output=True,
                                   text=True, timeout=60, cwd=target)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stdout.strip(), "12")
            finally:
                d.stop()


if __name__ == "__main__":
    unittest.main()
