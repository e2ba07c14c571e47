// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_threads.c - the UDP cluster tests with two dataplane
 * threads per daemon (dataplane.threads = 2): every tensor goes to shard
 * hash(id) % 2 on every host, each shard on its own socket (port + s).
 * Results are exact (cluster_clients.c); a daemon killed mid-run makes the
 * survivors pause both threads, rebuild both shards and run a new job,
 * and their logs show both shards carried traffic.
 */
#include <dirent.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "cluster_clients.h"

#define HOSTS 4

static const char *const two[] = {
	"--set", "dataplane.threads=2",
	NULL,
};

static const char *const two_lossy[] = {
	"--set", "dataplane.threads=2",
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.dup_ppm=5000",
	"--set", "emulator.reorder_ppm=50000",
	"--set", "emulator.reorder_us=300",
	NULL,
};

static void run_job(struct cluster_spec *spec, bool float_types)
{
	spec->port_stride = 2;
	assert_int_equal(run_checked_job(spec, 2, float_types, 120000), 0);
}

static void test_threads_dedicated_aggregator(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = two };

	(void)state;
	run_job(&s, true);
}

static void test_threads_colocated_shards(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker+aggregator",
				  .algorithm = "aggregate", .extra = two };

	(void)state;
	run_job(&s, true);
}

static void test_threads_ring(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker",
				  .algorithm = "ring", .extra = two };

	(void)state;
	run_job(&s, false);
}

static void test_threads_dedicated_lossy(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = two_lossy };

	(void)state;
	run_job(&s, false);
}

/* A roster change pauses and rebuilds both shards; the engines of the
 * first epoch, logged then, both received frames. */
static void test_threads_daemon_killed(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker+aggregator",
				  .algorithm = "aggregate", .extra = two,
				  .port_stride = 2 };
	struct test_cluster tc;
	uint64_t took;
	int failed, bad;

	(void)state;
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = kill_mid_run(&tc, HOSTS, 1500, &took);
	for (int d = 0; d < HOSTS - 1; d++)
		for (int sh = 0; sh < 2; sh++) {
			char what[64], idle[64];

			snprintf(what, sizeof(what), "worker (shard %d): rx ",
				 sh);
			snprintf(idle, sizeof(idle), "worker (shard %d): rx 0 ",
				 sh);
			assert_true(daemon_log_count(&tc.d[d], what) >= 1);
			assert_int_equal(daemon_log_count(&tc.d[d], idle), 0);
		}
	bad = cluster_down(&tc);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
	assert_true(took < 5000);
}

/* The CPUs of @pid's thread named @name, as a mask; -1 when none has it. */
static long thread_cpus(pid_t pid, const char *name)
{
	char path[128], comm[64];
	struct dirent *e;
	long mask = -1;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		cpu_set_t set;
		FILE *f;

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid,
			 (int)tid);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		comm[strcspn(comm, "\n")] = 0;
		if (strcmp(comm, name) || sched_getaffinity(tid, sizeof(set),
							    &set))
			continue;
		mask = 0;
		for (int c = 0; c < 64; c++)
			if (CPU_ISSET(c, &set))
				mask |= 1l << c;
	}
	closedir(dir);
	return mask;
}

/* dataplane.cpus = 0: both threads of every daemon run on CPU 0 only. */
static void test_threads_pinned(void **state)
{
	static const char *const pinned[] = {
		"--set", "dataplane.threads=2",
		"--set", "dataplane.cpus=0",
		NULL,
	};
	struct cluster_spec s = { .workers = 2, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = pinned, .port_stride = 2 };
	struct client_job job = { .hosts = 2, .rounds = 1, .go_fd = -1 };
	struct test_cluster tc;
	int failed;

	(void)state;
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = run_cluster_clients(&tc, 2, job, 60000);
	for (int d = 0; d < tc.n; d++) {
		assert_int_equal(thread_cpus(tc.d[d].pid, "tally-dp0"), 1);
		assert_int_equal(thread_cpus(tc.d[d].pid, "tally-dp1"), 1);
	}
	assert_int_equal(cluster_down(&tc), 0);
	assert_int_equal(failed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_dedicated_aggregator),
		cmocka_unit_test(test_threads_colocated_shards),
		cmocka_unit_test(test_threads_ring),
		cmocka_unit_test(test_threads_dedicated_lossy),
		cmocka_unit_test(test_threads_daemon_killed),
		cmocka_unit_test(test_threads_pinned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
