/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * progress.h - the helper thread of a tally_cuda context and the queue of
 * chunks it drives: a chunk is submitted to tallyd when its copy to
 * shared memory has landed (its event), and its slot's flag is raised when
 * tallyd completes it, which lets the copy back to the device run.  The
 * thread never blocks a stream: a chunk that fails still raises its flag.
 */
#ifndef TALLY_GPU_PROGRESS_H
#define TALLY_GPU_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include <tally/tally.h>

struct tally_cuda;

enum tcu_chunk_state {
	TCU_CHUNK_COPYING,	/* device to shared memory under way */
	TCU_CHUNK_SUBMITTED,	/* in tallyd */
	TCU_CHUNK_FINISHED,	/* done or failed; the flag is raised */
	TCU_CHUNK_CANCELLED,	/* queueing failed: never submitted, the
				 * flag is raised at once */
};

struct tcu_chunk {
	struct tcu_chunk *next;
	uint64_t seq;			/* the context's chunk number */
	unsigned int slot;
	cudaEvent_t copied;		/* recorded after the copy-in */
	struct tally_allreduce_args args;	/* on the staging slot */
	uint64_t req;
	enum tcu_chunk_state state;
};

struct tcu_progress {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;		/* a chunk was queued, or stop */
	struct tcu_chunk *head, *tail;
	bool stop;
};

/* start the thread of @tc; 0 or -TALLY_ENOMEM */
int tcu_progress_start(struct tally_cuda *tc);
/* hand @chunk (fully queued on the streams) to the thread */
void tcu_progress_push(struct tally_cuda *tc, struct tcu_chunk *chunk);
/* let the thread finish every queued chunk, then join it */
void tcu_progress_stop(struct tally_cuda *tc);

#endif /* TALLY_GPU_PROGRESS_H */
