/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ref.h - plain C references of the kernels in kernels.h, one per
 * launcher, with the same arguments less the stream and the same
 * semantics, on host memory.  Built everywhere (no CUDA): the unit tests
 * check them against dataplane/, and the device tests check the kernels
 * against them.
 *
 * Blocks are k >= 1 elements (the last one short); quantized words are
 * big-endian and each block's words are padded with zeros up to k, so
 * @out holds ceil(n / k) * k words.  @exp and @shift hold one entry per
 * block.
 */
#ifndef TALLY_GPU_KERNELS_REF_H
#define TALLY_GPU_KERNELS_REF_H

#include <stddef.h>
#include <stdint.h>

void tcu_ref_convert_f32_to_f16(uint16_t *dst, const float *src, size_t n);
void tcu_ref_convert_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void tcu_ref_convert_f16_to_f32(float *dst, const uint16_t *src, size_t n);
void tcu_ref_convert_bf16_to_f32(float *dst, const uint16_t *src, size_t n);

void tcu_ref_block_exp_f32(int32_t *exp, const float *x, size_t n, size_t k);
void tcu_ref_quantize_f32(uint32_t *out, const float *x, size_t n, size_t k,
			  const int32_t *shift);
void tcu_ref_dequantize_f32(float *x, const uint32_t *in, size_t n, size_t k,
			    const int32_t *shift);

/* error feedback: e += g, p = e in @p_type; e := e - sent / L
 * (numerics.h: tcu_ef_feedback_one) */
void tcu_ref_ef_accumulate(void *p, int p_type, float *e, const void *g,
			   int g_type, size_t n);
void tcu_ref_ef_feedback(float *e, const void *sent, int sent_type,
			 float inv_l, size_t n);

#endif /* TALLY_GPU_KERNELS_REF_H */
