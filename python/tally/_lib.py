# SPDX-License-Identifier: BSD-3-Clause
"""Loading libtally.so with ctypes, and the prototypes of its calls.

Where the library comes from, first match wins:
  1. $TALLY_LIBRARY, a path to libtally.so;
  2. the build tree this package sits in (python/tally/ of a checkout that
     was built with meson into build/), so tests and examples need no
     install;
  3. the system's libtally.so.1 (meson install, ldconfig).
"""
import ctypes
import ctypes.util
import os
from pathlib import Path

from .errors import TallyError

_PKG = Path(__file__).resolve().parent


class AllreduceArgs(ctypes.Structure):
    """struct tally_allreduce_args of include/tally/tally.h."""
    _fields_ = [
        ("key", ctypes.c_uint64),
        ("iteration", ctypes.c_uint64),
        ("sendbuf", ctypes.c_void_p),
        ("recvbuf", ctypes.c_void_p),
        ("count", ctypes.c_uint64),
        ("dtype", ctypes.c_int),
        ("op", ctypes.c_int),
        ("priority", ctypes.c_uint32),
        ("group", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
    ]


def build_tree():
    """The meson build folder of the checkout holding this package, or
    None (an installed package).  $TALLY_BUILD names another one."""
    env = os.environ.get("TALLY_BUILD")
    if env:
        return Path(env)
    build = _PKG.parent.parent / "build"
    return build if (build / "shm").is_dir() else None


def _candidates():
    env = os.environ.get("TALLY_LIBRARY")
    if env:
        yield env
        return
    build = build_tree()
    if build:
        yield str(build / "shm" / "libtally.so")
    found = ctypes.util.find_library("tally")
    if found:
        yield found
    yield "libtally.so.1"


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path, use_errno=True)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("tally: cannot load libtally: tried " +
                      "; ".join(tried) +
                      "; set TALLY_LIBRARY to libtally.so's path")


class Job(ctypes.Structure):
    """struct tally_job (include/tally/tally.h)."""
    _fields_ = [("id", ctypes.c_char_p), ("secret", ctypes.c_char_p),
                ("coordinator", ctypes.c_char_p), ("hosts", ctypes.c_int),
                ("host_rank", ctypes.c_int), ("local_size", ctypes.c_int),
                ("local_rank", ctypes.c_int)]


class ConnectOpts(ctypes.Structure):
    """struct tally_connect_opts (include/tally/tally.h)."""
    _fields_ = [("size", ctypes.c_size_t), ("socket", ctypes.c_char_p),
                ("flags", ctypes.c_uint), ("job", Job)]


CONNECT_NO_ENV = 0x1


def _prototypes(lib):
    p, i, u64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64
    protos = {
        "tally_connect": (i, [ctypes.c_char_p, ctypes.POINTER(p)]),
        "tally_connect_opts": (i, [ctypes.POINTER(ConnectOpts),
                                   ctypes.POINTER(p)]),
        "tally_disconnect": (None, [p]),
        "tally_rank": (i, [p]),
        "tally_size": (i, [p]),
        "tally_alloc": (p, [p, ctypes.c_size_t]),
        "tally_free": (None, [p, p]),
        "tally_last_error": (i, [p]),
        "tally_allreduce": (i, [p, ctypes.POINTER(AllreduceArgs),
                                ctypes.POINTER(u64)]),
        "tally_test": (i, [p, u64]),
        "tally_wait": (i, [p, u64, i]),
        "tally_wait_ready": (i, [p, i]),
        "tally_strerror": (ctypes.c_char_p, [i]),
        "tally_dtype_size": (ctypes.c_size_t, [i]),
        "tally_ef_reset": (i, [p, u64]),
        "tally_ef_reset_all": (None, [p]),
    }
    for name, (res, args) in protos.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ImportError("tally: %s lacks %s (a libtally older than "
                              "this binding: TALLY_1.4 is needed)" %
                              (lib._name, name)) from None
        fn.restype = res
        fn.argtypes = args
    return lib


lib = _prototypes(_load())


def strerror(code):
    return lib.tally_strerror(int(code)).decode()


def check(ret, context=None):
    """Raise TallyError for a negative return code, else return it."""
    if ret < 0:
        raise TallyError(-ret, strerror(ret), context)
    return ret
