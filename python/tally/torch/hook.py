# SPDX-License-Identifier: BSD-3-Clause
"""The DDP communication hook: each gradient bucket through tally.

    model = DistributedDataParallel(model)
    model.register_comm_hook(tally.torch.HookState(), tally.torch.allreduce_hook)

DDP calls the hook as each bucket's gradients are ready, during backward;
the hook submits the bucket's all-reduce (AVG) and returns a
torch.futures.Future that the progress thread completes when tally has
the result, so communication overlaps the rest of backward.

Each bucket is one tally tensor: key = the bucket's index (in the hook's
key space), iteration = the training step (counted by the hook: it ends
with the bucket DDP marks last).  Priority: DDP numbers buckets in the
reverse order of model.parameters(), so the highest index holds the
input-side layers that the next forward needs first; the hook gives
priority 65535 - index (0 is tally's most urgent), which is what
ByteScheduler's order asks for.  Group: index + 1, so under the mgwfbp
schedule every bucket travels whole and alone (DDP already merged its
gradients; a timing-based merge would differ between hosts).  Both can
be replaced through HookState.

Memory: a bucket is copied once into a tally buffer kept for its index
(and back when done) unless it already lies in tally memory; the
zero-copy path is SharedGradients (shared_grads.py).  CUDA buckets are
copied through host memory after the current stream is synchronised.
"""
import threading

import torch

from .. import client as tc
from .launch import job_client, current

KEY_KIND_HOOK = 2 << 56


def _default_priority(index):
    return max(0, 65535 - index)


def _default_group(index):
    return min(index + 1, 65535)


class HookState:
    """The hook's memory across calls.

    client: a JobClient or tally.Client (default: the job's, made from the
    default store if the tally backend did not make it already).
    priority_of(index) and group_of(index): see the module's text.
    """

    def __init__(self, client=None, priority_of=None, group_of=None,
                 op=tc.AVG):
        self._client = client
        self.priority_of = priority_of or _default_priority
        self.group_of = group_of or _default_group
        self.op = op
        self.step = 0
        self.staging = {}       # bucket index -> Buffer
        self.lock = threading.Lock()
        self.copies = 0         # buckets that needed a copy (tests)

    @property
    def client(self):
        if self._client is None:
            job = current()
            if job is None:
                import torch.distributed as dist
                store = dist.distributed_c10d._get_default_store()
                job = job_client(store, dist.get_rank(),
                                 dist.get_world_size())
            self._client = job
        c = self._client
        return c.client if hasattr(c, "client") else c

    def buffer_for(self, index, nbytes):
        """The staging buffer of bucket @index, grown as needed."""
        with self.lock:
            buf = self.staging.get(index)
            if buf is None or buf.nbytes < nbytes:
                buf = self.client.alloc(max(nbytes, 64))
                self.staging[index] = buf
            return buf


def allreduce_hook(state, bucket):
    """DDP communication hook: returns a Future of the averaged bucket."""
    state = state if state is not None else _shared_default()
    client = state.client
    tensor = bucket.buffer()
    index = bucket.index()
    dtype = tensor.dtype
    nbytes = tensor.numel() * tensor.element_size()
    iteration = state.step
    if bucket.is_last():
        state.step += 1

    cuda = tensor.device.type == "cuda"
    if cuda:
        torch.cuda.current_stream(tensor.device).synchronize()
    shared = None if cuda else client.buffer_of(tensor.data_ptr(), nbytes)
    if shared is not None:
        work = tensor
    else:
        state.copies += 1
        buf = state.buffer_for(index, nbytes)
        work = buf.torch(dtype, count=tensor.numel())
        work.copy_(tensor.view(-1))
    # DDP reads the future from C++: an error must be one C++ sees, and
    # set_exception() only stores the exception as the value (torch 1.13),
    # so the error is raised by a then() callback instead
    result = torch.futures.Future()
    fut = result.then(_raise_if_error)
    req = client.allreduce(work, key=KEY_KIND_HOOK | index,
                           iteration=iteration, op=state.op,
                           priority=state.priority_of(index),
                           group=state.group_of(index),
                           last=bucket.is_last())

    def done(r):
        err = r.error()
        if err is None and work is not tensor:
            try:
                tensor.view(-1).copy_(work)
            except Exception as e:      # noqa: BLE001
                err = e
        result.set_result(tensor if err is None else err)
    req.add_done_callback(done)
    return fut


def _raise_if_error(fut):
    value = fut.value()
    if isinstance(value, BaseException):
        raise value
    return value


_default_state = None


def _shared_default():
    global _default_state
    if _default_state is None:
        _default_state = HookState()
    return _default_state
