// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_strerror.c - unit tests of tally_strerror and tally_dtype_size
 * (shm/strerror.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <limits.h>
#include <string.h>
#include <cmocka.h>

#include <tally/tally.h>

#define UNKNOWN "unknown tally error"

static void test_strerror_every_code_has_own_text(void **state)
{
	(void)state;
	for (int e = 0; e < TALLY_ERROR_MAX; e++) {
		const char *s = tally_strerror(e);

		assert_non_null(s);
		assert_true(strlen(s) > 0);
		assert_string_not_equal(s, UNKNOWN);
		for (int f = 0; f < e; f++)
			assert_string_not_equal(s, tally_strerror(f));
	}
}

static void test_strerror_accepts_negative_codes(void **state)
{
	(void)state;
	for (int e = 0; e < TALLY_ERROR_MAX; e++)
		assert_ptr_equal(tally_strerror(-e), tally_strerror(e));
	assert_string_equal(tally_strerror(-TALLY_EINVAL),
			    tally_strerror(TALLY_EINVAL));
}

static void test_strerror_some_texts(void **state)
{
	(void)state;
	assert_string_equal(tally_strerror(TALLY_OK), "success");
	assert_string_equal(tally_strerror(-TALLY_EINVAL), "invalid argument");
	assert_non_null(strstr(tally_strerror(-TALLY_ETIMEDOUT), "timed out"));
}

static void test_strerror_out_of_range(void **state)
{
	static const int bad[] = { TALLY_ERROR_MAX, -TALLY_ERROR_MAX,
				   TALLY_ERROR_MAX + 1, 1000, -1000, INT_MAX,
				   -INT_MAX };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_string_equal(tally_strerror(bad[i]), UNKNOWN);
}

static void test_strerror_int_min(void **state)
{
	(void)state;
	/* -INT_MIN overflows: must still say "unknown", not crash */
	assert_string_equal(tally_strerror(INT_MIN), UNKNOWN);
}

static void test_dtype_sizes(void **state)
{
	(void)state;
	assert_int_equal(tally_dtype_size(TALLY_FLOAT32), 4);
	assert_int_equal(tally_dtype_size(TALLY_INT32), 4);
	assert_int_equal(tally_dtype_size(TALLY_FLOAT16), 2);
	assert_int_equal(tally_dtype_size(TALLY_BFLOAT16), 2);
	assert_int_equal(tally_dtype_size(TALLY_DTYPE_MAX), 0);
	assert_int_equal(tally_dtype_size((enum tally_dtype)100), 0);
	assert_int_equal(tally_dtype_size((enum tally_dtype)-1), 0);
	for (int d = 0; d < TALLY_DTYPE_MAX; d++)
		assert_int_not_equal(tally_dtype_size((enum tally_dtype)d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strerror_every_code_has_own_text),
		cmocka_unit_test(test_strerror_accepts_negative_codes),
		cmocka_unit_test(test_strerror_some_texts),
		cmocka_unit_test(test_strerror_out_of_range),
		cmocka_unit_test(test_strerror_int_min),
		cmocka_unit_test(test_dtype_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
