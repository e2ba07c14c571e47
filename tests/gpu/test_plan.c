// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_plan.c - the checks and chunking of a device all-reduce
 * (gpu/plan.c): which arguments are refused, and that the chunks tile the
 * tensor exactly, under keys that name tensor and chunk.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu/plan.h"

#define CHUNK (1u << 20)

static int plan(struct tcu_plan *p, uint64_t key, uint64_t count,
		enum tally_dtype d, enum tally_dtype w, uint64_t chunk)
{
	const char *why = NULL;
	int r = tcu_plan_make(p, key, count, d, w, chunk, &why);

	if (r)
		assert_non_null(why);
	return r;
}

static void test_wire_dtypes(void **state)
{
	static const struct {
		enum tally_dtype d, w;
		int ok;
	} cases[] = {
		{ TALLY_FLOAT32, TALLY_FLOAT32, 1 },
		{ TALLY_FLOAT32, TALLY_BFLOAT16, 1 },
		{ TALLY_FLOAT32, TALLY_FLOAT16, 1 },
		{ TALLY_FLOAT16, TALLY_FLOAT16, 1 },
		{ TALLY_BFLOAT16, TALLY_BFLOAT16, 1 },
		{ TALLY_INT32, TALLY_INT32, 1 },
		{ TALLY_BFLOAT16, TALLY_FLOAT32, 0 },	/* widening */
		{ TALLY_FLOAT16, TALLY_BFLOAT16, 0 },
		{ TALLY_INT32, TALLY_FLOAT16, 0 },
		{ TALLY_FLOAT32, TALLY_INT32, 0 },
		{ TALLY_DTYPE_MAX, TALLY_FLOAT32, 0 },
		{ TALLY_FLOAT32, TALLY_DTYPE_MAX, 0 },
		{ (enum tally_dtype)-1, TALLY_FLOAT32, 0 },
	};
	struct tcu_plan p;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = plan(&p, 1, 1000, cases[i].d, cases[i].w, CHUNK);

		assert_int_equal(r, cases[i].ok ? 0 : -TALLY_EINVAL);
		if (r)
			continue;
		assert_int_equal(p.convert, cases[i].d != cases[i].w);
		assert_int_equal(p.dev_size, tally_dtype_size(cases[i].d));
		assert_int_equal(p.wire_size, tally_dtype_size(cases[i].w));
	}
}

static void test_key_limit(void **state)
{
	struct tcu_plan p;

	(void)state;
	assert_int_equal(plan(&p, (1ull << 48) - 1, 10, TALLY_FLOAT32,
			      TALLY_FLOAT32, CHUNK), 0);
	assert_int_equal(plan(&p, 1ull << 48, 10, TALLY_FLOAT32,
			      TALLY_FLOAT32, CHUNK), -TALLY_EINVAL);
	assert_int_equal(plan(&p, UINT64_MAX, 10, TALLY_FLOAT32,
			      TALLY_FLOAT32, CHUNK), -TALLY_EINVAL);
	/* chunk keys: the tensor's bits below, the chunk's above */
	assert_true(tcu_chunk_key(5, 0) == 5);
	assert_true(tcu_chunk_key(5, 3) == (5 | 3ull << 48));
	assert_true(tcu_chunk_key((1ull << 48) - 1, 65535) == UINT64_MAX);
	assert_true(tcu_chunk_key(7, 1) != tcu_chunk_key(7, 2));
}

static void test_chunk_bytes(void **state)
{
	static const struct {
		uint64_t bytes;
		int ok;
	} cases[] = {
		{ 0, 0 }, { 64, 0 }, { 4095, 0 }, { 4096, 1 }, { 4100, 0 },
		{ 4160, 1 }, { 1u << 20, 1 }, { (1u << 20) + 32, 0 },
		{ 1ull << 32, 1 }, { (1ull << 32) + 64, 0 },
	};
	struct tcu_plan p;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(tcu_chunk_bytes_valid(cases[i].bytes),
				 cases[i].ok);
		assert_int_equal(plan(&p, 1, 100, TALLY_FLOAT32,
				      TALLY_FLOAT32, cases[i].bytes),
				 cases[i].ok ? 0 : -TALLY_EINVAL);
	}
}

/* the chunks are contiguous, in order, none empty, and cover count */
static void check_tiling(const struct tcu_plan *p, uint64_t count)
{
	uint64_t c, next = 0;

	for (c = 0; c < p->chunks; c++) {
		assert_true(tcu_plan_first(p, c) == next);
		assert_true(tcu_plan_elems(p, c) > 0);
		assert_true(tcu_plan_elems(p, c) <= p->chunk_elems);
		assert_true(tcu_plan_elems(p, c) * p->wire_size <= CHUNK);
		next += tcu_plan_elems(p, c);
	}
	assert_true(next == count);
}

static void test_chunking(void **state)
{
	const uint64_t f32_per_chunk = CHUNK / 4, bf16_per_chunk = CHUNK / 2;
	struct tcu_plan p;
	unsigned int seed = 1;
	int i;

	(void)state;
	assert_int_equal(plan(&p, 1, 0, TALLY_FLOAT32, TALLY_FLOAT32, CHUNK),
			 0);
	assert_true(p.chunks == 0);
	assert_int_equal(plan(&p, 1, f32_per_chunk, TALLY_FLOAT32,
			      TALLY_FLOAT32, CHUNK), 0);
	assert_true(p.chunks == 1);
	assert_int_equal(plan(&p, 1, f32_per_chunk + 1, TALLY_FLOAT32,
			      TALLY_FLOAT32, CHUNK), 0);
	assert_true(p.chunks == 2);
	assert_true(tcu_plan_elems(&p, 1) == 1);
	/* narrowed: a chunk holds twice the float32 elements */
	assert_int_equal(plan(&p, 1, bf16_per_chunk * 3, TALLY_FLOAT32,
			      TALLY_BFLOAT16, CHUNK), 0);
	assert_true(p.chunk_elems == bf16_per_chunk);
	assert_true(p.chunks == 3);
	check_tiling(&p, bf16_per_chunk * 3);
	for (i = 0; i < 200; i++) {
		uint64_t count = (uint64_t)rand_r(&seed) * 97 % (64ull << 20);

		assert_int_equal(plan(&p, 9, count, TALLY_FLOAT32,
				      i & 1 ? TALLY_FLOAT16 : TALLY_FLOAT32,
				      CHUNK), 0);
		check_tiling(&p, count);
	}
}

static void test_chunk_limit(void **state)
{
	const uint64_t per = 4096 / 4;
	struct tcu_plan p;

	(void)state;
	assert_int_equal(plan(&p, 1, per * TCU_MAX_CHUNKS, TALLY_FLOAT32,
			      TALLY_FLOAT32, 4096), 0);
	assert_true(p.chunks == TCU_MAX_CHUNKS);
	assert_int_equal(plan(&p, 1, per * TCU_MAX_CHUNKS + 1, TALLY_FLOAT32,
			      TALLY_FLOAT32, 4096), -TALLY_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wire_dtypes),
		cmocka_unit_test(test_key_limit),
		cmocka_unit_test(test_chunk_bytes),
		cmocka_unit_test(test_chunking),
		cmocka_unit_test(test_chunk_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
