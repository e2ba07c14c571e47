# SPDX-License-Identifier: BSD-3-Clause
"""The client of the host's tallyd: shared buffers and asynchronous
all-reduce, over libtally with ctypes.

    import tally
    c = tally.Client()                      # $TALLY_SOCKET or the default
    buf = c.alloc(4 * n)                    # shared with the daemon
    grad = buf.numpy("float32")             # a view, no copy
    grad[:] = ...
    req = c.allreduce(grad, key=0, iteration=step, op=tally.AVG)
    req.wait()                              # TallyError on failure

Threads: libtally's client is single-threaded; this class serialises
every call through one lock, and a progress thread (started by the first
all-reduce) sleeps in tally_wait_ready() without the lock, collects
finished requests with tally_test() and completes them: Request.wait()
and the callbacks never call into libtally.  So any thread may submit,
and a request may be waited for from any thread.
"""
import atexit
import ctypes
import threading
import weakref

from . import _lib
from ._lib import lib, check
from .errors import TallyError, EAGAIN, EINPROGRESS, ETIMEDOUT, \
    EDAEMONLOST, EINVAL, ERANGE

FLOAT32, FLOAT16, BFLOAT16, INT32 = 0, 1, 2, 3
SUM, AVG = 0, 1
F_LAST_OF_ITERATION = 0x1
# per-tensor compression (TALLY_F_COMPRESS, docs/compression.md): None is
# the job's [compression] method
COMPRESSION = {None: 0, "none": 1, "int16": 2, "int8": 3, "sign_ef": 4,
               "block_topk10_ef": 5, "block_topk1_ef": 6}
_F_COMPRESS_SHIFT = 4


def compression_flags(compression):
    """The flags bits of a compression name (None: the job's)."""
    try:
        return COMPRESSION[compression] << _F_COMPRESS_SHIFT
    except KeyError:
        raise ValueError("tally: compression is one of none, int16, int8, "
                         "sign_ef, block_topk10_ef, block_topk1_ef "
                         "(or None for the job's), not %r" % (compression,))
MAX_INFLIGHT = 256              # TALLY_MAX_INFLIGHT
DTYPE_NAMES = {"float32": FLOAT32, "float16": FLOAT16,
               "bfloat16": BFLOAT16, "int32": INT32}
DTYPE_SIZE = {FLOAT32: 4, FLOAT16: 2, BFLOAT16: 2, INT32: 4}

# How long the progress thread sleeps in one call before it looks for
# close(): bounds close()'s wait, costs nothing while operations run.
_PROGRESS_SLICE_MS = 200


class Buffer:
    """Memory shared with tallyd, from tally_alloc(): 64-byte aligned.

    numpy() and torch() give views of it without a copy; the views keep
    the buffer alive, and the buffer is freed when the last reference
    goes (or by free()).  The memory disappears when the client closes.
    """

    def __init__(self, client, nbytes):
        self._client = client
        self.nbytes = int(nbytes)
        with client._lock:
            client._check_open()
            ptr = lib.tally_alloc(client._c, self.nbytes)
            if not ptr:
                check(lib.tally_last_error(client._c) or -1,
                      "tally_alloc(%d bytes)" % self.nbytes)
        self.ptr = ptr
        # a ctypes array over the memory: the buffer-protocol object
        # the views are made from; it holds the Buffer alive
        self._cbuf = (ctypes.c_uint8 * self.nbytes).from_address(ptr)
        self._cbuf._tally_buffer = self
        client._buffers[ptr] = weakref.ref(self)

    def numpy(self, dtype="uint8", count=-1, offset=0):
        import numpy as np
        return np.frombuffer(self._cbuf, dtype=dtype, count=count,
                             offset=offset)

    def torch(self, dtype=None, count=-1, offset=0):
        import torch
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.frombuffer(self._cbuf,
                                    dtype=dtype or torch.uint8,
                                    count=count, offset=offset)

    def contains(self, ptr, nbytes):
        return self.ptr <= ptr and ptr + nbytes <= self.ptr + self.nbytes

    def free(self):
        """Release the memory now; no view of it may be used after."""
        client, self._client = self._client, None
        if client is None:
            return
        client._buffers.pop(self.ptr, None)
        with client._lock:
            if client._c:
                lib.tally_free(client._c, self.ptr)

    def __del__(self):
        try:
            self.free()
        except Exception:      # interpreter shutdown
            pass


class Request:
    """An all-reduce in flight.  wait() returns when tally finished it
    (raising TallyError if it failed); callbacks added with
    add_done_callback(fn) run with the request in the progress thread."""

    __slots__ = ("_event", "result", "_callbacks", "_keep", "context",
                 "__weakref__")

    def __init__(self, keep, context):
        self._event = threading.Event()
        self.result = None
        self._callbacks = []
        self._keep = keep       # the buffers, alive until completion
        self.context = context  # (key, iteration)

    def done(self):
        return self._event.is_set()

    def error(self):
        """The TallyError of a failed request, else None."""
        if self.result is None or self.result >= 0:
            return None
        return TallyError(-self.result, _lib.strerror(self.result),
                          _op_text(*self.context))

    def wait(self, timeout=None):
        if not self._event.wait(timeout):
            raise TallyError(ETIMEDOUT, _lib.strerror(-ETIMEDOUT),
                             _op_text(*self.context))
        err = self.error()
        if err:
            raise err

    def add_done_callback(self, fn):
        run_now = False
        with _callback_lock:
            if self._event.is_set():
                run_now = True
            else:
                self._callbacks.append(fn)
        if run_now:
            fn(self)

    def _complete(self, result):
        self.result = result
        self._keep = None
        with _callback_lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(self)
            except Exception:          # noqa: BLE001
                # the progress thread must survive a broken callback
                import traceback
                traceback.print_exc()


_callback_lock = threading.Lock()


def _op_text(key, iteration):
    """What a TallyError says it was doing."""
    return "all-reduce key %d iteration %d" % (key, iteration)


def _describe(obj):
    """(address, bytes, tally dtype or None) of a buffer-like object:
    a NumPy array, a torch tensor (CPU, contiguous) or a Buffer."""
    if isinstance(obj, Buffer):
        return obj.ptr, obj.nbytes, None
    mod = type(obj).__module__
    if mod.startswith("torch"):
        if obj.device.type != "cpu":
            raise TypeError("tally: a %s tensor: the binding takes CPU "
                            "tensors (tally.torch copies GPU buckets)"
                            % obj.device.type)
        if not obj.is_contiguous():
            raise TypeError("tally: the tensor is not contiguous")
        name = str(obj.dtype).replace("torch.", "")
        return obj.data_ptr(), obj.numel() * obj.element_size(), \
            DTYPE_NAMES.get(name)
    if mod == "numpy":
        if not obj.flags["C_CONTIGUOUS"]:
            raise TypeError("tally: the array is not C-contiguous")
        return obj.ctypes.data, obj.nbytes, DTYPE_NAMES.get(obj.dtype.name)
    raise TypeError("tally: cannot take a %s (a NumPy array, a torch "
                    "tensor or a tally.Buffer)" % type(obj).__name__)


_JOB_KEYS = ("id", "secret", "coordinator", "hosts", "host_rank",
             "local_size", "local_rank")


def _connect_opts(socket, job, env):
    """struct tally_connect_opts for @job (a dict of _JOB_KEYS; the
    rest unset) and @env (False: read no launcher environment)."""
    job = dict(job or {})
    unknown = set(job) - set(_JOB_KEYS)
    if unknown:
        raise TypeError("tally: unknown job field(s) %s (known: %s)" %
                        (", ".join(sorted(unknown)), ", ".join(_JOB_KEYS)))
    o = _lib.ConnectOpts()
    o.size = ctypes.sizeof(_lib.ConnectOpts)
    o.socket = socket.encode() if socket else None
    o.flags = 0 if env else _lib.CONNECT_NO_ENV
    for k in ("id", "secret", "coordinator"):
        if job.get(k) is not None:
            setattr(o.job, k, str(job[k]).encode())
    # unset as TALLY_CONNECT_OPTS_INIT: 0 for sizes, -1 for ranks
    for k, unset in (("hosts", 0), ("host_rank", -1), ("local_size", 0),
                     ("local_rank", -1)):
        v = job.get(k)
        setattr(o.job, k, unset if v is None else int(v))
    return o


class Client:
    """A connection to the host's tallyd (tally_connect_opts).

    @job names the job this process belongs to, for a tallyd serving
    many (a host service): a dict of id, secret, coordinator ("IP[:port]"),
    hosts, host_rank, local_size, local_rank.  Fields left out come from
    the launcher's environment (torchrun, Open MPI, Slurm, TALLY_*) unless
    @env is False.  A daemon started for one job ignores them."""

    def __init__(self, socket=None, job=None, env=True):
        c = ctypes.c_void_p()
        opts = _connect_opts(socket, job, env)
        check(lib.tally_connect_opts(ctypes.byref(opts), ctypes.byref(c)),
              "connecting to tallyd at %s" %
              (socket or "$TALLY_SOCKET or /run/tally/tallyd.sock"))
        self._c = c
        # reentrant: a Buffer freed by the garbage collector may call
        # tally_free() from a thread that holds the lock already
        self._lock = threading.RLock()
        self._cv = threading.Condition(self._lock)
        self._pending = {}      # handle -> Request
        self._buffers = {}      # address -> weakref to Buffer
        self._thread = None
        self._closing = False
        self.rank = lib.tally_rank(c)
        self.size = lib.tally_size(c)
        self.socket = socket
        atexit.register(self.close)

    def _check_open(self):
        if not self._c:
            raise TallyError(EINVAL, "the client is closed")

    def alloc(self, nbytes):
        """A Buffer of @nbytes shared with the daemon."""
        return Buffer(self, nbytes)

    def buffer_of(self, ptr, nbytes):
        """The live Buffer holding [ptr, ptr + nbytes), or None."""
        for ref in list(self._buffers.values()):
            buf = ref()
            if buf is not None and buf.contains(ptr, nbytes):
                return buf
        return None

    def allreduce(self, send, recv=None, *, key, iteration, op=SUM,
                  dtype=None, count=None, priority=0, group=0,
                  last=False, keep=(), compression=None):
        """Submit an all-reduce of @send into @recv (in place when None).

        Both must lie in this client's shared buffers.  dtype and count
        come from the arrays/tensors, or must be given for a Buffer.
        compression: "none", "int16", "int8", "sign_ef",
        "block_topk10_ef", "block_topk1_ef" or None (the job's method);
        float tensors only (an int32 tensor with a lossy method fails
        with EINVAL), every process naming the same for a tensor.
        sign_ef and block_topk keep an error-feedback residual per key in
        the library (ef_reset()); one request per key in flight.
        Returns a Request; @keep holds more objects alive until it ends.
        """
        recv = send if recv is None else recv
        sptr, sbytes, sdt = _describe(send)
        rptr, rbytes, rdt = _describe(recv)
        if isinstance(dtype, str):
            dtype = DTYPE_NAMES[dtype]
        dtype = dtype if dtype is not None else sdt
        if dtype is None or dtype not in DTYPE_SIZE:
            raise TypeError("tally: all-reduce takes float32, float16, "
                            "bfloat16 or int32")
        if count is None:
            count = sbytes // DTYPE_SIZE[dtype]
        nbytes = count * DTYPE_SIZE[dtype]
        if nbytes > sbytes or nbytes > rbytes or count <= 0:
            raise TallyError(EINVAL, _lib.strerror(-EINVAL),
                             "count %d does not fit the buffers" % count)
        flags = compression_flags(compression)
        if last:
            flags |= F_LAST_OF_ITERATION
        keep = (send, recv, keep)
        args = _lib.AllreduceArgs(
            key=key, iteration=iteration, sendbuf=sptr, recvbuf=rptr,
            count=count, dtype=dtype, op=op, priority=priority,
            group=group, flags=flags)
        handle = ctypes.c_uint64()
        req = Request(keep, (key, iteration))   # text made on failure
        with self._cv:
            self._check_open()
            while True:
                ret = lib.tally_allreduce(self._c, ctypes.byref(args),
                                          ctypes.byref(handle))
                if ret != -EAGAIN:
                    break
                # 256 in flight: the progress thread frees one
                self._start_progress()
                self._cv.wait(1.0)
            if ret < 0:
                context = _op_text(key, iteration)
                if ret == -ERANGE:
                    context += ": the buffers are not in tally memory " \
                        "(Client.alloc)"
                check(ret, context)
            self._pending[handle.value] = req
            self._start_progress()
            self._cv.notify_all()
        return req

    def ef_reset(self, key):
        """Forget sign_ef's residual of @key (a skipped step, a restore).
        False when the key has none."""
        with self._cv:
            self._check_open()
            return lib.tally_ef_reset(self._c, key) == 0

    def ef_reset_all(self):
        """Forget every sign_ef residual of this client."""
        with self._cv:
            self._check_open()
            lib.tally_ef_reset_all(self._c)

    def _start_progress(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._progress,
                                            name="tally-progress",
                                            daemon=True)
            self._thread.start()

    def _progress(self):
        while True:
            with self._cv:
                while not self._pending and not self._closing:
                    self._cv.wait()
                if self._closing:
                    return
                c = self._c
            ret = lib.tally_wait_ready(c, _PROGRESS_SLICE_MS)
            if ret == -ETIMEDOUT:
                continue
            done = []
            with self._cv:
                if not self._c:
                    return
                for handle, req in list(self._pending.items()):
                    r = lib.tally_test(self._c, handle)
                    if r != -EINPROGRESS:
                        del self._pending[handle]
                        done.append((req, r))
                self._cv.notify_all()
            for req, r in done:
                req._complete(r)
            if ret == -EDAEMONLOST and not done:
                with self._cv:      # nothing to collect: wait for more
                    if self._pending:
                        self._cv.wait(0.05)

    def close(self):
        """Disconnect.  Pending requests fail; buffers and their views
        become invalid."""
        with self._cv:
            if not self._c:
                return
            self._closing = True
            self._cv.notify_all()
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join()
        with self._cv:
            pending, self._pending = self._pending, {}
            lib.tally_disconnect(self._c)
            self._c = None
        for req in pending.values():
            req._complete(-EDAEMONLOST)
        atexit.unregister(self.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
