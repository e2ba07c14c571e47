/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * clock.h - the daemon's one clock: CLOCK_MONOTONIC in nanoseconds.  Every
 * now_ns the engines, transports, scheduler and control thread pass
 * around is read here (the engines themselves never read a clock).  The
 * client library (shm/) keeps its own reading of the same clock: it may
 * depend on libc only.
 */
#ifndef TALLY_DATAPLANE_CLOCK_H
#define TALLY_DATAPLANE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t tly_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t tly_now_ms(void)
{
	return tly_now_ns() / 1000000ull;
}

#endif /* TALLY_DATAPLANE_CLOCK_H */
