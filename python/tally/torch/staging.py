# SPDX-License-Identifier: BSD-3-Clause
"""Reusable tally buffers for tensors that do not live in tally memory.

An all-reduce's buffers must be inside the client's shared segments; a
tensor elsewhere is copied into a staging buffer and back.  Buffers are
kept per size class (powers of two from 4 KiB), so steady training
allocates nothing after its first step.  get() runs in the submitting
thread, put() in the progress thread.
"""
import threading


class StagingPool:
    MIN_BYTES = 4096

    def __init__(self, client):
        self._client = client
        self._free = {}         # size class -> [Buffer]
        self._lock = threading.Lock()

    @classmethod
    def size_class(cls, nbytes):
        size = cls.MIN_BYTES
        while size < nbytes:
            size *= 2
        return size

    def get(self, nbytes):
        size = self.size_class(nbytes)
        with self._lock:
            bufs = self._free.get(size)
            if bufs:
                return bufs.pop()
        return self._client.alloc(size)

    def put(self, buf):
        with self._lock:
            self._free.setdefault(buf.nbytes, []).append(buf)
