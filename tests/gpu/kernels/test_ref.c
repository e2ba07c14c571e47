// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_ref.c - the C references of the GPU kernels (gpu/kernels/ref.c)
 * against what the CPU engine puts on the wire (dataplane/half.h,
 * dataplane/engine/quant.c), bit for bit: every binary16 and bfloat16
 * value, the rounding boundaries around each of them, random bits, and
 * tensors of assorted blocks for the block exponent, quantization (words
 * and their zero padding) and dequantization.  Outputs are poisoned first
 * so a word the reference forgets to write shows up too.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/engine/quant.h"
#include "dataplane/half.h"
#include "gpu/kernels/numerics.h"
#include "gpu/kernels/ref.h"
#include "inputs.h"

#define POISON 0xa5
#define GUARD 8			/* elements past the end that must stay */
#define N_SEEDS 24

static const size_t ks[] = { 1, 64, 256, 363 };
static const unsigned int workers[] = { 1, 2, 3, 64 };
#define N_KS (sizeof(ks) / sizeof(ks[0]))
#define N_WORKERS (sizeof(workers) / sizeof(workers[0]))

static void *poisoned(size_t bytes)
{
	void *p = malloc(bytes);

	assert_non_null(p);
	memset(p, POISON, bytes);
	return p;
}

/* tensor lengths for block size k: edges of a block, then random */
static size_t pick_n(size_t k, unsigned int i, uint64_t *s)
{
	const size_t fixed[] = { 1, k - 1, k, k + 1, 3 * k + 5, 7 * k };

	if (i < sizeof(fixed) / sizeof(fixed[0]))
		return fixed[i] ? fixed[i] : 1;
	return 1 + kin_rand(s) % 6000;
}
#define N_LENGTHS 10

static size_t nblocks_of(size_t n, size_t k)
{
	return (n + k - 1) / k;
}

/* ---- conversions ---- */

static void check_widen_f16(const uint16_t *h, size_t n)
{
	float *got = poisoned((n + GUARD) * sizeof(float));
	size_t i;

	tcu_ref_convert_f16_to_f32(got, h, n);
	for (i = 0; i < n; i++)
		if (kin_bits_of_float(got[i]) !=
		    kin_bits_of_float(half_to_float(h[i])))
			fail_msg("f16 0x%04x: ref 0x%08x, dataplane 0x%08x",
				 h[i], kin_bits_of_float(got[i]),
				 kin_bits_of_float(half_to_float(h[i])));
	for (i = 0; i < GUARD; i++)
		assert_int_equal(kin_bits_of_float(got[n + i]), 0xa5a5a5a5u);
	free(got);
}

static void check_widen_bf16(const uint16_t *h, size_t n)
{
	float *got = poisoned((n + GUARD) * sizeof(float));
	size_t i;

	tcu_ref_convert_bf16_to_f32(got, h, n);
	for (i = 0; i < n; i++)
		if (kin_bits_of_float(got[i]) !=
		    kin_bits_of_float(bf16_to_float(h[i])))
			fail_msg("bf16 0x%04x: ref 0x%08x, dataplane 0x%08x",
				 h[i], kin_bits_of_float(got[i]),
				 kin_bits_of_float(bf16_to_float(h[i])));
	for (i = 0; i < GUARD; i++)
		assert_int_equal(kin_bits_of_float(got[n + i]), 0xa5a5a5a5u);
	free(got);
}

static void check_narrow(const float *x, size_t n)
{
	uint16_t *h = poisoned((n + GUARD) * sizeof(uint16_t));
	uint16_t *b = poisoned((n + GUARD) * sizeof(uint16_t));
	size_t i;

	tcu_ref_convert_f32_to_f16(h, x, n);
	tcu_ref_convert_f32_to_bf16(b, x, n);
	for (i = 0; i < n; i++) {
		if (h[i] != float_to_half(x[i]))
			fail_msg("f32 0x%08x to f16: ref 0x%04x, dataplane 0x%04x",
				 kin_bits_of_float(x[i]), h[i],
				 float_to_half(x[i]));
		if (b[i] != float_to_bf16(x[i]))
			fail_msg("f32 0x%08x to bf16: ref 0x%04x, "
				 "dataplane 0x%04x", kin_bits_of_float(x[i]),
				 b[i], float_to_bf16(x[i]));
	}
	for (i = 0; i < GUARD; i++) {
		assert_int_equal(h[n + i], 0xa5a5);
		assert_int_equal(b[n + i], 0xa5a5);
	}
	free(h);
	free(b);
}

static void test_widen_every_value(void **state)
{
	uint16_t *all = malloc(65536 * sizeof(uint16_t));
	uint32_t i;

	(void)state;
	assert_non_null(all);
	for (i = 0; i < 65536; i++)
		all[i] = (uint16_t)i;
	check_widen_f16(all, 65536);
	check_widen_bf16(all, 65536);
	free(all);
}

static void test_narrow_edges(void **state)
{
	float *x = malloc(kin_n_edge_f32 * sizeof(float));
	size_t i;

	(void)state;
	assert_non_null(x);
	for (i = 0; i < kin_n_edge_f32; i++)
		x[i] = kin_float_of_bits(kin_edge_f32[i]);
	check_narrow(x, kin_n_edge_f32);
	free(x);
}

/*
 * Around every binary16 value v (both signs): v itself, its neighbours in
 * float32, and the midpoint to the next binary16 value (a tie, exact in
 * float32) with the floats next to it; above 65504 the "next value" is
 * 65536, so 65519.99 and 65520 are among them.
 */
static void test_narrow_f16_boundaries(void **state)
{
	const size_t per = 8;
	float *x = malloc(0x7c00 * 2 * per * sizeof(float));
	size_t n = 0;
	uint32_t h, sign;

	(void)state;
	assert_non_null(x);
	for (sign = 0; sign < 2; sign++)
		for (h = 0; h < 0x7c00; h++) {
			uint16_t s = (uint16_t)(sign << 15);
			float v = half_to_float(s | (uint16_t)h);
			float w = h + 1 < 0x7c00 ?
				  half_to_float(s | (uint16_t)(h + 1)) :
				  (sign ? -65536.0f : 65536.0f);
			uint32_t vb = kin_bits_of_float(v);
			uint32_t mb = kin_bits_of_float((v + w) / 2);

			x[n++] = v;
			x[n++] = kin_float_of_bits(vb + 1);
			x[n++] = kin_float_of_bits(vb ? vb - 1 : 0);
			x[n++] = kin_float_of_bits(mb - 2);
			x[n++] = kin_float_of_bits(mb - 1);
			x[n++] = kin_float_of_bits(mb);
			x[n++] = kin_float_of_bits(mb + 1);
			x[n++] = kin_float_of_bits(mb + 2);
		}
	check_narrow(x, n);
	free(x);
}

/* every bfloat16 value with the float32 bits that round to it or tie */
static void test_narrow_bf16_boundaries(void **state)
{
	static const uint32_t low[] = {
		0, 1, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff,
	};
	const size_t per = sizeof(low) / sizeof(low[0]);
	float *x = malloc(65536 * per * sizeof(float));
	size_t n = 0, j;
	uint32_t h;

	(void)state;
	assert_non_null(x);
	for (h = 0; h < 65536; h++)
		for (j = 0; j < per; j++)
			x[n++] = kin_float_of_bits((h << 16) | low[j]);
	check_narrow(x, n);
	free(x);
}

static void test_convert_random_bits(void **state)
{
	const size_t n = 1 << 18;
	float *x = malloc(n * sizeof(float));
	uint16_t *h = malloc(n * sizeof(uint16_t));
	uint64_t seed;
	size_t i;

	(void)state;
	assert_non_null(x);
	assert_non_null(h);
	for (seed = 1; seed <= 8; seed++) {
		uint64_t s = seed;

		for (i = 0; i < n; i++)
			x[i] = seed & 1 ? kin_float_of_bits(kin_rand_bits(&s)) :
					  kin_rand_finite(&s);
		check_narrow(x, n);
		for (i = 0; i < n; i++)
			h[i] = (uint16_t)kin_rand(&s);
		check_widen_f16(h, n);
		check_widen_bf16(h, n);
	}
	free(x);
	free(h);
}

/* ---- block fixed point ---- */

static void test_quant_shift(void **state)
{
	unsigned int w;
	int32_t e;

	(void)state;
	for (w = 1; w <= 300; w++) {
		assert_int_equal(tcu_quant_shift(TCU_EXP_NONE, w),
				 tly_quant_shift(TLY_EXP_NONE, w));
		for (e = -400; e <= 400; e++)
			if (tcu_quant_shift(e, w) != tly_quant_shift(e, w))
				fail_msg("E %d, %u workers: ref %d, "
					 "dataplane %d", e, w,
					 tcu_quant_shift(e, w),
					 tly_quant_shift(e, w));
	}
	assert_int_equal(TCU_EXP_NONE, TLY_EXP_NONE);
	assert_int_equal(TCU_EXP_NONFINITE, TLY_EXP_NONFINITE);
	assert_int_equal(TCU_SHIFT_NONFINITE, TLY_SHIFT_NONFINITE);
}

/* exponents of x[0..n) in blocks of k: the reference, then dataplane's */
static int32_t *check_block_exp(const float *x, size_t n, size_t k)
{
	size_t nb = nblocks_of(n, k), b, i;
	int32_t *exp = poisoned((nb + GUARD) * sizeof(int32_t));

	tcu_ref_block_exp_f32(exp, x, n, k);
	for (b = 0; b < nb; b++) {
		size_t len = n - b * k < k ? n - b * k : k;
		int32_t want = tly_block_exp_f32(x + b * k, len);

		if (exp[b] != want)
			fail_msg("n %zu k %zu block %zu: ref E %d, "
				 "dataplane %d", n, k, b, exp[b], want);
	}
	for (i = 0; i < GUARD; i++)
		assert_int_equal((uint32_t)exp[nb + i], 0xa5a5a5a5u);
	return exp;
}

/* quantize with the reference and with dataplane, block by block */
static uint32_t *check_quantize(const float *x, size_t n, size_t k,
				const int32_t *shift)
{
	size_t nb = nblocks_of(n, k), b, i;
	size_t bytes = nb * k * sizeof(uint32_t);
	uint32_t *got = poisoned(bytes + GUARD * sizeof(uint32_t));
	uint8_t *want = malloc(bytes);

	assert_non_null(want);
	memset(want, 0x5a, bytes);
	tcu_ref_quantize_f32(got, x, n, k, shift);
	for (b = 0; b < nb; b++) {
		size_t len = n - b * k < k ? n - b * k : k;

		tly_quantize_f32(want + b * k * 4, x + b * k, len, k,
				 shift[b]);
	}
	for (i = 0; i < nb * k; i++)
		if (memcmp(&got[i], want + 4 * i, 4))
			fail_msg("n %zu k %zu word %zu (x 0x%08x, shift %d): "
				 "ref %02x%02x%02x%02x, dataplane "
				 "%02x%02x%02x%02x", n, k, i,
				 i < n ? kin_bits_of_float(x[i]) : 0,
				 shift[i / k], ((uint8_t *)&got[i])[0],
				 ((uint8_t *)&got[i])[1],
				 ((uint8_t *)&got[i])[2],
				 ((uint8_t *)&got[i])[3], want[4 * i],
				 want[4 * i + 1], want[4 * i + 2],
				 want[4 * i + 3]);
	for (i = 0; i < GUARD; i++)
		assert_int_equal(got[nb * k + i], 0xa5a5a5a5u);
	free(want);
	return got;
}

static void check_dequantize(const uint32_t *in, size_t n, size_t k,
			     const int32_t *shift)
{
	size_t nb = nblocks_of(n, k), b, i;
	float *got = poisoned((n + GUARD) * sizeof(float));
	float *want = malloc(n * sizeof(float));

	assert_non_null(want);
	memset(want, 0x5a, n * sizeof(float));
	tcu_ref_dequantize_f32(got, in, n, k, shift);
	for (b = 0; b < nb; b++) {
		size_t len = n - b * k < k ? n - b * k : k;

		tly_dequantize_f32(want + b * k,
				   (const uint8_t *)(in + b * k), len,
				   shift[b]);
	}
	for (i = 0; i < n; i++)
		if (kin_bits_of_float(got[i]) != kin_bits_of_float(want[i]))
			fail_msg("n %zu k %zu word %zu (0x%08x, shift %d): "
				 "ref 0x%08x, dataplane 0x%08x", n, k, i,
				 in[i], shift[i / k],
				 kin_bits_of_float(got[i]),
				 kin_bits_of_float(want[i]));
	for (i = 0; i < GUARD; i++)
		assert_int_equal(kin_bits_of_float(got[n + i]), 0xa5a5a5a5u);
	free(got);
	free(want);
}

static void test_blocks(void **state)
{
	uint64_t seed;
	size_t ki;

	(void)state;
	for (seed = 1; seed <= N_SEEDS; seed++)
		for (ki = 0; ki < N_KS; ki++) {
			size_t k = ks[ki];
			uint64_t s = seed * 1000003 + k;
			unsigned int li;

			for (li = 0; li < N_LENGTHS; li++) {
				size_t n = pick_n(k, li, &s);
				unsigned int w = workers[kin_rand(&s) %
							 N_WORKERS];
				size_t nb = nblocks_of(n, k);
				float *x = malloc(n * sizeof(float));
				int32_t *shift = malloc(nb * sizeof(int32_t));
				int32_t *exp;
				uint32_t *q, *sum;

				assert_non_null(x);
				assert_non_null(shift);
				kin_fill_blocks(x, n, k, &s);
				exp = check_block_exp(x, n, k);
				kin_pick_shifts(shift, exp, nb, w, &s);
				q = check_quantize(x, n, k, shift);
				check_dequantize(q, n, k, shift);
				sum = kin_summed_words(q, n, k, shift, w, &s);
				assert_non_null(sum);
				check_dequantize(sum, n, k, shift);
				free(sum);
				free(q);
				free(exp);
				free(shift);
				free(x);
			}
		}
}

/* every edge value at every shift, in blocks of one */
static void test_quantize_edges_every_shift(void **state)
{
	const size_t n = kin_n_edge_f32;
	float *x = malloc(n * sizeof(float));
	int32_t *shift = malloc(n * sizeof(int32_t));
	int s;
	size_t i;

	(void)state;
	assert_non_null(x);
	assert_non_null(shift);
	for (i = 0; i < n; i++)
		x[i] = kin_float_of_bits(kin_edge_f32[i]);
	for (s = -127; s <= 127; s++) {
		uint32_t *q;

		for (i = 0; i < n; i++)
			shift[i] = s;
		q = check_quantize(x, n, 1, shift);
		check_dequantize(q, n, 1, shift);
		free(q);
	}
	free(shift);
	free(x);
}

/* any word at all at any shift (the sum of n workers is any int32) */
static void test_dequantize_random_words(void **state)
{
	const size_t n = 1 << 16, k = 363;
	size_t nb = nblocks_of(n, k), i;
	uint32_t *in = malloc(nb * k * sizeof(uint32_t));
	int32_t *shift = malloc(nb * sizeof(int32_t));
	uint64_t seed;

	(void)state;
	assert_non_null(in);
	assert_non_null(shift);
	for (seed = 1; seed <= N_SEEDS; seed++) {
		uint64_t s = seed;

		for (i = 0; i < nb * k; i++)
			in[i] = kin_rand_bits(&s);
		for (i = 0; i < nb; i++)
			shift[i] = i % 16 == 0 ? TCU_SHIFT_NONFINITE :
				   -104 + (int32_t)(kin_rand(&s) % 232);
		check_dequantize(in, n, k, shift);
	}
	free(shift);
	free(in);
}

/* a count of 0 writes nothing */
/* ---- error feedback against libtally's CPU arithmetic ---- */

static const int ef_types[] = { TCU_F32, TCU_F16, TCU_BF16 };
#define N_EF_TYPES 3
#define EF_N 70001

/* shm/client_ef.c's element access: dataplane/half.h, not numerics.h */
static float model_load(const void *x, int t, size_t i)
{
	if (t == TCU_F16)
		return half_to_float(((const uint16_t *)x)[i]);
	if (t == TCU_BF16)
		return bf16_to_float(((const uint16_t *)x)[i]);
	return ((const float *)x)[i];
}

static void model_store(void *x, int t, size_t i, float v)
{
	if (t == TCU_F16)
		((uint16_t *)x)[i] = float_to_half(v);
	else if (t == TCU_BF16)
		((uint16_t *)x)[i] = float_to_bf16(v);
	else
		((float *)x)[i] = v;
}

static size_t type_bytes(int t)
{
	return t == TCU_F32 ? 4 : 2;
}

/*
 * @n elements of @t at @got against @want bit for bit, except that any
 * NaN matches any NaN: which operand's payload a NaN + NaN keeps is up to
 * the compiler's order of the operands (IEEE leaves it open; the ASan
 * build and the optimised one differ), then @guard bytes past the end
 * the same (both poisoned: nothing written there).
 */
static void expect_values(const char *what, const void *got,
			  const void *want, size_t n, int t, size_t guard)
{
	size_t unit = type_bytes(t), i;

	for (i = 0; i < n; i++) {
		if (isnan(model_load(got, t, i)) &&
		    isnan(model_load(want, t, i)))
			continue;
		if (memcmp((const uint8_t *)got + i * unit,
			   (const uint8_t *)want + i * unit, unit))
			fail_msg("%s: element %zu: %a, want %a", what, i,
				 (double)model_load(got, t, i),
				 (double)model_load(want, t, i));
	}
	assert_memory_equal((const uint8_t *)got + n * unit,
			    (const uint8_t *)want + n * unit, guard);
}

/* e += g, p = e in p's type: client_ef_prepare()'s loop, every pair of
 * types, bit for bit but NaN payloads; nothing past the end */
static void test_ef_accumulate(void **state)
{
	uint64_t s = 7;

	(void)state;
	for (int a = 0; a < N_EF_TYPES; a++)
		for (int b = 0; b < N_EF_TYPES; b++) {
			int pt = ef_types[a], gt = ef_types[b];
			size_t pb = type_bytes(pt);
			float *e = malloc(EF_N * 4), *e_want = malloc(EF_N * 4);
			void *g = malloc(EF_N * type_bytes(gt));
			uint8_t *p = poisoned((EF_N + GUARD) * pb);
			uint8_t *p_want = poisoned((EF_N + GUARD) * pb);

			assert_true(e && e_want && g);
			kin_fill_typed(e, TCU_F32, EF_N, &s);
			kin_fill_typed(g, gt, EF_N, &s);
			memcpy(e_want, e, EF_N * 4);
			for (size_t i = 0; i < EF_N; i++) {
				e_want[i] += model_load(g, gt, i);
				model_store(p_want, pt, i, e_want[i]);
			}
			tcu_ref_ef_accumulate(p, pt, e, g, gt, EF_N);
			expect_values("e", e, e_want, EF_N, TCU_F32, 0);
			expect_values("p", p, p_want, EF_N, pt, GUARD * pb);
			free(e);
			free(e_want);
			free(g);
			free(p);
			free(p_want);
		}
}

/* e := e - sent / L, 0 where sent is inf or NaN: client_ef_finish()'s
 * loop, for each type of sent and several L */
static void test_ef_feedback(void **state)
{
	static const float inv_l[] = { 1.0f, 0.5f, 1.0f / 3, 1.0f / 7 };
	uint64_t s = 11;

	(void)state;
	for (int a = 0; a < N_EF_TYPES; a++)
		for (size_t l = 0; l < 4; l++) {
			int st = ef_types[a];
			float *e = poisoned((EF_N + GUARD) * 4);
			float *e_want = poisoned((EF_N + GUARD) * 4);
			void *sent = malloc(EF_N * type_bytes(st));
			size_t zeros = 0;

			assert_non_null(sent);
			kin_fill_typed(e, TCU_F32, EF_N, &s);
			kin_fill_typed(sent, st, EF_N, &s);
			memcpy(e_want, e, EF_N * 4);
			for (size_t i = 0; i < EF_N; i++) {
				float v = model_load(sent, st, i);

				e_want[i] = isfinite(v) ?
					    e_want[i] - v * inv_l[l] : 0.0f;
				zeros += !isfinite(v);
			}
			assert_true(zeros > 0 && zeros < EF_N / 16);
			tcu_ref_ef_feedback(e, sent, st, inv_l[l], EF_N);
			expect_values("e", e, e_want, EF_N, TCU_F32, GUARD * 4);
			free(e);
			free(e_want);
			free(sent);
		}
}

static void test_empty(void **state)
{
	uint32_t words[4];
	float f[4];
	uint16_t h[4];
	int32_t e[4], sh[4] = { 0, 0, 0, 0 };
	size_t i;

	(void)state;
	memset(words, POISON, sizeof(words));
	memset(f, POISON, sizeof(f));
	memset(h, POISON, sizeof(h));
	memset(e, POISON, sizeof(e));
	tcu_ref_convert_f32_to_f16(h, f, 0);
	tcu_ref_convert_f32_to_bf16(h, f, 0);
	tcu_ref_convert_f16_to_f32(f, h, 0);
	tcu_ref_convert_bf16_to_f32(f, h, 0);
	tcu_ref_block_exp_f32(e, f, 0, 64);
	tcu_ref_quantize_f32(words, f, 0, 64, sh);
	tcu_ref_dequantize_f32(f, words, 0, 64, sh);
	tcu_ref_ef_accumulate(h, TCU_F16, f, h, TCU_BF16, 0);
	tcu_ref_ef_feedback(f, h, TCU_F16, 0.5f, 0);
	for (i = 0; i < 4; i++) {
		assert_int_equal(words[i], 0xa5a5a5a5u);
		assert_int_equal(kin_bits_of_float(f[i]), 0xa5a5a5a5u);
		assert_int_equal(h[i], 0xa5a5);
		assert_int_equal((uint32_t)e[i], 0xa5a5a5a5u);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_widen_every_value),
		cmocka_unit_test(test_narrow_edges),
		cmocka_unit_test(test_narrow_f16_boundaries),
		cmocka_unit_test(test_narrow_bf16_boundaries),
		cmocka_unit_test(test_convert_random_bits),
		cmocka_unit_test(test_quant_shift),
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_quantize_edges_every_shift),
		cmocka_unit_test(test_dequantize_random_words),
		cmocka_unit_test(test_ef_accumulate),
		cmocka_unit_test(test_ef_feedback),
		cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
