// SPDX-License-Identifier: BSD-3-Clause
/*
 * strerror.c - names of tally's error codes and dtype sizes.
 */
#include <tally/tally.h>

static const char *const error_text[TALLY_ERROR_MAX] = {
	[TALLY_OK] = "success",
	[TALLY_EINVAL] = "invalid argument",
	[TALLY_ENOMEM] = "out of (shared) memory",
	[TALLY_ECONNECT] = "cannot connect to tallyd",
	[TALLY_EPROTO] = "protocol version mismatch with tallyd",
	[TALLY_EAGAIN] = "too many requests in flight, reap and retry",
	[TALLY_ETIMEDOUT] = "timed out, request still pending",
	[TALLY_EMISMATCH] = "group members disagree on count, dtype or op",
	[TALLY_EPEERLOST] = "another member of the group was lost",
	[TALLY_EDAEMONLOST] = "connection to tallyd lost",
	[TALLY_EBADOP] = "request rejected by tallyd",
	[TALLY_ERANGE] = "buffer outside the shared segments",
	[TALLY_ENOENT] = "unknown request handle",
	[TALLY_EDENIED] = "admission refused by tallyd",
	[TALLY_ENETWORK] = "multi-host aggregation failed",
	[TALLY_EINPROGRESS] = "request in progress",
	[TALLY_ELIMIT] = ("a tallyd limit was reached (segments, segment "
			  "size or connections)"),
	[TALLY_EDEVICE] = "GPU device error (a CUDA call failed)",
};

const char *tally_strerror(int err)
{
	/* in unsigned arithmetic: -INT_MIN would overflow */
	unsigned int e = err < 0 ? 0u - (unsigned int)err : (unsigned int)err;

	if (e >= TALLY_ERROR_MAX || !error_text[e])
		return "unknown tally error";
	return error_text[e];
}

size_t tally_dtype_size(enum tally_dtype dtype)
{
	switch (dtype) {
	case TALLY_FLOAT32:
	case TALLY_INT32:
		return 4;
	case TALLY_FLOAT16:
	case TALLY_BFLOAT16:
		return 2;
	default:
		return 0;
	}
}
