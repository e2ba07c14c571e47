// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_sign_ef.c - the sign codec with error feedback against a plain
 * reference: the encoded bytes and residual, the vote (ties included)
 * for n = 2, 3, 33 and 64, count lanes at their worst case, error
 * feedback over many rounds, float16/bfloat16 inputs and outputs, and
 * non-finite chunks.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/compress/elem.h"
#include "dataplane/compress/sign_ef.h"
#include "dataplane/engine/quant.h"
#include "dataplane/half.h"
#include "cref.h"

#define K	16
#define M	(32 * (K - 1))		/* elements of a chunk */
#define MAXW	64

static uint64_t seed = 0x51c9;

static int bit_at(const uint8_t *plane, size_t i)
{
	return (plane[i / 8] >> (7 - i % 8)) & 1;
}

static int32_t be32_at(const uint8_t *p)
{
	return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
			 ((uint32_t)p[2] << 8) | p[3]);
}

/* the int32 scheme's shift for the scales' exponent round */
static int ref_scale_shift(int e, unsigned int n)
{
	int s;

	if (e == -1000)
		return 127;
	if (e == 129)
		return -127;
	s = 30 - e - cref_log2_ceil(n);
	return s > 127 ? 127 : s;
}

struct worker {
	float p[M];		/* residual, then p = g + e */
	uint8_t data[4 + M / 8];
	float a;
};

/* one round: p += g; the exponent round over the scales; encode */
static int round_encode(struct worker *w, unsigned int n, const float *g)
{
	int e = -1000, s;
	unsigned int i;

	for (i = 0; i < n; i++) {
		tly_elem_accumulate(w[i].p, g + (size_t)i * M, TLY_DT_F32, M);
		w[i].a = tly_sign_scale(w[i].p, M);
		e = cref_exp(&w[i].a, 1) > e ? cref_exp(&w[i].a, 1) : e;
	}
	s = ref_scale_shift(e, n);
	assert_int_equal(tly_quant_shift(e, n), s);
	for (i = 0; i < n; i++)
		tly_sign_encode(w[i].data, w[i].p, M, w[i].a, s);
	return s;
}

static void test_encode_against_reference(void **state)
{
	static struct worker w[1];
	static float g[M], p[M];
	unsigned int round, n;
	size_t i;

	(void)state;
	for (round = 0; round < 40; round++) {
		double sum = 0;
		float a, ahat;
		int64_t q;
		int s;

		n = 1 + round % 64;	/* the shift's n varies */
		for (i = 0; i < M; i++)
			g[i] = round % 5 == 0 && i % 3 ? 0 :
			       cref_float(&seed, (int)(round % 30) - 15);
		if (round == 7)
			memset(g, 0, sizeof(g));
		memcpy(p, w[0].p, sizeof(p));
		for (i = 0; i < M; i++)
			p[i] += g[i];
		for (i = 0; i < M; i++)
			sum += fabs((double)p[i]);
		a = (float)(sum / M);
		for (i = 0; i < M; i++)
			w[0].p[i] += g[i];
		assert_true(tly_sign_scale(w[0].p, M) == a);
		s = ref_scale_shift(cref_exp(&a, 1), n);
		{
			/* packing is pure: a retransmission's bytes */
			static uint8_t again[4 + M / 8];

			tly_sign_pack(again, w[0].p, M, a, s);
			assert_memory_equal(w[0].p, p, sizeof(p));
			tly_sign_encode(w[0].data, w[0].p, M, a, s);
			assert_memory_equal(again, w[0].data, sizeof(again));
		}
		q = cref_quant(a, s, 1073741760);
		assert_int_equal(be32_at(w[0].data), q);
		ahat = (float)ldexp((double)q, -s);
		for (i = 0; i < M; i++) {
			int pos = p[i] >= 0;

			assert_int_equal(bit_at(w[0].data + 4, i), pos);
			assert_true(w[0].p[i] == (pos ? p[i] - ahat :
						  p[i] + ahat));
		}
		if (round == 7)	/* residual was 0 before the round? */
			assert_true(a == 0 || sum > 0);
	}
}

static void run_vote(unsigned int n, int allpos)
{
	static struct worker w[MAXW];
	static float g[MAXW * M];
	static uint8_t count[M], res[4 + M / 8];
	const uint64_t coins = 0x0123456789abcdefull * n;
	struct tly_sign_acc acc;
	float out[M];
	int64_t ssum = 0;
	int ties = 0, tie_up = 0, s;
	unsigned int i;
	size_t j;

	memset(w, 0, sizeof(w));
	for (j = 0; j < (size_t)n * M; j++)
		g[j] = allpos ? ldexpf(1, 20) : cref_float(&seed, 3);
	s = round_encode(w, n, g);
	tly_sign_acc_init(&acc, count, M);
	for (i = 0; i < n; i++) {
		tly_sign_acc_add(&acc, w[i].data);
		ssum += be32_at(w[i].data);
	}
	assert_true(ssum < ((int64_t)1 << 30));
	assert_int_equal((int32_t)acc.scale_sum, ssum);
	tly_sign_result(res, &acc, n, coins);
	tly_sign_decode(out, TLY_DT_F32, res, M, s);
	for (j = 0; j < M; j++) {
		unsigned int c = 0;
		double want;
		int vote;

		for (i = 0; i < n; i++)
			c += bit_at(w[i].data + 4, j);
		assert_int_equal(count[j], c);	/* no lane wrapped */
		vote = 2 * c > n ? 1 : (2 * c < n ? -1 : 0);
		if (!vote) {
			/* a tie: the coin of docs/compression.md section 3,
			 * bit 63 of splitmix64(seed + j) */
			vote = tly_key_hash(coins + j) >> 63 ? 1 : -1;
			ties++;
			tie_up += vote > 0;
		}
		/* S converted to float32 once, as quant.h's decode does */
		want = vote * (double)(float)ldexp((double)ssum, -s);
		assert_true((double)out[j] == want);
		if (allpos)
			assert_int_equal(c, n);
	}
	if (n == 2 && !allpos) {
		/* ties happen, and their coins are fair */
		assert_true(ties > 64);
		assert_in_range(tie_up, ties / 4, 3 * ties / 4);
	}
	if (n % 2)
		assert_int_equal(ties, 0);
}

static void test_vote(void **state)
{
	static const unsigned int ns[] = { 1, 2, 3, 4, 33, 64 };
	unsigned int j, r;

	(void)state;
	for (j = 0; j < sizeof(ns) / sizeof(ns[0]); j++)
		for (r = 0; r < 4; r++)
			run_vote(ns[j], 0);
}

/* 64 workers, every sign positive, scales at the top of their range */
static void test_count_lanes_worst_case(void **state)
{
	(void)state;
	run_vote(64, 1);
	run_vote(33, 1);
}

/*
 * Error feedback: after R rounds, sum of the inputs = sum of what was
 * sent (decoded from the worker's own DATA) + the residual, per element
 * within the float32 rounding of the two additions per round:
 *	|sum g - sum sent - e_R| <= 2^-23 * sum_t (|p_t| + |e_t+1|)
 */
static void test_error_feedback(void **state)
{
	static struct worker w[1];
	static double gsum[M], sent[M], slack[M];
	static float g[M];
	int round;
	size_t i;

	(void)state;
	memset(w, 0, sizeof(w));
	for (round = 0; round < 500; round++) {
		int s;

		for (i = 0; i < M; i++) {
			/* a drift per element plus noise of varying scale */
			g[i] = (float)(i % 7) * 1e-3f +
			       cref_float(&seed, -(round % 12));
			gsum[i] += g[i];
		}
		s = round_encode(w, 1, g);
		for (i = 0; i < M; i++) {
			double ah = ldexp((double)be32_at(w[0].data), -s);
			double snt = bit_at(w[0].data + 4, i) ? ah : -ah;
			double p = (double)w[0].p[i] + snt;

			sent[i] += snt;
			slack[i] += ldexp(fabs(p) + fabs(w[0].p[i]), -23);
		}
	}
	for (i = 0; i < M; i++) {
		double err = fabs(gsum[i] - sent[i] - (double)w[0].p[i]);

		assert_true(err <= slack[i]);
		/* the residual stays of the order of the inputs */
		assert_true(fabs(w[0].p[i]) < 4.0);
	}
}

static void test_half_types(void **state)
{
	static float p[M], ref[M];
	static uint16_t gh[M], outh[M];
	static uint8_t data[4 + M / 8], count[M], res[4 + M / 8];
	struct tly_sign_acc acc;
	int dt, s;
	size_t i;
	float a;

	(void)state;
	for (dt = TLY_DT_F16; dt <= TLY_DT_BF16; dt++) {
		memset(p, 0, sizeof(p));
		for (i = 0; i < M; i++) {
			float v = cref_float(&seed, 2);

			gh[i] = dt == TLY_DT_F16 ? float_to_half(v) :
				float_to_bf16(v);
		}
		tly_elem_accumulate(p, gh, (enum tly_dtype)dt, M);
		for (i = 0; i < M; i++)
			assert_true(p[i] == (dt == TLY_DT_F16 ?
					     half_to_float(gh[i]) :
					     bf16_to_float(gh[i])));
		a = tly_sign_scale(p, M);
		s = tly_quant_shift(cref_exp(&a, 1), 1);
		tly_sign_encode(data, p, M, a, s);
		tly_sign_acc_init(&acc, count, M);
		tly_sign_acc_add(&acc, data);
		tly_sign_result(res, &acc, 1, 0);
		tly_sign_decode(ref, TLY_DT_F32, res, M, s);
		tly_sign_decode(outh, (enum tly_dtype)dt, res, M, s);
		for (i = 0; i < M; i++)
			assert_int_equal(outh[i], dt == TLY_DT_F16 ?
					 float_to_half(ref[i]) :
					 float_to_bf16(ref[i]));
	}
}

/* inf or NaN on one worker: non-finite everywhere, residuals reset */
static void test_nonfinite(void **state)
{
	static const unsigned int ns[] = { 2, 33 };
	static struct worker w[MAXW];
	static float g[MAXW * M];
	static uint8_t count[M], res[4 + M / 8];
	struct tly_sign_acc acc;
	unsigned int j, i, kind;
	float out[M];
	size_t e;

	(void)state;
	for (j = 0; j < 2; j++)
		for (kind = 0; kind < 3; kind++) {
			unsigned int n = ns[j];
			int s;

			memset(w, 0, sizeof(w));
			for (e = 0; e < (size_t)n * M; e++)
				g[e] = cref_float(&seed, 0);
			g[(size_t)(n - 1) * M + 5] = kind == 0 ? INFINITY :
						     kind == 1 ? -INFINITY :
						     NAN;
			s = round_encode(w, n, g);
			assert_int_equal(s, TLY_SHIFT_NONFINITE);
			tly_sign_acc_init(&acc, count, M);
			for (i = 0; i < n; i++) {
				tly_sign_acc_add(&acc, w[i].data);
				for (e = 0; e < M; e++)
					assert_true(w[i].p[e] == 0);
			}
			tly_sign_result(res, &acc, n, 7);
			tly_sign_decode(out, TLY_DT_F32, res, M, s);
			for (e = 0; e < M; e++) {
				assert_false(isfinite(out[e]));
				/* a NaN anywhere poisons the whole chunk */
				if (kind == 2)
					assert_true(isnan(out[e]));
			}
		}
}

/*
 * float32 subnormals: the scale (below 2^-128) quantizes to 0 under the
 * saturated shift, nothing is sent, and the residual keeps p exactly
 * until it grows large enough to be sent
 */
static void test_denormals(void **state)
{
	static struct worker w[1];
	static float g[M];
	int s, round, sent_once = 0;
	size_t i;

	(void)state;
	memset(w, 0, sizeof(w));
	for (i = 0; i < M; i++)
		g[i] = ldexpf(i % 2 ? 1.0f : -1.0f, -140);
	s = round_encode(w, 1, g);
	assert_int_equal(s, 127);
	assert_int_equal(be32_at(w[0].data), 0);
	for (i = 0; i < M; i++)
		assert_true(w[0].p[i] == g[i]);
	for (round = 0; round < 20000 && !sent_once; round++) {
		s = round_encode(w, 1, g);
		sent_once = be32_at(w[0].data) != 0;
	}
	assert_true(sent_once);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_against_reference),
		cmocka_unit_test(test_vote),
		cmocka_unit_test(test_count_lanes_worst_case),
		cmocka_unit_test(test_error_feedback),
		cmocka_unit_test(test_half_types),
		cmocka_unit_test(test_nonfinite),
		cmocka_unit_test(test_denormals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
