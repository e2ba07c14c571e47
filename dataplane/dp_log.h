/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_log.h - how the dataplane logs: through a sink the daemon installs
 * (ctrl/log.c: its levels, prefixes and journald priorities), or to
 * stderr when none is (tests, tools).  The dataplane never calls up into
 * ctrl/: the sink is the callback.  The levels are the daemon's
 * (enum log_level in ctrl/log.h has the same values).
 */
#ifndef TALLY_DATAPLANE_DP_LOG_H
#define TALLY_DATAPLANE_DP_LOG_H

enum dp_log_level { DP_LOG_ERR = 0, DP_LOG_WARN, DP_LOG_INFO, DP_LOG_DEBUG };

/* @line has no trailing newline; called from any dataplane thread */
typedef void (*dp_log_sink)(enum dp_log_level level, const char *line);

/* NULL: back to stderr.  Set before the dataplane threads start. */
void dp_log_set_sink(dp_log_sink sink);
void dp_log(enum dp_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define dp_err(...) dp_log(DP_LOG_ERR, __VA_ARGS__)
#define dp_warn(...) dp_log(DP_LOG_WARN, __VA_ARGS__)
#define dp_info(...) dp_log(DP_LOG_INFO, __VA_ARGS__)

#endif /* TALLY_DATAPLANE_DP_LOG_H */
