// SPDX-License-Identifier: BSD-3-Clause
/*
 * quant.c - block fixed-point quantization (see quant.h for the scheme and
 * its error bound).  The loops are plain C written so the auto-vectoriser
 * turns them into SIMD; tests/dataplane/test_quant.c holds the scalar
 * reference they are checked against.
 */
#include "dataplane/engine/quant.h"

#include <math.h>

#include "dataplane/engine/simd.h"
#include "dataplane/half.h"

float tly_pow2f(int s)
{
	if (s >= -126)
		return f32_from_bits((uint32_t)(s + 127) << 23);
	return f32_from_bits(1u << (s + 149));	/* subnormal */
}

/* E with max|x| < 2^E, from the bits of max|x| */
static int32_t exp_of_abs_bits(uint32_t m)
{
	if (m == 0)
		return TLY_EXP_NONE;
	if (m >= 0x7f800000u)			/* inf or NaN */
		return TLY_EXP_NONFINITE;
	if (m >> 23)
		return (int32_t)(m >> 23) - 126;
	return 32 - __builtin_clz(m) - 149;	/* subnormal */
}

TLY_HOT int32_t tly_block_exp_f32(const float *x, size_t n)
{
	uint32_t m = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t a = f32_bits(x[i]) & 0x7fffffffu;

		m = a > m ? a : m;
	}
	return exp_of_abs_bits(m);
}

/* binary16 and bfloat16 keep their order as magnitudes, so widen the max */
int32_t tly_block_exp_f16(const uint16_t *x, size_t n)
{
	uint16_t m = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint16_t a = x[i] & 0x7fffu;

		m = a > m ? a : m;
	}
	return exp_of_abs_bits(f32_bits(half_to_float(m)));
}

int32_t tly_block_exp_bf16(const uint16_t *x, size_t n)
{
	uint16_t m = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint16_t a = x[i] & 0x7fffu;

		m = a > m ? a : m;
	}
	return exp_of_abs_bits((uint32_t)m << 16);
}

int tly_quant_shift(int32_t exp, unsigned int n_workers)
{
	int l = 0, s;

	while ((1u << l) < n_workers)
		l++;
	if (exp < -149)			/* all zero (TLY_EXP_NONE) */
		return 127;
	if (exp >= TLY_EXP_NONFINITE)
		return TLY_SHIFT_NONFINITE;
	s = 30 - exp - l;
	return s > 127 ? 127 : s;
}

/*
 * q = rint(x * 2^shift), clamped to the range the shift guarantees.  The
 * clamp works on the magnitude (one compare and blend per vector) and puts
 * the sign back: infinities and NaN land on +-limit by their sign bit.
 */
static inline uint32_t quantize_one(float x, float scale)
{
	const float lim = 1073741760.0f;	/* largest float < 2^30 */
	uint32_t y = f32_bits(x * scale);
	float mag = f32_from_bits(y & 0x7fffffffu);

	mag = mag < lim ? mag : lim;
	y = f32_bits(mag) | (y & 0x80000000u);
	return tly_be32((uint32_t)(int32_t)rintf(f32_from_bits(y)));
}

/* ---- blocks with inf or NaN somewhere (TLY_SHIFT_NONFINITE) ---- */

#define NF_POS_INF	1u
#define NF_NEG_INF	(1u << 8)
#define NF_NAN		(1u << 16)

static uint32_t nonfinite_code(float x)
{
	if (isnan(x))
		return NF_NAN;
	if (isinf(x))
		return x > 0 ? NF_POS_INF : NF_NEG_INF;
	return 0;
}

static float nonfinite_value(uint32_t sum)
{
	uint32_t pos = sum & 0xff, neg = (sum >> 8) & 0xff;

	if ((sum >> 16) || (pos && neg) || (!pos && !neg))
		return NAN;
	return pos ? INFINITY : -INFINITY;
}

static void nonfinite_encode(uint8_t *out, const void *x, size_t n,
			     size_t k, float (*to_f32)(const void *, size_t))
{
	tly_u32_una *o = (tly_u32_una *)out;
	size_t i;

	for (i = 0; i < n; i++)
		o[i] = tly_be32(nonfinite_code(to_f32(x, i)));
	for (; i < k; i++)
		o[i] = 0;
}

static float f32_at(const void *x, size_t i)
{
	return ((const float *)x)[i];
}

static float f16_at(const void *x, size_t i)
{
	return half_to_float(((const uint16_t *)x)[i]);
}

static float bf16_at(const void *x, size_t i)
{
	return bf16_to_float(((const uint16_t *)x)[i]);
}

/* ---- ordinary blocks ---- */

TLY_HOT void tly_quantize_f32(uint8_t *out, const float *x, size_t n,
			      size_t k, int shift)
{
	tly_u32_una *o = (tly_u32_una *)out;
	float scale = tly_pow2f(shift);
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		nonfinite_encode(out, x, n, k, f32_at);
		return;
	}
	for (i = 0; i < n; i++)
		o[i] = quantize_one(x[i], scale);
	for (; i < k; i++)
		o[i] = 0;
}

TLY_HOT void tly_quantize_f16(uint8_t *out, const uint16_t *x, size_t n,
			      size_t k, int shift)
{
	tly_u32_una *o = (tly_u32_una *)out;
	float scale = tly_pow2f(shift);
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		nonfinite_encode(out, x, n, k, f16_at);
		return;
	}
	for (i = 0; i < n; i++)
		o[i] = quantize_one(half_to_float(x[i]), scale);
	for (; i < k; i++)
		o[i] = 0;
}

TLY_HOT void tly_quantize_bf16(uint8_t *out, const uint16_t *x, size_t n,
			       size_t k, int shift)
{
	tly_u32_una *o = (tly_u32_una *)out;
	float scale = tly_pow2f(shift);
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		nonfinite_encode(out, x, n, k, bf16_at);
		return;
	}
	for (i = 0; i < n; i++)
		o[i] = quantize_one(bf16_to_float(x[i]), scale);
	for (; i < k; i++)
		o[i] = 0;
}

TLY_HOT void tly_dequantize_f32(float *out, const uint8_t *in, size_t n,
				int shift)
{
	const tly_u32_una *w = (const tly_u32_una *)in;
	float scale = tly_pow2f(-shift);
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		for (i = 0; i < n; i++)
			out[i] = nonfinite_value(tly_be32(w[i]));
		return;
	}
	for (i = 0; i < n; i++)
		out[i] = (float)(int32_t)tly_be32(w[i]) * scale;
}

TLY_HOT void tly_dequantize_f16(uint16_t *out, const uint8_t *in, size_t n,
				int shift)
{
	const tly_u32_una *w = (const tly_u32_una *)in;
	float scale = tly_pow2f(-shift);
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		for (i = 0; i < n; i++)
			out[i] = float_to_half(nonfinite_value(tly_be32(w[i])));
		return;
	}
	for (i = 0; i < n; i++)
		out[i] = float_to_half((float)(int32_t)tly_be32(w[i]) * scale);
}

TLY_HOT void tly_dequantize_bf16(uint16_t *out, const uint8_t *in, size_t n,
				 int shift)
{
	const tly_u32_una *w = (const tly_u32_una *)in;
	float scale = tly_pow2f(-shift);
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		for (i = 0; i < n; i++)
			out[i] = float_to_bf16(nonfinite_value(tly_be32(w[i])));
		return;
	}
	for (i = 0; i < n; i++)
		out[i] = float_to_bf16((float)(int32_t)tly_be32(w[i]) * scale);
}

TLY_HOT void tly_pack_u32(uint8_t *out, const uint32_t *x, size_t n,
			  size_t k)
{
	tly_u32_una *o = (tly_u32_una *)out;
	size_t i;

	for (i = 0; i < n; i++)
		o[i] = tly_be32(x[i]);
	for (; i < k; i++)
		o[i] = 0;
}

TLY_HOT void tly_unpack_u32(uint32_t *out, const uint8_t *in, size_t n)
{
	const tly_u32_una *w = (const tly_u32_una *)in;
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = tly_be32(w[i]);
}
