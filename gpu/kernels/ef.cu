// SPDX-License-Identifier: BSD-3-Clause
/*
 * ef.cu - error feedback on the GPU (docs/compression.md section 5): the
 * residual e of a tensor stays in device memory; before a chunk goes to
 * shared memory, e += g and p = e in the wire type; after the result,
 * e := e - sent / L.  Element-wise through numerics.h, the same functions
 * as ref.c, grid-stride as convert.cu.  The element types are picked per
 * element (a branch every thread of a warp takes alike); the kernels are
 * bound by memory, not by it.
 */
#include "gpu/kernels/kernels.h"
#include "gpu/kernels/launch.h"
#include "gpu/kernels/numerics.h"

__global__ void ef_accumulate_kernel(void *p, int p_type, float *e,
				     const void *g, int g_type, size_t n)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE) {
		float v = tcu_add_rn(e[i], tcu_load(g, g_type, i));

		e[i] = v;
		tcu_store(p, p_type, i, v);
	}
}

__global__ void ef_feedback_kernel(float *e, const void *sent, int sent_type,
				   float inv_l, size_t n)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE)
		e[i] = tcu_ef_feedback_one(e[i], tcu_load(sent, sent_type, i),
					   inv_l);
}

static bool type_valid(int t)
{
	return t == TCU_F32 || t == TCU_F16 || t == TCU_BF16;
}

extern "C" cudaError_t tcu_ef_accumulate(void *p, int p_type, float *e,
					 const void *g, int g_type, size_t n,
					 cudaStream_t stream)
{
	if (!type_valid(p_type) || !type_valid(g_type))
		return cudaErrorInvalidValue;
	if (!n)
		return cudaSuccess;
	return tcu_launch(ef_accumulate_kernel, tcu_grid(n), TCU_BLOCK, stream,
			  p, p_type, e, g, g_type, n);
}

extern "C" cudaError_t tcu_ef_feedback(float *e, const void *sent,
				       int sent_type, float inv_l, size_t n,
				       cudaStream_t stream)
{
	if (!type_valid(sent_type))
		return cudaErrorInvalidValue;
	if (!n)
		return cudaSuccess;
	return tcu_launch(ef_feedback_kernel, tcu_grid(n), TCU_BLOCK, stream,
			  e, sent, sent_type, inv_l, n);
}
