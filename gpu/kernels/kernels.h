/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.h - launchers of libtally-cuda's kernels.  Each queues its kernel
 * on @stream and returns the launch's cudaError_t (cudaSuccess, or why it
 * could not be queued); a count of 0 queues nothing.  Pointers are device
 * pointers (or mapped host memory).  ref.h has the C reference of each.
 *
 * Conversion, round to nearest even as dataplane/half.h:
 *	tcu_convert_f32_to_f16/bf16, tcu_convert_f16/bf16_to_f32
 * Block fixed point (docs/protocol.md section 2), blocks of @k >= 1
 * elements (the last one short; its words padded with zeros up to k; a k
 * of 0 with elements is refused with cudaErrorInvalidValue):
 *	tcu_block_exp_f32	exp[b] = E of block b (TCU_EXP_NONE for zeros)
 *	tcu_quantize_f32	out[b*k + i] = big-endian word of x at shift[b]
 *	tcu_dequantize_f32	x[b*k + i] = value of in[b*k + i] at shift[b]
 * Error feedback (docs/compression.md section 5; types TCU_F32, TCU_F16,
 * TCU_BF16 of numerics.h, e float32):
 *	tcu_ef_accumulate	e[i] += g[i]; p[i] = e[i] in p's type
 *	tcu_ef_feedback		e[i] -= sent[i] * inv_l, 0 where sent[i]
 *				is inf or NaN
 * A type outside those three is refused with cudaErrorInvalidValue.
 */
#ifndef TALLY_GPU_KERNELS_KERNELS_H
#define TALLY_GPU_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t tcu_convert_f32_to_f16(uint16_t *dst, const float *src, size_t n,
				   cudaStream_t stream);
cudaError_t tcu_convert_f32_to_bf16(uint16_t *dst, const float *src,
				    size_t n, cudaStream_t stream);
cudaError_t tcu_convert_f16_to_f32(float *dst, const uint16_t *src, size_t n,
				   cudaStream_t stream);
cudaError_t tcu_convert_bf16_to_f32(float *dst, const uint16_t *src,
				    size_t n, cudaStream_t stream);

cudaError_t tcu_block_exp_f32(int32_t *exp, const float *x, size_t n,
			      size_t k, cudaStream_t stream);
cudaError_t tcu_quantize_f32(uint32_t *out, const float *x, size_t n,
			     size_t k, const int32_t *shift,
			     cudaStream_t stream);
cudaError_t tcu_dequantize_f32(float *x, const uint32_t *in, size_t n,
			       size_t k, const int32_t *shift,
			       cudaStream_t stream);

cudaError_t tcu_ef_accumulate(void *p, int p_type, float *e, const void *g,
			      int g_type, size_t n, cudaStream_t stream);
cudaError_t tcu_ef_feedback(float *e, const void *sent, int sent_type,
			    float inv_l, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_GPU_KERNELS_KERNELS_H */
