// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_quant_guarantee.c - the no-overflow guarantee of block fixed point
 * as docs/protocol.md section 2 states it: with
 *	shift = min(30 - E - ceil(log2 n), 127)
 * every |q| is at most 2^30 / n, so n times the largest |q| of a block
 * stays below 2^30 (and the sum of n contributions cannot reach it).
 *
 * Checked for every worker count up to TLY_MAX_WORKERS and a few beyond
 * (most of them not powers of two, where ceil and floor of log2 n
 * differ), over every exponent a finite float block can have, at the
 * worst case: every worker holds the largest float below 2^E.  The shift
 * must also not be needlessly small: n times the largest |q| stays above
 * 2^29, so a shift that is one too small (ceil(log2 n) + 1) fails too.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "dataplane/engine/quant.h"
#include "dataplane/engine/wire.h"

/* finite blocks: max|x| < 2^E for E from the smallest subnormal up */
#define E_MIN (-148)
#define E_MAX 128

static int32_t get_be(const uint8_t *p, size_t i)
{
	p += 4 * i;
	return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
			 ((uint32_t)p[2] << 8) | p[3]);
}

/* the largest |q| of a block whose largest |x| is just below 2^e */
static int64_t worst_q(int e, int shift)
{
	float x[2];
	uint8_t q[4 * TLY_K_MIN];
	int64_t a, b;

	x[0] = nextafterf(ldexpf(1.0f, e), 0.0f);	/* e = 128: FLT_MAX */
	x[1] = -x[0];
	assert_int_equal(tly_block_exp_f32(x, 2), e);
	tly_quantize_f32(q, x, 2, TLY_K_MIN, shift);
	a = llabs(get_be(q, 0));
	b = llabs(get_be(q, 1));
	return a > b ? a : b;
}

static void check_n(unsigned int n)
{
	int e;

	for (e = E_MIN; e <= E_MAX; e++) {
		int s = tly_quant_shift(e, n);
		int64_t q = worst_q(e, s);

		if ((int64_t)n * q >= (1ll << 30) ||
		    (s < TLY_SHIFT_MAX && (int64_t)n * q <= (1ll << 29)))
			fail_msg("n = %u, E = %d: shift %d gives |q| = %lld, "
				 "n * |q| = %lld (want in (2^29, 2^30))", n, e,
				 s, (long long)q, (long long)n * q);
	}
}

static void test_every_worker_count(void **state)
{
	unsigned int n;

	(void)state;
	for (n = 1; n <= TLY_MAX_WORKERS; n++)
		check_n(n);
}

/* beyond the engine's limit the formula still holds */
static void test_large_counts(void **state)
{
	static const unsigned int ns[] = { 65, 100, 127, 129, 255, 257,
					   1000, 1023, 1025, 4097, 100000 };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		check_n(ns[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_worker_count),
		cmocka_unit_test(test_large_counts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
