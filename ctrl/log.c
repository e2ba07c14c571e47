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
