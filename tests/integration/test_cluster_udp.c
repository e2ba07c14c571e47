// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_udp.c - 4 hosts x 2 clients over kernel UDP on the
 * loopback: a dedicated aggregator, co-located shards, ring all-reduce,
 * the same under 1 % loss with reordering and duplication, and a daemon
 * killed mid-run.  Results are exact (see cluster_clients.c).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "cluster_clients.h"

#define HOSTS 4

static const char *const lossy[] = {
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.dup_ppm=5000",
	"--set", "emulator.reorder_ppm=50000",
	"--set", "emulator.reorder_us=300",
	NULL,
};

static void run_job(const struct cluster_spec *spec, bool float_types)
{
	struct test_cluster tc;
	struct client_job job = { .hosts = HOSTS, .rounds = 2,
				  .float_types = float_types, .go_fd = -1 };
	int failed, bad;

	assert_int_equal(cluster_up(&tc, spec), 0);
	failed = run_cluster_clients(&tc, HOSTS, job, 120000);
	bad = cluster_down(&tc);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
}

static void test_dedicated_aggregator(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate" };

	(void)state;
	run_job(&s, true);
}

static void test_colocated_shards(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker+aggregator",
				  .algorithm = "aggregate" };

	(void)state;
	run_job(&s, true);
}

static void test_ring_allreduce(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker",
				  .algorithm = "ring" };

	(void)state;
	run_job(&s, false);
}

static void test_dedicated_aggregator_lossy(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = lossy };

	(void)state;
	run_job(&s, false);
}

static void test_ring_lossy(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker",
				  .algorithm = "ring", .extra = lossy };

	(void)state;
	run_job(&s, false);
}

/*
 * Kill one daemon while every client has work in flight: the clients of
 * the other hosts get TALLY_EPEERLOST within 2 s, nothing hangs, and the
 * three survivors run a new job among themselves.
 */
static void test_daemon_killed_mid_run(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker+aggregator",
				  .algorithm = "aggregate" };
	struct test_cluster tc;
	uint64_t took;
	int failed, bad;

	(void)state;
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = kill_mid_run(&tc, HOSTS, 1500, &took);
	bad = cluster_down(&tc);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
	/* within 2 s of the kill, plus what the slowest client took to see
	 * it was told */
	assert_true(took < 5000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dedicated_aggregator),
		cmocka_unit_test(test_colocated_shards),
		cmocka_unit_test(test_ring_allreduce),
		cmocka_unit_test(test_dedicated_aggregator_lossy),
		cmocka_unit_test(test_ring_lossy),
		cmocka_unit_test(test_daemon_killed_mid_run),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
