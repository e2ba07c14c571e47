// SPDX-License-Identifier: BSD-3-Clause
/*
 * inputs.c - see inputs.h.
 */
#include "inputs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/kernels/numerics.h"

const uint32_t kin_edge_f32[] = {
	/* zeros, float32 subnormals, extremes, infinities */
	0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x00000002,
	0x007fffff, 0x807fffff, 0x00400000, 0x00800000, 0x80800000,
	0x7f7fffff, 0xff7fffff, 0x7f000000, 0x7f800000, 0xff800000,
	/* quiet and signalling NaN, payloads kept or dropped by binary16 */
	0x7fc00000, 0xffc00000, 0x7fc00001, 0x7fffffff, 0xffffffff,
	0x7f800001, 0xff800001, 0x7fa00000, 0x7f802000, 0x7f801fff,
	0x7fbfffff,
	/* binary16 subnormals: 2^-24, ties at 2^-25, 1.5 and 2.5 * 2^-24,
	 * the largest, the tie to the smallest normal, 2^-14 */
	0x33800000, 0xb3800000, 0x33000000, 0x33000001, 0x32ffffff,
	0x33c00000, 0x34200000, 0x387fc000, 0x387fe000, 0x387fdfff,
	0x38800000, 0xb8800000, 0x387fffff, 0x2f800000,
	/* binary16 top: 65504, 65519.99, 65520 (rounds to inf), 65536 */
	0x477fe000, 0xc77fe000, 0x477fefff, 0x477ff000, 0xc77ff000,
	0x477ff001, 0x47800000,
	/* binary16 ties at 1: 1 + 2^-11 (to even: 1), 1 + 3 * 2^-11 (up) */
	0x3f801000, 0x3f803000, 0x3f800fff, 0x3f801001, 0xbf803000,
	/* bfloat16 ties at 1 and at the top (0x7f7f is odd: to inf) */
	0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, 0x7f7f8000,
	0xff7f8000, 0x7f7f7fff, 0x7f7e8000, 0x00008000, 0x00018000,
	/* fixed point: 1/2, 3/2, 5/2 (rint ties), 2^30 - 64, 2^30 */
	0x3f800000, 0xbf800000, 0x3f000000, 0x3fc00000, 0x40200000,
	0xc0200000, 0x3effffff, 0x4e7fffff, 0x4e800000, 0xce800000,
};
const size_t kin_n_edge_f32 = sizeof(kin_edge_f32) / sizeof(kin_edge_f32[0]);

uint64_t kin_rand(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

float kin_float_of_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

uint32_t kin_bits_of_float(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

uint32_t kin_rand_bits(uint64_t *s)
{
	return (uint32_t)kin_rand(s);
}

float kin_rand_finite(uint64_t *s)
{
	uint64_t r = kin_rand(s);
	uint32_t exp = (uint32_t)(r % 255);	/* 0 (subnormal) .. 254 */

	return kin_float_of_bits(((uint32_t)(r >> 63) << 31) | (exp << 23) |
				 (uint32_t)((r >> 8) & 0x7fffff));
}

static float edge(uint64_t *s)
{
	return kin_float_of_bits(kin_edge_f32[kin_rand(s) % kin_n_edge_f32]);
}

/* about 2^e in magnitude, e in the float range, sign at random */
static float near_pow2(int e, uint64_t *s)
{
	uint64_t r = kin_rand(s);
	float m = 1.0f + (float)(r >> 41) * 0x1p-23f;	/* [1, 2) */

	return ldexpf(r & 1 ? -m : m, e);
}

static const float nonfinite[] = { INFINITY, -INFINITY, NAN, -NAN };

static void fill_block(float *x, size_t len, uint64_t *s)
{
	unsigned int kind = (unsigned int)(kin_rand(s) % 9);
	int e = (int)(kin_rand(s) % 278) - 150;		/* -150 .. 127 */
	size_t i, j;

	for (i = 0; i < len; i++) {
		uint64_t r = kin_rand(s);

		switch (kind) {
		case 0:		/* zeros of both signs */
			x[i] = r & 1 ? -0.0f : 0.0f;
			break;
		case 1:		/* anything finite */
			x[i] = kin_rand_finite(s);
			break;
		case 2:		/* subnormals */
			x[i] = kin_float_of_bits((uint32_t)r & 0x807fffffu);
			break;
		case 3:		/* edge cases, NaN and inf among them */
			x[i] = edge(s);
			break;
		case 4:		/* tiny: 2^-149 .. 2^-120 */
			x[i] = near_pow2(-149 + (int)(r % 30), s);
			break;
		case 5:		/* huge: 2^100 .. 2^127 */
			x[i] = near_pow2(100 + (int)(r % 28), s);
			break;
		default:	/* one magnitude 2^e, halves of its step */
			if (r % 4 == 0)
				x[i] = ldexpf((float)((r >> 40) & 63) + 0.5f,
					      e - 30 - (int)((r >> 8) & 7));
			else
				x[i] = near_pow2(e - (int)((r >> 8) % 40), s);
			break;
		}
	}
	/* some blocks of one magnitude get 1 to 3 infinities or NaNs */
	if (kind == 7 && len)
		for (j = 0; j < 1 + kin_rand(s) % 3; j++)
			x[kin_rand(s) % len] = nonfinite[kin_rand(s) % 4];
}

void kin_fill_blocks(float *x, size_t n, size_t k, uint64_t *s)
{
	size_t b;

	for (b = 0; b < n; b += k)
		fill_block(x + b, n - b < k ? n - b : k, s);
}

void kin_pick_shifts(int32_t *shift, const int32_t *exp, size_t nblocks,
		     unsigned int workers, uint64_t *s)
{
	/* the smallest ordinary shift: E = 128, 64 workers */
	const int lowest = 30 - 128 - 6;
	size_t b;

	for (b = 0; b < nblocks; b++) {
		uint64_t r = kin_rand(s);
		int32_t e = exp[b];

		switch (r % 10) {
		case 0:
			shift[b] = 127;
			break;
		case 1:
			shift[b] = lowest;
			break;
		case 2:
			shift[b] = TCU_SHIFT_NONFINITE;
			break;
		case 3:
			shift[b] = lowest +
				   (int32_t)((r >> 8) % (uint64_t)(128 - lowest));
			break;
		case 4:		/* another worker's larger exponent */
			if (e > -150 && e < 129)
				e += (int32_t)((r >> 8) % (uint64_t)(129 - e));
			/* fall through */
		default:
			shift[b] = tcu_quant_shift(e, workers);
			break;
		}
	}
}

uint32_t kin_rand_code_sum(unsigned int workers, uint64_t *s)
{
	static const uint32_t code[] = {
		0, TCU_NF_POS_INF, TCU_NF_NEG_INF, TCU_NF_NAN,
	};
	uint64_t r = kin_rand(s);
	uint32_t sum = 0;
	unsigned int w;

	/* mostly one kind of code, so sums of pure infinities appear */
	for (w = 0; w < workers; w++) {
		unsigned int c = (unsigned int)(r & 3);

		if (kin_rand(s) % 8 == 0)
			c = (unsigned int)(kin_rand(s) & 3);
		sum += code[c];
	}
	return sum;
}

uint32_t *kin_summed_words(const uint32_t *q, size_t n, size_t k,
			   const int32_t *shift, unsigned int workers,
			   uint64_t *s)
{
	size_t words = (n + k - 1) / k * k, i;
	uint32_t *sum = malloc(words * sizeof(uint32_t));

	if (!sum)
		return NULL;
	for (i = 0; i < words; i++) {
		int32_t sh = shift[i / k];
		uint32_t v = tcu_bswap32(q[i]);	/* int32 addition, wrapping */
		unsigned int w;

		if (sh == TCU_SHIFT_NONFINITE)
			v = kin_rand_code_sum(workers, s);
		else
			for (w = 1; w < workers; w++)
				v += tcu_bswap32(tcu_quantize_one(
					kin_rand_finite(s), sh));
		sum[i] = tcu_bswap32(v);
	}
	return sum;
}

void kin_fill_typed(void *x, int type, size_t n, uint64_t *state)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t r = kin_rand(state);
		float v;

		if (i < kin_n_edge_f32)
			v = kin_float_of_bits(kin_edge_f32[i]);
		else if (r % 64 == 0)
			v = kin_float_of_bits(kin_rand_bits(state));
		else if (type == TCU_F16)	/* binary16's range: 2^-25.. */
			v = ldexpf((float)(r % 2001) / 1000.0f - 1.0f,
				   (int)((r >> 16) % 41) - 24);
		else
			v = kin_rand_finite(state);
		if (type == TCU_F32) {
			((float *)x)[i] = v;
		} else if (r % 64 == 1) {	/* any 16 bits at all */
			((uint16_t *)x)[i] = (uint16_t)(r >> 16);
		} else {
			tcu_store(x, type, i, v);
		}
	}
}
