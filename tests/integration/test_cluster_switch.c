// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_switch.c - the switch profile (docs/switch-profile.md)
 * through real tallyd daemons: 4 hosts x 2 clients over kernel UDP on the
 * loopback, a dedicated aggregator and co-located shards, under 1 % loss
 * with duplication and reordering; results exact (cluster_clients.c).  The
 * held bound's key reaching every worker's engine.  And a configuration the
 * profile cannot run, refused at start.
 */
#include <setjmp.h>
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

/*
 * The held bound of one worker daemon's log: the end of the epoch prints
 * "held at node N: peak P of B, past it E, probes Q" for each aggregator
 * the worker launched to.  Returns the lines with bound @want and a peak
 * within it (or past it only by escapes), -1 on any other.
 */
static int held_lines(const struct test_daemon *d, unsigned int want)
{
	char line[1024];
	FILE *f = fopen(d->log, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "held at node ");
		unsigned int node, peak, max, escapes;

		if (!p)
			continue;
		if (sscanf(p, "held at node %u: peak %u of %u, past it %u",
			   &node, &peak, &max, &escapes) != 4 ||
		    max != want || !peak || (peak > max && !escapes)) {
			fprintf(stderr, "%s: not a bound of %u: %s", d->log,
				want, p);
			n = -1;
			break;
		}
		n++;
	}
	fclose(f);
	return n;
}

/* [dataplane] held_max reaches each worker's engine: a bound that is no
 * default (the pool's share here is 256 chunks) is the one every worker
 * daemon reports at the end of its epoch, with exact sums */
static void test_switch_held_max(void **state)
{
	static const char *const held[] = {
		"--set", "dataplane.profile=switch",
		"--set", "dataplane.k=128",
		"--set", "dataplane.pool_slots=1024",
		"--set", "dataplane.held_max=96",
		NULL,
	};
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = held };
	struct client_job job = { .hosts = HOSTS, .rounds = 1, .go_fd = -1 };
	struct test_cluster tc;
	int failed, lines[HOSTS];

	(void)state;
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = run_cluster_clients(&tc, HOSTS, job, 120000);
	if (failed)
		cluster_show_warnings(&tc);
	/* the report comes as the engine goes: stop, then read the logs */
	failed += cluster_terminate(&tc);
	for (int r = 0; r < HOSTS; r++)
		lines[r] = held_lines(&tc.d[r], 96);
	cluster_down(&tc);
	assert_int_equal(failed, 0);
	for (int r = 0; r < HOSTS; r++)
		assert_int_equal(lines[r], 1);	/* one aggregator */
}

/* K = 96 is no whole number of 64-lane passes: refused at start, saying
 * why */
static void test_switch_bad_k_refused(void **state)
{
	const char *args[] = { "--rank", "0", "--world", "2",
			       "--coordinator", "127.0.0.1:9", "--address",
			       "127.0.0.1:10", "--set", "dataplane.profile=switch",
			       "--set", "dataplane.k=80", NULL };

	(void)state;
	cluster_default_secret();
	assert_int_equal(daemon_refuses(args, "dataplane.k = a multiple of "
					       "32 up to 832"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_switch_dedicated_lossy),
		cmocka_unit_test(test_switch_colocated_lossy),
		cmocka_unit_test(test_switch_held_max),
		cmocka_unit_test(test_switch_bad_k_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
