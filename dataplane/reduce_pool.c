// SPDX-License-Identifier: BSD-3-Clause
/*
 * reduce_pool.c - a reduction split over the caller and helper threads
 * (see reduce_pool.h).
 *
 * Words (each on its own cache line where two sides write them):
 * - claim: job sequence << 32 | next chunk.  A thread reads the job's
 *   description after an acquire load of claim and owns a chunk once its
 *   compare-and-swap moved claim on; a chunk of an older job can no longer
 *   be claimed (the sequence differs), and a job stays alive until every
 *   claimed chunk is done, so what a claimer read is that job's.
 * - seq: the latest job's sequence; the helpers' futex word.
 * - sleepers: helpers that announced sleep.  Helper: sleepers++, re-read
 *   seq, sleep if unchanged.  Caller: store seq, read sleepers, wake if
 *   any.  All seq_cst, so one of the two sees the other (Dekker, as in
 *   shm/ring.h): no lost wake-up, and no syscall while helpers poll.
 * - done: chunks finished; the caller's futex word, with caller_asleep as
 *   the same handshake in the other direction.
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/clock.h"
#include "dataplane/reduce_pool.h"

#define CACHELINE 64

/* Poll with pause this long, then with sched_yield (a shared core). */
#define PAUSE_NS 5000ull
/* The caller waits this long for a helper's chunk before it sleeps. */
#define CALLER_SPIN_NS 2000000ull

/* Chunks: about this many per thread, so a late helper costs little,
 * and at most this many blocks each (1 MiB of float32). */
#define CHUNKS_PER_THREAD 4
#define MAX_CHUNK_BLOCKS 64

/* Calibration: a job of four 64 KiB float32 buffers reduced in place. */
#define CAL_BUFFERS 4
#define CAL_COUNT (4 * REDUCE_BLOCK_ELEMS)
#define CAL_RUNS 15
#define CAL_WAKE_RUNS 5
#define CAL_WAIT_NS 20000000ull		/* per wake-up trial */

struct helper {
	_Alignas(CACHELINE) _Atomic uint32_t seen; /* latest seq it saw */
	struct reduce_pool *pool;
	pthread_t thread;
	unsigned int index;
};

struct reduce_pool {
	/* the job, written by the caller before it publishes claim */
	_Alignas(CACHELINE) _Atomic(const struct reduce_args *) job;
	_Atomic size_t chunk;	/* elements per chunk, whole blocks */
	_Atomic uint32_t nchunks;

	_Alignas(CACHELINE) _Atomic uint64_t claim;
	_Alignas(CACHELINE) _Atomic uint32_t seq;
	_Atomic uint32_t stop;
	_Alignas(CACHELINE) _Atomic uint32_t sleepers;
	_Alignas(CACHELINE) _Atomic uint32_t done;
	_Atomic uint32_t caller_asleep;

	/* helpers' counters and the calibration's probe */
	_Alignas(CACHELINE) _Atomic uint64_t helper_wakes;
	_Atomic uint64_t helper_chunks;
	_Atomic uint32_t probe_armed;
	_Atomic uint64_t probe_ns;	/* a helper woke (calibration) */
	_Atomic uint64_t spin_ns;	/* read by polling helpers */

	/* the caller's side */
	_Alignas(CACHELINE) _Atomic uint64_t jobs_inline;
	_Atomic uint64_t jobs_split;
	_Atomic uint64_t wakeups;
	_Atomic size_t split_polling;
	_Atomic size_t split_sleeping;
	struct reduce_pool_calibration cal;
	bool last_big;		/* the last job was >= split_polling */
	unsigned int threads;
	struct helper helper[REDUCE_POOL_MAX_THREADS];
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static void futex_wait(_Atomic uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* One poll step of a bounded wait that started at @start (0: not yet
 * timed): pause first, then yield.  False once @limit has passed. */
static bool poll_step(uint64_t *start, unsigned int *turn, uint64_t limit)
{
	uint64_t elapsed;

	if ((++*turn & 15) != 0 && *turn < (1u << 30)) {
		cpu_relax();
		return true;
	}
	if (!*start)
		*start = tly_now_ns();
	elapsed = tly_now_ns() - *start;
	if (elapsed >= limit)
		return false;
	if (elapsed >= PAUSE_NS) {
		*turn = 1u << 30;	/* from now on: look at the clock */
		sched_yield();
	} else {
		cpu_relax();
	}
	return true;
}

/* Claim and reduce chunks of the current job until none is left.
 * Returns the number of chunks this thread reduced. */
static unsigned int work(struct reduce_pool *pool)
{
	uint64_t w = atomic_load_explicit(&pool->claim, memory_order_acquire);
	unsigned int n = 0;

	for (;;) {
		const struct reduce_args *a =
			atomic_load_explicit(&pool->job, memory_order_relaxed);
		size_t chunk = atomic_load_explicit(&pool->chunk,
						    memory_order_relaxed);
		uint32_t nchunks = atomic_load_explicit(&pool->nchunks,
							memory_order_relaxed);
		uint32_t idx = (uint32_t)w;

		if (idx >= nchunks)
			break;
		if (!atomic_compare_exchange_weak_explicit(&pool->claim, &w,
				w + 1, memory_order_acq_rel,
				memory_order_acquire))
			continue;
		reduce_range(a, idx * chunk, (idx + 1) * chunk);
		n++;
		/* the last chunk: wake the caller if it announced sleep */
		if (atomic_fetch_add(&pool->done, 1) + 1 == nchunks &&
		    atomic_load(&pool->caller_asleep))
			futex_wake(&pool->done, 1);
		w = atomic_load_explicit(&pool->claim, memory_order_acquire);
	}
	return n;
}

/* A helper between jobs: poll for a bounded time, then sleep.  Returns
 * the new seq. */
static uint32_t wait_for_job(struct reduce_pool *pool, uint32_t seen)
{
	uint64_t start = 0;
	unsigned int turn = 0;
	uint32_t s;

	for (;;) {
		s = atomic_load_explicit(&pool->seq, memory_order_acquire);
		if (s != seen || atomic_load(&pool->stop))
			return s;
		if (!poll_step(&start, &turn,
			       atomic_load_explicit(&pool->spin_ns,
						    memory_order_relaxed)))
			break;
	}
	/* announce, then re-check */
	atomic_fetch_add(&pool->sleepers, 1);
	while ((s = atomic_load(&pool->seq)) == seen &&
	       !atomic_load(&pool->stop))
		futex_wait(&pool->seq, seen);
	atomic_fetch_sub(&pool->sleepers, 1);
	atomic_fetch_add_explicit(&pool->helper_wakes, 1,
				  memory_order_relaxed);
	return s;
}

static void *helper_main(void *p)
{
	struct helper *h = p;
	struct reduce_pool *pool = h->pool;
	uint32_t seen = atomic_load(&h->seen);

	for (;;) {
		unsigned int n;

		seen = wait_for_job(pool, seen);
		if (atomic_load(&pool->stop))
			break;
		atomic_store_explicit(&h->seen, seen, memory_order_release);
		if (atomic_load_explicit(&pool->probe_armed,
					 memory_order_relaxed)) {
			uint64_t zero = 0;

			atomic_compare_exchange_strong(&pool->probe_ns, &zero,
						       tly_now_ns());
		}
		n = work(pool);
		if (n)
			atomic_fetch_add_explicit(&pool->helper_chunks, n,
						  memory_order_relaxed);
	}
	return NULL;
}

/* "tly-reduce/N": ps -L and /proc show which threads reduce (a name is
 * at most 15 characters; a failure only loses the name) */
static void set_name(pthread_t t, unsigned int index)
{
	char name[16];

	snprintf(name, sizeof(name), REDUCE_POOL_THREAD_NAME "/%u", index);
	pthread_setname_np(t, name);
}

/* Publish job @a in @nchunks chunks of @chunk elements; wake sleeping
 * helpers if there are any.  Returns the wake-up syscall's time (0: none
 * was needed). */
static uint64_t publish(struct reduce_pool *pool, const struct reduce_args *a,
			size_t chunk, uint32_t nchunks)
{
	uint32_t s = atomic_load_explicit(&pool->seq,
					  memory_order_relaxed) + 1;
	uint64_t t0;

	atomic_store_explicit(&pool->job, a, memory_order_relaxed);
	atomic_store_explicit(&pool->chunk, chunk, memory_order_relaxed);
	atomic_store_explicit(&pool->nchunks, nchunks, memory_order_relaxed);
	atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
	atomic_store_explicit(&pool->claim, (uint64_t)s << 32,
			      memory_order_release);
	atomic_store(&pool->seq, s);
	if (!atomic_load(&pool->sleepers))
		return 0;
	t0 = tly_now_ns();
	futex_wake(&pool->seq, INT_MAX);
	atomic_fetch_add_explicit(&pool->wakeups, 1, memory_order_relaxed);
	return tly_now_ns() - t0 + 1;
}

/* The caller, its own chunks done: wait for the ones helpers took. */
static void wait_done(struct reduce_pool *pool, uint32_t nchunks)
{
	uint64_t start = 0;
	unsigned int turn = 0;
	uint32_t d;

	while ((d = atomic_load_explicit(&pool->done, memory_order_acquire))
	       != nchunks) {
		if (poll_step(&start, &turn, CALLER_SPIN_NS))
			continue;
		atomic_store(&pool->caller_asleep, 1);
		d = atomic_load(&pool->done);
		if (d != nchunks)
			futex_wait(&pool->done, d);
		atomic_store(&pool->caller_asleep, 0);
	}
}

/* Split @a over the pool unconditionally.  Returns the wake-up's time. */
static uint64_t run_split(struct reduce_pool *pool,
			  const struct reduce_args *a)
{
	size_t blocks = (a->count + REDUCE_BLOCK_ELEMS - 1) /
			REDUCE_BLOCK_ELEMS;
	size_t per = blocks / (pool->threads * CHUNKS_PER_THREAD);
	uint32_t nchunks;
	uint64_t wake;

	if (per < 1)
		per = 1;
	if (per > MAX_CHUNK_BLOCKS)
		per = MAX_CHUNK_BLOCKS;
	nchunks = (uint32_t)((blocks + per - 1) / per);
	wake = publish(pool, a, per * REDUCE_BLOCK_ELEMS, nchunks);
	work(pool);
	wait_done(pool, nchunks);
	atomic_fetch_add_explicit(&pool->jobs_split, 1, memory_order_relaxed);
	return wake;
}

/*
 * Split @a?  Polling helpers: from split_polling on.  A helper asleep:
 * from split_sleeping on, which pays the wake-up syscall within the job;
 * or from split_polling on when the job before was as large too (a
 * stream of them): the wake-up is paid once, the helpers then poll
 * between the jobs and the ones after split at the polling price.
 */
static bool should_split(struct reduce_pool *pool, const struct reduce_args *a)
{
	size_t bytes = reduce_job_bytes(a);
	bool big = bytes >= atomic_load_explicit(&pool->split_polling,
						 memory_order_relaxed);
	bool stream = big && pool->last_big;

	pool->last_big = big;
	if (pool->threads == 1 || a->count <= REDUCE_BLOCK_ELEMS || !big)
		return false;
	if (!atomic_load_explicit(&pool->sleepers, memory_order_relaxed))
		return true;
	return stream || bytes >= atomic_load_explicit(&pool->split_sleeping,
						       memory_order_relaxed);
}

void reduce_pool_run(struct reduce_pool *pool, const struct reduce_args *a)
{
	if (should_split(pool, a)) {
		run_split(pool, a);
		return;
	}
	reduce_range(a, 0, a->count);
	atomic_fetch_add_explicit(&pool->jobs_inline, 1, memory_order_relaxed);
}

/* ---- calibration ------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

/* Fastest of CAL_RUNS runs of @a, inline or split. */
static uint64_t time_job(struct reduce_pool *pool,
			 const struct reduce_args *a, bool split)
{
	uint64_t best = UINT64_MAX;

	for (int i = -3; i < CAL_RUNS; i++) {
		uint64_t t0 = tly_now_ns(), t;

		if (split)
			run_split(pool, a);
		else
			reduce_range(a, 0, a->count);
		t = tly_now_ns() - t0;
		if (i >= 0 && t < best)
			best = t;
	}
	return best ? best : 1;
}

/* Wait (bounded) until every helper announced sleep. */
static bool helpers_asleep(struct reduce_pool *pool)
{
	uint64_t end = tly_now_ns() + CAL_WAIT_NS;

	while (atomic_load(&pool->sleepers) != pool->threads - 1) {
		if (tly_now_ns() > end)
			return false;
		usleep(50);
	}
	return true;
}

/* The wake-up syscall and the time until a sleeping helper runs: the
 * median of a few trials; false if the helpers would not fall asleep
 * (a loaded machine). */
static bool time_wake(struct reduce_pool *pool, const struct reduce_args *a,
		      uint64_t *wake_ns, uint64_t *latency_ns)
{
	uint64_t call[CAL_WAKE_RUNS], lat[CAL_WAKE_RUNS];
	uint64_t spin = atomic_load(&pool->spin_ns);
	unsigned int n = 0;

	atomic_store(&pool->spin_ns, 0);
	for (int i = 0; i < CAL_WAKE_RUNS; i++) {
		uint64_t t0, w, end;

		if (!helpers_asleep(pool))
			break;
		atomic_store(&pool->probe_ns, 0);
		atomic_store(&pool->probe_armed, 1);
		t0 = tly_now_ns();
		w = run_split(pool, a);
		end = tly_now_ns() + CAL_WAIT_NS;
		while (!atomic_load(&pool->probe_ns) && tly_now_ns() < end)
			usleep(10);
		atomic_store(&pool->probe_armed, 0);
		if (!w || !atomic_load(&pool->probe_ns))
			continue;
		call[n] = w;
		lat[n] = atomic_load(&pool->probe_ns) - t0;
		n++;
	}
	atomic_store(&pool->spin_ns, spin);
	if (!n)
		return false;
	*wake_ns = median(call, n);
	*latency_ns = median(lat, n);
	return true;
}

/* Smallest job (bytes touched) whose saved time beats twice @cost_ns. */
static size_t split_point(const struct reduce_pool *pool, double ns_per_byte,
			  uint64_t cost_ns)
{
	double gain = (double)(pool->threads - 1) / pool->threads;
	double bytes = 2.0 * (double)cost_ns / (ns_per_byte * gain);

	if (bytes < REDUCE_POOL_SPLIT_MIN)
		return REDUCE_POOL_SPLIT_MIN;
	if (bytes > REDUCE_POOL_SPLIT_MAX)
		return REDUCE_POOL_SPLIT_MAX;
	return (size_t)bytes;
}

void reduce_pool_calibrate(struct reduce_pool *pool)
{
	struct reduce_pool_calibration *c = &pool->cal;
	float *buf[CAL_BUFFERS];
	struct reduce_args a;
	uint64_t inline_ns, split_ns, floor_ns;
	bool ok = true;

	if (pool->threads == 1) {	/* never splits: nothing to measure */
		c->split_polling = c->split_sleeping = SIZE_MAX;
		atomic_store(&pool->split_polling, SIZE_MAX);
		atomic_store(&pool->split_sleeping, SIZE_MAX);
		return;
	}
	for (int i = 0; i < CAL_BUFFERS; i++) {
		buf[i] = calloc(CAL_COUNT, sizeof(float));
		ok = ok && buf[i];
	}
	if (!ok || reduce_prepare(&a, TALLY_FLOAT32, TALLY_SUM,
				  (const void *const *)buf, CAL_BUFFERS,
				  (void *const *)buf, CAL_BUFFERS, CAL_COUNT,
				  1)) {
		/* no measurement: split only large jobs */
		atomic_store(&pool->split_polling, (size_t)(1u << 20));
		atomic_store(&pool->split_sleeping, (size_t)(4u << 20));
		goto out;
	}
	inline_ns = time_job(pool, &a, false);
	c->ns_per_byte = (double)inline_ns / (double)reduce_job_bytes(&a);
	/* polling helpers: the split's time over a perfect split's */
	split_ns = time_job(pool, &a, true);
	floor_ns = inline_ns / pool->threads;
	c->handoff_ns = split_ns > floor_ns + 100 ? split_ns - floor_ns : 100;
	if (!time_wake(pool, &a, &c->wake_ns, &c->wake_latency_ns)) {
		/* the helpers never slept: assume a handoff's cost thrice */
		c->wake_ns = 3 * c->handoff_ns;
		c->wake_latency_ns = 0;
	}
	c->split_polling = split_point(pool, c->ns_per_byte, c->handoff_ns);
	c->split_sleeping = split_point(pool, c->ns_per_byte,
					c->handoff_ns + c->wake_ns);
	atomic_store(&pool->split_polling, c->split_polling);
	atomic_store(&pool->split_sleeping, c->split_sleeping);
out:
	for (int i = 0; i < CAL_BUFFERS; i++)
		free(buf[i]);
	/* calibration's jobs are not the caller's */
	atomic_store(&pool->jobs_inline, 0);
	atomic_store(&pool->jobs_split, 0);
	atomic_store(&pool->wakeups, 0);
	atomic_store(&pool->helper_wakes, 0);
	atomic_store(&pool->helper_chunks, 0);
}

/* ---- life cycle and knobs ---------------------------------------------- */

struct reduce_pool *reduce_pool_create(unsigned int threads)
{
	struct reduce_pool *pool;

	if (threads == 0 || threads > REDUCE_POOL_MAX_THREADS)
		return NULL;
	pool = aligned_alloc(CACHELINE, sizeof(*pool));
	if (!pool)
		return NULL;
	memset(pool, 0, sizeof(*pool));
	atomic_store(&pool->spin_ns, REDUCE_POOL_SPIN_NS);
	pool->threads = 1;
	for (unsigned int i = 1; i < threads; i++) {
		struct helper *h = &pool->helper[i];

		h->pool = pool;
		h->index = i;
		if (pthread_create(&h->thread, NULL, helper_main, h))
			break;
		set_name(h->thread, i);
		pool->threads++;
	}
	reduce_pool_calibrate(pool);
	return pool;
}

void reduce_pool_destroy(struct reduce_pool *pool)
{
	if (!pool)
		return;
	atomic_store(&pool->stop, 1);
	atomic_fetch_add(&pool->seq, 1);
	futex_wake(&pool->seq, INT_MAX);
	for (unsigned int i = 1; i < pool->threads; i++)
		pthread_join(pool->helper[i].thread, NULL);
	free(pool);
}

int reduce_pool_pin(struct reduce_pool *pool, const cpu_set_t *cpus)
{
	for (unsigned int i = 1; i < pool->threads; i++) {
		int e = pthread_setaffinity_np(pool->helper[i].thread,
					       sizeof(*cpus), cpus);

		if (e)
			return e;
	}
	if (pool->threads > 1)
		reduce_pool_calibrate(pool);	/* the cores changed */
	return 0;
}

void reduce_pool_calibration(const struct reduce_pool *pool,
			     struct reduce_pool_calibration *c)
{
	*c = pool->cal;
	c->split_polling = atomic_load(&pool->split_polling);
	c->split_sleeping = atomic_load(&pool->split_sleeping);
}

void reduce_pool_set_split(struct reduce_pool *pool, size_t polling,
			   size_t sleeping)
{
	atomic_store(&pool->split_polling, polling);
	atomic_store(&pool->split_sleeping, sleeping);
}

void reduce_pool_set_spin_ns(struct reduce_pool *pool, uint64_t ns)
{
	atomic_store(&pool->spin_ns, ns);
}

void reduce_pool_stats(const struct reduce_pool *pool,
		       struct reduce_pool_stats *st)
{
	st->jobs_inline = atomic_load(&pool->jobs_inline);
	st->jobs_split = atomic_load(&pool->jobs_split);
	st->wakeups = atomic_load(&pool->wakeups);
	st->helper_wakes = atomic_load(&pool->helper_wakes);
	st->helper_chunks = atomic_load(&pool->helper_chunks);
}

unsigned int reduce_pool_sleepers(const struct reduce_pool *pool)
{
	return atomic_load(&pool->sleepers);
}

bool reduce_pool_helpers_caught_up(const struct reduce_pool *pool)
{
	uint32_t s = atomic_load(&pool->seq);

	for (unsigned int i = 1; i < pool->threads; i++)
		if (atomic_load(&pool->helper[i].seen) != s)
			return false;
	return true;
}
