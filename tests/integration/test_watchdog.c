// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_watchdog.c - a real tallyd reports an operation stuck past
 * daemon.stuck_ms, once, naming what it waits for, and logs its end:
 * locally (a member that has not submitted) and across hosts (the engine
 * waits for a host that has not submitted).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "cluster_harness.h"

#define COUNT 1000

/* The first log line containing @what, copied to @line; 0 or -1 when it
 * did not appear within @timeout_ms. */
static int wait_log(const char *path, const char *what, char *line,
		    size_t len, int timeout_ms)
{
	uint64_t end = test_now_ms() + (uint64_t)timeout_ms;

	do {
		FILE *f = fopen(path, "r");

		if (f) {
			while (fgets(line, (int)len, f)) {
				if (strstr(line, what)) {
					fclose(f);
					return 0;
				}
			}
			fclose(f);
		}
		usleep(20000);
	} while (test_now_ms() < end);
	return -1;
}

/* SIGTERM and reap, leaving the log for reading; daemon_stop() then only
 * removes the directory. */
static void stop_keep_log(struct test_daemon *d)
{
	int status = 0;

	kill(d->pid, SIGTERM);
	for (int i = 0; waitpid(d->pid, &status, WNOHANG) != d->pid; i++) {
		assert_true(i < 500);
		usleep(10000);
	}
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	d->pid = 0;
}

static int32_t *submit(struct tally_client *c, int32_t base, uint64_t key,
		       uint64_t *req)
{
	int32_t *buf = tally_alloc(c, COUNT * sizeof(int32_t));
	struct tally_allreduce_args a = {
		.key = key, .iteration = 1, .sendbuf = buf, .recvbuf = buf,
		.count = COUNT, .dtype = TALLY_INT32, .op = TALLY_SUM,
	};

	assert_non_null(buf);
	for (int i = 0; i < COUNT; i++)
		buf[i] = base + i;
	assert_int_equal(tally_allreduce(c, &a, req), 0);
	return buf;
}

/* Every buffer holds sum over the members of (base + i), bases 1..n. */
static void expect_sum(int32_t *buf, int n)
{
	for (int i = 0; i < COUNT; i++)
		assert_int_equal(buf[i], n * (n + 1) / 2 + n * i);
}

static void test_local_member_missing(void **state)
{
	static const char *const extra[] = {
		"--set", "daemon.stuck_ms=200", NULL,
	};
	struct test_daemon d;
	struct tally_client *a, *b;
	uint64_t ra, rb, t0;
	int32_t *ba, *bb;
	char line[1024];

	(void)state;
	assert_int_equal(daemon_start(&d, 2, extra), 0);
	assert_int_equal(tally_connect(d.sock, &a), 0);
	assert_int_equal(tally_connect(d.sock, &b), 0);
	t0 = test_now_ms();
	ba = submit(a, 1, 7, &ra);
	assert_int_equal(wait_log(d.log, "stuck: key 7 iteration 1", line,
				  sizeof(line), 5000), 0);
	assert_true(test_now_ms() - t0 >= 200);
	assert_non_null(strstr(line, "local ranks 1 have not submitted"));
	usleep(300000);			/* reported once, not per scan */
	assert_int_equal(daemon_log_count(&d, "stuck: key 7"), 1);

	bb = submit(b, 2, 7, &rb);
	assert_int_equal(tally_wait(a, ra, 5000), 0);
	assert_int_equal(tally_wait(b, rb, 5000), 0);
	expect_sum(ba, 2);
	expect_sum(bb, 2);
	assert_int_equal(wait_log(d.log, "key 7 iteration 1 is no longer "
				  "stuck", line, sizeof(line), 5000), 0);
	tally_disconnect(a);
	tally_disconnect(b);
	stop_keep_log(&d);
	/* the statistics at exit count the report */
	assert_int_equal(daemon_log_count(&d, "1 reported stuck"), 1);
	assert_int_equal(daemon_stop(&d), 0);	/* removes the directory */
}

/* Host 0 submits, host 1 does not: host 0's tensor waits in the engine
 * for the aggregator's result, and the report says so. */
static void test_cluster_host_missing(void **state)
{
	static const char *const extra[] = {
		"--set", "daemon.stuck_ms=300", NULL,
	};
	struct cluster_spec spec = { .workers = 2, .aggregators = 1,
				     .role = "worker",
				     .algorithm = "aggregate",
				     .extra = extra };
	struct test_cluster tc;
	struct tally_client *c[2][CL_LOCAL];
	uint64_t req[2][CL_LOCAL];
	int32_t *buf[2][CL_LOCAL];
	char line[1024];

	(void)state;
	assert_int_equal(cluster_up(&tc, &spec), 0);
	for (int h = 0; h < 2; h++)
		for (int r = 0; r < CL_LOCAL; r++)
			assert_int_equal(tally_connect(tc.d[h].sock, &c[h][r]),
					 0);
	for (int r = 0; r < CL_LOCAL; r++)
		buf[0][r] = submit(c[0][r], 1 + r, 9, &req[0][r]);
	assert_int_equal(wait_log(tc.d[0].log, "stuck: key 9 iteration 1",
				  line, sizeof(line), 5000), 0);
	print_message("%s", line);
	assert_non_null(strstr(line, "engine tensor"));
	assert_non_null(strstr(line, "waits on node 2"));

	for (int r = 0; r < CL_LOCAL; r++)
		buf[1][r] = submit(c[1][r], 1 + CL_LOCAL + r, 9, &req[1][r]);
	for (int h = 0; h < 2; h++)
		for (int r = 0; r < CL_LOCAL; r++) {
			assert_int_equal(tally_wait(c[h][r], req[h][r], 5000),
					 0);
			expect_sum(buf[h][r], 2 * CL_LOCAL);
		}
	assert_int_equal(wait_log(tc.d[0].log, "key 9 iteration 1 is no "
				  "longer stuck", line, sizeof(line), 5000), 0);
	for (int h = 0; h < 2; h++)
		for (int r = 0; r < CL_LOCAL; r++)
			tally_disconnect(c[h][r]);
	assert_int_equal(cluster_down(&tc), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local_member_missing),
		cmocka_unit_test(test_cluster_host_missing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
