// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_metrics.c - the metric registry and its Prometheus text writer:
 * HELP/TYPE lines, label escaping, cumulative histogram buckets with
 * +Inf, _sum and _count, and the names it refuses.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctrl/metrics.h"

static char *write_all(struct metrics *m)
{
	char *out = NULL;
	size_t len = 0;

	assert_int_equal(metrics_write(m, &out, &len), 0);
	assert_int_equal(strlen(out), len);
	return out;
}

static void test_counter_gauge(void **state)
{
	struct metrics *m = metrics_new();
	const char *const l[] = { "job", "7", "peer", "1", NULL };
	char *out;

	(void)state;
	assert_int_equal(metrics_family(m, "tally_x_total", METRICS_COUNTER,
					"X things.\nsecond \\ line"), 0);
	assert_int_equal(metrics_family(m, "tally_g", METRICS_GAUGE, "G"), 0);
	assert_int_equal(metrics_set(m, "tally_x_total", l, 42), 0);
	assert_int_equal(metrics_set(m, "tally_g", NULL, 0.5), 0);
	assert_int_equal(metrics_set(m, "tally_g", NULL, NAN), 0);
	out = write_all(m);
	assert_string_equal(out,
		"# HELP tally_x_total X things.\\nsecond \\\\ line\n"
		"# TYPE tally_x_total counter\n"
		"tally_x_total{job=\"7\",peer=\"1\"} 42\n"
		"# HELP tally_g G\n"
		"# TYPE tally_g gauge\n"
		"tally_g 0.5\n"
		"tally_g NaN\n");
	free(out);
	assert_int_equal(metrics_count(m), 3);
	metrics_reset(m);
	assert_int_equal(metrics_count(m), 0);
	out = write_all(m);
	assert_string_equal(out, "");
	free(out);
	metrics_free(m);
}

static void test_escaping(void **state)
{
	struct metrics *m = metrics_new();
	const char *const l[] = { "v", "a\"b\\c\nd", NULL };
	char *out;

	(void)state;
	assert_int_equal(metrics_family(m, "t", METRICS_GAUGE, ""), 0);
	assert_int_equal(metrics_set(m, "t", l, 1), 0);
	out = write_all(m);
	assert_non_null(strstr(out, "t{v=\"a\\\"b\\\\c\\nd\"} 1\n"));
	free(out);
	metrics_free(m);
}

static void test_histogram(void **state)
{
	static const double b[] = { 0.001, 0.01, 0.1 };
	const char *const l[] = { "size_class", "le_4KiB", NULL };
	struct metrics *m = metrics_new();
	struct metrics_hist h;
	char *out;

	(void)state;
	assert_int_equal(metrics_hist_init(&h, b, 3), 0);
	metrics_hist_observe(&h, 0.0005);
	metrics_hist_observe(&h, 0.001);	/* le is inclusive */
	metrics_hist_observe(&h, 0.05);
	metrics_hist_observe(&h, 3);
	assert_int_equal(metrics_family(m, "lat_seconds", METRICS_HISTOGRAM,
					"L"), 0);
	assert_int_equal(metrics_set_hist(m, "lat_seconds", l, &h), 0);
	out = write_all(m);
	assert_non_null(strstr(out, "# TYPE lat_seconds histogram\n"
		"lat_seconds_bucket{size_class=\"le_4KiB\",le=\"0.001\"} 2\n"
		"lat_seconds_bucket{size_class=\"le_4KiB\",le=\"0.01\"} 2\n"
		"lat_seconds_bucket{size_class=\"le_4KiB\",le=\"0.1\"} 3\n"
		"lat_seconds_bucket{size_class=\"le_4KiB\",le=\"+Inf\"} 4\n"
		"lat_seconds_sum{size_class=\"le_4KiB\"} 3.0515\n"
		"lat_seconds_count{size_class=\"le_4KiB\"} 4\n"));
	free(out);
	metrics_free(m);
}

/* Ended jobs' latencies are kept by adding histograms. */
static void test_histogram_add(void **state)
{
	const double b[] = { 1, 2 };
	struct metrics_hist sum = { 0 }, x, y;

	(void)state;
	assert_int_equal(metrics_hist_init(&x, b, 2), 0);
	assert_int_equal(metrics_hist_init(&y, b, 2), 0);
	metrics_hist_observe(&x, 0.5);
	metrics_hist_observe(&x, 3);
	metrics_hist_observe(&y, 1.5);
	metrics_hist_add(&sum, &x);	/* empty: takes x's bounds */
	metrics_hist_add(&sum, &y);
	assert_int_equal(sum.n_bounds, 2);
	assert_true(sum.bounds[1] == 2);
	assert_int_equal(sum.counts[0], 1);
	assert_int_equal(sum.counts[1], 1);
	assert_int_equal(sum.counts[2], 1);
	assert_int_equal(sum.count, 3);
	assert_true(sum.sum == 5.0);
}

static void test_refusals(void **state)
{
	static const double bad[] = { 2, 1 };
	const char *const le[] = { "le", "1", NULL };
	const char *const bad_label[] = { "1x", "1", NULL };
	const char *const odd[] = { "a", NULL };
	struct metrics *m = metrics_new();
	struct metrics_hist h;

	(void)state;
	assert_int_equal(metrics_family(m, "9bad", METRICS_GAUGE, ""), -1);
	assert_int_equal(metrics_family(m, "bad-name", METRICS_GAUGE, ""), -1);
	assert_int_equal(metrics_family(m, "ok:name", METRICS_GAUGE, ""), 0);
	assert_int_equal(metrics_family(m, "ok:name", METRICS_GAUGE, ""), 0);
	assert_int_equal(metrics_family(m, "ok:name", METRICS_COUNTER, ""),
			 -1);
	assert_int_equal(metrics_set(m, "unknown", NULL, 1), -1);
	assert_int_equal(metrics_set(m, "ok:name", le, 1), -1);
	assert_int_equal(metrics_set(m, "ok:name", bad_label, 1), -1);
	assert_int_equal(metrics_set(m, "ok:name", odd, 1), -1);
	assert_int_equal(metrics_hist_init(&h, bad, 2), -1);
	assert_int_equal(metrics_hist_init(&h, bad, 1), 0);
	assert_int_equal(metrics_set_hist(m, "ok:name", NULL, &h), -1);
	assert_int_equal(metrics_count(m), 0);
	metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counter_gauge),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_histogram_add),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
