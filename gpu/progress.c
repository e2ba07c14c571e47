// SPDX-License-Identifier: BSD-3-Clause
/*
 * progress.c - the helper thread of a tally_cuda context (progress.h).
 *
 * It looks at the oldest `depth` chunks only: a later chunk reuses one of
 * their slots, so its copy cannot have started.  When nothing moved it
 * backs off: short sleeps while a copy is under way (a copy of a 4 MiB
 * chunk takes about 100 us), or a sleep on the client's completion
 * doorbell while every chunk is in tallyd.
 */
#include "gpu/progress.h"

#include <stdlib.h>
#include <time.h>

#include "gpu/context.h"

#define BACKOFF_MIN_NS 2000L
#define BACKOFF_MAX_NS 100000L

/* the flag lets copy_out run: the data is there, or never will be */
static void chunk_finish(struct tally_cuda *tc, struct tcu_chunk *ch)
{
	__atomic_store_n(&tc->flags[ch->slot], (uint32_t)(ch->seq + 1),
			 __ATOMIC_RELEASE);
	ch->state = TCU_CHUNK_FINISHED;
}

/* a chunk tallyd refused (its copy landed): with error feedback its
 * `sent` becomes NaN, so copy_out's feedback resets its residual, as
 * libtally's completion of a failed request does.  (A cancelled chunk's
 * operation failed while queueing: it resets the key's residual.) */
static void chunk_fail(struct tally_cuda *tc, struct tcu_chunk *ch)
{
	if (ch->args.flags & TALLY_F_EF_CALLER)
		tcu_ef_nan_fill((void *)ch->args.sendbuf, ch->args.dtype,
				ch->args.count);
	chunk_finish(tc, ch);
}

static int chunk_submit(struct tally_cuda *tc, struct tcu_chunk *ch)
{
	cudaError_t e = cudaEventQuery(ch->copied);
	int r;

	if (e == cudaErrorNotReady)
		return 0;
	if (e != cudaSuccess) {
		tcu_fail_async(tc, -TALLY_EDEVICE,
			       "cudaEventQuery (copy of key %#llx to shared "
			       "memory): %s",
			       (unsigned long long)ch->args.key,
			       cudaGetErrorString(e));
		chunk_finish(tc, ch);
		return 1;
	}
	pthread_mutex_lock(&tc->client_lock);
	r = tally_allreduce(tc->client, &ch->args, &ch->req);
	pthread_mutex_unlock(&tc->client_lock);
	if (r == -TALLY_EAGAIN)
		return 0;
	if (r) {
		tcu_fail_async(tc, r, "tally_allreduce (key %#llx): %s",
			       (unsigned long long)ch->args.key,
			       tally_strerror(r));
		chunk_fail(tc, ch);
		return 1;
	}
	ch->state = TCU_CHUNK_SUBMITTED;
	return 1;
}

static int chunk_test(struct tally_cuda *tc, struct tcu_chunk *ch)
{
	int r;

	pthread_mutex_lock(&tc->client_lock);
	r = tally_test(tc->client, ch->req);
	pthread_mutex_unlock(&tc->client_lock);
	if (r == -TALLY_EINPROGRESS)
		return 0;
	if (r)
		tcu_fail_async(tc, r, "tally_allreduce (key %#llx): %s",
			       (unsigned long long)ch->args.key,
			       tally_strerror(r));
	chunk_finish(tc, ch);
	return 1;
}

/* copy up to @max of the oldest chunks; wait for one; NULL-free 0: stop */
static unsigned int take_window(struct tcu_progress *p,
				struct tcu_chunk **win, unsigned int max)
{
	struct tcu_chunk *ch;
	unsigned int n = 0;

	pthread_mutex_lock(&p->lock);
	while (!p->head && !p->stop)
		pthread_cond_wait(&p->wake, &p->lock);
	for (ch = p->head; ch && n < max; ch = ch->next)
		win[n++] = ch;
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* free the finished chunks at the head of the queue */
static void retire(struct tcu_progress *p)
{
	struct tcu_chunk *ch;

	pthread_mutex_lock(&p->lock);
	while ((ch = p->head) && ch->state == TCU_CHUNK_FINISHED) {
		p->head = ch->next;
		if (!p->head)
			p->tail = NULL;
		cudaEventDestroy(ch->copied);
		free(ch);
	}
	pthread_mutex_unlock(&p->lock);
}

static void backoff(struct tally_cuda *tc, bool copying, long *ns)
{
	struct timespec ts = { 0, *ns };

	if (!copying) {
		/* every chunk is in tallyd: sleep until one completes */
		tally_wait_ready(tc->client, 1);
		return;
	}
	nanosleep(&ts, NULL);
	*ns = *ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : *ns * 2;
}

static void *progress_main(void *arg)
{
	struct tally_cuda *tc = arg;
	struct tcu_chunk *win[TALLY_CUDA_DEPTH_MAX];
	long sleep_ns = BACKOFF_MIN_NS;
	unsigned int n, i;
	bool copying;
	int moved;

	/* events and queries of this context are on its device */
	cudaSetDevice(tc->device);
	while ((n = take_window(&tc->progress, win, tc->depth))) {
		moved = 0;
		copying = false;
		for (i = 0; i < n; i++) {
			if (win[i]->state == TCU_CHUNK_COPYING)
				moved += chunk_submit(tc, win[i]);
			else if (win[i]->state == TCU_CHUNK_SUBMITTED)
				moved += chunk_test(tc, win[i]);
			else if (win[i]->state == TCU_CHUNK_CANCELLED) {
				chunk_finish(tc, win[i]);
				moved++;
			}
			copying |= win[i]->state == TCU_CHUNK_COPYING;
		}
		retire(&tc->progress);
		if (moved) {
			sleep_ns = BACKOFF_MIN_NS;
			continue;
		}
		backoff(tc, copying, &sleep_ns);
	}
	return NULL;
}

int tcu_progress_start(struct tally_cuda *tc)
{
	struct tcu_progress *p = &tc->progress;

	p->head = p->tail = NULL;
	p->stop = false;
	if (pthread_mutex_init(&p->lock, NULL))
		return -TALLY_ENOMEM;
	if (pthread_cond_init(&p->wake, NULL))
		goto err_cond;
	if (pthread_create(&p->thread, NULL, progress_main, tc))
		goto err_thread;
	return 0;

err_thread:
	pthread_cond_destroy(&p->wake);
err_cond:
	pthread_mutex_destroy(&p->lock);
	return -TALLY_ENOMEM;
}

void tcu_progress_push(struct tally_cuda *tc, struct tcu_chunk *chunk)
{
	struct tcu_progress *p = &tc->progress;

	chunk->next = NULL;
	pthread_mutex_lock(&p->lock);
	if (p->tail)
		p->tail->next = chunk;
	else
		p->head = chunk;
	p->tail = chunk;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
}

void tcu_progress_stop(struct tally_cuda *tc)
{
	struct tcu_progress *p = &tc->progress;

	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
}
