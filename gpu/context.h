/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * context.h - struct tally_cuda, shared by the files of libtally-cuda.
 *
 * Two internal streams carry every operation: copy_in (device to shared
 * memory, after an optional narrowing kernel) and copy_out (shared memory
 * to device, then the widening kernel).  Chunk i uses staging slot
 * i % depth; copy_out releases a slot (slot_free) before copy_in reuses
 * it, and copy_out waits for tallyd through the slot's flag, which the
 * progress thread sets when the chunk completes (docs/gpu.md).
 */
#ifndef TALLY_GPU_CONTEXT_H
#define TALLY_GPU_CONTEXT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include <tally/tally_cuda.h>

#include "gpu/ef.h"
#include "gpu/progress.h"
#include "gpu/stream_wait.h"

#define TCU_MSG_MAX 256

struct tcu_slot {
	void *host;		/* chunk_bytes of shared memory (pinned) */
	void *scratch;		/* chunk_bytes on the device: narrowed data,
				 * or p and sent with error feedback */
	void *sent;		/* chunk_bytes of shared memory (pinned):
				 * p, then sent, with error feedback (ef.h) */
	cudaEvent_t free;	/* copy_out is done with the slot */
};

struct tally_cuda {
	struct tally_client *client;
	pthread_mutex_t client_lock;	/* the client is not thread-safe */
	int device;
	int numa_node;			/* -1: unbound */
	size_t chunk_bytes;
	unsigned int depth;

	cudaStream_t copy_in, copy_out;
	cudaEvent_t op_start, op_end;
	struct tcu_slot slot[TALLY_CUDA_DEPTH_MAX];
	void *staging;			/* depth * chunk_bytes, tally_alloc() */
	void *scratch;			/* depth * chunk_bytes, cudaMalloc() */
	uint32_t *flags;		/* per slot: chunk seq + 1 when done */
	uint32_t *flags_dev;		/* the same, as the device sees it */
	struct tcu_stream_wait wait;
	uint64_t next_seq;		/* chunks ever queued */

	struct tcu_progress progress;
	struct tcu_ef ef;		/* device residuals (ef.h) */

	pthread_mutex_t err_lock;
	int async_error;
	char msg[TCU_MSG_MAX];
};

/* record @err with its message (printf-style) as the context's last
 * error; returns @err */
int tcu_fail(struct tally_cuda *tc, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* a failed CUDA call: "@call: cudaGetErrorString(@e)", -TALLY_EDEVICE */
int tcu_fail_cuda(struct tally_cuda *tc, const char *call, cudaError_t e);
/* the same from the progress thread: also the first async error */
void tcu_fail_async(struct tally_cuda *tc, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* staging memory: shared with tallyd, NUMA-bound, registered; NULL with
 * *@err and the message set on failure */
void *tcu_pinned_alloc(struct tally_cuda *tc, size_t bytes, int *err);
void tcu_pinned_free(struct tally_cuda *tc, void *ptr);

#endif /* TALLY_GPU_CONTEXT_H */
