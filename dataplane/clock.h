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

/* CLOCK_MONOTONIC - CLOCK_REALTIME in ns: what moves a kernel's
 * CLOCK_REALTIME stamp (SO_TIMESTAMPNS) onto this clock.  It changes when
 * the wall clock is stepped. */
static inline int64_t tly_mono_minus_real_ns(void)
{
	struct timespec real, mono;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return ((int64_t)mono.tv_sec - real.tv_sec) * 1000000000 +
	       mono.tv_nsec - real.tv_nsec;
}

#endif /* TALLY_DATAPLANE_CLOCK_H */
