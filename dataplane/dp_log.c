// SPDX-License-Identifier: BSD-3-Clause
/*
 * dp_log.c - the dataplane's log calls, handed to the daemon's sink.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "dataplane/dp_log.h"

static _Atomic(dp_log_sink) sink;

void dp_log_set_sink(dp_log_sink s)
{
	atomic_store_explicit(&sink, s, memory_order_release);
}

void dp_log(enum dp_log_level level, const char *fmt, ...)
{
	dp_log_sink s = atomic_load_explicit(&sink, memory_order_acquire);
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (s)
		s(level, line);
	else
		fprintf(stderr, "%s\n", line);
}
