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
from .launch import resolve_client

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
                 op=tc.AVG, compression=None):
        tc.compression_flags(compression)   # a bad name fails here
        self._client = client
        # "none", "int16", "int8", "sign_ef", "block_topk10_ef",
        # "block_topk1_ef" (docs/compression.md) or None: the job's
        # [compression] method
        self.compression = compression
        self._resolved = None   # the tally.Client, found on first use
        self.priority_of = priority_of or _default_priority
        self.group_of = group_of or _default_group
        self.op = op
        self.step = 0
        self.staging = {}       # bucket index -> ((dtype, n), view)
        self.outside = set()    # bucket addresses not in tally memory
        self.lock = threading.Lock()
        self.copies = 0         # buckets that needed a copy (tests)

    @property
    def client(self):
        if self._resolved is None:
            self._resolved = resolve_client(self._client)
        return self._resolved

    def staging_view(self, index, tensor):
        """The tally-memory tensor bucket @index is copied into: made at
        the bucket's first step (and when DDP rebuilds its buckets), then
        reused, so a step allocates nothing and makes no new views."""
        key = (tensor.dtype, tensor.numel())
        with self.lock:
            cached = self.staging.get(index)
            if cached is None or cached[0] != key:
                nbytes = tensor.numel() * tensor.element_size()
                buf = self.client.alloc(max(nbytes, 64))
                cached = (key, buf.torch(tensor.dtype,
                                         count=tensor.numel()))
                self.staging[index] = cached
            return cached[1]

    def in_tally_memory(self, tensor):
        """Does @tensor lie in tally memory?  A "no" is remembered per
        address (DDP's buckets keep theirs); a "yes" is asked again, as
        the buffer may have been freed since."""
        ptr = tensor.data_ptr()
        if ptr in self.outside:
            return False
        nbytes = tensor.numel() * tensor.element_size()
        if self.client.buffer_of(ptr, nbytes) is not None:
            return True
        self.outside.add(ptr)
        return False


def allreduce_hook(state, bucket):
    """DDP communication hook: returns a Future of the averaged bucket."""
    state = state if state is not None else _shared_default()
    client = state.client
    tensor = bucket.buffer()
    index = bucket.index()
    iteration = state.step
    if bucket.is_last():
        state.step += 1

    cuda = tensor.device.type == "cuda"
    if cuda:
        torch.cuda.current_stream(tensor.device).synchronize()
    if not cuda and state.in_tally_memory(tensor):
        work = tensor
    else:
        state.copies += 1
        work = state.staging_view(index, tensor)
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
                           last=bucket.is_last(),
                           compression=state.compression)

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
