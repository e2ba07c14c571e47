// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_reduce.c - unit tests of the local reduction kernels
 * (dataplane/reduce.c), the half/bfloat16 conversions (dataplane/half.h)
 * the reduction thread pool (dataplane/reduce_pool.c) and its placement
 * on CPUs and a NUMA node (dataplane/placement.c).
 *
 * Every expected value comes from a scalar reference written here,
 * independently of the code under test, following the numerics promised
 * in reduce.h:
 * - float32: float32 sum in input order;
 * - float16 / bfloat16: each input widened to float32, float32 sum in
 *   input order, one rounding to the narrow type (nearest, ties to even).
 *   The float16 reference uses the compiler's _Float16 conversions, the
 *   bfloat16 one a rounding by comparing distances in double;
 * - int32: SUM wraps modulo 2^32, AVG is the exact 64-bit sum divided
 *   with truncation toward zero;
 * - AVG of floating types: the float32 sum times (1.0f / divisor), the
 *   product rounded to float32, then narrowed.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "dataplane/half.h"
#include "dataplane/placement.h"
#include "dataplane/reduce.h"
#include "dataplane/reduce_pool.h"

#define MAX_IN 5
#define MAX_OUT 8

/* ---- deterministic random numbers (xorshift64*) ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t rng_u32(void)
{
	return (uint32_t)(rng_next() >> 32);
}

/* A float in [-1000, 1000) with a random fraction: sums round a lot. */
static float rng_float(void)
{
	return (float)((double)(rng_u32() >> 8) / (1 << 24) * 2000.0 - 1000.0);
}

/* ---- reference conversions, independent of half.h ---- */

static uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float float_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static float ref_half_to_float(uint16_t h)
{
	_Float16 x;

	memcpy(&x, &h, 2);
	return (float)x;
}

static uint16_t ref_float_to_half(float f)
{
	_Float16 x = (_Float16)f;
	uint16_t h;

	memcpy(&h, &x, 2);
	return h;
}

static float ref_bf16_to_float(uint16_t b)
{
	/* sign * 2^(e - 127) * 1.m, computed in double */
	int sign = b >> 15, e = (b >> 7) & 0xff, m = b & 0x7f;
	double v;

	if (e == 0xff)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, -126 - 7);
	else
		v = ldexp(128 + m, e - 127 - 7);
	return (float)(sign ? -v : v);
}

/* Value of the magnitude pattern @m (no sign) with an unbounded exponent:
 * 0x7f80 stands for 2^128, the first value past the largest finite. */
static double bf16_mag_value(uint32_t m)
{
	if (m == 0x7f80)
		return ldexp(1.0, 128);
	return ref_bf16_to_float((uint16_t)m);
}

/* Round to nearest bfloat16, ties to even, by comparing distances. */
static uint16_t ref_float_to_bf16(float f)
{
	uint32_t u = bits_of(f);
	uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
	uint32_t lo = mag >> 16, hi = lo + 1;
	double x = fabs((double)f), dlo, dhi;

	if (isnan(f))
		return 0x7fc0 | (uint16_t)(sign >> 16);
	if (isinf(f) || (mag & 0xffff) == 0)
		return (uint16_t)((sign | mag) >> 16);
	dlo = x - bf16_mag_value(lo);
	dhi = bf16_mag_value(hi) - x;
	if (dhi < dlo || (dhi == dlo && (hi & 1) == 0))
		lo = hi;
	return (uint16_t)((sign >> 16) | lo);
}

static bool half_is_nan(uint16_t h)
{
	return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static bool bf16_is_nan(uint16_t b)
{
	return (b & 0x7f80) == 0x7f80 && (b & 0x7f);
}

/* ---- reference reductions ---- */

static int esize(enum tally_dtype dt)
{
	return dt == TALLY_FLOAT16 || dt == TALLY_BFLOAT16 ? 2 : 4;
}

/* Element @i of the reduction of @in, written into @dst (one element). */
static void ref_reduce_elem(enum tally_dtype dt, enum tally_op op,
			    const void *const *in, unsigned int n_in,
			    size_t i, unsigned int divisor, void *dst)
{
	if (dt == TALLY_INT32) {
		if (op == TALLY_SUM) {
			uint32_t s = 0;

			for (unsigned int k = 0; k < n_in; k++)
				s += ((const uint32_t *)in[k])[i];
			memcpy(dst, &s, 4);
		} else {
			int64_t s = 0, q;

			for (unsigned int k = 0; k < n_in; k++)
				s += ((const int32_t *)in[k])[i];
			/* truncate toward zero, spelled out */
			q = (int64_t)((uint64_t)llabs(s) / divisor);
			if (s < 0)
				q = -q;
			int32_t r = (int32_t)q;

			memcpy(dst, &r, 4);
		}
		return;
	}

	float acc = 0.0f;

	for (unsigned int k = 0; k < n_in; k++) {
		float x;

		if (dt == TALLY_FLOAT32)
			x = ((const float *)in[k])[i];
		else if (dt == TALLY_FLOAT16)
			x = ref_half_to_float(((const uint16_t *)in[k])[i]);
		else
			x = ref_bf16_to_float(((const uint16_t *)in[k])[i]);
		acc = k == 0 ? x : acc + x;
	}
	if (op == TALLY_AVG)
		acc = acc * (1.0f / (float)divisor);
	if (dt == TALLY_FLOAT32) {
		memcpy(dst, &acc, 4);
	} else {
		uint16_t h = dt == TALLY_FLOAT16 ? ref_float_to_half(acc) :
						   ref_float_to_bf16(acc);

		memcpy(dst, &h, 2);
	}
}

/* Compare element @i of @got with @want: bit-exact, except that any NaN
 * matches any NaN of the type. */
static bool elem_equal(enum tally_dtype dt, const void *got,
		       const void *want, size_t i)
{
	if (dt == TALLY_FLOAT16 || dt == TALLY_BFLOAT16) {
		uint16_t g = ((const uint16_t *)got)[i];
		uint16_t w = ((const uint16_t *)want)[i];
		bool (*isn)(uint16_t) = dt == TALLY_FLOAT16 ? half_is_nan :
							      bf16_is_nan;

		return g == w || (isn(g) && isn(w));
	}
	uint32_t g = ((const uint32_t *)got)[i];
	uint32_t w = ((const uint32_t *)want)[i];

	if (dt == TALLY_FLOAT32)
		return g == w || (isnan(float_of(g)) && isnan(float_of(w)));
	return g == w;
}

static void assert_buffer_matches(enum tally_dtype dt, const void *got,
				  const void *want, size_t count,
				  const char *what)
{
	for (size_t i = 0; i < count; i++) {
		if (!elem_equal(dt, got, want, i)) {
			uint32_t g = 0, w = 0;

			memcpy(&g, (const char *)got + i * esize(dt),
			       (size_t)esize(dt));
			memcpy(&w, (const char *)want + i * esize(dt),
			       (size_t)esize(dt));
			fail_msg("%s: dtype %d element %zu of %zu: got 0x%x, "
				 "want 0x%x", what, dt, i, count, g, w);
		}
	}
}

/* Random data for @dt: floats with rounding in every sum; halves from
 * random bit patterns over the whole range (incl. subnormals, inf and
 * NaN) one time in four; int32 near the wrap-around point. */
static void fill_random(enum tally_dtype dt, void *buf, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		uint32_t r = rng_u32();

		switch (dt) {
		case TALLY_FLOAT32:
			((float *)buf)[i] = rng_float();
			break;
		case TALLY_FLOAT16:
			((uint16_t *)buf)[i] = (r & 3) == 0 ?
				(uint16_t)(r >> 16) :
				ref_float_to_half(rng_float() / 16);
			break;
		case TALLY_BFLOAT16:
			((uint16_t *)buf)[i] = (r & 3) == 0 ?
				(uint16_t)(r >> 16) :
				ref_float_to_bf16(rng_float());
			break;
		default:
			((uint32_t *)buf)[i] = (r & 1) ?
				r : (uint32_t)(int32_t)(r % 2001) - 1000;
			break;
		}
	}
}

/* ---- conversions ---- */

static void test_half_roundtrip_all_patterns(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = half_to_float((uint16_t)h);
		float r = ref_half_to_float((uint16_t)h);
		uint16_t back = float_to_half(f);

		if (half_is_nan((uint16_t)h)) {
			assert_true(isnan(f));
			assert_true(half_is_nan(back));
			assert_int_equal(back & 0x8000, h & 0x8000);
			continue;
		}
		/* exact widening, signed zeros and infinities included */
		if (bits_of(f) != bits_of(r))
			fail_msg("half_to_float(0x%04x) = %a, want %a", h,
				 (double)f, (double)r);
		if (back != h)
			fail_msg("half 0x%04x -> %a -> 0x%04x", h, (double)f,
				 back);
	}
}

static void check_float_to_half(float f)
{
	uint16_t got = float_to_half(f), want = ref_float_to_half(f);

	if (isnan(f)) {
		if (!half_is_nan(got) || (got & 0x8000) != (want & 0x8000))
			fail_msg("float_to_half(NaN 0x%08x) = 0x%04x",
				 bits_of(f), got);
		return;
	}
	if (got != want)
		fail_msg("float_to_half(%a = 0x%08x) = 0x%04x, want 0x%04x",
			 (double)f, bits_of(f), got, want);
}

static void test_float_to_half_random_bits(void **state)
{
	(void)state;
	for (int i = 0; i < 1000000; i++)
		check_float_to_half(float_of(rng_u32()));
}

static void test_float_to_half_half_range(void **state)
{
	(void)state;
	/* exponents from far below the subnormals to past the overflow */
	for (int i = 0; i < 1000000; i++) {
		uint32_t r = rng_u32();
		uint32_t exp = 95 + r % 50;	/* 2^-32 .. 2^17 */

		check_float_to_half(float_of((r & 0x80000000u) | exp << 23 |
					     (rng_u32() & 0x7fffffu)));
	}
}

/* Exact ties and their neighbours: the midpoint between every two
 * adjacent finite halves (and past the largest one), as floats. */
static void test_float_to_half_ties_to_even(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 0x7c00; h++) {
		double lo = ref_half_to_float((uint16_t)h);
		double hi = h + 1 < 0x7c00 ? ref_half_to_float((uint16_t)(h + 1))
					   : 65536.0;
		float mid = (float)((lo + hi) / 2);	/* exact in float */

		assert_true((double)mid == (lo + hi) / 2);
		for (int s = 0; s < 2; s++) {
			float m = s ? -mid : mid;

			check_float_to_half(m);
			check_float_to_half(nextafterf(m, 0.0f));
			check_float_to_half(nextafterf(m, s ? -INFINITY :
							      INFINITY));
		}
		/* the tie goes to the even one */
		assert_int_equal(float_to_half(mid) & 1, 0);
	}
}

static void test_float_to_half_specials(void **state)
{
	static const float vals[] = {
		0.0f, -0.0f, INFINITY, -INFINITY, 65504.0f, -65504.0f,
		65519.99f, 65520.0f, 65536.0f, 1e10f, -1e10f, 3.4e38f,
		0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f,
		0x1p-26f, 1e-30f, 0x1p-149f, -0x1p-149f, 0x1.ffep-15f,
		0x1.ffcp-15f, 0x1.fffp-15f, 1.0f, 0x1.002p0f, 0x1.006p0f,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		check_float_to_half(vals[i]);
	check_float_to_half(NAN);
	check_float_to_half(-NAN);
	check_float_to_half(float_of(0x7f800001u));	/* signalling */
	check_float_to_half(float_of(0xffa00000u));
	assert_int_equal(float_to_half(65520.0f), 0x7c00);
	assert_int_equal(float_to_half(-0.0f), 0x8000);
	assert_int_equal(float_to_half(0x1p-24f), 0x0001);
	assert_int_equal(float_to_half(0x1p-25f), 0x0000);	/* tie to 0 */
	assert_int_equal(float_to_half(0x1.8p-24f), 0x0002);	/* tie to 2 */
}

static void check_float_to_bf16(float f)
{
	uint16_t got = float_to_bf16(f), want = ref_float_to_bf16(f);

	if (isnan(f)) {
		if (!bf16_is_nan(got) || (got & 0x8000) != (want & 0x8000))
			fail_msg("float_to_bf16(NaN 0x%08x) = 0x%04x",
				 bits_of(f), got);
		return;
	}
	if (got != want)
		fail_msg("float_to_bf16(%a = 0x%08x) = 0x%04x, want 0x%04x",
			 (double)f, bits_of(f), got, want);
}

static void test_bf16_to_float_all_patterns(void **state)
{
	(void)state;
	for (uint32_t b = 0; b < 65536; b++) {
		float f = bf16_to_float((uint16_t)b);

		if (bf16_is_nan((uint16_t)b)) {
			assert_true(isnan(f));
			/* NaN stays NaN, even a signalling one */
			assert_true(bf16_is_nan(float_to_bf16(f)));
			continue;
		}
		if (bits_of(f) != bits_of(ref_bf16_to_float((uint16_t)b)))
			fail_msg("bf16_to_float(0x%04x) = %a", b, (double)f);
		assert_int_equal(float_to_bf16(f), b);
	}
}

static void test_float_to_bf16_random(void **state)
{
	(void)state;
	for (int i = 0; i < 1000000; i++)
		check_float_to_bf16(float_of(rng_u32()));
}

static void test_float_to_bf16_ties_to_even(void **state)
{
	(void)state;
	for (uint32_t b = 0; b < 0x7f80; b++) {
		uint32_t mid = b << 16 | 0x8000u;

		for (uint32_t s = 0; s < 2; s++) {
			uint32_t sg = s << 31;

			check_float_to_bf16(float_of(sg | mid));
			check_float_to_bf16(float_of(sg | (mid - 1)));
			check_float_to_bf16(float_of(sg | (mid + 1)));
		}
		assert_int_equal(float_to_bf16(float_of(mid)) & 1, 0);
	}
	/* past the largest finite: ties and above go to infinity */
	assert_int_equal(float_to_bf16(float_of(0x7f7f8000u)), 0x7f80);
	assert_int_equal(float_to_bf16(float_of(0x7f7f7fffu)), 0x7f7f);
	assert_int_equal(float_to_bf16(float_of(0xff7fffffu)), 0xff80);
	assert_int_equal(float_to_bf16(INFINITY), 0x7f80);
	assert_int_equal(float_to_bf16(-INFINITY), 0xff80);
	assert_int_equal(float_to_bf16(-0.0f), 0x8000);
	check_float_to_bf16(float_of(0x7f800001u));
	check_float_to_bf16(float_of(0xffffffffu));
	check_float_to_bf16(float_of(0x7fff0001u));
}

/* ---- reduce_buffers against the reference ---- */

static const size_t counts[] = {
	1, 2, 7, 4095, 4096, 4097, 3 * 4096 + 5,
};

static const char *dt_name(enum tally_dtype dt)
{
	static const char *const names[] = { "f32", "f16", "bf16", "i32" };

	return names[dt];
}

/*
 * Run one reduction and check every output.  @in_place: out[0] is in[0]
 * (and out[1] is in[1] when both exist); @n_out outputs in all, the
 * others separate buffers.
 */
static void check_reduce(enum tally_dtype dt, enum tally_op op,
			 unsigned int n_in, unsigned int n_out, size_t count,
			 bool in_place, unsigned int divisor)
{
	size_t bytes = count * (size_t)esize(dt);
	void *in_buf[MAX_IN], *out_buf[MAX_OUT];
	const void *in[MAX_IN], *ref_in[MAX_IN];
	void *out[MAX_OUT];
	unsigned int n_aliased = in_place ? (n_in < 2 ? 1 : 2) : 0;
	char *want = malloc(bytes);
	char what[128];

	assert_non_null(want);
	if (n_aliased > n_out)
		n_aliased = n_out;
	for (unsigned int k = 0; k < n_in; k++) {
		in_buf[k] = malloc(bytes);
		assert_non_null(in_buf[k]);
		fill_random(dt, in_buf[k], count);
		in[k] = in_buf[k];
	}
	/* the reference reads pristine copies: in-place runs overwrite */
	for (unsigned int k = 0; k < n_in; k++) {
		void *copy = malloc(bytes);

		assert_non_null(copy);
		memcpy(copy, in_buf[k], bytes);
		ref_in[k] = copy;
	}
	for (size_t i = 0; i < count; i++)
		ref_reduce_elem(dt, op, ref_in, n_in, i, divisor,
				want + i * (size_t)esize(dt));
	for (unsigned int j = 0; j < n_out; j++) {
		if (j < n_aliased) {
			out_buf[j] = NULL;
			out[j] = in_buf[j];
		} else {
			out_buf[j] = malloc(bytes);
			assert_non_null(out_buf[j]);
			memset(out_buf[j], 0xee, bytes);
			out[j] = out_buf[j];
		}
	}

	assert_int_equal(reduce_buffers(dt, op, in, n_in, out, n_out, count,
					divisor), 0);

	for (unsigned int j = 0; j < n_out; j++) {
		snprintf(what, sizeof(what),
			 "%s %s n_in %u out %u/%u count %zu%s div %u",
			 dt_name(dt), op == TALLY_SUM ? "sum" : "avg", n_in, j,
			 n_out, count, j < n_aliased ? " in-place" : "",
			 divisor);
		assert_buffer_matches(dt, out[j], want, count, what);
	}
	/* inputs that are not outputs are left alone */
	for (unsigned int k = n_aliased; k < n_in; k++)
		assert_memory_equal(in_buf[k], ref_in[k], bytes);

	for (unsigned int k = 0; k < n_in; k++) {
		free(in_buf[k]);
		free((void *)ref_in[k]);
	}
	for (unsigned int j = 0; j < n_out; j++)
		free(out_buf[j]);
	free(want);
}

static void check_all_shapes(enum tally_dtype dt, enum tally_op op)
{
	for (unsigned int n_in = 1; n_in <= MAX_IN; n_in++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			size_t count = counts[c];

			check_reduce(dt, op, n_in, 1, count, false, n_in);
			check_reduce(dt, op, n_in, n_in, count, true, n_in);
			/* more outputs than inputs */
			check_reduce(dt, op, n_in, n_in + 2, count, true,
				     n_in);
			check_reduce(dt, op, n_in, n_in + 3, count, false,
				     n_in);
		}
	}
	/* AVG divides by the divisor given, not by n_in */
	if (op == TALLY_AVG) {
		check_reduce(dt, op, 2, 1, 4097, false, 3);
		check_reduce(dt, op, 3, 1, 4097, false, 7);
		check_reduce(dt, op, 1, 1, 100, false, 1);
		check_reduce(dt, op, 4, 2, 100, true, 64);
	}
}

static void test_reduce_f32_sum(void **state)
{
	(void)state;
	check_all_shapes(TALLY_FLOAT32, TALLY_SUM);
}

static void test_reduce_f32_avg(void **state)
{
	(void)state;
	check_all_shapes(TALLY_FLOAT32, TALLY_AVG);
}

static void test_reduce_f16_sum(void **state)
{
	(void)state;
	check_all_shapes(TALLY_FLOAT16, TALLY_SUM);
}

static void test_reduce_f16_avg(void **state)
{
	(void)state;
	check_all_shapes(TALLY_FLOAT16, TALLY_AVG);
}

static void test_reduce_bf16_sum(void **state)
{
	(void)state;
	check_all_shapes(TALLY_BFLOAT16, TALLY_SUM);
}

static void test_reduce_bf16_avg(void **state)
{
	(void)state;
	check_all_shapes(TALLY_BFLOAT16, TALLY_AVG);
}

static void test_reduce_i32_sum(void **state)
{
	(void)state;
	check_all_shapes(TALLY_INT32, TALLY_SUM);
}

static void test_reduce_i32_avg(void **state)
{
	(void)state;
	check_all_shapes(TALLY_INT32, TALLY_AVG);
}

/* Hand-made cases that state the numerics directly. */
static void test_reduce_i32_sum_wraps(void **state)
{
	int32_t a[3] = { INT32_MAX, INT32_MIN, -1 };
	int32_t b[3] = { 1, -1, INT32_MIN };
	int32_t o[3];
	const void *in[2] = { a, b };
	void *out[1] = { o };

	(void)state;
	assert_int_equal(reduce_buffers(TALLY_INT32, TALLY_SUM, in, 2, out, 1,
					3, 0), 0);
	assert_int_equal(o[0], INT32_MIN);
	assert_int_equal(o[1], INT32_MAX);
	assert_int_equal(o[2], INT32_MAX);
}

static void test_reduce_i32_avg_truncates_toward_zero(void **state)
{
	int32_t a[6] = { -7, 7, -1, INT32_MAX, INT32_MIN, -5 };
	int32_t b[6] = { 0, 0, 0, INT32_MAX, INT32_MIN, 0 };
	int32_t o[6];
	const void *in[2] = { a, b };
	void *out[1] = { o };

	(void)state;
	/* divisor 2: sums -7, 7, -1, 2^32 - 2, -2^32, -5 */
	assert_int_equal(reduce_buffers(TALLY_INT32, TALLY_AVG, in, 2, out, 1,
					6, 2), 0);
	assert_int_equal(o[0], -3);		/* not -4 */
	assert_int_equal(o[1], 3);
	assert_int_equal(o[2], 0);		/* not -1 */
	assert_int_equal(o[3], INT32_MAX);	/* exact in 64 bits */
	assert_int_equal(o[4], INT32_MIN);
	assert_int_equal(o[5], -2);
}

static void test_reduce_f32_avg_multiplies_by_reciprocal(void **state)
{
	/* 1/3 is not exact: x * (1/3) and x / 3 differ for some x; the
	 * kernel promises the former */
	float a[64], o[64];
	const void *in[1] = { a };
	void *out[1] = { o };
	int differ = 0;

	(void)state;
	for (int i = 0; i < 64; i++)
		a[i] = (float)(i + 1) * 1.1f;
	assert_int_equal(reduce_buffers(TALLY_FLOAT32, TALLY_AVG, in, 1, out,
					1, 64, 3), 0);
	for (int i = 0; i < 64; i++) {
		float want = a[i] * (1.0f / 3.0f);

		assert_int_equal(bits_of(o[i]), bits_of(want));
		differ += bits_of(a[i] / 3.0f) != bits_of(want);
	}
	assert_true(differ > 0);	/* the test can tell the two apart */
}

/* One input in place (a host of one member): nothing is written, so a
 * read-only buffer passes, for every dtype and both ops (AVG of one) */
static void test_reduce_one_in_place_writes_nothing(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), count = page;
	uint32_t *buf = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_true(buf != MAP_FAILED);
	for (size_t i = 0; i < count; i++)
		buf[i] = (uint32_t)(i * 2654435761u);
	assert_int_equal(mprotect(buf, 4 * page, PROT_READ), 0);
	for (int dt = TALLY_FLOAT32; dt <= TALLY_INT32; dt++)
		for (int op = TALLY_SUM; op < TALLY_OP_MAX; op++) {
			const void *in[1] = { buf };
			void *out[1] = { buf };

			assert_int_equal(reduce_buffers((enum tally_dtype)dt,
					 (enum tally_op)op, in, 1, out, 1,
					 count, 1), 0);
		}
	for (size_t i = 0; i < count; i++)
		assert_int_equal(buf[i], (uint32_t)(i * 2654435761u));
	munmap(buf, 4 * page);
}

/* One input to other outputs (and to itself): each a copy, bit for bit,
 * NaN payloads and subnormals included */
static void test_reduce_one_input_copies_bits(void **state)
{
	uint16_t h[5] = { 0x7c01, 0xfc02, 0x7f81, 0x0001, 0x3c00 };
	uint16_t o1[5], o2[5];
	const void *in[1] = { h };
	void *out[3] = { o1, h, o2 };

	(void)state;
	for (int dt = TALLY_FLOAT16; dt <= TALLY_BFLOAT16; dt++) {
		memset(o1, 0xee, sizeof(o1));
		memset(o2, 0xee, sizeof(o2));
		assert_int_equal(reduce_buffers((enum tally_dtype)dt, TALLY_SUM,
						in, 1, out, 3, 5, 1), 0);
		assert_memory_equal(o1, h, sizeof(h));
		assert_memory_equal(o2, h, sizeof(h));
	}
}

static void test_reduce_f16_rounds_once(void **state)
{
	/* 1 + 2^-11 + 2^-11: pairwise half sums would round 1 + 2^-11 to 1
	 * (tie to even) twice; one float sum rounded once gives 1 + 2^-10 */
	uint16_t a = ref_float_to_half(1.0f);
	uint16_t b = ref_float_to_half(0x1p-11f);
	uint16_t o;
	const void *in[3] = { &a, &b, &b };
	void *out[1] = { &o };

	(void)state;
	assert_int_equal(reduce_buffers(TALLY_FLOAT16, TALLY_SUM, in, 3, out,
					1, 1, 0), 0);
	assert_int_equal(o, ref_float_to_half(1.0f + 0x1p-10f));
	assert_int_not_equal(o, a);
}

static void test_reduce_zero_count(void **state)
{
	float a[1] = { 1.0f }, o[1] = { 5.0f };
	const void *in[1] = { a };
	void *out[1] = { o };

	(void)state;
	assert_int_equal(reduce_buffers(TALLY_FLOAT32, TALLY_SUM, in, 1, out,
					1, 0, 0), 0);
	assert_true(o[0] == 5.0f);
}

static void test_reduce_prepare_rejects_bad_args(void **state)
{
	float a[4] = { 0 }, o[4];
	const void *in[1] = { a };
	void *out[1] = { o };
	struct reduce_args ra;

	(void)state;
	assert_int_equal(reduce_prepare(&ra, TALLY_DTYPE_MAX, TALLY_SUM, in,
					1, out, 1, 4, 1), -TALLY_EINVAL);
	assert_int_equal(reduce_prepare(&ra, (enum tally_dtype)-1, TALLY_SUM,
					in, 1, out, 1, 4, 1), -TALLY_EINVAL);
	assert_int_equal(reduce_prepare(&ra, TALLY_FLOAT32, TALLY_OP_MAX, in,
					1, out, 1, 4, 1), -TALLY_EINVAL);
	assert_int_equal(reduce_prepare(&ra, TALLY_FLOAT32, (enum tally_op)-1,
					in, 1, out, 1, 4, 1), -TALLY_EINVAL);
	for (int dt = 0; dt < TALLY_DTYPE_MAX; dt++)
		assert_int_equal(reduce_prepare(&ra, (enum tally_dtype)dt,
						TALLY_AVG, in, 1, out, 1, 4, 0),
				 -TALLY_EINVAL);
	assert_int_equal(reduce_prepare(&ra, TALLY_FLOAT32, TALLY_SUM, in, 0,
					out, 1, 4, 1), -TALLY_EINVAL);
	assert_int_equal(reduce_buffers(TALLY_INT32, TALLY_AVG, in, 1, out, 1,
					4, 0), -TALLY_EINVAL);

	/* divisor is ignored for SUM */
	assert_int_equal(reduce_prepare(&ra, TALLY_FLOAT32, TALLY_SUM, in, 1,
					out, 1, 4, 0), 0);
	assert_true(ra.scale == 1.0f);
	assert_false(ra.stream);
	assert_int_equal(reduce_prepare(&ra, TALLY_BFLOAT16, TALLY_AVG, in, 1,
					out, 1, 4, 4), 0);
	assert_true(ra.scale == 0.25f);
	assert_int_equal(ra.count, 4);
	assert_int_equal(ra.n_in, 1);
	assert_int_equal(ra.n_out, 1);
	assert_int_equal(reduce_prepare(&ra, TALLY_FLOAT16, TALLY_SUM, in, 1,
					out, 1,
					REDUCE_STREAM_MIN_BYTES / 2, 1), 0);
	assert_true(ra.stream);
	assert_int_equal(reduce_prepare(&ra, TALLY_FLOAT16, TALLY_SUM, in, 1,
					out, 1,
					REDUCE_STREAM_MIN_BYTES / 2 - 1, 1), 0);
	assert_false(ra.stream);
}

/* Ranges in any split (block-aligned or not) give the whole result. */
static void test_reduce_range_pieces(void **state)
{
	const size_t count = 5 * REDUCE_BLOCK_ELEMS + 123;
	static const size_t cuts[] = { 0, 1, 4096, 4100, 8192, 12000,
				       5 * 4096 + 100, 5 * 4096 + 123 };
	float *a = malloc(count * 4), *b = malloc(count * 4);
	float *whole = malloc(count * 4), *parts = malloc(count * 4);
	const void *in[2] = { a, b };
	void *o_whole[1] = { whole }, *o_parts[1] = { parts };
	struct reduce_args ra;

	(void)state;
	fill_random(TALLY_FLOAT32, a, count);
	fill_random(TALLY_FLOAT32, b, count);
	assert_int_equal(reduce_buffers(TALLY_FLOAT32, TALLY_AVG, in, 2,
					o_whole, 1, count, 2), 0);
	memset(parts, 0, count * 4);
	assert_int_equal(reduce_prepare(&ra, TALLY_FLOAT32, TALLY_AVG, in, 2,
					o_parts, 1, count, 2), 0);
	for (size_t i = sizeof(cuts) / sizeof(cuts[0]) - 1; i > 0; i--)
		reduce_range(&ra, cuts[i - 1], cuts[i]);
	reduce_range(&ra, count, count + 10);	/* past the end: nothing */
	reduce_range(&ra, 100, 50);		/* empty */
	assert_memory_equal(whole, parts, count * 4);
	free(a);
	free(b);
	free(whole);
	free(parts);
}

/* Outputs of REDUCE_STREAM_MIN_BYTES and more take the non-temporal store
 * path; one output 16-byte aligned, one not, one in place. */
static void check_streamed(enum tally_dtype dt, enum tally_op op)
{
	size_t count = REDUCE_STREAM_MIN_BYTES / (size_t)esize(dt) + 4101;
	size_t bytes = count * (size_t)esize(dt);
	char *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
	size_t alloc = (bytes + 64 + 63) & ~(size_t)63;	/* C11 rule */
	char *o1 = aligned_alloc(64, alloc);
	char *o2raw = aligned_alloc(64, alloc);
	char *o2 = o2raw + esize(dt);		/* misaligned for SSE */
	char *want = malloc(bytes);
	const void *in[3] = { a, b, c };
	const void *ref[3];
	void *out[3] = { o1, o2, NULL };
	struct reduce_args ra;
	char *copy = malloc(bytes);

	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_non_null(o1);
	assert_non_null(o2raw);
	assert_non_null(want);
	assert_non_null(copy);
	fill_random(dt, a, count);
	fill_random(dt, b, count);
	fill_random(dt, c, count);
	memcpy(copy, c, bytes);
	ref[0] = a;
	ref[1] = b;
	ref[2] = copy;
	for (size_t i = 0; i < count; i++)
		ref_reduce_elem(dt, op, ref, 3, i, 3,
				want + i * (size_t)esize(dt));
	assert_int_equal(reduce_prepare(&ra, dt, op, in, 3, out, 2, count, 3),
			 0);
	assert_true(ra.stream);
	assert_int_equal(reduce_buffers(dt, op, in, 3, out, 2, count, 3), 0);
	assert_buffer_matches(dt, o1, want, count, "streamed aligned");
	assert_buffer_matches(dt, o2, want, count, "streamed misaligned");

	/* in place into the last input, plus an out-of-place output */
	out[0] = c;
	out[1] = o1;
	memset(o1, 0, bytes);
	assert_int_equal(reduce_buffers(dt, op, in, 3, out, 2, count, 3), 0);
	assert_buffer_matches(dt, c, want, count, "streamed, in place");
	assert_buffer_matches(dt, o1, want, count, "streamed, beside");
	free(a);
	free(b);
	free(c);
	free(o1);
	free(o2raw);
	free(want);
	free(copy);
}

static void test_reduce_streamed_output(void **state)
{
	(void)state;
	/* both element sizes; int32 shares float32's store path */
	check_streamed(TALLY_FLOAT32, TALLY_SUM);
	check_streamed(TALLY_BFLOAT16, TALLY_AVG);
}

/* ---- reduce_pool ---- */

/* Seconds a test waits for a helper before it fails (instead of hanging). */
#define POOL_WAIT_S 20

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait until @cond(@pool) holds; false after POOL_WAIT_S seconds. */
static bool wait_pool(const struct reduce_pool *pool,
		      bool (*cond)(const struct reduce_pool *))
{
	uint64_t end = mono_ns() + POOL_WAIT_S * 1000000000ull;

	while (!cond(pool)) {
		if (mono_ns() > end)
			return false;
		usleep(20);
	}
	return true;
}

static bool one_asleep(const struct reduce_pool *pool)
{
	return reduce_pool_sleepers(pool) == 1;
}

static bool none_asleep(const struct reduce_pool *pool)
{
	return reduce_pool_sleepers(pool) == 0;
}

/*
 * Reduce @count elements of @dt over @pool and check every element of
 * every output against the scalar reference.  In place: the outputs are
 * the inputs (the local path's shape); otherwise @n_out fresh buffers.
 */
static void check_pool_job(struct reduce_pool *pool, enum tally_dtype dt,
			   enum tally_op op, size_t count, unsigned int n_in,
			   unsigned int n_out, bool inplace)
{
	size_t bytes = count * (size_t)esize(dt);
	void *in_buf[MAX_IN], *out_buf[MAX_OUT], *want;
	const void *in[MAX_IN];
	void *out[MAX_OUT];
	struct reduce_args ra;
	char what[96];

	if (inplace)
		n_out = n_in;
	want = malloc(bytes ? bytes : 1);
	assert_non_null(want);
	for (unsigned int k = 0; k < n_in; k++) {
		in_buf[k] = malloc(bytes ? bytes : 1);
		assert_non_null(in_buf[k]);
		fill_random(dt, in_buf[k], count);
		in[k] = in_buf[k];
	}
	for (size_t i = 0; i < count; i++)
		ref_reduce_elem(dt, op, in, n_in, i, n_in,
				(char *)want + i * (size_t)esize(dt));
	for (unsigned int j = 0; j < n_out; j++) {
		if (inplace) {
			out[j] = in_buf[j];
			continue;
		}
		out_buf[j] = malloc(bytes ? bytes : 1);
		assert_non_null(out_buf[j]);
		memset(out_buf[j], 0xcd, bytes);
		out[j] = out_buf[j];
	}
	assert_int_equal(reduce_prepare(&ra, dt, op, in, n_in, out, n_out,
					count, n_in), 0);
	reduce_pool_run(pool, &ra);
	for (unsigned int j = 0; j < n_out; j++) {
		snprintf(what, sizeof(what), "pool %s count %zu %u->%u out %u",
			 dt_name(dt), count, n_in, n_out, j);
		assert_buffer_matches(dt, out[j], want, count, what);
	}
	for (unsigned int k = 0; k < n_in; k++)
		free(in_buf[k]);
	for (unsigned int j = 0; !inplace && j < n_out; j++)
		free(out_buf[j]);
	free(want);
}

static void check_pool_matches(struct reduce_pool *pool,
			       enum tally_dtype dt, enum tally_op op,
			       size_t count, unsigned int n_in,
			       unsigned int n_out)
{
	check_pool_job(pool, dt, op, count, n_in, n_out, false);
}

/* Element counts of @dt whose job (@n_in in, @n_out out) is just under,
 * at and just over @split bytes touched. */
static void counts_around(size_t split, enum tally_dtype dt,
			  unsigned int n_in, unsigned int n_out, size_t c[3])
{
	size_t per = (size_t)esize(dt) * (n_in + n_out);
	size_t at = (split + per - 1) / per;

	c[0] = at > 1 ? at - 1 : 1;
	c[1] = at;
	c[2] = at + 1;
}

static const enum tally_dtype pool_types[] = {
	TALLY_FLOAT32, TALLY_INT32, TALLY_FLOAT16, TALLY_BFLOAT16,
};

/* 1, 2 and 3 threads; every type; sizes around the calibrated split
 * point, odd sizes, whole blocks; in place and not; then with the split
 * forced on every job and on none. */
static void test_reduce_pool_matches_serial(void **state)
{
	static const size_t odd[] = {
		1, 7, REDUCE_BLOCK_ELEMS - 1, REDUCE_BLOCK_ELEMS + 1,
		2 * REDUCE_BLOCK_ELEMS, 3 * REDUCE_BLOCK_ELEMS + 17,
		(3u << 20) / 4 + 4096 * 3 + 17,
	};

	(void)state;
	for (unsigned int threads = 1; threads <= 3; threads++) {
		struct reduce_pool *pool = reduce_pool_create(threads);
		struct reduce_pool_calibration cal;

		assert_non_null(pool);
		reduce_pool_calibration(pool, &cal);
		for (size_t t = 0; t < 4; t++) {
			enum tally_dtype dt = pool_types[t];
			enum tally_op op = t & 1 ? TALLY_AVG : TALLY_SUM;
			size_t c[3];

			if (threads > 1) {
				counts_around(cal.split_polling, dt, 4, 4, c);
				for (int i = 0; i < 3; i++)
					check_pool_job(pool, dt, op, c[i], 4,
						       4, true);
				counts_around(cal.split_sleeping, dt, 3, 2, c);
				for (int i = 0; i < 3; i++)
					check_pool_job(pool, dt, TALLY_SUM,
						       c[i], 3, 2, false);
			}
			for (size_t s = 0; s < sizeof(odd) / sizeof(odd[0]);
			     s++)
				check_pool_job(pool, dt, op, odd[s], 3, 2,
					       s & 1);
		}
		/* every job that has two blocks split; then none */
		reduce_pool_set_split(pool, 0, 0);
		for (size_t t = 0; t < 4; t++)
			for (size_t s = 0; s < sizeof(odd) / sizeof(odd[0]);
			     s++)
				check_pool_job(pool, pool_types[t], TALLY_SUM,
					       odd[s], 4, 4, s & 1);
		reduce_pool_set_split(pool, SIZE_MAX, SIZE_MAX);
		check_pool_job(pool, TALLY_FLOAT32, TALLY_SUM,
			       odd[6], 4, 4, true);
		reduce_pool_destroy(pool);
	}
}

static void test_reduce_pool_many_jobs_one_pool(void **state)
{
	struct reduce_pool *pool = reduce_pool_create(3);

	(void)state;
	assert_non_null(pool);
	reduce_pool_set_split(pool, 0, 0);
	for (int i = 0; i < 30; i++)
		check_pool_matches(pool, TALLY_FLOAT32, TALLY_AVG,
				   (size_t)REDUCE_BLOCK_ELEMS * (2 + i % 5) +
				   (size_t)i * 1000, 2, 1);
	reduce_pool_destroy(pool);
}

static void test_reduce_pool_create_destroy_repeatedly(void **state)
{
	(void)state;
	for (int i = 0; i < 60; i++) {
		struct reduce_pool *pool = reduce_pool_create(1 + i % 4);

		assert_non_null(pool);
		reduce_pool_set_split(pool, 0, 0);
		if (i % 3 == 0)		/* some used once, some never */
			check_pool_matches(pool, TALLY_FLOAT32, TALLY_SUM,
					   4 * REDUCE_BLOCK_ELEMS + 3, 2, 1);
		reduce_pool_destroy(pool);
	}
	reduce_pool_destroy(NULL);
}

static void test_reduce_pool_rejects_bad_thread_count(void **state)
{
	struct reduce_pool *pool;

	(void)state;
	assert_null(reduce_pool_create(0));
	assert_null(reduce_pool_create(REDUCE_POOL_MAX_THREADS + 1));
	pool = reduce_pool_create(REDUCE_POOL_MAX_THREADS);
	assert_non_null(pool);
	reduce_pool_set_split(pool, 0, 0);
	check_pool_matches(pool, TALLY_FLOAT32, TALLY_SUM, (1u << 20), 2, 1);
	reduce_pool_destroy(pool);
}

/* A helper that announced sleep is woken by the next job: one wake-up
 * syscall, and the helper sees the job. */
static void test_reduce_pool_wakes_sleeping_helper(void **state)
{
	struct reduce_pool *pool = reduce_pool_create(2);
	struct reduce_pool_stats before, after;

	(void)state;
	assert_non_null(pool);
	reduce_pool_set_spin_ns(pool, 0);	/* sleep at once */
	reduce_pool_set_split(pool, 0, 0);
	for (int round = 0; round < 5; round++) {
		assert_true(wait_pool(pool, one_asleep));
		reduce_pool_stats(pool, &before);
		check_pool_job(pool, TALLY_FLOAT32, TALLY_SUM,
			       8 * REDUCE_BLOCK_ELEMS, 4, 4, true);
		reduce_pool_stats(pool, &after);
		assert_int_equal(after.jobs_split, before.jobs_split + 1);
		assert_int_equal(after.wakeups, before.wakeups + 1);
		/* woken: it comes to see the job and goes back to sleep */
		assert_true(wait_pool(pool, reduce_pool_helpers_caught_up));
		assert_true(wait_pool(pool, one_asleep));
		reduce_pool_stats(pool, &after);
		assert_true(after.helper_wakes >= before.helper_wakes + 1);
	}
	reduce_pool_destroy(pool);
}

/* With the helper asleep: a job under split_polling runs inline; one
 * between the split points runs inline unless the job before was as large
 * (a stream); one from split_sleeping on splits and wakes it. */
static void test_reduce_pool_split_policy(void **state)
{
	struct reduce_pool *pool = reduce_pool_create(2);
	struct reduce_pool_stats st;
	/* 4 in, 4 out of float32: 32 bytes touched per element */
	size_t small = 2 * REDUCE_BLOCK_ELEMS, mid = 8 * REDUCE_BLOCK_ELEMS,
	       big = 32 * REDUCE_BLOCK_ELEMS;
	static const struct {
		int which;	/* 0 small, 1 mid, 2 big */
		bool split;
	} steps[] = {
		{ 1, false }, { 1, true }, { 0, false }, { 1, false },
		{ 2, true }, { 1, true }, { 0, false }, { 0, false },
	};

	(void)state;
	assert_non_null(pool);
	reduce_pool_set_spin_ns(pool, 0);
	reduce_pool_set_split(pool, 4 * REDUCE_BLOCK_ELEMS * 32,
			      16 * REDUCE_BLOCK_ELEMS * 32);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		size_t count = steps[i].which == 0 ? small :
			       steps[i].which == 1 ? mid : big;
		struct reduce_pool_stats before;

		assert_true(wait_pool(pool, one_asleep));
		reduce_pool_stats(pool, &before);
		check_pool_job(pool, TALLY_FLOAT32, TALLY_SUM, count, 4, 4,
			       true);
		reduce_pool_stats(pool, &st);
		assert_int_equal(st.jobs_split - before.jobs_split,
				 steps[i].split);
		assert_int_equal(st.jobs_inline - before.jobs_inline,
				 !steps[i].split);
		assert_int_equal(st.wakeups - before.wakeups,
				 steps[i].split);
	}
	reduce_pool_destroy(pool);
}

/* Helpers that poll take jobs without a single wake-up syscall. */
static void test_reduce_pool_polling_helper_needs_no_wakeup(void **state)
{
	struct reduce_pool *pool = reduce_pool_create(3);
	struct reduce_pool_stats before, after;

	(void)state;
	assert_non_null(pool);
	reduce_pool_set_spin_ns(pool, 60ull * 1000000000ull);
	reduce_pool_set_split(pool, 0, 0);
	/* the first job wakes any helper that slept since the creation */
	check_pool_job(pool, TALLY_FLOAT32, TALLY_SUM,
		       4 * REDUCE_BLOCK_ELEMS, 2, 1, false);
	assert_true(wait_pool(pool, none_asleep));
	assert_true(wait_pool(pool, reduce_pool_helpers_caught_up));
	reduce_pool_stats(pool, &before);
	for (int i = 0; i < 300; i++)
		check_pool_job(pool, TALLY_FLOAT32, TALLY_SUM,
			       (size_t)(2 + i % 7) * REDUCE_BLOCK_ELEMS + 5,
			       4, 4, true);
	assert_true(wait_pool(pool, reduce_pool_helpers_caught_up));
	reduce_pool_stats(pool, &after);
	assert_int_equal(after.jobs_split, before.jobs_split + 300);
	assert_int_equal(after.wakeups, before.wakeups);
	assert_int_equal(reduce_pool_sleepers(pool), 0);
	reduce_pool_destroy(pool);
}

/* Many small jobs while the helpers keep falling asleep: after every job
 * each helper must come to see it (a lost wake-up leaves one asleep with
 * an old job, and the bounded wait fails); then a stretch without the
 * pause, for the caller's side, with every result checked. */
static void test_reduce_pool_no_lost_wakeup_stress(void **state)
{
	struct reduce_pool *pool = reduce_pool_create(3);
	struct reduce_pool_stats st;
	enum { N = 4, COUNT = 3 * REDUCE_BLOCK_ELEMS + 1 };
	float *buf[N], want;
	struct reduce_args ra;

	(void)state;
	assert_non_null(pool);
	reduce_pool_set_split(pool, 0, 0);
	for (int k = 0; k < N; k++) {
		buf[k] = malloc(COUNT * sizeof(float));
		assert_non_null(buf[k]);
	}
	assert_int_equal(reduce_prepare(&ra, TALLY_FLOAT32, TALLY_SUM,
					(const void *const *)buf, N,
					(void *const *)buf, N, COUNT, N), 0);
	for (int i = 0; i < 6000; i++) {
		/* vary the race window: sleep at once, or after a little */
		reduce_pool_set_spin_ns(pool, (uint64_t)(i % 3) * 1000);
		for (int k = 0; k < N; k++)
			for (size_t e = 0; e < COUNT; e++)
				buf[k][e] = (float)(k + 1 + (i & 7));
		reduce_pool_run(pool, &ra);
		if (!wait_pool(pool, reduce_pool_helpers_caught_up))
			fail_msg("job %d: a helper never saw it (lost "
				 "wake-up)", i);
		want = (float)(10 + 4 * (i & 7));
		for (int k = 0; k < N; k++)
			for (size_t e = 0; e < COUNT; e += 97)
				if (buf[k][e] != want)
					fail_msg("job %d buf %d elem %zu: %g",
						 i, k, e, buf[k][e]);
	}
	for (int i = 0; i < 20000; i++) {
		float at = i % COUNT == COUNT - 1 ? 6.0f : 4.0f;

		for (int k = 0; k < N; k++)
			buf[k][i % COUNT] = 1.0f;
		for (int k = 0; k < N; k++)
			buf[k][COUNT - 1] = (float)k;
		reduce_pool_run(pool, &ra);
		if (buf[N - 1][i % COUNT] != at || buf[0][COUNT - 1] != 6.0f)
			fail_msg("job %d: wrong sum", i);
	}
	assert_true(wait_pool(pool, reduce_pool_helpers_caught_up));
	reduce_pool_stats(pool, &st);
	assert_int_equal(st.jobs_split, 26000);
	for (int k = 0; k < N; k++)
		free(buf[k]);
	reduce_pool_destroy(pool);
}

/* The calibration's numbers are measurements (positive, bounded) and its
 * split points follow from them: polling helpers split no later than
 * sleeping ones, within the clamp; one thread never splits. */
static void test_reduce_pool_calibration_sane(void **state)
{
	(void)state;
	for (unsigned int threads = 1; threads <= 4; threads++) {
		struct reduce_pool *pool = reduce_pool_create(threads);
		struct reduce_pool_calibration c;
		double gain = (double)(threads - 1) / threads, want;

		assert_non_null(pool);
		reduce_pool_calibration(pool, &c);
		if (threads == 1) {
			assert_int_equal(c.split_polling, SIZE_MAX);
			assert_int_equal(c.split_sleeping, SIZE_MAX);
			reduce_pool_destroy(pool);
			continue;
		}
		/* between 10 MB/s and 10 TB/s per thread */
		assert_true(c.ns_per_byte > 1e-4 && c.ns_per_byte < 100.0);
		assert_true(c.handoff_ns > 0 && c.handoff_ns < 1000000000ull);
		assert_true(c.wake_ns > 0 && c.wake_ns < 1000000000ull);
		assert_true(c.split_polling >= REDUCE_POOL_SPLIT_MIN);
		assert_true(c.split_sleeping <= REDUCE_POOL_SPLIT_MAX);
		assert_true(c.split_polling <= c.split_sleeping);
		want = 2.0 * (double)c.handoff_ns / (c.ns_per_byte * gain);
		if (want > REDUCE_POOL_SPLIT_MIN &&
		    want < REDUCE_POOL_SPLIT_MAX)
			assert_true(fabs((double)c.split_polling - want) <=
				    1.0 + want * 1e-9);
		/* measuring again gives a split point too, and jobs work */
		reduce_pool_calibrate(pool);
		reduce_pool_calibration(pool, &c);
		assert_true(c.split_polling >= REDUCE_POOL_SPLIT_MIN &&
			    c.split_polling <= c.split_sleeping);
		check_pool_job(pool, TALLY_FLOAT32, TALLY_SUM,
			       c.split_polling / 32 + 3, 4, 4, true);
		reduce_pool_destroy(pool);
	}
}

/* ---- placement: reduce_pool_pin, dataplane/placement.c ---- */

/* The first line of @path without its newline ("" when unreadable). */
static void read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

/*
 * Every reduce helper of this process, as the kernel sees it: threads
 * named REDUCE_POOL_THREAD_NAME in /proc/self/task, each with its
 * Cpus_allowed_list.  Counts the helpers; @mismatch counts those whose
 * list is not @want.
 */
static int helpers_on(const char *want, int *mismatch)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], line[256], comm[32];
	int helpers = 0;

	assert_non_null(dir);
	*mismatch = 0;
	while ((e = readdir(dir))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		read_line(path, comm, sizeof(comm));
		if (strncmp(comm, REDUCE_POOL_THREAD_NAME,
			    strlen(REDUCE_POOL_THREAD_NAME)))
			continue;
		helpers++;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 e->d_name);
		f = fopen(path, "r");
		assert_non_null(f);
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "Cpus_allowed_list:", 18))
				break;
		fclose(f);
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line + 18 + strspn(line + 18, " \t"), want)) {
			print_message("%s (%s): %s, want %s\n", comm,
				      e->d_name, line, want);
			(*mismatch)++;
		}
	}
	closedir(dir);
	return helpers;
}

/*
 * helpers_on() once it counts @expect: a thread that pthread_join()
 * returned for stays in /proc/self/task until the kernel reaps it, a
 * moment later (a destroyed pool's helpers were counted in CI).  Up to 2 s.
 */
static int helpers_settled(const char *want, int expect, int *mismatch)
{
	const struct timespec ms = { .tv_nsec = 1000000 };
	int n = helpers_on(want, mismatch);

	for (int i = 0; i < 2000 && n != expect; i++) {
		nanosleep(&ms, NULL);
		n = helpers_on(want, mismatch);
	}
	return n;
}

/* the CPUs this process may run on, as the kernel lists them */
static void allowed_list(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];

	assert_non_null(f);
	buf[0] = '\0';
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Cpus_allowed_list:", 18)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(buf, len, "%s",
				 line + 18 + strspn(line + 18, " \t"));
		}
	fclose(f);
}

/* The first @max CPUs this thread may run on, into @cpus; how many. */
static int allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	for (int cpu = 0; cpu < CPU_SETSIZE && n < max; cpu++)
		if (CPU_ISSET(cpu, &set))
			cpus[n++] = cpu;
	return n;
}

static void test_reduce_pool_pin_cpus(void **state)
{
	char all[256], err[512], want[16];
	int mismatch, cpus[2], ncpus = allowed_cpus(cpus, 2);

	(void)state;
	allowed_list(all, sizeof(all));
	for (int i = 0; i < ncpus; i++) {	/* CPUs 0 and 1 here */
		int cpu = cpus[i];
		struct tly_placement p;
		struct reduce_pool *pool = reduce_pool_create(3);

		assert_non_null(pool);
		snprintf(want, sizeof(want), "%d", cpu);
		/* not pinned yet: where the process may run */
		assert_int_equal(helpers_settled(all, 2, &mismatch), 2);
		assert_int_equal(mismatch, 0);
		if (tly_placement_resolve(&p, -1, want, err, sizeof(err)))
			fail_msg("cpus %s: %s", want, err);
		assert_true(p.pinned);
		assert_int_equal(p.numa_node, -1);
		assert_int_equal(CPU_COUNT(&p.cpus), 1);
		assert_true(CPU_ISSET(cpu, &p.cpus));
		assert_int_equal(reduce_pool_pin(pool, &p.cpus), 0);
		assert_int_equal(helpers_on(want, &mismatch), 2);
		assert_int_equal(mismatch, 0);
		/* pinned helpers still reduce their shares */
		reduce_pool_set_split(pool, 0, 0);
		check_pool_matches(pool, TALLY_FLOAT32, TALLY_SUM,
				   64 * REDUCE_BLOCK_ELEMS + 1, 2, 1);
		reduce_pool_destroy(pool);
	}
	assert_int_equal(helpers_settled("", 0, &mismatch), 0); /* joined */
}

/* a thread created after the policy was set reports its own */
static void *policy_of_new_thread(void *arg)
{
	int *mode = arg;
	unsigned long nodes[16] = { 0 };

	if (get_mempolicy(mode, nodes, sizeof(nodes) * 8, NULL, 0))
		*mode = -1;
	else if (*mode == MPOL_PREFERRED && nodes[0] != 1)
		*mode = -2;	/* preferred, but not node 0 alone */
	return NULL;
}

static void test_placement_numa_node(void **state)
{
	struct tly_placement p;
	struct reduce_pool *pool;
	unsigned long nodes[16] = { 0 };
	char node_cpus[256], got[256], err[512], online[256], all[256];
	int mode = -1, child_mode = -1, mismatch;
	pthread_t t;

	(void)state;
	if (numa_available() < 0)
		skip();
	/* node 0's CPUs as sysfs lists them; the placement keeps those we
	 * may use, which are all of them unless the tests run under a
	 * narrower affinity (taskset), where only the pinning is checked */
	read_line("/sys/devices/system/node/node0/cpulist", node_cpus,
		  sizeof(node_cpus));
	if (!node_cpus[0])
		skip();
	read_line("/sys/devices/system/cpu/online", online, sizeof(online));
	allowed_list(all, sizeof(all));
	if (tly_placement_resolve(&p, 0, "", err, sizeof(err)))
		fail_msg("numa_node 0: %s", err);
	assert_true(p.pinned);
	assert_int_equal(p.numa_node, 0);
	tly_cpuset_format(&p.cpus, got, sizeof(got));
	if (!strcmp(all, online))
		assert_string_equal(got, node_cpus);
	else
		snprintf(node_cpus, sizeof(node_cpus), "%s", got);

	pool = reduce_pool_create(3);
	assert_non_null(pool);
	assert_int_equal(reduce_pool_pin(pool, &p.cpus), 0);
	assert_int_equal(helpers_settled(node_cpus, 2, &mismatch), 2);
	assert_int_equal(mismatch, 0);
	reduce_pool_destroy(pool);

	/* the memory policy: default before, node 0 preferred after */
	assert_int_equal(get_mempolicy(&mode, nodes, sizeof(nodes) * 8, NULL,
				       0), 0);
	assert_int_equal(mode, MPOL_DEFAULT);
	assert_int_equal(tly_placement_prefer_memory(&p, err, sizeof(err)),
			 0);
	memset(nodes, 0, sizeof(nodes));
	assert_int_equal(get_mempolicy(&mode, nodes, sizeof(nodes) * 8, NULL,
				       0), 0);
	assert_int_equal(mode, MPOL_PREFERRED);
	assert_int_equal(nodes[0], 1ul);	/* node 0, and only it */
	for (size_t i = 1; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		assert_int_equal(nodes[i], 0ul);
	/* tallyd relies on threads inheriting it */
	assert_int_equal(pthread_create(&t, NULL, policy_of_new_thread,
					&child_mode), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(child_mode, MPOL_PREFERRED);
	assert_int_equal(set_mempolicy(MPOL_DEFAULT, NULL, 0), 0);
}

/* cpus wins for the threads, numa_node keeps the memory */
static void test_placement_both_keys(void **state)
{
	struct tly_placement p;
	char err[512], list[16];
	int cpus[2], n = allowed_cpus(cpus, 2);

	(void)state;
	if (numa_available() < 0 ||
	    access("/sys/devices/system/node/node0", F_OK))
		skip();
	/* CPU 1 here, a CPU of node 0 or not: the list wins for threads */
	snprintf(list, sizeof(list), "%d", cpus[n - 1]);
	if (tly_placement_resolve(&p, 0, list, err, sizeof(err)))
		fail_msg("%s", err);
	assert_true(p.pinned);
	assert_int_equal(p.numa_node, 0);
	assert_int_equal(CPU_COUNT(&p.cpus), 1);
	assert_true(CPU_ISSET(cpus[n - 1], &p.cpus));
	/* neither: nothing placed, no policy set */
	memset(&p, 0xa5, sizeof(p));
	assert_int_equal(tly_placement_resolve(&p, -1, NULL, err,
					       sizeof(err)), 0);
	assert_false(p.pinned);
	assert_int_equal(p.numa_node, -1);
	assert_int_equal(tly_placement_prefer_memory(&p, err, sizeof(err)),
			 0);
}

static void expect_refused(int node, const char *cpus, const char *needle)
{
	struct tly_placement p;
	char err[512] = "";

	if (tly_placement_resolve(&p, node, cpus, err, sizeof(err)) != -1)
		fail_msg("node %d cpus '%s' accepted", node,
			 cpus ? cpus : "(null)");
	if (!strstr(err, needle))
		fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
}

static void test_placement_refuses(void **state)
{
	char needle[80], cpus[32];
	int beyond = numa_max_node() + 1;
	int ncpus = numa_num_configured_cpus();
	int two[2];
	cpu_set_t one, saved;

	(void)state;
	snprintf(needle, sizeof(needle), "daemon.numa_node = %d", beyond);
	expect_refused(beyond, NULL, needle);
	expect_refused(1023, "", "daemon.numa_node = 1023");
	/* a CPU the host does not have */
	snprintf(cpus, sizeof(cpus), "%d", ncpus);
	snprintf(needle, sizeof(needle), "daemon.cpus = '%d'", ncpus);
	expect_refused(-1, cpus, needle);
	snprintf(cpus, sizeof(cpus), "0-%d", ncpus);
	expect_refused(-1, cpus, "daemon.cpus = '0-");
	expect_refused(-1, "0x", "daemon.cpus = '0x'");
	/* a CPU outside our affinity mask counts as not online to us
	 * (CPUs 0 and 1 here: run on 0 alone, ask for 0,1) */
	if (allowed_cpus(two, 2) < 2)
		return;
	assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
	CPU_ZERO(&one);
	CPU_SET(two[0], &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	snprintf(cpus, sizeof(cpus), "%d,%d", two[0], two[1]);
	snprintf(needle, sizeof(needle), "daemon.cpus = '%s': CPU %d is not "
		 "online", cpus, two[1]);
	expect_refused(-1, cpus, needle);
	assert_int_equal(sched_setaffinity(0, sizeof(saved), &saved), 0);
}

static void test_cpuset_format(void **state)
{
	cpu_set_t set;
	char buf[64];

	(void)state;
	CPU_ZERO(&set);
	tly_cpuset_format(&set, buf, sizeof(buf));
	assert_string_equal(buf, "");
	CPU_SET(0, &set);
	CPU_SET(1, &set);
	CPU_SET(2, &set);
	CPU_SET(3, &set);
	CPU_SET(8, &set);
	CPU_SET(10, &set);
	CPU_SET(11, &set);
	CPU_SET(CPU_SETSIZE - 1, &set);
	tly_cpuset_format(&set, buf, sizeof(buf));
	assert_string_equal(buf, "0-3,8,10-11,1023");
	/* too small a buffer: a prefix of whole items, terminated */
	tly_cpuset_format(&set, buf, 8);
	assert_string_equal(buf, "0-3,8");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_half_roundtrip_all_patterns),
		cmocka_unit_test(test_float_to_half_random_bits),
		cmocka_unit_test(test_float_to_half_half_range),
		cmocka_unit_test(test_float_to_half_ties_to_even),
		cmocka_unit_test(test_float_to_half_specials),
		cmocka_unit_test(test_bf16_to_float_all_patterns),
		cmocka_unit_test(test_float_to_bf16_random),
		cmocka_unit_test(test_float_to_bf16_ties_to_even),
		cmocka_unit_test(test_reduce_f32_sum),
		cmocka_unit_test(test_reduce_f32_avg),
		cmocka_unit_test(test_reduce_f16_sum),
		cmocka_unit_test(test_reduce_f16_avg),
		cmocka_unit_test(test_reduce_bf16_sum),
		cmocka_unit_test(test_reduce_bf16_avg),
		cmocka_unit_test(test_reduce_i32_sum),
		cmocka_unit_test(test_reduce_i32_avg),
		cmocka_unit_test(test_reduce_i32_sum_wraps),
		cmocka_unit_test(test_reduce_i32_avg_truncates_toward_zero),
		cmocka_unit_test(test_reduce_f32_avg_multiplies_by_reciprocal),
		cmocka_unit_test(test_reduce_one_in_place_writes_nothing),
		cmocka_unit_test(test_reduce_one_input_copies_bits),
		cmocka_unit_test(test_reduce_f16_rounds_once),
		cmocka_unit_test(test_reduce_zero_count),
		cmocka_unit_test(test_reduce_prepare_rejects_bad_args),
		cmocka_unit_test(test_reduce_range_pieces),
		cmocka_unit_test(test_reduce_streamed_output),
		cmocka_unit_test(test_reduce_pool_matches_serial),
		cmocka_unit_test(test_reduce_pool_many_jobs_one_pool),
		cmocka_unit_test(test_reduce_pool_create_destroy_repeatedly),
		cmocka_unit_test(test_reduce_pool_rejects_bad_thread_count),
		cmocka_unit_test(test_reduce_pool_wakes_sleeping_helper),
		cmocka_unit_test(test_reduce_pool_split_policy),
		cmocka_unit_test(test_reduce_pool_polling_helper_needs_no_wakeup),
		cmocka_unit_test(test_reduce_pool_no_lost_wakeup_stress),
		cmocka_unit_test(test_reduce_pool_calibration_sane),
		cmocka_unit_test(test_cpuset_format),
		cmocka_unit_test(test_reduce_pool_pin_cpus),
		cmocka_unit_test(test_placement_numa_node),
		cmocka_unit_test(test_placement_both_keys),
		cmocka_unit_test(test_placement_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
