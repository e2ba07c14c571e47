// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_switch.c - the switch profile (docs/switch-profile.md)
 * through real tallyd daemons: 4 hosts x 2 clients over kernel UDP on the
 * loopback, a dedicated aggregator and co-located shards, under 1 % loss
 * with duplication and reordering; results exact (cluster_clients.c).  And
 * a configuration the profile cannot run, refused at start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "cluster_clients.h"

#define HOSTS 4

static const char *const switch_lossy[] = {
	"--set", "dataplane.profile=switch",
	"--set", "dataplane.k=128",
	"--set", "dataplane.pool_slots=1024",
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.dup_ppm=5000",
	"--set", "emulator.reorder_ppm=50000",
	"--set", "emulator.reorder_us=300",
	NULL,
};

static void test_switch_dedicated_lossy(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = switch_lossy };

	(void)state;
	assert_int_equal(run_checked_job(&s, 2, true, 180000), 0);
}

static void test_switch_colocated_lossy(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker+aggregator",
				  .algorithm = "aggregate",
				  .extra = switch_lossy };

	(void)state;
	assert_int_equal(run_checked_job(&s, 2, true, 180000), 0);
}

/* K = 96 is no whole number of 64-lane passes: refused at start, saying
 * why */
static void test_switch_bad_k_refused(void **state)
{
	const char *args[] = { "--rank", "0", "--world", "2",
			       "--coordinator", "127.0.0.1:9", "--address",
			       "127.0.0.1:10", "--set", "dataplane.profile=switch",
			       "--set", "dataplane.k=96", NULL };

	(void)state;
	cluster_default_secret();
	assert_int_equal(daemon_refuses(args,
					 "dataplane.k = 64, 128 or 256"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_switch_dedicated_lossy),
		cmocka_unit_test(test_switch_colocated_lossy),
		cmocka_unit_test(test_switch_bad_k_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
