// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_ef_store.c - the residual store: zeroed on creation, kept between
 * calls, per tensor, re-created zeroed on a new element count, reset one
 * or all, dropped, and its byte count; many keys (bucket collisions)
 * against a plain table kept by the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/compress/ef_store.h"

#define NKEYS	300

static void test_lifecycle(void **state)
{
	struct tly_ef_store s;
	float *a, *b;
	size_t i;

	(void)state;
	tly_ef_store_init(&s);
	a = tly_ef_get(&s, 7, 100);
	assert_non_null(a);
	for (i = 0; i < 100; i++) {
		assert_true(a[i] == 0);
		a[i] = (float)i + 1;
	}
	assert_ptr_equal(tly_ef_get(&s, 7, 100), a);	/* kept */
	b = tly_ef_get(&s, 8, 10);
	assert_true(b != a && b[9] == 0);
	b[9] = 5;
	assert_int_equal(s.n_tensors, 2);
	assert_int_equal(s.bytes, 110 * sizeof(float));
	assert_int_equal(tly_ef_reset(&s, 7), 0);
	for (i = 0; i < 100; i++)
		assert_true(a[i] == 0);
	assert_true(b[9] == 5);			/* only key 7 reset */
	assert_int_equal(tly_ef_reset(&s, 9), -1);
	a = tly_ef_get(&s, 7, 50);		/* a new shape */
	a[49] = 3;
	assert_int_equal(s.bytes, 60 * sizeof(float));
	tly_ef_reset_all(&s);
	assert_true(a[49] == 0 && b[9] == 0);
	assert_int_equal(tly_ef_drop(&s, 8), 0);
	assert_int_equal(tly_ef_drop(&s, 8), -1);
	assert_int_equal(s.n_tensors, 1);
	assert_int_equal(s.bytes, 50 * sizeof(float));
	b = tly_ef_get(&s, 8, 10);		/* back, zeroed */
	assert_true(b[9] == 0);
	tly_ef_store_fini(&s);
}

static void test_many_keys(void **state)
{
	struct tly_ef_store s;
	static uint64_t key[NKEYS];
	static size_t len[NKEYS];
	float *r;
	size_t i, j, bytes = 0;

	(void)state;
	tly_ef_store_init(&s);
	for (i = 0; i < NKEYS; i++) {
		/* consecutive and far-apart keys, 0 included */
		key[i] = i % 2 ? i : (uint64_t)i << 40;
		len[i] = 1 + i % 17;
		r = tly_ef_get(&s, key[i], len[i]);
		for (j = 0; j < len[i]; j++)
			r[j] = (float)(i * 100 + j);
		bytes += len[i] * sizeof(float);
	}
	assert_int_equal(s.n_tensors, NKEYS);
	assert_int_equal(s.bytes, bytes);
	for (i = 0; i < NKEYS; i += 3)
		assert_int_equal(tly_ef_reset(&s, key[i]), 0);
	for (i = 0; i < NKEYS; i++) {
		r = tly_ef_get(&s, key[i], len[i]);
		for (j = 0; j < len[i]; j++)
			assert_true(r[j] == (i % 3 ? (float)(i * 100 + j) : 0));
	}
	for (i = 0; i < NKEYS; i += 2)
		assert_int_equal(tly_ef_drop(&s, key[i]), 0);
	assert_int_equal(s.n_tensors, NKEYS / 2);
	for (i = 1; i < NKEYS; i += 2)
		assert_int_equal(tly_ef_reset(&s, key[i]), 0);
	tly_ef_store_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lifecycle),
		cmocka_unit_test(test_many_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
