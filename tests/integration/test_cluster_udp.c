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
#include <sys/stat.h>
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
	assert_int_equal(run_checked_job(spec, 2, float_types, 120000), 0);
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

/*
 * Every daemon of the job frozen for longer than peer_timeout_ms (a paused
 * VM, a machine too busy to run any of them): on waking up each one finds
 * its peers' heartbeats waiting in its sockets, so nobody is declared
 * lost and the job goes on.  A daemon that judged its peers before
 * reading what they had sent declared them all lost.
 */
static void test_all_frozen_then_resumed(void **state)
{
	struct cluster_spec s = { .workers = 2, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate" };
	struct client_job job = { .hosts = 2, .rounds = 1, .go_fd = -1 };
	struct test_cluster tc;
	int failed;

	(void)state;
	assert_int_equal(cluster_up(&tc, &s), 0);
	usleep(500000);			/* heartbeats flow */
	for (int i = 0; i < tc.n; i++)
		kill(tc.d[i].pid, SIGSTOP);
	usleep(1800000);		/* peer_timeout_ms is 1000 */
	for (int i = 0; i < tc.n; i++)
		kill(tc.d[i].pid, SIGCONT);
	usleep(500000);
	failed = run_cluster_clients(&tc, 2, job, 60000);
	if (failed)
		cluster_show_warnings(&tc);
	for (int i = 0; i < tc.n; i++)
		assert_int_equal(daemon_log_count(&tc.d[i], "stopped answering"),
				 0);
	assert_int_equal(cluster_down(&tc), 0);
	assert_int_equal(failed, 0);
}

/* voluntary context switches of process @pid's main thread (its control
 * loop): how often it went to sleep; -1 if unknown */
static long main_thread_sleeps(pid_t pid)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid,
		 (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

/*
 * While operations are in the network a daemon's control thread sleeps
 * until something happens (a completion, a client, a peer, the
 * schedule's deadline): it has no clock of its own to keep.  Links shaped
 * to 20 Mbit/s make the operations last.  Until 2026-12-05 it woke every
 * millisecond while anything was out, 500-1000 times a second; now each
 * daemon must sleep fewer than 100 times a second of the run.
 */
static void test_control_thread_sleeps(void **state)
{
	static const char *const shaped[] = {
		"--set", "emulator.rate_bps=20000000", NULL,
	};
	struct cluster_spec s = { .workers = 2, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = shaped };
	struct client_job job = { .hosts = 2, .rounds = 2, .go_fd = -1 };
	long before[CL_MAX_DAEMONS], after[CL_MAX_DAEMONS];
	struct test_cluster tc;
	uint64_t start, ms;
	int failed;

	(void)state;
	assert_int_equal(cluster_up(&tc, &s), 0);
	for (int i = 0; i < tc.n; i++)
		before[i] = main_thread_sleeps(tc.d[i].pid);
	start = test_now_ms();
	failed = run_cluster_clients(&tc, 2, job, 120000);
	ms = test_now_ms() - start;
	for (int i = 0; i < tc.n; i++)
		after[i] = main_thread_sleeps(tc.d[i].pid);
	if (failed)
		cluster_show_warnings(&tc);
	assert_int_equal(cluster_down(&tc), 0);
	assert_int_equal(failed, 0);
	for (int i = 0; i < tc.n; i++) {
		printf("daemon %d: its control loop slept %ld times in %llu "
		       "ms\n", i, after[i] - before[i],
		       (unsigned long long)ms);
		assert_true(before[i] >= 0 && after[i] >= before[i]);
		assert_true((uint64_t)(after[i] - before[i]) * 1000 <
			    100 * ms);
	}
}

/*
 * Two jobs one after the other on the same daemons, with the same tensor
 * keys and iterations (a training script run twice): the aggregators'
 * tombstones of the first job must not drop the second job's chunks for
 * ever (found by tools/soak: the second run hung).
 */
static void test_second_job_same_ids(void **state)
{
	struct cluster_spec s = { .workers = 2, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate" };
	struct client_job job = { .hosts = 2, .rounds = 1, .go_fd = -1 };
	struct test_cluster tc;
	int first, second;

	(void)state;
	assert_int_equal(cluster_up(&tc, &s), 0);
	first = run_cluster_clients(&tc, 2, job, 60000);
	second = run_cluster_clients(&tc, 2, job, 60000);
	if (first || second)
		cluster_show_warnings(&tc);
	assert_int_equal(cluster_down(&tc), 0);
	assert_int_equal(first, 0);
	assert_int_equal(second, 0);
}

/*
 * A daemon of another job registers: the coordinator refuses it, it says
 * why, and its clients' operations fail instead of waiting for a job that
 * will never form.
 */
static int foreign_client(void *arg)
{
	struct test_daemon *d = arg;
	struct tally_client *c;
	struct tally_allreduce_args a = { .count = 1 };
	uint64_t req;
	float *buf;

	CHECK(tally_connect(d->sock, &c) == 0, 2);
	buf = tally_alloc(c, 64);
	a.sendbuf = a.recvbuf = buf;
	for (int i = 0; i < 200; i++) {		/* until the refusal came */
		CHECK(tally_allreduce(c, &a, &req) == 0, 3);
		a.iteration++;
		if (tally_wait(c, req, 100) == -TALLY_EPEERLOST) {
			tally_disconnect(c);
			return 0;
		}
	}
	return 4;
}

static void test_wrong_job_key_refused(void **state)
{
	int base = 23000 + getpid() % 500 * 4;
	char coord[32], a0[32], a1[32];
	const char *r0[] = { "--rank", "0", "--world", "2", "--job-key", "1",
			     "--coordinator", coord, "--address", a0, NULL };
	const char *r1[] = { "--rank", "1", "--world", "2", "--job-key", "2",
			     "--coordinator", coord, "--address", a1, NULL };
	struct test_daemon d0, d1;
	bool said = false;
	int ret;

	(void)state;
	cluster_default_secret();
	snprintf(coord, sizeof(coord), "127.0.0.1:%d", base);
	snprintf(a0, sizeof(a0), "127.0.0.1:%d", base + 1);
	snprintf(a1, sizeof(a1), "127.0.0.1:%d", base + 2);
	assert_int_equal(daemon_start(&d0, CL_LOCAL, r0), 0);
	assert_int_equal(daemon_start(&d1, 1, r1), 0);
	ret = child_wait(child_start(foreign_client, &d1), 30000);
	said = daemon_log_count(&d1, "wrong job key") > 0;
	assert_int_equal(daemon_stop(&d1), 0);
	assert_int_equal(daemon_stop(&d0), 0);
	assert_int_equal(ret, 0);
	assert_true(said);
}

/*
 * A daemon with another job secret (from its own 0600 file) registers:
 * the coordinator refuses it for its MAC and counts it, the daemon says
 * why, and its clients' operations fail instead of waiting.
 */
static void test_wrong_secret_refused(void **state)
{
	char dir[] = "/tmp/tally-secret-XXXXXX", path[64];
	struct cluster_spec s = { .workers = 2, .role = "worker+aggregator",
				  .algorithm = "aggregate" };
	struct test_cluster tc;
	bool refused, counted, told;
	FILE *f;
	int ret;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/job.secret", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("a secret of some other job\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
	s.secret_file[1] = path;
	assert_int_equal(cluster_up(&tc, &s), 0);
	ret = child_wait(child_start(foreign_client, &tc.d[1]), 30000);
	refused = daemon_log_count(&tc.d[0], "registration of rank 1 "
				   "refused: authentication failed") > 0;
	counted = daemon_log_count(&tc.d[0], "failed authentication "
				   "(another job secret, or forged); 1 so "
				   "far") > 0;
	told = daemon_log_count(&tc.d[1], "job secret differs") > 0;
	assert_int_equal(cluster_down(&tc), 0);
	unlink(path);
	rmdir(dir);
	assert_int_equal(ret, 0);
	assert_true(refused);
	assert_true(counted);
	assert_true(told);
}

/* A secret file others can read is refused at start, saying why. */
static void test_open_secret_file_refused(void **state)
{
	char dir[] = "/tmp/tally-secret-XXXXXX", path[64], set[128];
	const char *args[] = { "--rank", "0", "--world", "2",
			       "--coordinator", "127.0.0.1:9", "--address",
			       "127.0.0.1:10", "--set", set, NULL };
	int refused;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/job.secret", dir);
	snprintf(set, sizeof(set), "cluster.secret_file=%s", path);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("a secret that everyone can read\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0644), 0);
	refused = daemon_refuses(args, "chmod 600");
	unlink(path);
	rmdir(dir);
	assert_int_equal(refused, 0);
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
		cmocka_unit_test(test_all_frozen_then_resumed),
		cmocka_unit_test(test_control_thread_sleeps),
		cmocka_unit_test(test_second_job_same_ids),
		cmocka_unit_test(test_wrong_job_key_refused),
		cmocka_unit_test(test_wrong_secret_refused),
		cmocka_unit_test(test_open_secret_file_refused),
	};

	/* TALLY_TEST_FILTER=pattern runs only the matching tests */
	if (getenv("TALLY_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TALLY_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
