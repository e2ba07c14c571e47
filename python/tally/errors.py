# SPDX-License-Identifier: BSD-3-Clause
"""tally's error codes as a Python exception.

Every call of libtally returns 0 or a negative TALLY_E* code; the binding
turns a code into TallyError, which carries the code, its name as in
include/tally/tally.h and tally_strerror()'s text.
"""

# The order of enum tally_error in include/tally/tally.h.
ERROR_NAMES = (
    "TALLY_OK", "TALLY_EINVAL", "TALLY_ENOMEM", "TALLY_ECONNECT",
    "TALLY_EPROTO", "TALLY_EAGAIN", "TALLY_ETIMEDOUT", "TALLY_EMISMATCH",
    "TALLY_EPEERLOST", "TALLY_EDAEMONLOST", "TALLY_EBADOP", "TALLY_ERANGE",
    "TALLY_ENOENT", "TALLY_EDENIED", "TALLY_ENETWORK", "TALLY_EINPROGRESS",
    "TALLY_ELIMIT", "TALLY_EDEVICE",
)

for _i, _name in enumerate(ERROR_NAMES):
    globals()[_name[6:]] = _i    # EINVAL = 1, ...


class TallyError(RuntimeError):
    """A tally operation failed.

    code is the positive TALLY_E* value, name its symbol (e.g.
    "TALLY_EPEERLOST"); str() is "tally: NAME: text[: context]", so a
    training script's traceback says which error it met.
    """

    def __init__(self, code, text, context=None):
        self.code = abs(int(code))
        self.name = (ERROR_NAMES[self.code]
                     if self.code < len(ERROR_NAMES) else
                     "TALLY_E%d" % self.code)
        self.text = text
        self.context = context
        msg = "tally: %s: %s" % (self.name, text)
        if context:
            msg += ": " + context
        super().__init__(msg)
