// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_quant.c - block fixed-point against a scalar reference written
 * straight from the definition in quant.h, the no-overflow guarantee and
 * the error bound.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "expect.h"

#include "dataplane/engine/quant.h"
#include "dataplane/half.h"
#include "fabric.h"

#define K 256

static uint64_t rng = 12345;

static float rand_float(int emin, int emax)
{
	uint64_t r = fab_rand(&rng);
	int e = emin + (int)(r % (uint64_t)(emax - emin + 1));
	float m = (float)(r >> 40) / (float)(1 << 24);	/* [0, 1) */

	return ldexpf(r & 1 ? -m : m, e);
}

static int32_t get_be(const uint8_t *p, size_t i)
{
	p += 4 * i;
	return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
			 ((uint32_t)p[2] << 8) | p[3]);
}

/* the definition: q = rint(x * 2^s), within +-(2^30 - 64) by sign */
static int32_t ref_quant(float x, int s)
{
	double y = (double)x * ldexp(1, s), lim = 1073741760.0;

	if (!(fabs(y) < lim))
		y = signbit(x) ? -lim : lim;
	return (int32_t)nearbyint(y);
}

static int ref_exp(const float *x, size_t n)
{
	int e = TLY_EXP_NONE, ex;
	size_t i;

	for (i = 0; i < n; i++) {
		if (isnan(x[i]) || isinf(x[i]))
			return 129;
		if (x[i] != 0) {
			frexpf(x[i], &ex);
			e = ex > e ? ex : e;
		}
	}
	return e;
}

static void test_block_exp(void **state)
{
	float x[K];
	int round, i;

	(void)state;
	memset(x, 0, sizeof(x));
	assert_int_equal(tly_block_exp_f32(x, K), TLY_EXP_NONE);
	x[7] = 1.0f;			/* 1 < 2^1 */
	assert_int_equal(tly_block_exp_f32(x, K), 1);
	x[9] = -0.75f;
	assert_int_equal(tly_block_exp_f32(x, K), 1);
	x[3] = 1e-40f;			/* subnormals count too */
	x[7] = 0;
	x[9] = 0;
	assert_int_equal(tly_block_exp_f32(x, K), ref_exp(x, K));
	x[5] = INFINITY;
	assert_int_equal(tly_block_exp_f32(x, K), 129);
	for (round = 0; round < 200; round++) {
		size_t n = 1 + fab_rand(&rng) % K;

		for (i = 0; i < K; i++)
			x[i] = rand_float(-140, 120);
		assert_int_equal(tly_block_exp_f32(x, n), ref_exp(x, n));
	}
}

static void test_pow2(void **state)
{
	int s;

	(void)state;
	for (s = -149; s <= 127; s++)
		assert_true(tly_pow2f(s) == ldexpf(1, s));
}

static void test_quantize_matches_reference(void **state)
{
	float x[K];
	uint8_t out[4 * K];
	int round;

	(void)state;
	for (round = 0; round < 400; round++) {
		size_t n = fab_rand(&rng) % (K + 1), i;
		int s = (int)(fab_rand(&rng) % 60) - 20;

		for (i = 0; i < K; i++)
			x[i] = rand_float(-30, 12);
		if (round % 7 == 0 && n)
			x[n / 2] = 0.5f * (float)(2 * (round % 5) + 1) *
				   ldexpf(1, -s);	/* exact ties */
		memset(out, 0x5a, sizeof(out));
		tly_quantize_f32(out, x, n, K, s);
		for (i = 0; i < K; i++)
			assert_int_equal(get_be(out, i),
					 i < n ? ref_quant(x[i], s) : 0);
	}
}

static void test_dequantize_matches_reference(void **state)
{
	uint8_t in[4 * K];
	float out[K];
	int round;

	(void)state;
	for (round = 0; round < 200; round++) {
		size_t n = fab_rand(&rng) % (K + 1), i;
		int s = (int)(fab_rand(&rng) % 254) - 126;	/* not NONFINITE */

		for (i = 0; i < 4 * K; i++)
			in[i] = (uint8_t)fab_rand(&rng);
		tly_dequantize_f32(out, in, n, s);
		for (i = 0; i < n; i++)
			assert_true(out[i] == (float)get_be(in, i) *
					      ldexpf(1, -s));
	}
}

/* the worst case: every worker at the top of the block's range */
static void test_no_overflow(void **state)
{
	unsigned int n;
	int e;

	(void)state;
	for (n = 1; n <= 64; n++)
		for (e = -20; e <= 40; e += 3) {
			float x = nextafterf(ldexpf(1, e), 0);
			int s = tly_quant_shift(e, n);
			uint8_t q[4 * TLY_K_MIN];
			int64_t sum;

			tly_quantize_f32(q, &x, 1, TLY_K_MIN, s);
			sum = (int64_t)get_be(q, 0) * n;
			assert_true(sum <= INT32_MAX);
			/* without clamping: the rounding error stays 1/2 */
			assert_true(fabs(get_be(q, 0) - ldexp(x, s)) <= 0.5);
			/* and the scale is not needlessly small */
			assert_true((int64_t)get_be(q, 0) * 2 * n > (1 << 29) ||
				    s == 127);
		}
	assert_int_equal(tly_quant_shift(TLY_EXP_NONE, 8), 127);
	assert_int_equal(tly_quant_shift(-200, 1), 127);
}

/* the bound of quant.h, over random blocks from n workers */
static void test_error_bound(void **state)
{
	static const unsigned int ns[] = { 2, 3, 4, 8, 33, 64 };
	static float x[64][K];
	static uint8_t q[64][4 * K];
	float out[K];
	size_t t, i;
	unsigned int w;

	(void)state;
	for (t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
		unsigned int n = ns[t];
		int32_t e = TLY_EXP_NONE, s;
		uint8_t sum[4 * K];

		for (w = 0; w < n; w++) {
			for (i = 0; i < K; i++)
				x[w][i] = rand_float(-20, (int)(w % 5));
			int32_t ew = tly_block_exp_f32(x[w], K);

			e = ew > e ? ew : e;	/* the exponent round: max */
		}
		s = tly_quant_shift(e, n);
		for (w = 0; w < n; w++)
			tly_quantize_f32(q[w], x[w], K, K, s);
		for (i = 0; i < K; i++) {
			int64_t acc = 0;

			for (w = 0; w < n; w++)
				acc += get_be(q[w], i);
			assert_true(acc <= INT32_MAX && acc >= INT32_MIN);
			sum[4 * i] = (uint8_t)((uint32_t)acc >> 24);
			sum[4 * i + 1] = (uint8_t)((uint32_t)acc >> 16);
			sum[4 * i + 2] = (uint8_t)((uint32_t)acc >> 8);
			sum[4 * i + 3] = (uint8_t)acc;
		}
		tly_dequantize_f32(out, sum, K, s);
		for (i = 0; i < K; i++) {
			double ref = 0, bound;

			for (w = 0; w < n; w++)
				ref += x[w][i];
			bound = n * ldexp(1, e + dp_ceil_log2(n) - 31) +
				0x1p-24 * fabs(ref);
			assert_true(fabs(out[i] - ref) <= bound);
		}
	}
}

static void test_nonfinite_saturates(void **state)
{
	float x[5] = { INFINITY, -INFINITY, NAN, -NAN, 1.0f };
	uint8_t q[4 * TLY_K_MIN];

	(void)state;
	tly_quantize_f32(q, x, 5, TLY_K_MIN, 10);
	assert_int_equal(get_be(q, 0), 1073741760);
	assert_int_equal(get_be(q, 1), -1073741760);
	assert_int_equal(get_be(q, 2), 1073741760);
	assert_int_equal(get_be(q, 3), -1073741760);
	assert_int_equal(get_be(q, 4), 1024);
}

static void test_half_types(void **state)
{
	uint16_t h[K], b[K], back[K];
	float f[K], o[K];
	uint8_t q1[4 * K], q2[4 * K];
	size_t i;
	int s = 12;

	(void)state;
	for (i = 0; i < K; i++) {
		h[i] = float_to_half(rand_float(-20, 10));
		b[i] = float_to_bf16(rand_float(-60, 50));
	}
	for (i = 0; i < K; i++)
		f[i] = half_to_float(h[i]);
	assert_int_equal(tly_block_exp_f16(h, K), tly_block_exp_f32(f, K));
	tly_quantize_f16(q1, h, K - 3, K, s);
	tly_quantize_f32(q2, f, K - 3, K, s);
	assert_memory_equal(q1, q2, sizeof(q1));
	tly_dequantize_f32(o, q1, K, s);
	tly_dequantize_f16(back, q1, K, s);
	for (i = 0; i < K; i++)
		assert_int_equal(back[i], float_to_half(o[i]));

	for (i = 0; i < K; i++)
		f[i] = bf16_to_float(b[i]);
	assert_int_equal(tly_block_exp_bf16(b, K), tly_block_exp_f32(f, K));
	s = tly_quant_shift(tly_block_exp_bf16(b, K), 4);
	tly_quantize_bf16(q1, b, K, K, s);
	tly_quantize_f32(q2, f, K, K, s);
	assert_memory_equal(q1, q2, sizeof(q1));
	tly_dequantize_f32(o, q1, K, s);
	tly_dequantize_bf16(back, q1, K, s);
	for (i = 0; i < K; i++)
		assert_int_equal(back[i], float_to_bf16(o[i]));
}

static void test_int32_exact(void **state)
{
	uint32_t x[K], y[K];
	uint8_t p[4 * K];
	size_t i;

	(void)state;
	for (i = 0; i < K; i++)
		x[i] = (uint32_t)fab_rand(&rng);
	tly_pack_u32(p, x, K - 5, K);
	assert_int_equal(p[0], x[0] >> 24);	/* big-endian on the wire */
	assert_int_equal(p[3], x[0] & 0xff);
	for (i = K - 5; i < K; i++)
		assert_int_equal(get_be(p, i), 0);
	tly_unpack_u32(y, p, K - 5);
	assert_memory_equal(x, y, (K - 5) * 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_exp),
		cmocka_unit_test(test_pow2),
		cmocka_unit_test(test_quantize_matches_reference),
		cmocka_unit_test(test_dequantize_matches_reference),
		cmocka_unit_test(test_no_overflow),
		cmocka_unit_test(test_error_bound),
		cmocka_unit_test(test_nonfinite_saturates),
		cmocka_unit_test(test_half_types),
		cmocka_unit_test(test_int32_exact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
