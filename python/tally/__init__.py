# SPDX-License-Identifier: BSD-3-Clause
"""tally: all-reduce through the host's tallyd, from Python.

The binding of libtally (ctypes, no compiled extension).  tally.torch adds
the torch.distributed backend "tally" and the DDP communication hook; see
docs/pytorch.md.
"""
from .errors import TallyError, ERROR_NAMES
from .client import (Client, Buffer, Request, FLOAT32, FLOAT16, BFLOAT16,
                     INT32, SUM, AVG, F_LAST_OF_ITERATION, MAX_INFLIGHT)
from ._lib import strerror

__version__ = "0.1.0"
__all__ = ["Client", "Buffer", "Request", "TallyError", "ERROR_NAMES",
           "strerror", "FLOAT32", "FLOAT16", "BFLOAT16", "INT32", "SUM",
           "AVG", "F_LAST_OF_ITERATION", "MAX_INFLIGHT"]
