// SPDX-License-Identifier: BSD-3-Clause
/*
 * reduce_pool.c - a reduction split over the caller and helper threads
 * (see reduce_pool.h).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "dataplane/reduce_pool.h"

struct reduce_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;	/* helpers wait for a new job */
	pthread_cond_t done;	/* the caller waits for the helpers */
	const struct reduce_args *job;
	size_t share;		/* elements per thread, whole blocks */
	unsigned long generation;
	unsigned int pending;	/* helpers still working on this job */
	unsigned int threads;
	bool stop;
	pthread_t helper[REDUCE_POOL_MAX_THREADS];
};

struct helper_arg {
	struct reduce_pool *pool;
	unsigned int index;	/* 1..threads-1; the caller is 0 */
};

static void *helper_main(void *p)
{
	struct helper_arg *arg = p;
	struct reduce_pool *pool = arg->pool;
	unsigned int index = arg->index;
	unsigned long seen = 0;

	free(arg);
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (!pool->stop && pool->generation == seen)
			pthread_cond_wait(&pool->work, &pool->lock);
		if (pool->stop)
			break;
		seen = pool->generation;
		pthread_mutex_unlock(&pool->lock);

		reduce_range(pool->job, index * pool->share,
			     (index + 1) * pool->share);

		pthread_mutex_lock(&pool->lock);
		if (--pool->pending == 0)
			pthread_cond_signal(&pool->done);
	}
	pthread_mutex_unlock(&pool->lock);
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

struct reduce_pool *reduce_pool_create(unsigned int threads)
{
	struct reduce_pool *pool = calloc(1, sizeof(*pool));

	if (!pool || threads == 0 || threads > REDUCE_POOL_MAX_THREADS) {
		free(pool);
		return NULL;
	}
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->work, NULL);
	pthread_cond_init(&pool->done, NULL);
	pool->threads = 1;
	for (unsigned int i = 1; i < threads; i++) {
		struct helper_arg *arg = malloc(sizeof(*arg));

		if (!arg)
			break;
		arg->pool = pool;
		arg->index = i;
		if (pthread_create(&pool->helper[i], NULL, helper_main, arg)) {
			free(arg);
			break;
		}
		set_name(pool->helper[i], i);
		pool->threads++;
	}
	return pool;
}

void reduce_pool_destroy(struct reduce_pool *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stop = true;
	pthread_cond_broadcast(&pool->work);
	pthread_mutex_unlock(&pool->lock);
	for (unsigned int i = 1; i < pool->threads; i++)
		pthread_join(pool->helper[i], NULL);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->work);
	pthread_cond_destroy(&pool->done);
	free(pool);
}

int reduce_pool_pin(struct reduce_pool *pool, const cpu_set_t *cpus)
{
	for (unsigned int i = 1; i < pool->threads; i++) {
		int e = pthread_setaffinity_np(pool->helper[i], sizeof(*cpus),
					       cpus);

		if (e)
			return e;
	}
	return 0;
}

void reduce_pool_run(struct reduce_pool *pool, const struct reduce_args *a)
{
	size_t bytes = a->count * tally_dtype_size(a->dtype);
	size_t blocks;

	if (pool->threads == 1 || bytes < REDUCE_PARALLEL_MIN_BYTES) {
		reduce_range(a, 0, a->count);
		return;
	}
	blocks = (a->count + REDUCE_BLOCK_ELEMS - 1) / REDUCE_BLOCK_ELEMS;
	pthread_mutex_lock(&pool->lock);
	pool->job = a;
	pool->share = (blocks + pool->threads - 1) / pool->threads *
		      REDUCE_BLOCK_ELEMS;
	pool->pending = pool->threads - 1;
	pool->generation++;
	pthread_cond_broadcast(&pool->work);
	pthread_mutex_unlock(&pool->lock);

	reduce_range(a, 0, pool->share);

	pthread_mutex_lock(&pool->lock);
	while (pool->pending)
		pthread_cond_wait(&pool->done, &pool->lock);
	pthread_mutex_unlock(&pool->lock);
}
