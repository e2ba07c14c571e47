/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * launch.h - the launch shape every element-wise kernel of gpu/ uses:
 * 256 threads a block, a grid of at most 4096 blocks walked with a
 * grid-stride loop (enough to fill an H100/H200's 132 SMs several times;
 * docs/gpu.md), and tcu_launch().  nvcc only.
 */
#ifndef TALLY_GPU_KERNELS_LAUNCH_H
#define TALLY_GPU_KERNELS_LAUNCH_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#define TCU_BLOCK 256
#define TCU_GRID_MAX 4096
#define TCU_GRID_START ((size_t)blockIdx.x * blockDim.x + threadIdx.x)
#define TCU_GRID_STRIDE ((size_t)gridDim.x * blockDim.x)

static inline unsigned int tcu_grid(size_t n)
{
	size_t blocks = (n + TCU_BLOCK - 1) / TCU_BLOCK;

	return blocks < TCU_GRID_MAX ? (unsigned int)blocks : TCU_GRID_MAX;
}

/* the parameter types themselves, so that arguments convert to them */
template <typename T> struct tcu_same {
	typedef T type;
};

/*
 * Launch @kernel on @stream and return that launch's own status.  Not
 * kernel<<<...>>>() followed by cudaGetLastError(): that returns, and
 * clears, an earlier error the caller's thread left behind, failing a
 * tally call for someone else's mistake.
 */
template <typename... P>
static inline cudaError_t tcu_launch(void (*kernel)(P...), unsigned int grid,
				     unsigned int block, cudaStream_t stream,
				     typename tcu_same<P>::type... args)
{
	void *argv[] = { (void *)&args..., NULL };

	return cudaLaunchKernel((const void *)kernel, dim3(grid), dim3(block),
				argv, 0, stream);
}

#endif /* TALLY_GPU_KERNELS_LAUNCH_H */
