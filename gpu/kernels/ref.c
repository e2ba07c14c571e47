// SPDX-License-Identifier: BSD-3-Clause
/*
 * ref.c - the kernels of convert.cu, quantize.cu and ef.cu as plain loops over
 * numerics.h, the same per-element functions the kernels call.  Written
 * for clarity, not speed: one element (or one block) at a time.
 */
#include "gpu/kernels/ref.h"

#include "gpu/kernels/numerics.h"

void tcu_ref_convert_f32_to_f16(uint16_t *dst, const float *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = tcu_f32_to_f16(src[i]);
}

void tcu_ref_convert_f32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = tcu_f32_to_bf16(src[i]);
}

void tcu_ref_convert_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = tcu_f16_to_f32(src[i]);
}

void tcu_ref_convert_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = tcu_bf16_to_f32(src[i]);
}

/* elements in block @b: k, or what is left of n for the last one */
static size_t block_len(size_t b, size_t n, size_t k)
{
	size_t left = n - b * k;

	return left < k ? left : k;
}

void tcu_ref_block_exp_f32(int32_t *exp, const float *x, size_t n, size_t k)
{
	size_t b, i;

	if (!k)
		return;
	for (b = 0; b * k < n; b++) {
		const float *xb = x + b * k;
		size_t len = block_len(b, n, k);
		uint32_t m = 0;

		for (i = 0; i < len; i++) {
			uint32_t a = tcu_bits(xb[i]) & 0x7fffffffu;

			m = a > m ? a : m;
		}
		exp[b] = tcu_exp_of_abs_bits(m);
	}
}

void tcu_ref_quantize_f32(uint32_t *out, const float *x, size_t n, size_t k,
			  const int32_t *shift)
{
	size_t b, i;

	if (!k)
		return;
	for (b = 0; b * k < n; b++) {
		size_t len = block_len(b, n, k);

		for (i = 0; i < len; i++)
			out[b * k + i] = tcu_quantize_one(x[b * k + i],
							  shift[b]);
		for (; i < k; i++)
			out[b * k + i] = 0;
	}
}

void tcu_ref_dequantize_f32(float *x, const uint32_t *in, size_t n, size_t k,
			    const int32_t *shift)
{
	size_t b, i;

	if (!k)
		return;
	for (b = 0; b * k < n; b++) {
		size_t len = block_len(b, n, k);

		for (i = 0; i < len; i++)
			x[b * k + i] = tcu_dequantize_one(in[b * k + i],
							  shift[b]);
	}
}

void tcu_ref_ef_accumulate(void *p, int p_type, float *e, const void *g,
			   int g_type, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		e[i] = tcu_add_rn(e[i], tcu_load(g, g_type, i));
		tcu_store(p, p_type, i, e[i]);
	}
}

void tcu_ref_ef_feedback(float *e, const void *sent, int sent_type,
			 float inv_l, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		e[i] = tcu_ef_feedback_one(e[i], tcu_load(sent, sent_type, i),
					   inv_l);
}
