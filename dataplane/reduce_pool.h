/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reduce_pool.h - run one large reduction on several cores.
 *
 * The caller's thread takes the first share and helper threads the others;
 * shares are whole blocks, disjoint, so no two threads touch one cache
 * line.  Reductions under REDUCE_PARALLEL_MIN_BYTES run on the caller
 * alone: waking a helper costs more than it saves there.  Helpers sleep on
 * a condition variable between jobs (never spin: cores are shared).
 * Helpers are named REDUCE_POOL_THREAD_NAME (/proc/PID/task/TID/comm).
 */
#ifndef TALLY_DATAPLANE_REDUCE_POOL_H
#define TALLY_DATAPLANE_REDUCE_POOL_H

#include <sched.h>

#include "dataplane/reduce.h"

#define REDUCE_PARALLEL_MIN_BYTES (256u << 10)
#define REDUCE_POOL_MAX_THREADS 16
#define REDUCE_POOL_THREAD_NAME "tly-reduce"

struct reduce_pool;

/* @threads in all, the caller included; 1 makes a pool without helpers.
 * NULL on failure. */
struct reduce_pool *reduce_pool_create(unsigned int threads);
void reduce_pool_destroy(struct reduce_pool *pool);

/*
 * reduce_pool_pin - let every helper run on any CPU of @cpus (not one CPU
 * each: see docs/numa.md).  The caller's share runs on the caller's
 * thread, which this leaves alone.  0, or the error number of
 * pthread_setaffinity_np.
 */
int reduce_pool_pin(struct reduce_pool *pool, const cpu_set_t *cpus);

/* Run @a to completion over the pool; returns when every share is done. */
void reduce_pool_run(struct reduce_pool *pool, const struct reduce_args *a);

#endif /* TALLY_DATAPLANE_REDUCE_POOL_H */
