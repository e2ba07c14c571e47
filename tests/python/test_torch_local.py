# SPDX-License-Identifier: BSD-3-Clause
"""The torch.distributed backend "tally" on one host: torchrun starts 2
processes of torch_local_worker.py, whose tally backend starts the job's
tallyd itself; every case runs on both ranks and reports a line, checked
here one test per case (a case that hangs fails them all by timeout)."""
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ("allreduce_sweep", "inplace_in_tally_memory",
         "broadcast_and_gathers", "refused_calls_say_why",
         "ddp_hook_trains_in_step", "shared_gradients_zero_copy",
         "local_sgd_averages_every_period",
         "failure_raises")
RANKS = 2


def torchrun(script, nproc, *args, env=None, timeout=240):
    """Run @script under real torchrun on this host; (status, output).
    -r 1 -t 1: Debian's torch 1.13 on Python 3.11 needs non-zero
    redirects (docs/pytorch.md)."""
    with tempfile.TemporaryDirectory() as logs:
        cmd = [sys.executable, "-m", "torch.distributed.run",
               "--standalone", "--nproc_per_node", str(nproc),
               "-r", "1", "-t", "1", "--log_dir", logs, str(script),
               *args]
        full = dict(os.environ, PYTHONPATH=str(HERE.parents[1] / "python"),
                    OMP_NUM_THREADS="1")
        full.update(env or {})
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=full,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, _ = p.communicate()
            return None, out
        return p.returncode, out


class TestTorchLocal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.status, cls.out = torchrun(HERE / "torch_local_worker.py",
                                       RANKS)

    def check_case(self, name):
        self.assertIsNotNone(self.status, "timed out:\n" + self.out[-3000:])
        for rank in range(RANKS):
            m = re.search(r"^\[default%d\]:CASE %s (OK|FAIL.*)$"
                          % (rank, name), self.out, re.M)
            self.assertIsNotNone(m, "rank %d did not report %s:\n%s"
                                 % (rank, name, self.out[-3000:]))
            self.assertEqual(m.group(1), "OK", "rank %d: %s\n%s"
                             % (rank, m.group(1), self.out[-3000:]))

    def test_exit_status(self):
        self.assertEqual(self.status, 0, self.out[-3000:])


for _name in CASES:
    setattr(TestTorchLocal, "test_" + _name,
            lambda self, n=_name: self.check_case(n))

if __name__ == "__main__":
    unittest.main()
