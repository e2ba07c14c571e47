/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.h - leveled logging to stderr (journald picks it up under systemd).
 */
#ifndef TALLY_CTRL_LOG_H
#define TALLY_CTRL_LOG_H

enum log_level { LOG_ERR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_set_level(enum log_level level);
/* Parse "error|warn|info|debug"; -1 if unknown. */
int log_level_parse(const char *name);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* From now on the dataplane (dataplane/dp_log.h) logs through us too. */
void log_take_dataplane(void);

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* TALLY_CTRL_LOG_H */
