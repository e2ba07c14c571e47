/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_emu.h - what the host emulation of the CUDA runtime (cuda_emu.c)
 * offers the tests beyond <cuda_runtime_api.h>: a "kernel" that is a host
 * function run in stream order, and a look at the emulated memory.
 *
 * This is an EMULATION for CI machines without a GPU: "device memory" is
 * host memory, every stream is a host thread running its queue in order,
 * events are generation marks.  It checks libtally-cuda's ordering logic,
 * not CUDA itself; tests/gpu/run-device.sh runs the real thing.
 */
#ifndef TALLY_TESTS_GPU_EMU_CUDA_EMU_H
#define TALLY_TESTS_GPU_EMU_CUDA_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* a kernel body: runs on the stream's thread; an error return is a
 * device fault (sticky, as cudaErrorIllegalAddress is on a GPU) */
typedef cudaError_t (*emu_kernel_fn)(void *arg);

/*
 * Queue @fn on @stream with a private copy of @arg_bytes of @arg (as a
 * kernel launch copies its parameters).  Unlike cudaLaunchHostFunc, the
 * function may read and write device memory: it stands for a kernel.
 */
cudaError_t emu_launch(cudaStream_t stream, emu_kernel_fn fn,
		       const void *arg, size_t arg_bytes);

/* may a kernel touch [@p, @p + @bytes): device memory or pinned host
 * memory (mapped, its device pointer is itself) */
bool emu_device_accessible(const void *p, size_t bytes);

/*
 * Fault injection: the @nth next cudaMemcpyAsync of @kind (1: the next
 * one) fails with cudaErrorMemoryAllocation without queueing anything, as
 * a real runtime out of resources would.
 */
void emu_fail_async_copy(enum cudaMemcpyKind kind, unsigned int nth);

/* the seed of this process's jitter ($TALLY_CUDA_EMU_SEED, or random) */
uint64_t emu_seed(void);

#endif /* TALLY_TESTS_GPU_EMU_CUDA_EMU_H */
