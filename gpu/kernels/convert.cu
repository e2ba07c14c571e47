// SPDX-License-Identifier: BSD-3-Clause
/*
 * convert.cu - float32 <-> binary16/bfloat16 on the GPU, element by
 * element through numerics.h (the bits of dataplane/half.h).  One
 * grid-stride kernel, instantiated per conversion: a fixed grid covers any
 * n, and consecutive threads touch consecutive elements so the accesses
 * coalesce.
 */
#include "gpu/kernels/kernels.h"
#include "gpu/kernels/launch.h"
#include "gpu/kernels/numerics.h"

template <typename To, typename From, To (*convert)(From)>
__global__ void convert_kernel(To *dst, const From *src, size_t n)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE)
		dst[i] = convert(src[i]);
}

template <typename To, typename From, To (*convert)(From)>
static cudaError_t convert_launch(To *dst, const From *src, size_t n,
				  cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	return tcu_launch(convert_kernel<To, From, convert>, tcu_grid(n),
			  TCU_BLOCK, stream, dst, src, n);
}

extern "C" cudaError_t tcu_convert_f32_to_f16(uint16_t *dst, const float *src,
					      size_t n, cudaStream_t stream)
{
	return convert_launch<uint16_t, float, tcu_f32_to_f16>(dst, src, n,
								stream);
}

extern "C" cudaError_t tcu_convert_f32_to_bf16(uint16_t *dst,
					       const float *src, size_t n,
					       cudaStream_t stream)
{
	return convert_launch<uint16_t, float, tcu_f32_to_bf16>(dst, src, n,
								 stream);
}

extern "C" cudaError_t tcu_convert_f16_to_f32(float *dst, const uint16_t *src,
					      size_t n, cudaStream_t stream)
{
	return convert_launch<float, uint16_t, tcu_f16_to_f32>(dst, src, n,
								stream);
}

extern "C" cudaError_t tcu_convert_bf16_to_f32(float *dst,
					       const uint16_t *src, size_t n,
					       cudaStream_t stream)
{
	return convert_launch<float, uint16_t, tcu_bf16_to_f32>(dst, src, n,
								 stream);
}
