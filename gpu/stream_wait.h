/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stream_wait.h - make a stream wait until a 32-bit word in mapped host
 * memory reaches a value (cyclic >=), which is how the progress thread
 * tells the copy-out stream that tallyd finished a chunk.
 *
 * Preferred: the driver's stream memory operation cuStreamWaitValue32
 * (no SM is held while waiting), looked up at run time through
 * cudaGetDriverEntryPointByVersion so that nothing links libcuda.  Where
 * the driver lacks it, or $TALLY_CUDA_WAIT=kernel, a one-thread kernel
 * polls the word (as NCCL's proxy flags are polled).
 */
#ifndef TALLY_GPU_STREAM_WAIT_H
#define TALLY_GPU_STREAM_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tcu_wait_kind {
	TCU_WAIT_MEMOP,		/* cuStreamWaitValue32 */
	TCU_WAIT_KERNEL,	/* the polling kernel */
};

struct tcu_stream_wait {
	enum tcu_wait_kind kind;
	void *wait_value32;	/* the driver entry point (TCU_WAIT_MEMOP) */
};

/* choose the mechanism for the current device; never fails */
void tcu_stream_wait_init(struct tcu_stream_wait *w);

/* queue on @stream: wait until (int32_t)(*@flag_dev - @value) >= 0 */
cudaError_t tcu_stream_wait_geq(const struct tcu_stream_wait *w,
				cudaStream_t stream, uint32_t *flag_dev,
				uint32_t value);

/* the polling kernel's launcher (wait_kernel.cu) */
cudaError_t tcu_wait_kernel_geq(cudaStream_t stream, const uint32_t *flag_dev,
				uint32_t value);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_GPU_STREAM_WAIT_H */
