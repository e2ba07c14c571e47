# SPDX-License-Identifier: BSD-3-Clause
"""The torch.distributed backend "tally": a Python ProcessGroup.

What goes through tally's all-reduce, and how:
- allreduce, SUM or AVG, float32/float16/bfloat16/int32: tally's
  all-reduce, in place when the tensor lies in tally memory, else through
  a staging buffer.
- broadcast, allgather (and _allgather_base, gather, scatter),
  reduce_scatter's inputs: exact, any dtype, as an int32 SUM of the raw
  bytes in which every rank contributes zeros outside its own part.
- allreduce of other dtypes or ops (MAX, MIN, PRODUCT, float64, int64 ...),
  and reduce: gather everything, reduce locally in rank order: exact and
  equal on every rank, at world_size times the bytes (fine for metrics;
  gradients should use the first path).
- barrier: a 1-element all-reduce.
send/recv/alltoall are refused.

Works: every collective returns a _TallyWork, a Python Work whose wait()
raises the collective's TallyError.  The C++ side of a Python Work finds
the Python wait() only while the Python object lives (pybind11's
trampoline), so the group keeps its works alive (all unfinished ones, and
the last KEEP_WORKS finished ones: a C++ caller such as DDP's constructor
waits at once).  A C++ work made from a future (_create_work_from_future)
would need no keeping, but its wait() does not raise: a failed all_reduce
would return as if it had succeeded (docs/pytorch.md, "Why DDP hung").
"""
from datetime import timedelta
import threading

import torch
import torch.distributed as dist
from collections import deque

from torch._C._distributed_c10d import Work

from .. import client as tc
from ..errors import TallyError, EINVAL
from .launch import job_client
from .staging import StagingPool

_TALLY_DTYPE = {torch.float32: tc.FLOAT32, torch.float16: tc.FLOAT16,
                torch.bfloat16: tc.BFLOAT16, torch.int32: tc.INT32}
# key space: bits 56..63 say who made the key (the hook uses 2)
KEY_KIND_PG = 1 << 56

_pg_count = 0
_pg_count_lock = threading.Lock()


# finished works kept alive for C++ callers that wait on them late
KEEP_WORKS = 1024


class _TallyWork(Work):
    """A collective in flight: wait() returns True or raises its error."""

    def __init__(self, fut):
        super().__init__()
        self._fut = fut

    def wait(self, timeout=None):
        self._fut.wait()        # raises the TallyError set on failure
        return True

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        if not self._fut.done():
            return False
        try:
            self._fut.value()
            return True
        except Exception:       # noqa: BLE001
            return False

    def exception(self):
        try:
            self._fut.value()
        except Exception as e:  # noqa: BLE001
            return e
        return None

    def result(self):
        return self._fut.value()

    def get_future(self):
        return self._fut


def _bytes_of(t):
    return t.numel() * t.element_size()


def _attempt(fn):
    """Run a completion's work; its exception, or None.  Completions
    run in the progress thread: an exception escaping them would leave
    the collective's future unfinished."""
    try:
        fn()
        return None
    except Exception as e:          # noqa: BLE001
        return e


def _reduce_rows(rows, op, n):
    """Every rank's tensor, reduced in rank order, in a wide type (so
    that float16 products and int32 sums do not depend on kernels the
    narrow type lacks)."""
    stack = torch.stack(rows)
    wide = stack.double() if stack.is_floating_point() else stack.long()
    if op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
        res = wide.sum(0)
        if op == dist.ReduceOp.AVG:
            res = res / n if res.is_floating_point() else \
                torch.div(res, n, rounding_mode="floor")
        return res
    if op == dist.ReduceOp.PRODUCT:
        return wide.prod(0)
    if op == dist.ReduceOp.MAX:
        return wide.max(0).values
    if op == dist.ReduceOp.MIN:
        return wide.min(0).values
    raise TallyError(EINVAL, "reduce op %s is not supported" % op)


class ProcessGroupTally(dist.ProcessGroup):
    def __init__(self, store, rank, size, timeout=None):
        global _pg_count
        super().__init__(rank, size)
        self._job = job_client(store, rank, size)
        if self._job.world != size:
            raise TallyError(EINVAL, "tally serves the whole job only",
                             "a group of %d of the job's %d ranks; create "
                             "sub-groups with backend='gloo'" %
                             (size, self._job.world))
        self._client = self._job.client
        self._pool = StagingPool(self._client)
        with _pg_count_lock:
            index = _pg_count
            _pg_count += 1
        self._key = KEY_KIND_PG | (index << 32)
        self._seq = 0
        self._lock = threading.Lock()
        self._works = deque()   # alive for C++ callers (see the top)

    def getBackendName(self):
        return "tally"

    # --- the one primitive: an all-reduce of a flat CPU tensor --------

    def _next_iteration(self):
        with self._lock:
            self._seq += 1
            return self._seq

    def _allreduce_flat(self, tensor, op, done):
        """All-reduce @tensor (CPU, contiguous, a tally dtype); call
        done(error or None) in the progress thread once the result is in
        @tensor."""
        nbytes = _bytes_of(tensor)
        it = self._next_iteration()
        inplace = self._client.buffer_of(tensor.data_ptr(), nbytes)
        if inplace is not None:
            buf, work = None, tensor
        else:
            buf = self._pool.get(nbytes)
            work = buf.torch(tensor.dtype, count=tensor.numel())
            work.copy_(tensor.reshape(-1))
        req = self._client.allreduce(work, key=self._key, iteration=it,
                                     op=op, last=True)

        def finish(r):
            err = r.error()
            if err is None and buf is not None:
                err = _attempt(lambda: tensor.view(-1).copy_(work))
            if buf is not None:
                self._pool.put(buf)
            done(err)
        req.add_done_callback(finish)

    def _future_of(self, parts, result, after=None):
        """A Work that completes when every part called back."""
        fut = torch.futures.Future()
        left = [len(parts)]
        errors = []
        lock = threading.Lock()

        def part_done(err):
            with lock:
                if err is not None:
                    errors.append(err)
                left[0] -= 1
                last = left[0] == 0
            if not last:
                return
            if errors:
                fut.set_exception(errors[0])
                return
            try:
                if after:
                    after()
                fut.set_result(result)
            except Exception as e:         # noqa: BLE001
                fut.set_exception(e)
        for start in parts:
            start(part_done)
        work = _TallyWork(fut)
        with self._lock:
            self._works.append(work)
            while len(self._works) > KEEP_WORKS and \
                    self._works[0].is_completed():
                self._works.popleft()
        return work

    # --- raw-byte exchange: broadcast and gathers -----------------------

    def _exchange(self, total_bytes, fill, done):
        """SUM of int32 lanes over a zeroed buffer of @total_bytes that
        fill(bytes_view) writes this rank's part into; done(err, view)."""
        lanes = (total_bytes + 3) // 4
        buf = self._pool.get(lanes * 4)
        raw = buf.torch(torch.uint8, count=lanes * 4)
        raw.zero_()
        fill(raw)
        ints = buf.torch(torch.int32, count=lanes)
        it = self._next_iteration()
        req = self._client.allreduce(ints, key=self._key, iteration=it,
                                     op=tc.SUM, last=True)

        def finish(r):
            err = r.error()
            try:
                done(err, raw)
            finally:
                self._pool.put(buf)
        req.add_done_callback(finish)

    @staticmethod
    def _as_bytes(t):
        return t.contiguous().view(-1).view(torch.uint8)

    # --- collectives ------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        for t in tensors:
            self._check_cpu(t)
        fast = op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG)
        if fast and all(t.dtype in _TALLY_DTYPE and t.is_contiguous()
                        for t in tensors):
            top = tc.AVG if op == dist.ReduceOp.AVG else tc.SUM
            parts = [lambda cb, t=t: self._allreduce_flat(t, top, cb)
                     for t in tensors]
            return self._future_of(parts, tensors)
        return self._allreduce_by_gather(tensors, op)

    def allreduce_coalesced(self, tensors, opts=None):
        o = dist.AllreduceOptions()
        if opts is not None:
            o.reduceOp = opts.reduceOp
        return self.allreduce(tensors, o)

    def _allreduce_by_gather(self, tensors, op):
        n = self.size()

        def reduce_one(t, cb):
            def done(err, rows):
                if err is None:
                    err = _attempt(lambda: t.copy_(
                        _reduce_rows(rows, op, n).to(t.dtype)))
                cb(err)
            self._gather_rows(t, done)
        parts = [lambda cb, t=t: reduce_one(t, cb) for t in tensors]
        return self._future_of(parts, tensors)

    def _gather_rows(self, t, done):
        """done(err, [tensor of every rank]) via one exchange."""
        n, me = self.size(), self.rank()
        nb = _bytes_of(t)
        stride = (nb + 3) // 4 * 4
        src = self._as_bytes(t)

        def fill(raw):
            raw[me * stride:me * stride + nb].copy_(src)

        def finish(err, raw):
            rows = []
            if err is None:
                err = _attempt(lambda: rows.extend(
                    raw[r * stride:r * stride + nb].clone()
                    .view(t.dtype).view(t.shape) for r in range(n)))
            done(err, rows)
        self._exchange(n * stride, fill, finish)

    def broadcast(self, tensors, opts):
        root = opts.rootRank
        me = self.rank()

        def one(t, cb):
            self._check_cpu(t)
            nb = _bytes_of(t)

            def fill(raw):
                if me == root:
                    raw[:nb].copy_(self._as_bytes(t))

            def finish(err, raw):
                if err is None and me != root:
                    err = _attempt(lambda: t.copy_(
                        raw[:nb].clone().view(t.dtype).view(t.shape)))
                cb(err)
            self._exchange(nb, fill, finish)
        parts = [lambda cb, t=t: one(t, cb) for t in tensors]
        return self._future_of(parts, tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        def one(outs, t, cb):
            self._check_cpu(t)

            def done(err, rows):
                if err is None:
                    err = _attempt(lambda: [o.copy_(row) for o, row
                                            in zip(outs, rows)])
                cb(err)
            self._gather_rows(t, done)
        parts = [lambda cb, o=o, t=t: one(o, t, cb)
                 for o, t in zip(output_tensors, input_tensors)]
        return self._future_of(parts, output_tensors)

    def _allgather_base(self, output, input, opts=None):
        def one(cb):
            def done(err, rows):
                if err is None:
                    err = _attempt(lambda: output.view(-1).copy_(
                        torch.cat([r.reshape(-1) for r in rows])))
                cb(err)
            self._gather_rows(input, done)
        return self._future_of([one], [output])

    def gather(self, output_tensors, input_tensors, opts):
        root = opts.rootRank

        def one(cb):
            def done(err, rows):
                if err is None and self.rank() == root:
                    err = _attempt(lambda: [o.copy_(row) for o, row
                                            in zip(output_tensors[0], rows)])
                cb(err)
            self._gather_rows(input_tensors[0], done)
        return self._future_of([one], output_tensors)

    def scatter(self, output_tensors, input_tensors, opts):
        root, me, n = opts.rootRank, self.rank(), self.size()
        out = output_tensors[0]
        nb = _bytes_of(out)
        stride = (nb + 3) // 4 * 4

        def one(cb):
            def fill(raw):
                if me == root:
                    for r, t in enumerate(input_tensors[0]):
                        raw[r * stride:r * stride + nb].copy_(
                            self._as_bytes(t))

            def finish(err, raw):
                if err is None:
                    err = _attempt(lambda: out.copy_(
                        raw[me * stride:me * stride + nb].clone()
                        .view(out.dtype).view(out.shape)))
                cb(err)
            self._exchange(n * stride, fill, finish)
        return self._future_of([one], output_tensors)

    def reduce(self, tensors, opts):
        o = dist.AllreduceOptions()
        o.reduceOp = opts.reduceOp
        return self.allreduce(tensors, o)   # the root keeps its result

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        out, ins = output_tensors[0], input_tensors[0]
        flat = torch.cat([t.reshape(-1) for t in ins])
        o = dist.AllreduceOptions()
        o.reduceOp = opts.reduceOp
        me, n = self.rank(), out.numel()

        def one(cb):
            work = self.allreduce([flat], o)
            fut = work.get_future()

            def copy(f):
                try:
                    f.wait()
                    out.view(-1).copy_(flat[me * n:(me + 1) * n])
                    cb(None)
                except Exception as e:      # noqa: BLE001
                    cb(e)
            fut.then(copy)
        return self._future_of([one], output_tensors)

    def barrier(self, opts=None):
        t = torch.zeros(1, dtype=torch.int32)
        return self.allreduce([t], None)

    def _refuse(self, what):
        raise RuntimeError("tally: the tally backend has no %s; run it "
                           "on a gloo group (docs/pytorch.md)" % what)

    def send(self, *a, **k):
        self._refuse("send")

    def recv(self, *a, **k):
        self._refuse("recv")

    def alltoall(self, *a, **k):
        self._refuse("alltoall")

    def alltoall_base(self, *a, **k):
        self._refuse("alltoall")

    @staticmethod
    def _check_cpu(t):
        if t.device.type != "cpu":
            raise RuntimeError("tally: the tally backend takes CPU "
                               "tensors; GPU gradients go through the "
                               "DDP hook (docs/pytorch.md)")


def create(store, rank, size, timeout=timedelta(minutes=30)):
    return ProcessGroupTally(store, rank, size, timeout)


def register():
    """Make "tally" a torch.distributed backend (once)."""
    if "TALLY" not in dist.Backend._plugins:
        dist.Backend.register_backend("tally", create)
