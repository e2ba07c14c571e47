/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * launch.h - the launch shape every element-wise kernel of gpu/ uses:
 * 256 threads a block, a grid of at most 4096 blocks walked with a
 * grid-stride loop (enough to fill an H100/H200's 132 SMs several times;
 * docs/gpu.md).  nvcc only.
 */
#ifndef TALLY_GPU_KERNELS_LAUNCH_H
#define TALLY_GPU_KERNELS_LAUNCH_H

#include <stddef.h>

#define TCU_BLOCK 256
#define TCU_GRID_MAX 4096
#define TCU_GRID_START ((size_t)blockIdx.x * blockDim.x + threadIdx.x)
#define TCU_GRID_STRIDE ((size_t)gridDim.x * blockDim.x)

static inline unsigned int tcu_grid(size_t n)
{
	size_t blocks = (n + TCU_BLOCK - 1) / TCU_BLOCK;

	return blocks < TCU_GRID_MAX ? (unsigned int)blocks : TCU_GRID_MAX;
}

#endif /* TALLY_GPU_KERNELS_LAUNCH_H */
