/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reduce_pool.h - run one large reduction on several cores.
 *
 * A job is cut into chunks of whole blocks; the caller and the helper
 * threads claim chunks from one shared counter until none is left, so a
 * helper that is late (asleep, or preempted on a shared core) never holds
 * the caller up: the caller does the work itself and waits only for the
 * chunks a helper actually took.
 *
 * Waking: after its work a helper polls for the next job for a bounded
 * time (pause, then sched_yield), then announces that it sleeps and sleeps
 * on a futex.  The caller issues the wake-up syscall only when a helper
 * announced sleep (the prepare-sleep / needs-wakeup handshake of
 * shm/ring.h), so a job that finds its helpers polling costs no syscall.
 *
 * Splitting: a job is split only when the time the helpers save beats the
 * handoff: the pool measures at creation how fast one thread reduces and
 * what a handoff costs, to a polling helper and to a sleeping one (the
 * wake-up syscall), and splits a job when its predicted single-thread time,
 * times (threads - 1) / threads, is over twice that cost.  A job between
 * the two points finds a helper asleep: it runs inline, unless the job
 * before was as large (a stream: the one wake-up then pays for the jobs
 * that follow while the helpers poll).  Sizes are counted in bytes
 * touched: count x element size x (inputs + outputs).
 *
 * Helpers are named REDUCE_POOL_THREAD_NAME (/proc/PID/task/TID/comm).
 */
#ifndef TALLY_DATAPLANE_REDUCE_POOL_H
#define TALLY_DATAPLANE_REDUCE_POOL_H

#include <sched.h>
#include <stdint.h>

#include "dataplane/reduce.h"

#define REDUCE_POOL_MAX_THREADS 16
#define REDUCE_POOL_THREAD_NAME "tly-reduce"

/* How long an idle helper polls before it sleeps (the cores are shared:
 * bounded, and it yields after the first microseconds). */
#define REDUCE_POOL_SPIN_NS 200000ull

/* Calibrated split points are clamped to this range (bytes touched). */
#define REDUCE_POOL_SPLIT_MIN (64u << 10)
#define REDUCE_POOL_SPLIT_MAX (256u << 20)

struct reduce_pool;

/* What the calibration measured and what it decided. */
struct reduce_pool_calibration {
	double ns_per_byte;	/* one thread, per byte touched (0: none) */
	uint64_t handoff_ns;	/* split overhead, helpers polling */
	uint64_t wake_ns;	/* the submitter's wake-up syscall */
	uint64_t wake_latency_ns; /* wake-up until a helper takes a chunk */
	size_t split_polling;	/* split at or above, helpers polling */
	size_t split_sleeping;	/* split at or above, a helper asleep */
};

struct reduce_pool_stats {
	uint64_t jobs_inline;	/* run by the caller alone */
	uint64_t jobs_split;
	uint64_t wakeups;	/* wake-up syscalls the caller issued */
	uint64_t helper_wakes;	/* a sleeping helper woke to a job */
	uint64_t helper_chunks;	/* chunks helpers reduced */
};

/* @threads in all, the caller included; 1 makes a pool without helpers
 * (which never splits, and measures nothing).  With helpers, calibrates
 * the split points (a few milliseconds).  NULL on failure. */
struct reduce_pool *reduce_pool_create(unsigned int threads);
void reduce_pool_destroy(struct reduce_pool *pool);

/*
 * reduce_pool_pin - let every helper run on any CPU of @cpus (not one CPU
 * each: see docs/numa.md).  The caller's share runs on the caller's
 * thread, which this leaves alone.  0, or the error number of
 * pthread_setaffinity_np.
 */
int reduce_pool_pin(struct reduce_pool *pool, const cpu_set_t *cpus);

/* Run @a to completion over the pool; returns when every chunk is done.
 * One caller at a time. */
void reduce_pool_run(struct reduce_pool *pool, const struct reduce_args *a);

/* Measure again (e.g. after pinning); not concurrently with a run. */
void reduce_pool_calibrate(struct reduce_pool *pool);
void reduce_pool_calibration(const struct reduce_pool *pool,
			     struct reduce_pool_calibration *c);

/* Override the split points (bytes touched; 0 splits every job that has
 * more than one block, SIZE_MAX never splits).  For tests and tuning. */
void reduce_pool_set_split(struct reduce_pool *pool, size_t polling,
			   size_t sleeping);
/* How long idle helpers poll before they sleep. */
void reduce_pool_set_spin_ns(struct reduce_pool *pool, uint64_t ns);

void reduce_pool_stats(const struct reduce_pool *pool,
		       struct reduce_pool_stats *st);
/* Helpers asleep now (announced). */
unsigned int reduce_pool_sleepers(const struct reduce_pool *pool);
/* True when every helper has seen the latest job (a test's check that no
 * wake-up was lost). */
bool reduce_pool_helpers_caught_up(const struct reduce_pool *pool);

/* Bytes a job touches: what the split points are compared with. */
static inline size_t reduce_job_bytes(const struct reduce_args *a)
{
	return a->count * tally_dtype_size(a->dtype) * (a->n_in + a->n_out);
}

#endif /* TALLY_DATAPLANE_REDUCE_POOL_H */
