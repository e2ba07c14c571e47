/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watchdog.h - reports every operation that has not finished within
 * daemon.stuck_ms, once, naming what it waits for: local members that
 * have not submitted, the scheduler's credit, or the engine's chunks and
 * the node whose packets they need.  A report is a warning in the log and
 * a count in the daemon's statistics; the end of a reported operation is
 * logged too.  One per job.  Scans run every stuck_ms / 4, so a report comes between
 * stuck_ms and 1.25 stuck_ms after the operation was first seen.
 */
#ifndef TALLY_CTRL_WATCHDOG_H
#define TALLY_CTRL_WATCHDOG_H

#include <stdint.h>

struct job;

struct watchdog_stats {
	uint64_t reports;	/* operations reported stuck, in total */
	uint32_t stuck_now;	/* operations stuck at the last scan */
};

int watchdog_init(struct job *j);
/* A new daemon.stuck_ms (SIGHUP reload): 0 turns the watchdog off, a
 * watchdog that was off starts timing what it sees from its next scan.
 * 0, or -1 when out of memory (the watchdog stays off). */
int watchdog_set_stuck_ms(struct job *j, int stuck_ms);
void watchdog_fini(struct job *j);
/* Scan when due; cheap otherwise. */
void watchdog_poll(struct job *j, uint64_t now_ns);
/* How long the loop may sleep before the next scan is due (-1: no limit). */
int64_t watchdog_sleep_ns(const struct job *j, uint64_t now_ns);
const struct watchdog_stats *watchdog_stats(const struct job *j);

#endif /* TALLY_CTRL_WATCHDOG_H */
