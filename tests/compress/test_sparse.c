// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_sparse.c - block sparsification with error feedback against a
 * plain reference: top-k and threshold selection (all-zero, tied, partial
 * and non-finite blocks), the exponent round's max-and-count lane, block
 * encoding and residuals, the aggregator's partial block under
 * duplication and reordering for n = 2, 3, 33 and 64, its overflow
 * guarantee, and error feedback over many rounds.
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
#include "dataplane/compress/sparse.h"
#include "dataplane/engine/quant.h"
#include "cref.h"

#define B	32		/* block = chunk = K words */
#define NB	40
#define N	(NB * B - 7)	/* the last block is partial */
#define MAXW	64
#define LIM32	1073741760

static uint64_t seed = 0x5a55;

static double ref_norm(const float *p, size_t len)
{
	double s = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!isfinite(p[i]))
			return INFINITY;
		s += (double)p[i] * p[i];
	}
	return s;
}

static size_t ref_len(size_t b)
{
	return b == NB - 1 ? N - b * B : B;
}

/*
 * top-k by repeated scans: non-finite blocks first, then the largest
 * norm, lowest index on ties, up to k in all
 */
static size_t ref_topk(int *chosen, const float *p, size_t k)
{
	double norm[NB];
	size_t b, n = 0, t;

	for (b = 0; b < NB; b++) {
		norm[b] = ref_norm(p + b * B, ref_len(b));
		chosen[b] = isinf(norm[b]);
		n += chosen[b];
	}
	for (t = n; t < k; t++) {
		size_t best = NB;

		for (b = 0; b < NB; b++)
			if (!chosen[b] && norm[b] > 0 &&
			    (best == NB || norm[b] > norm[best]))
				best = b;
		if (best == NB)
			break;
		chosen[best] = 1;
		n++;
	}
	return n;
}

/* a gradient with all-zero blocks, tied blocks and mixed scales */
static void fill(float *p, int zero_frac)
{
	size_t b, i;

	for (b = 0; b < NB; b++) {
		int zero = (int)(cref_rand(&seed) % 100) < zero_frac;
		int e = (int)(cref_rand(&seed) % 24) - 12;

		for (i = 0; i < ref_len(b); i++)
			p[b * B + i] = zero ? 0 : cref_float(&seed, e);
	}
	memcpy(p + 3 * B, p + 9 * B, B * sizeof(*p));	/* a tie */
}

static void check_selection(const uint32_t *idx, size_t n_sel,
			    const int *chosen, size_t n_ref)
{
	size_t i;

	assert_int_equal(n_sel, n_ref);
	for (i = 0; i < n_sel; i++) {
		assert_true(idx[i] < NB);
		assert_true(chosen[idx[i]]);
		if (i)
			assert_true(idx[i] > idx[i - 1]);
	}
}

static void test_select(void **state)
{
	static float p[N];
	uint32_t idx[NB];
	int chosen[NB], round;

	(void)state;
	for (round = 0; round < 200; round++) {
		size_t k = cref_rand(&seed) % (NB + 3), n_sel, n_ref, b;
		float thr;

		fill(p, round % 4 * 25);
		if (round % 10 == 1)
			p[17 * B + 3] = round % 20 == 1 ? INFINITY : NAN;
		n_sel = tly_sparse_select_topk(idx, p, N, B, k);
		n_ref = ref_topk(chosen, p, k);
		check_selection(idx, n_sel, chosen, n_ref);
		for (b = 0; b < n_sel; b++)
			assert_true(ref_norm(p + idx[b] * B,
					     ref_len(idx[b])) > 0);
		/* threshold: norm >= thr, non-finite always */
		thr = ldexpf(1, (int)(cref_rand(&seed) % 12) - 8);
		n_sel = tly_sparse_select_threshold(idx, p, N, B, thr);
		n_ref = 0;
		for (b = 0; b < NB; b++) {
			double nb = ref_norm(p + b * B, ref_len(b));

			chosen[b] = nb > 0 && nb >= (double)thr * thr;
			n_ref += chosen[b];
		}
		check_selection(idx, n_sel, chosen, n_ref);
	}
	/* every block zero: nothing is ever selected */
	memset(p, 0, sizeof(p));
	assert_int_equal(tly_sparse_select_topk(idx, p, N, B, NB), 0);
	assert_int_equal(tly_sparse_select_threshold(idx, p, N, B, 1e-30f),
			 0);
}

static void test_exp_word(void **state)
{
	static const int32_t es[] = { TLY_EXP_NONE, -149, -1, 0, 1, 30, 128,
				      TLY_EXP_NONFINITE };
	unsigned int m, j;

	(void)state;
	for (j = 0; j < sizeof(es) / sizeof(es[0]); j++)
		for (m = 0; m <= 64; m++) {
			unsigned int m2;
			int32_t e2;

			tly_sparse_exp_unword(tly_sparse_exp_word(es[j], m),
					      &e2, &m2);
			assert_int_equal(e2, es[j]);
			assert_int_equal(m2, m);
		}
}

struct contrib {
	unsigned int rank;
	unsigned int senders;
	int shift;
	uint8_t payload[4 * B];
};

/* one round of n workers; returns nothing, checks everything */
static void run_round(unsigned int n, size_t k, int zero_frac,
		      int nonfinite)
{
	static float p[MAXW][N], before[MAXW][N];
	static int32_t exps[MAXW][NB];
	static struct contrib c[4 * MAXW];
	struct tly_sparse_exp_lane lane[NB];
	uint32_t idx[NB], lanes[B];
	unsigned int w;
	size_t b, i;

	for (w = 0; w < n; w++) {
		size_t n_sel;

		fill(p[w], zero_frac);
		if (nonfinite && w == n - 1)
			p[w][5 * B + 1] = nonfinite == 1 ? -INFINITY : NAN;
		n_sel = tly_sparse_select_topk(idx, p[w], N, B, k);
		tly_sparse_exps(exps[w], p[w], N, B, idx, n_sel);
		for (b = 0; b < NB; b++) {
			int sel = 0;

			for (i = 0; i < n_sel; i++)
				sel |= idx[i] == b;
			assert_int_equal(exps[w][b], sel ?
					 cref_exp(p[w] + b * B, ref_len(b)) :
					 TLY_EXP_NONE);
		}
		memcpy(before[w], p[w], sizeof(p[w]));
	}
	tly_sparse_exp_init(lane, NB);
	for (w = 0; w < n; w++)
		tly_sparse_exp_add(lane, exps[w], NB);

	for (b = 0; b < NB; b++) {
		struct tly_sparse_acc acc;
		unsigned int m = 0, got = 0, n_c = 0, j;
		int32_t e = TLY_EXP_NONE;
		int s, completes = 0;

		for (w = 0; w < n; w++) {
			m += exps[w][b] != TLY_EXP_NONE;
			e = exps[w][b] > e ? exps[w][b] : e;
		}
		assert_int_equal(lane[b].exp, e);
		assert_int_equal(lane[b].senders, m);
		if (nonfinite && b == 5)
			assert_int_equal(e, TLY_EXP_NONFINITE);
		if (m == 0) {	/* nobody sends: zeros everywhere */
			float z[B];

			memset(z, 0xff, sizeof(z));
			tly_sparse_decode_block(z, TLY_DT_F32, NULL,
						ref_len(b), 0, 0);
			for (i = 0; i < ref_len(b); i++)
				assert_true(z[i] == 0 && !signbit(z[i]));
			continue;
		}
		s = tly_quant_shift(e, m);
		/* each sender's contribution, plus duplicates */
		for (w = 0; w < n; w++) {
			if (exps[w][b] == TLY_EXP_NONE)
				continue;
			c[n_c].rank = w;
			c[n_c].senders = m;
			c[n_c].shift = s;
			tly_sparse_encode_block(c[n_c].payload, p[w] + b * B,
						ref_len(b), B, s);
			for (i = 0; i < ref_len(b); i++) {
				double q = (double)cref_quant(
					before[w][b * B + i], s, LIM32);
				float want = s == TLY_SHIFT_NONFINITE ? 0 :
					before[w][b * B + i] -
					(float)ldexp(q, -s);

				assert_true(p[w][b * B + i] == want);
			}
			n_c++;
			if (cref_rand(&seed) % 3 == 0) {
				c[n_c] = c[n_c - 1];
				n_c++;
			}
		}
		/* reorder */
		for (j = n_c; j > 1; j--) {
			unsigned int r = (unsigned int)(cref_rand(&seed) % j);
			struct contrib t = c[j - 1];

			c[j - 1] = c[r];
			c[r] = t;
		}
		tly_sparse_acc_init(&acc, lanes, B);
		for (j = 0; j < n_c; j++) {
			enum tly_sparse_verdict v;
			uint64_t before_seen = acc.seen;

			/* once started, another count is not believed
			 * (every honest worker carries the m(b) of the
			 * same exponent RESULT) */
			if (j)
				assert_int_equal(tly_sparse_acc_add(&acc,
						 c[j].rank, m + 1, s,
						 c[j].payload),
						 TLY_SPARSE_MISMATCH);
			v = tly_sparse_acc_add(&acc, c[j].rank, m, s,
					       c[j].payload);
			if (before_seen & (1ull << c[j].rank)) {
				assert_true(v == (got == m ?
					    TLY_SPARSE_DONE :
					    TLY_SPARSE_DUPLICATE));
				continue;
			}
			got++;
			assert_int_equal(v, got == m ? TLY_SPARSE_COMPLETE :
					 TLY_SPARSE_ADDED);
			completes += v == TLY_SPARSE_COMPLETE;
			if (got < m)
				assert_int_equal(tly_sparse_acc_add(&acc,
						 c[j].rank, m, s ^ 1,
						 c[j].payload),
						 TLY_SPARSE_MISMATCH);
		}
		assert_int_equal(completes, 1);
		/* a non-sender's contribution after completion: refused */
		for (w = 0; w < n; w++)
			if (exps[w][b] == TLY_EXP_NONE) {
				assert_int_equal(tly_sparse_acc_add(&acc, w, m,
						 s, c[0].payload),
						 TLY_SPARSE_MISMATCH);
				break;
			}
		/* the sum against the reference, and the bound */
		for (i = 0; i < ref_len(b); i++) {
			int64_t qs = 0;
			double exact = 0;
			float r;

			for (w = 0; w < n; w++) {
				if (exps[w][b] == TLY_EXP_NONE)
					continue;
				exact += before[w][b * B + i];
				if (s != TLY_SHIFT_NONFINITE)
					qs += cref_quant(before[w][b * B + i],
							 s, LIM32);
			}
			if (s == TLY_SHIFT_NONFINITE) {
				uint8_t be[4] = { (uint8_t)(lanes[i] >> 24),
						  (uint8_t)(lanes[i] >> 16),
						  (uint8_t)(lanes[i] >> 8),
						  (uint8_t)lanes[i] };

				tly_dequantize_f32(&r, be, 1, s);
				assert_false(isfinite(r));
				if (nonfinite == 2 && i == 1)
					assert_true(isnan(r));
				continue;
			}
			assert_true(llabs(qs) < ((int64_t)1 << 31));
			assert_int_equal((int32_t)lanes[i], qs);
			{
				uint8_t be[4] = { (uint8_t)(lanes[i] >> 24),
						  (uint8_t)(lanes[i] >> 16),
						  (uint8_t)(lanes[i] >> 8),
						  (uint8_t)lanes[i] };

				tly_sparse_decode_block(&r, TLY_DT_F32, be, 1,
							m, s);
			}
			assert_true((double)r == (double)(float)ldexp(
				(double)qs, -s));
			assert_true(fabs((double)r - exact) <=
				    m * ldexp(1, -s - 1) +
				    ldexp(fabs((double)r), -24));
		}
	}
	/* blocks a worker did not send keep p as the residual */
	for (w = 0; w < n; w++)
		for (b = 0; b < NB; b++)
			if (exps[w][b] == TLY_EXP_NONE)
				assert_memory_equal(p[w] + b * B,
						    before[w] + b * B,
						    ref_len(b) * sizeof(float));
}

static void test_rounds(void **state)
{
	static const unsigned int ns[] = { 2, 3, 33, 64 };
	unsigned int j, r;

	(void)state;
	for (j = 0; j < 4; j++)
		for (r = 0; r < 6; r++)
			run_round(ns[j], r % 3 == 0 ? NB / 10 : r * 5,
				  r * 15, 0);
}

static void test_nonfinite(void **state)
{
	(void)state;
	run_round(2, 0, 50, 1);		/* k = 0: still sent */
	run_round(33, 4, 20, 2);
}

/* m senders at the largest magnitude of their exponent: no wrap */
static void test_no_overflow_worst_case(void **state)
{
	uint8_t pay[4 * 4];
	uint32_t lanes[4];
	unsigned int m, w;
	int e;

	(void)state;
	for (m = 1; m <= 64; m++)
		for (e = -148; e <= 128; e += 7) {
			float x[4] = { nextafterf(ldexpf(1, e), 0), 0, 0, 0 };
			int s = tly_quant_shift(e, m);
			struct tly_sparse_acc acc;

			x[1] = -x[0];
			x[2] = cref_float(&seed, e);
			tly_sparse_acc_init(&acc, lanes, 4);
			for (w = 0; w < m; w++) {
				float y[4];

				memcpy(y, x, sizeof(y));
				tly_sparse_encode_block(pay, y, 4, 4, s);
				tly_sparse_acc_add(&acc, w, m, s, pay);
			}
			assert_int_equal((int32_t)lanes[0],
					 (int64_t)m * cref_quant(x[0], s,
								 LIM32));
			assert_int_equal((int32_t)lanes[1],
					 -(int64_t)m * cref_quant(x[0], s,
								  LIM32));
			assert_true((int64_t)m * cref_quant(x[0], s, LIM32) <
				    ((int64_t)1 << 31));
		}
}

/*
 * Error feedback over many rounds, top-10 % blocks: sum of the inputs =
 * sum of what was sent + the residual, per element within the float32
 * rounding of the two additions per round:
 *	|sum g - sum sent - e_R| <= 2^-23 * sum_t (|p_t| + |e_t+1|)
 * and every block is sent now and then (none starves).
 */
static void test_error_feedback(void **state)
{
	static float e[N], g[N], before[N];
	static double gsum[N], sent[N], slack[N];
	uint8_t pay[4 * B];
	uint32_t idx[NB];
	int round, ever[NB] = { 0 };
	size_t b, i;

	(void)state;
	for (round = 0; round < 400; round++) {
		size_t n_sel;

		fill(g, 30);
		for (i = 0; i < N; i++)
			gsum[i] += g[i];
		tly_elem_accumulate(e, g, TLY_DT_F32, N);
		memcpy(before, e, sizeof(e));
		n_sel = tly_sparse_select_topk(idx, e, N, B, NB / 10);
		for (i = 0; i < n_sel; i++) {
			size_t off = idx[i] * B, len = ref_len(idx[i]), j;
			int s = tly_quant_shift(cref_exp(e + off, len), 1);

			ever[idx[i]] = 1;
			tly_sparse_encode_block(pay, e + off, len, B, s);
			for (j = 0; j < len; j++)
				sent[off + j] += ldexp((double)(int32_t)(
					((uint32_t)pay[4 * j] << 24) |
					((uint32_t)pay[4 * j + 1] << 16) |
					((uint32_t)pay[4 * j + 2] << 8) |
					pay[4 * j + 3]), -s);
		}
		for (i = 0; i < N; i++)
			slack[i] += ldexp(fabs((double)before[i]) +
					  fabs((double)e[i]), -23);
	}
	for (i = 0; i < N; i++)
		assert_true(fabs(gsum[i] - sent[i] - e[i]) <= slack[i]);
	for (b = 0; b < NB; b++)
		assert_true(ever[b]);
}

/* a block of float32 subnormals: the shift saturates at 127, what
 * rounds away stays in the residual exactly */
static void test_denormals(void **state)
{
	float p[B], before[B];
	uint8_t pay[4 * B];
	uint32_t idx[1];
	int s;
	size_t i;

	(void)state;
	for (i = 0; i < B; i++)
		p[i] = ldexpf((float)(i + 1), -149 + (int)(i % 20));
	memcpy(before, p, sizeof(p));
	assert_int_equal(tly_sparse_select_topk(idx, p, B, B, 1), 1);
	s = tly_quant_shift(cref_exp(p, B), 2);
	assert_int_equal(s, 127);
	tly_sparse_encode_block(pay, p, B, B, s);
	for (i = 0; i < B; i++) {
		double q = (double)cref_quant(before[i], s, LIM32);

		assert_true(p[i] == before[i] - (float)ldexp(q, -s));
		assert_true((double)p[i] + ldexp(q, -s) == (double)before[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_select),
		cmocka_unit_test(test_exp_word),
		cmocka_unit_test(test_rounds),
		cmocka_unit_test(test_nonfinite),
		cmocka_unit_test(test_no_overflow_worst_case),
		cmocka_unit_test(test_error_feedback),
		cmocka_unit_test(test_denormals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
