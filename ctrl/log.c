// SPDX-License-Identifier: BSD-3-Clause
/*
 * log.c - leveled logging to stderr with syslog-style <N> priority
 * prefixes, which journald understands.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ctrl/log.h"
#include "dataplane/dp_log.h"

/* set by the main thread (a reload), read by every thread that logs */
static _Atomic int current = LOG_INFO;
static const char *const names[] = { "error", "warn", "info", "debug" };
static const int syslog_prio[] = { 3, 4, 6, 7 };

void log_set_level(enum log_level level)
{
	atomic_store_explicit(&current, (int)level, memory_order_relaxed);
}

int log_level_parse(const char *name)
{
	for (int i = 0; i <= LOG_DEBUG; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -1;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if ((int)level > atomic_load_explicit(&current, memory_order_relaxed))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "<%d>tallyd: %s: %s\n", syslog_prio[level],
		names[level], line);
}

/* The dataplane's log lines, through the same levels and prefixes. */
static void dataplane_line(enum dp_log_level level, const char *line)
{
	log_msg((enum log_level)level, "%s", line);
}

void log_take_dataplane(void)
{
	dp_log_set_sink(dataplane_line);
}

_Static_assert((int)DP_LOG_ERR == (int)LOG_ERR &&
	       (int)DP_LOG_DEBUG == (int)LOG_DEBUG,
	       "the dataplane's log levels are the daemon's");
