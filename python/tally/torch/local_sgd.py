# SPDX-License-Identifier: BSD-3-Clause
"""Periodic model averaging (local SGD) through tally.

    model = DistributedDataParallel(model)
    local = tally.torch.LocalSGD(model, period=8)   # registers the hook
    for x, y in data:
        opt.zero_grad()
        loss_fn(model(x), y).backward()             # no gradient traffic
        opt.step()
        local.step()            # every 8th step: parameters averaged

The drop-in for DDP's allreduce_hook when gradients should not travel
every step: each worker takes `period` (H) local steps, then the
parameters themselves are averaged through tally (AVG), so a step moves
1/H of the bytes of gradient averaging on average.  It is PyTorch's
post-local SGD (the post_localSGD_hook plus a PeriodicModelAverager) over
tally: for `warmup` steps the hook averages gradients like
allreduce_hook, which local SGD needs to converge from a random start;
after that the hook hands DDP each bucket unreduced.

Parameters go as one flat tally tensor (float32, or the parameters'
dtype when they all share one) copied into a tally buffer kept across
rounds: key = KEY_KIND_AVERAGE, iteration = the averaging round.  Buffers
(BatchNorm statistics) are averaged with them when `buffers` is True.
The optimizer's state (momentum) stays local, as in PyTorch.
"""
import torch

from .. import client as tc
from .hook import HookState, allreduce_hook

KEY_KIND_AVERAGE = 3 << 56


class LocalSGD:
    """Average @model's parameters every @period steps after @warmup.

    model: a DistributedDataParallel module (its comm hook is replaced) or
    a plain module (then nothing is registered and step() alone runs the
    averaging; gradients are never exchanged).
    client: a JobClient or tally.Client (default: the job's).
    """

    def __init__(self, model, period, warmup=0, client=None,
                 buffers=True):
        if int(period) < 1:
            raise ValueError("tally: local SGD period must be >= 1, "
                             "got %r" % (period,))
        if int(warmup) < 0:
            raise ValueError("tally: local SGD warmup must be >= 0, "
                             "got %r" % (warmup,))
        self.period = int(period)
        self.warmup = int(warmup)
        self.steps = 0          # optimizer steps taken (step() calls)
        self.rounds = 0         # averaging rounds done
        self.bytes_averaged = 0
        self.hook_state = HookState(client=client)
        self._module = getattr(model, "module", model)
        self._buffers = buffers
        self._flat = None       # tally-memory view the tensors travel in
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model.register_comm_hook(self, local_sgd_hook)

    def _tensors(self):
        ts = [p for p in self._module.parameters()]
        if self._buffers:
            ts += [b for b in self._module.buffers()
                   if b.is_floating_point()]
        return ts

    def _flat_view(self, dtype, n):
        if self._flat is None or self._flat.dtype != dtype or \
                self._flat.numel() != n:
            size = torch.tensor([], dtype=dtype).element_size()
            buf = self.hook_state.client.alloc(max(n * size, 64))
            self._flat = buf.torch(dtype, count=n)
        return self._flat

    def average(self):
        """Average the parameters (and buffers) across the job now."""
        ts = self._tensors()
        if not ts:
            return
        dtypes = {t.dtype for t in ts}
        dtype = dtypes.pop() if len(dtypes) == 1 else torch.float32
        if dtype not in (torch.float32, torch.float16, torch.bfloat16):
            dtype = torch.float32
        n = sum(t.numel() for t in ts)
        flat = self._flat_view(dtype, n)
        with torch.no_grad():
            at = 0
            for t in ts:
                flat[at:at + t.numel()].copy_(t.detach().reshape(-1))
                at += t.numel()
            client = self.hook_state.client
            client.allreduce(flat, key=KEY_KIND_AVERAGE,
                             iteration=self.rounds, op=tc.AVG,
                             last=True).wait()
            at = 0
            for t in ts:
                t.copy_(flat[at:at + t.numel()].view_as(t))
                at += t.numel()
        self.rounds += 1
        self.bytes_averaged += n * flat.element_size()

    def step(self):
        """Call after each optimizer step: averages when a period ends."""
        self.steps += 1
        if self.steps > self.warmup and \
                (self.steps - self.warmup) % self.period == 0:
            self.average()
            return True
        return False


def local_sgd_hook(state, bucket):
    """DDP comm hook of LocalSGD: gradient averaging while warming up,
    then each bucket back unreduced (a completed future)."""
    if state.steps < state.warmup:
        return allreduce_hook(state.hook_state, bucket)
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut
