// SPDX-License-Identifier: BSD-3-Clause
/*
 * stream_wait.c - a stream waits for a flag in mapped host memory
 * (stream_wait.h).
 */
#include "gpu/stream_wait.h"

#include <stdlib.h>
#include <string.h>

#include <cuda.h>

typedef CUresult (*wait_value32_fn)(CUstream, CUdeviceptr, cuuint32_t,
				    unsigned int);

void tcu_stream_wait_init(struct tcu_stream_wait *w)
{
	enum cudaDriverEntryPointQueryResult found;
	const char *force = getenv("TALLY_CUDA_WAIT");
	void *fn = NULL;

	w->kind = TCU_WAIT_KERNEL;
	w->wait_value32 = NULL;
	if (force && !strcmp(force, "kernel"))
		return;
	/* the v2 memory operations, supported by every driver of CUDA 12+ */
	if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn,
					     12000, cudaEnableDefault,
					     &found) != cudaSuccess ||
	    found != cudaDriverEntryPointSuccess || !fn)
		return;
	w->kind = TCU_WAIT_MEMOP;
	w->wait_value32 = fn;
}

cudaError_t tcu_stream_wait_geq(const struct tcu_stream_wait *w,
				cudaStream_t stream, uint32_t *flag_dev,
				uint32_t value)
{
	wait_value32_fn wait;

	if (w->kind == TCU_WAIT_KERNEL)
		return tcu_wait_kernel_geq(stream, flag_dev, value);
	*(void **)&wait = w->wait_value32;
	/* the runtime's error codes are the driver's where both exist */
	return (cudaError_t)wait((CUstream)stream,
				 (CUdeviceptr)(uintptr_t)flag_dev, value,
				 CU_STREAM_WAIT_VALUE_GEQ);
}
