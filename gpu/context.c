// SPDX-License-Identifier: BSD-3-Clause
/*
 * context.c - opening and closing a tally_cuda context: the device, the
 * NUMA node, the staging slots in shared memory, the device scratch for
 * narrowed chunks, the slot flags, the internal streams and the helper
 * thread.  Acquired in that order, released in reverse (one goto ladder).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/context.h"
#include "gpu/numa_place.h"
#include "gpu/plan.h"

static __thread char open_msg[TCU_MSG_MAX];

const char *tally_cuda_open_error(void)
{
	return open_msg;
}

/* the open failed: keep the message for tally_cuda_open_error() */
static int open_fail(struct tally_cuda *tc, int err)
{
	snprintf(open_msg, sizeof(open_msg), "%s", tc->msg);
	return err;
}

static int take_opts(struct tally_cuda *tc, const struct tally_cuda_opts *o)
{
	const char *env = getenv("TALLY_CUDA_CHUNK_BYTES");

	if (!o || o->size < sizeof(*o))
		return tcu_fail(tc, -TALLY_EINVAL, "tally_cuda_open: opts "
				"missing or opts.size too small");
	tc->chunk_bytes = o->chunk_bytes;
	if (!tc->chunk_bytes && env)
		tc->chunk_bytes = strtoull(env, NULL, 0);
	if (!tc->chunk_bytes)
		tc->chunk_bytes = TALLY_CUDA_CHUNK_DEFAULT;
	if (!tcu_chunk_bytes_valid(tc->chunk_bytes))
		return tcu_fail(tc, -TALLY_EINVAL, "tally_cuda_open: chunk "
				"size %zu is not a multiple of 64 bytes in "
				"4 KiB .. 4 GiB", tc->chunk_bytes);
	tc->depth = o->depth ? o->depth : TALLY_CUDA_DEPTH_DEFAULT;
	if (tc->depth < TALLY_CUDA_DEPTH_MIN ||
	    tc->depth > TALLY_CUDA_DEPTH_MAX)
		return tcu_fail(tc, -TALLY_EINVAL, "tally_cuda_open: depth "
				"%u outside %u..%u", tc->depth,
				TALLY_CUDA_DEPTH_MIN, TALLY_CUDA_DEPTH_MAX);
	if (o->numa_node < TALLY_CUDA_NUMA_NONE)
		return tcu_fail(tc, -TALLY_EINVAL, "tally_cuda_open: bad "
				"numa_node %d", o->numa_node);
	return 0;
}

static int pick_device(struct tally_cuda *tc, int device)
{
	cudaError_t e;
	int n;

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaGetDeviceCount", e);
	if (device < 0) {
		e = cudaGetDevice(&device);
		if (e != cudaSuccess)
			return tcu_fail_cuda(tc, "cudaGetDevice", e);
	}
	if (device >= n)
		return tcu_fail(tc, -TALLY_EINVAL, "tally_cuda_open: device "
				"%d, the host has %d", device, n);
	e = cudaSetDevice(device);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaSetDevice", e);
	tc->device = device;
	return 0;
}

/* the GPU's node from sysfs, or the caller's; -1: leave memory alone */
static int pick_numa_node(struct tally_cuda *tc, int wanted)
{
	char bus_id[32];
	cudaError_t e;
	int node;

	tc->numa_node = -1;
	if (wanted == TALLY_CUDA_NUMA_NONE)
		return 0;
	if (wanted >= 0) {
		tc->numa_node = wanted;
		return 0;
	}
	e = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), tc->device);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaDeviceGetPCIBusId", e);
	node = tcu_pci_numa_node("/sys", bus_id);
	tc->numa_node = node >= 0 ? node : -1;	/* -1: one-node host */
	return 0;
}

static int make_slots(struct tally_cuda *tc)
{
	size_t bytes = (size_t)tc->depth * tc->chunk_bytes;
	cudaError_t e;
	unsigned int i;
	int err;

	tc->staging = tcu_pinned_alloc(tc, bytes, &err);
	if (!tc->staging)
		return err;
	e = cudaMalloc(&tc->scratch, bytes);
	if (e != cudaSuccess) {
		tcu_fail_cuda(tc, "cudaMalloc", e);
		goto err_scratch;
	}
	for (i = 0; i < tc->depth; i++) {
		tc->slot[i].host = (char *)tc->staging + i * tc->chunk_bytes;
		tc->slot[i].scratch = (char *)tc->scratch + i * tc->chunk_bytes;
		e = cudaEventCreateWithFlags(&tc->slot[i].free,
					     cudaEventDisableTiming);
		if (e != cudaSuccess) {
			tcu_fail_cuda(tc, "cudaEventCreateWithFlags", e);
			goto err_events;
		}
	}
	e = cudaHostAlloc((void **)&tc->flags,
			  TALLY_CUDA_DEPTH_MAX * sizeof(*tc->flags),
			  cudaHostAllocMapped | cudaHostAllocPortable);
	if (e != cudaSuccess) {
		tcu_fail_cuda(tc, "cudaHostAlloc", e);
		goto err_events;
	}
	memset(tc->flags, 0, TALLY_CUDA_DEPTH_MAX * sizeof(*tc->flags));
	e = cudaHostGetDevicePointer((void **)&tc->flags_dev, tc->flags, 0);
	if (e != cudaSuccess) {
		tcu_fail_cuda(tc, "cudaHostGetDevicePointer", e);
		goto err_flags;
	}
	return 0;

err_flags:
	cudaFreeHost(tc->flags);
err_events:
	while (i--)
		cudaEventDestroy(tc->slot[i].free);
	cudaFree(tc->scratch);
err_scratch:
	tcu_pinned_free(tc, tc->staging);
	return -TALLY_EDEVICE;
}

static void free_slots(struct tally_cuda *tc)
{
	unsigned int i;

	cudaFreeHost(tc->flags);
	for (i = 0; i < tc->depth; i++)
		cudaEventDestroy(tc->slot[i].free);
	cudaFree(tc->scratch);
	tcu_pinned_free(tc, tc->staging);
}

static int make_streams(struct tally_cuda *tc)
{
	cudaError_t e;

	e = cudaStreamCreateWithFlags(&tc->copy_in, cudaStreamNonBlocking);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaStreamCreateWithFlags", e);
	e = cudaStreamCreateWithFlags(&tc->copy_out, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		tcu_fail_cuda(tc, "cudaStreamCreateWithFlags", e);
		goto err_out;
	}
	e = cudaEventCreateWithFlags(&tc->op_start, cudaEventDisableTiming);
	if (e != cudaSuccess) {
		tcu_fail_cuda(tc, "cudaEventCreateWithFlags", e);
		goto err_start;
	}
	e = cudaEventCreateWithFlags(&tc->op_end, cudaEventDisableTiming);
	if (e != cudaSuccess) {
		tcu_fail_cuda(tc, "cudaEventCreateWithFlags", e);
		goto err_end;
	}
	return 0;

err_end:
	cudaEventDestroy(tc->op_start);
err_start:
	cudaStreamDestroy(tc->copy_out);
err_out:
	cudaStreamDestroy(tc->copy_in);
	return -TALLY_EDEVICE;
}

static void free_streams(struct tally_cuda *tc)
{
	cudaEventDestroy(tc->op_end);
	cudaEventDestroy(tc->op_start);
	cudaStreamDestroy(tc->copy_out);
	cudaStreamDestroy(tc->copy_in);
}

int tally_cuda_open(struct tally_client *client,
		    const struct tally_cuda_opts *opts,
		    struct tally_cuda **out)
{
	struct tally_cuda *tc;
	int r;

	open_msg[0] = '\0';
	if (!client || !out) {
		snprintf(open_msg, sizeof(open_msg),
			 "tally_cuda_open: client or out is NULL");
		return -TALLY_EINVAL;
	}
	tc = calloc(1, sizeof(*tc));
	if (!tc) {
		snprintf(open_msg, sizeof(open_msg), "tally_cuda_open: calloc");
		return -TALLY_ENOMEM;
	}
	tc->client = client;
	pthread_mutex_init(&tc->err_lock, NULL);
	pthread_mutex_init(&tc->client_lock, NULL);
	r = take_opts(tc, opts);
	if (r)
		goto err_opts;
	r = pick_device(tc, opts->device);
	if (r)
		goto err_opts;
	r = pick_numa_node(tc, opts->numa_node);
	if (r)
		goto err_opts;
	r = make_slots(tc);
	if (r)
		goto err_opts;
	r = make_streams(tc);
	if (r)
		goto err_streams;
	tcu_stream_wait_init(&tc->wait);
	r = tcu_progress_start(tc);
	if (r) {
		tcu_fail(tc, r, "tally_cuda_open: pthread_create");
		goto err_thread;
	}
	*out = tc;
	return 0;

err_thread:
	free_streams(tc);
err_streams:
	free_slots(tc);
err_opts:
	r = open_fail(tc, r);
	pthread_mutex_destroy(&tc->client_lock);
	pthread_mutex_destroy(&tc->err_lock);
	free(tc);
	return r;
}

void tally_cuda_close(struct tally_cuda *tc)
{
	if (!tc)
		return;
	tcu_progress_stop(tc);
	cudaSetDevice(tc->device);
	/* the copies back of the last chunks may still be running */
	cudaStreamSynchronize(tc->copy_out);
	cudaStreamSynchronize(tc->copy_in);
	tcu_ef_free(tc);
	free_streams(tc);
	free_slots(tc);
	pthread_mutex_destroy(&tc->client_lock);
	pthread_mutex_destroy(&tc->err_lock);
	free(tc);
}
