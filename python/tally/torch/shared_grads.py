# SPDX-License-Identifier: BSD-3-Clause
"""The zero-copy path: gradients that live in tally memory.

DDP allocates its buckets itself, so its hook must copy each bucket into
tally memory and back.  SharedGradients instead makes every parameter's
.grad a view into flat buckets allocated with tally_alloc(): autograd
accumulates into them in place, and as soon as the last gradient of a
bucket is accumulated (a hook on the parameter's AccumulateGrad node, as
Horovod does) the bucket's all-reduce is submitted on the memory itself.

    grads = tally.torch.SharedGradients(model)
    for batch in data:
        grads.zero_grad()               # not optimizer.zero_grad(set_to_none)
        loss_fn(model(batch)).backward()
        grads.synchronize()             # waits; raises TallyError
        optimizer.step()

Parameters are bucketed in reverse order (the order backward produces
them), up to bucket_bytes per bucket and one dtype per bucket; keys,
priorities and groups follow the DDP hook's rules, in their own key space.
"""
import torch

from .. import client as tc
from ..errors import TallyError, EINVAL
from .hook import _default_priority, _default_group
from .launch import resolve_client

KEY_KIND_SHARED = 3 << 56


class _Bucket:
    def __init__(self, index, params, buf, flat):
        self.index = index
        self.params = params
        self.buf = buf
        self.flat = flat
        self.ready = 0
        self.req = None


class SharedGradients:
    def __init__(self, model, client=None, bucket_bytes=25 << 20,
                 op=tc.AVG):
        self._client = resolve_client(client)
        self.op = op
        self.step = 0
        self.buckets = []
        self._of_param = {}
        self._hooks = []
        params = [p for p in model.parameters() if p.requires_grad]
        group, size = [], 0
        for p in reversed(params):
            nb = p.numel() * p.element_size()
            if group and (size + nb > bucket_bytes or
                          p.dtype != group[0].dtype):
                self._make_bucket(group)
                group, size = [], 0
            group.append(p)
            size += nb
        if group:
            self._make_bucket(group)

    def _make_bucket(self, params):
        dtype = params[0].dtype
        if dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TallyError(EINVAL, "SharedGradients takes float32, "
                             "float16 and bfloat16 parameters")
        count = sum(p.numel() for p in params)
        esize = params[0].element_size()
        buf = self._client.alloc(count * esize)
        flat = buf.torch(dtype, count=count)
        flat.zero_()
        off = 0
        for p in params:
            p.grad = flat[off:off + p.numel()].view_as(p)
            off += p.numel()
        b = _Bucket(len(self.buckets), params, buf, flat)
        self.buckets.append(b)
        for p in params:
            self._of_param[p] = b
            # the AccumulateGrad node runs its hooks after it added the
            # new gradient into p.grad
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self._hooks.append((acc, acc.register_hook(
                lambda *unused, p=p: self._accumulated(p))))

    def _accumulated(self, p):
        b = self._of_param[p]
        b.ready += 1
        if b.ready == len(b.params):
            self._submit(b)

    def _submit(self, b):
        if b.req is not None:
            return
        for p in b.params:
            if p.grad is None or p.grad.data_ptr() < b.flat.data_ptr() or \
               p.grad.data_ptr() >= b.flat.data_ptr() + b.buf.nbytes:
                raise TallyError(EINVAL, "a gradient left tally memory",
                                 "zero gradients with "
                                 "SharedGradients.zero_grad() (or "
                                 "set_to_none=False), never set them to "
                                 "None")
        last = b.index == len(self.buckets) - 1
        b.req = self._client.allreduce(
            b.flat, key=KEY_KIND_SHARED | b.index, iteration=self.step,
            op=self.op, priority=_default_priority(b.index),
            group=_default_group(b.index), last=last)

    def synchronize(self):
        """Submit buckets backward did not complete (unused parameters:
        their gradients stay as they were), wait for all, start the next
        step.  Raises the first TallyError."""
        for b in self.buckets:
            self._submit(b)
        err = None
        for b in self.buckets:
            try:
                b.req.wait()
            except TallyError as e:
                err = err or e
            b.req, b.ready = None, 0
        self.step += 1
        if err:
            raise err

    def zero_grad(self):
        for b in self.buckets:
            b.flat.zero_()
