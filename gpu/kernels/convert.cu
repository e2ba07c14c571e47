// SPDX-License-Identifier: BSD-3-Clause
/*
 * convert.cu - float32 <-> binary16/bfloat16 on the GPU, element by
 * element through numerics.h (the bits of dataplane/half.h).  Grid-stride
 * loops: a fixed grid covers any n, and consecutive threads touch
 * consecutive elements so the accesses coalesce.
 */
#include "gpu/kernels/kernels.h"
#include "gpu/kernels/launch.h"
#include "gpu/kernels/numerics.h"

__global__ void f32_to_f16_kernel(uint16_t *dst, const float *src, size_t n)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE)
		dst[i] = tcu_f32_to_f16(src[i]);
}

__global__ void f32_to_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE)
		dst[i] = tcu_f32_to_bf16(src[i]);
}

__global__ void f16_to_f32_kernel(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE)
		dst[i] = tcu_f16_to_f32(src[i]);
}

__global__ void bf16_to_f32_kernel(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE)
		dst[i] = tcu_bf16_to_f32(src[i]);
}

extern "C" cudaError_t tcu_convert_f32_to_f16(uint16_t *dst, const float *src,
					      size_t n, cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	f32_to_f16_kernel<<<tcu_grid(n), TCU_BLOCK, 0, stream>>>(dst, src, n);
	return cudaGetLastError();
}

extern "C" cudaError_t tcu_convert_f32_to_bf16(uint16_t *dst,
					       const float *src, size_t n,
					       cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	f32_to_bf16_kernel<<<tcu_grid(n), TCU_BLOCK, 0, stream>>>(dst, src, n);
	return cudaGetLastError();
}

extern "C" cudaError_t tcu_convert_f16_to_f32(float *dst, const uint16_t *src,
					      size_t n, cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	f16_to_f32_kernel<<<tcu_grid(n), TCU_BLOCK, 0, stream>>>(dst, src, n);
	return cudaGetLastError();
}

extern "C" cudaError_t tcu_convert_bf16_to_f32(float *dst,
					       const uint16_t *src, size_t n,
					       cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	bf16_to_f32_kernel<<<tcu_grid(n), TCU_BLOCK, 0, stream>>>(dst, src, n);
	return cudaGetLastError();
}
