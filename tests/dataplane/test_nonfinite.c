// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_nonfinite.c - inf and NaN through the aggregation path: a block in
 * which any worker has a non-finite value comes back non-finite on every
 * worker, with IEEE's answer per element (docs/protocol.md section 2),
 * and the other blocks of the tensor stay exact.  Saturating them to
 * +-(2^30 - 64) used to overflow int32 with three workers: inf + inf + inf
 * came back -inf, inf + (-inf) + 1 came back 0.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cluster.h"
#include "dataplane/engine/quant.h"
#include "dataplane/engine/wire.h"
#include "dataplane/half.h"

#define K 64
#define N (2 * K)		/* block 0 holds the non-finite values */
#define W 3

static const float cases[][W] = {
	{ INFINITY, INFINITY, INFINITY },	/* +inf */
	{ INFINITY, -INFINITY, 1.0f },		/* NaN */
	{ NAN, 1.0f, 2.0f },			/* NaN */
	{ -INFINITY, 1.0f, 1.0f },		/* -inf */
	{ -INFINITY, -INFINITY, 5.0f },		/* -inf */
	{ 1.0f, 2.0f, 3.0f },			/* finite, in a non-finite block */
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static void expect_case(float got, unsigned int c)
{
	switch (c) {
	case 0:
		assert_true(isinf(got) && got > 0);
		break;
	case 3: case 4:
		assert_true(isinf(got) && got < 0);
		break;
	default:
		assert_true(isnan(got));
	}
}

static void test_codes_sum_like_ieee(void **state)
{
	uint8_t q[W][4 * K];
	uint32_t sum[K] = { 0 };
	float out[K];

	(void)state;
	assert_int_equal(tly_quant_shift(TLY_EXP_NONFINITE, W),
			 TLY_SHIFT_NONFINITE);
	for (unsigned int w = 0; w < W; w++) {
		float x[N_CASES];

		for (unsigned int c = 0; c < N_CASES; c++)
			x[c] = cases[c][w];
		assert_int_equal(tly_block_exp_f32(x, N_CASES),
				 TLY_EXP_NONFINITE);
		tly_quantize_f32(q[w], x, N_CASES, K, TLY_SHIFT_NONFINITE);
		for (unsigned int i = 0; i < K; i++)
			sum[i] += (uint32_t)q[w][4 * i] << 24 |
				  (uint32_t)q[w][4 * i + 1] << 16 |
				  (uint32_t)q[w][4 * i + 2] << 8 |
				  q[w][4 * i + 3];
	}
	for (unsigned int i = 0; i < K; i++) {
		q[0][4 * i] = (uint8_t)(sum[i] >> 24);
		q[0][4 * i + 1] = (uint8_t)(sum[i] >> 16);
		q[0][4 * i + 2] = (uint8_t)(sum[i] >> 8);
		q[0][4 * i + 3] = (uint8_t)sum[i];
	}
	tly_dequantize_f32(out, q[0], N_CASES, TLY_SHIFT_NONFINITE);
	for (unsigned int c = 0; c < N_CASES; c++)
		expect_case(out[c], c);
}

static void run_cluster(enum cl_role role, enum tly_dtype dt)
{
	struct cl_cfg cc = {
		.n_workers = W, .k = K, .role = role, .n_slots = 64,
		.n_fallback = 4, .window = 16,
		.fab = { .seed = 5, .delay_ns = 2000 },
	};
	struct cluster *cl = cl_create(&cc);
	static float f[W][N];
	static uint16_t h[W][N];

	assert_non_null(cl);
	for (unsigned int w = 0; w < W; w++) {
		struct tly_tensor_desc d = {
			.id = tly_tensor_id(9, 1, 0), .dtype = dt,
			.algo = TLY_ALGO_AGG, .count = N, .prio = 1,
		};

		for (unsigned int i = 0; i < N; i++)
			f[w][i] = i < N_CASES ? cases[i][w] :
				  (float)(i % K + w);	/* sums exact in bf16 */
		for (unsigned int i = 0; i < N; i++)
			h[w][i] = dt == TLY_DT_BF16 ? float_to_bf16(f[w][i]) :
				  float_to_half(f[w][i]);
		d.src = d.dst = dt == TLY_DT_F32 ? (void *)f[w] : (void *)h[w];
		assert_int_equal(tly_worker_submit(cl->w[w], &d, 0), 0);
	}
	assert_int_equal(cl_run(cl, 1, 1000000000ull), 0);
	for (unsigned int w = 0; w < W; w++) {
		for (unsigned int i = 0; i < N; i++) {
			float got = dt == TLY_DT_F32 ? f[w][i] :
				    dt == TLY_DT_BF16 ? bf16_to_float(h[w][i]) :
				    half_to_float(h[w][i]);

			if (i < N_CASES)
				expect_case(got, i);
			else if (i >= K)	/* block 1: exact */
				assert_true(got == (float)(3 * (i % K) + 3));
			else			/* rest of block 0 */
				assert_true(isnan(got));
		}
	}
	cl_destroy(cl);
}

static void test_cluster_f32(void **state)
{
	(void)state;
	run_cluster(CL_DEDICATED, TLY_DT_F32);
	run_cluster(CL_COLOCATED, TLY_DT_F32);
}

static void test_cluster_half_types(void **state)
{
	(void)state;
	run_cluster(CL_DEDICATED, TLY_DT_F16);
	run_cluster(CL_DEDICATED, TLY_DT_BF16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codes_sum_like_ieee),
		cmocka_unit_test(test_cluster_f32),
		cmocka_unit_test(test_cluster_half_types),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
