// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_narrow.c - int16 and int8 block fixed point against a reference in
 * double written from docs/compression.md: shift and limit, lanes, the
 * aggregator's lane sum, the decode and its error bound, non-finite
 * blocks, denormals, and the no-overflow guarantee at worst-case
 * magnitudes for every n up to 64.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/compress/narrow.h"
#include "dataplane/engine/quant.h"
#include "dataplane/half.h"
#include "cref.h"

#define K	64			/* 32-bit words per packet */
#define MAXL	(4 * K)			/* lanes of the int8 packet */

static uint64_t seed = 0x5eed;

static int ref_shift(int e, unsigned int n, unsigned int bytes)
{
	int s;

	if (e == -1000)
		return 127;
	if (e == 129)
		return -127;
	s = 8 * (int)bytes - 1 - e - cref_log2_ceil(n);
	return s > 127 ? 127 : (s < -126 ? -126 : s);
}

static int64_t ref_lim(unsigned int n, unsigned int bytes)
{
	return ((int64_t)1 << (8 * bytes - 1 - cref_log2_ceil(n))) - 1;
}

static int64_t lane_at(const uint8_t *p, size_t i, unsigned int bytes)
{
	if (bytes == 2)
		return (int16_t)(((unsigned int)p[2 * i] << 8) | p[2 * i + 1]);
	return (int8_t)p[i];
}

static void test_shift_and_limit(void **state)
{
	unsigned int n, bytes;
	int e;

	(void)state;
	for (bytes = 1; bytes <= 2; bytes++)
		for (n = 1; n <= 64; n++) {
			assert_int_equal(tly_narrow_limit(n, bytes),
					 ref_lim(n, bytes));
			assert_true(tly_narrow_limit(n, bytes) >= 1);
			assert_int_equal(tly_narrow_shift(TLY_EXP_NONE, n,
							  bytes), 127);
			assert_int_equal(tly_narrow_shift(129, n, bytes),
					 TLY_SHIFT_NONFINITE);
			for (e = -149; e <= 128; e++) {
				int s = tly_narrow_shift(e, n, bytes);

				assert_int_equal(s, ref_shift(e, n, bytes));
				assert_true(s != TLY_SHIFT_NONFINITE);
			}
		}
}

/* n workers' random blocks of @dt through quantize, add, dequantize */
static void run_sum(unsigned int n, unsigned int bytes, enum tly_dtype dt,
		    int emin, int emax, int zero_block)
{
	size_t lanes = tly_narrow_lanes(K, bytes), m = lanes - 3, i;
	static float xf[64][MAXL];
	static uint16_t xh[64][MAXL];
	uint8_t acc[4 * K], pkt[4 * K];
	int64_t lim = ref_lim(n, bytes);
	int e = -1000, s;
	unsigned int w;

	for (w = 0; w < n; w++) {
		int ew = emin + (int)(cref_rand(&seed) %
				      (uint64_t)(emax - emin + 1));

		for (i = 0; i < m; i++) {
			float v = zero_block ? 0 : cref_float(&seed, ew);

			/* the value the worker really holds in its dtype */
			if (dt == TLY_DT_F16) {
				xh[w][i] = float_to_half(v);
				v = half_to_float(xh[w][i]);
			} else if (dt == TLY_DT_BF16) {
				xh[w][i] = float_to_bf16(v);
				v = bf16_to_float(xh[w][i]);
			}
			xf[w][i] = v;
		}
		{
			int ex = cref_exp(xf[w], m);
			const void *src = dt == TLY_DT_F32 ?
					  (const void *)xf[w] : xh[w];

			assert_int_equal(tly_narrow_block_exp(src, dt, m), ex);
			e = ex > e ? ex : e;
		}
	}
	s = tly_narrow_shift(e, n, bytes);
	assert_int_equal(s, ref_shift(e, n, bytes));
	memset(acc, 0xa5, sizeof(acc));
	for (w = 0; w < n; w++) {
		const void *src = dt == TLY_DT_F32 ? (const void *)xf[w] : xh[w];

		tly_narrow_quantize(pkt, src, dt, m, lanes, s, n, bytes);
		for (i = 0; i < lanes; i++) {
			int64_t q = i < m ? cref_quant(xf[w][i], s, lim) : 0;

			assert_int_equal(lane_at(pkt, i, bytes), q);
		}
		if (w == 0)
			memcpy(acc, pkt, 4 * K);
		else
			tly_narrow_add(acc, pkt, lanes, bytes);
	}
	for (i = 0; i < m; i++) {
		double exact = 0, unit = ldexp(1, -s);
		int64_t qsum = 0;
		float r;

		for (w = 0; w < n; w++) {
			exact += xf[w][i];
			qsum += cref_quant(xf[w][i], s, lim);
		}
		/* no wrap: the lane holds the true integer sum */
		assert_true(llabs(qsum) < ((int64_t)1 << (8 * bytes - 1)));
		assert_int_equal(lane_at(acc, i, bytes), qsum);
		tly_narrow_dequantize(&r, TLY_DT_F32, acc + i * bytes, 1, s,
				      bytes);
		assert_true((double)r == (double)qsum * unit);
		/* the bound of narrow.h: below n units */
		assert_true(fabs((double)r - exact) < n * unit);
		if (zero_block)
			assert_true(r == 0);
	}
	/* a float16/bfloat16 destination narrows the float32 result */
	if (dt != TLY_DT_F32) {
		uint16_t out[MAXL];
		float r32[MAXL];

		tly_narrow_dequantize(out, dt, acc, m, s, bytes);
		tly_narrow_dequantize(r32, TLY_DT_F32, acc, m, s, bytes);
		for (i = 0; i < m; i++)
			assert_int_equal(out[i], dt == TLY_DT_F16 ?
					 float_to_half(r32[i]) :
					 float_to_bf16(r32[i]));
	}
}

static void test_sum_f32(void **state)
{
	static const unsigned int ns[] = { 1, 2, 3, 33, 64 };
	unsigned int bytes, j, round;

	(void)state;
	for (bytes = 1; bytes <= 2; bytes++)
		for (j = 0; j < sizeof(ns) / sizeof(ns[0]); j++)
			for (round = 0; round < 20; round++)
				run_sum(ns[j], bytes, TLY_DT_F32, -20, 20, 0);
}

static void test_sum_half_types(void **state)
{
	static const unsigned int ns[] = { 2, 33 };
	unsigned int bytes, j, round;

	(void)state;
	for (bytes = 1; bytes <= 2; bytes++)
		for (j = 0; j < 2; j++)
			for (round = 0; round < 10; round++) {
				run_sum(ns[j], bytes, TLY_DT_F16, -14, 15, 0);
				run_sum(ns[j], bytes, TLY_DT_BF16, -60, 60,
					0);
			}
}

static void test_all_zero_and_denormals(void **state)
{
	unsigned int bytes;

	(void)state;
	for (bytes = 1; bytes <= 2; bytes++) {
		run_sum(2, bytes, TLY_DT_F32, 0, 0, 1);
		run_sum(33, bytes, TLY_DT_F32, 0, 0, 1);
		/* float32 subnormals: the shift saturates at 127 and they
		 * round to 0 within the bound (n * 2^-127) */
		run_sum(2, bytes, TLY_DT_F32, -140, -127, 0);
		run_sum(33, bytes, TLY_DT_F32, -149, -126, 0);
		/* float16 subnormals (2^-24 .. 2^-14) are carried */
		run_sum(2, bytes, TLY_DT_F16, -24, -15, 0);
	}
}

/*
 * Lane overflow is impossible by construction: every n up to 64, every
 * worker at the worst magnitude (just below 2^E, or exactly the block's
 * largest, all of one sign), for E over the whole float range.
 */
static void test_no_overflow_worst_case(void **state)
{
	static float x[64][8];
	uint8_t acc[16], pkt[16];
	unsigned int n, bytes, w;
	int e, sign, i;

	(void)state;
	for (bytes = 1; bytes <= 2; bytes++)
		for (n = 1; n <= 64; n++)
			for (e = -148; e <= 128; e += 3)
				for (sign = -1; sign <= 1; sign += 2) {
					int s = tly_narrow_shift(e, n, bytes);
					int64_t lim = ref_lim(n, bytes);

					for (w = 0; w < n; w++)
						for (i = 0; i < 8; i++) {
							float big = nextafterf(
								ldexpf(1, e), 0);
							float v = i < 4 ? big :
							cref_float(&seed, e);

							x[w][i] = sign * (i & 1 ?
							fabsf(v) : big);
						}
					for (w = 0; w < n; w++) {
						tly_narrow_quantize(pkt, x[w],
							TLY_DT_F32, 8,
							16 / bytes, s, n,
							bytes);
						if (w == 0)
							memcpy(acc, pkt, 16);
						else
							tly_narrow_add(acc,
							pkt, 16 / bytes,
							bytes);
					}
					for (i = 0; i < 8; i++) {
						int64_t t = 0;

						for (w = 0; w < n; w++)
							t += cref_quant(
							x[w][i], s, lim);
						assert_true(llabs(t) <=
							(int64_t)n * lim);
						assert_true(n * lim <
							(1 << (8 * bytes - 1)));
						assert_int_equal(lane_at(acc,
							i, bytes), t);
					}
				}
}

/* the IEEE sum a reference computes by adding floats */
static void expect_nonfinite(float got, float want, unsigned int bytes)
{
	if (bytes == 1 || isnan(want)) {
		assert_true(isnan(got));
		return;
	}
	assert_true(isinf(got));
	assert_true(signbit(got) == signbit(want));
}

static void test_nonfinite(void **state)
{
	static const unsigned int ns[] = { 2, 3, 33, 64 };
	static float x[64][16];
	uint8_t acc[4 * K], pkt[4 * K];
	unsigned int bytes, j, w, round;
	size_t i;

	(void)state;
	for (bytes = 1; bytes <= 2; bytes++)
		for (j = 0; j < 4; j++)
			for (round = 0; round < 30; round++) {
				unsigned int n = ns[j];
				int e = -1000, s;

				for (w = 0; w < n; w++) {
					for (i = 0; i < 16; i++) {
						uint64_t r = cref_rand(&seed);
						int kind = (int)(r % 8);

						x[w][i] = kind == 0 ? INFINITY :
							  kind == 1 ? -INFINITY :
							  kind == 2 && round & 1 ?
							  NAN : (float)(r >> 50);
					}
					/* column 0 all +inf, column 1 all
					 * -inf: the counts reach n */
					x[w][0] = INFINITY;
					x[w][1] = -INFINITY;
					x[w][2] = round % 3 ? 1.0f : NAN;
					e = cref_exp(x[w], 16) > e ?
					    cref_exp(x[w], 16) : e;
				}
				assert_int_equal(e, 129);
				s = tly_narrow_shift(e, n, bytes);
				assert_int_equal(s, TLY_SHIFT_NONFINITE);
				for (w = 0; w < n; w++) {
					tly_narrow_quantize(pkt, x[w],
						TLY_DT_F32, 16,
						tly_narrow_lanes(K, bytes), s,
						n, bytes);
					if (w == 0)
						memcpy(acc, pkt, 4 * K);
					else
						tly_narrow_add(acc, pkt,
						tly_narrow_lanes(K, bytes),
						bytes);
				}
				for (i = 0; i < 16; i++) {
					float want = 0, got;
					int finite = 1;

					for (w = 0; w < n; w++) {
						want += x[w][i];
						finite &= isfinite(x[w][i]);
					}
					if (finite)	/* documented: NaN */
						want = NAN;
					tly_narrow_dequantize(&got, TLY_DT_F32,
						acc + i * bytes, 1, s, bytes);
					expect_nonfinite(got, want, bytes);
				}
			}
}

/* inf under an ordinary shift (never chosen for it) saturates by sign */
static void test_inf_under_ordinary_shift(void **state)
{
	float x[4] = { INFINITY, -INFINITY, NAN, 1.0f };
	uint8_t pkt[8];
	unsigned int bytes;

	(void)state;
	for (bytes = 1; bytes <= 2; bytes++) {
		int32_t lim = tly_narrow_limit(4, bytes);

		tly_narrow_quantize(pkt, x, TLY_DT_F32, 4, 4, 0, 4, bytes);
		assert_int_equal(lane_at(pkt, 0, bytes), lim);
		assert_int_equal(lane_at(pkt, 1, bytes), -lim);
		assert_int_equal(llabs(lane_at(pkt, 2, bytes)), lim);
		assert_int_equal(lane_at(pkt, 3, bytes), 1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shift_and_limit),
		cmocka_unit_test(test_sum_f32),
		cmocka_unit_test(test_sum_half_types),
		cmocka_unit_test(test_all_zero_and_denormals),
		cmocka_unit_test(test_no_overflow_worst_case),
		cmocka_unit_test(test_nonfinite),
		cmocka_unit_test(test_inf_under_ordinary_shift),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
