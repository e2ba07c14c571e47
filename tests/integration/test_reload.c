// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_reload.c - SIGHUP makes a running tallyd read its --config file
 * again: daemon.stuck_ms and daemon.log_level take effect under connected
 * clients with an operation pending, a key that needs a restart is logged
 * and kept, and a file with an error is refused whole (the running
 * configuration stays) without dropping a client.
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
#include "harness.h"

#define COUNT 1000

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* Wait at most @timeout_ms until @what appears in @n lines of the log. */
static int wait_log(const struct test_daemon *d, const char *what, int n,
		    int timeout_ms)
{
	uint64_t end = test_now_ms() + (uint64_t)timeout_ms;

	do {
		if (daemon_log_count(d, what) >= n)
			return 0;
		usleep(20000);
	} while (test_now_ms() < end);
	fprintf(stderr, "not in the log: '%s'\n", what);
	return -1;
}

static int32_t *submit(struct tally_client *c, int32_t base, uint64_t *req)
{
	int32_t *buf = tally_alloc(c, COUNT * sizeof(int32_t));
	struct tally_allreduce_args a = {
		.key = 7, .iteration = 1, .sendbuf = buf, .recvbuf = buf,
		.count = COUNT, .dtype = TALLY_INT32, .op = TALLY_SUM,
	};

	assert_non_null(buf);
	for (int i = 0; i < COUNT; i++)
		buf[i] = base + i;
	assert_int_equal(tally_allreduce(c, &a, req), 0);
	return buf;
}

static void test_reload_applies_and_refuses(void **state)
{
	char conf[160];
	const char *extra[] = { "--config", conf, NULL };
	struct test_daemon d;
	struct tally_client *a, *b, *c;
	uint64_t ra, rb, rc;
	int32_t *ba, *bb, *bc;
	int status = 0;

	(void)state;
	/* the file lives beside the daemon's directory, made before it */
	snprintf(conf, sizeof(conf), "/tmp/tally-reload-%d.conf", getpid());
	write_file(conf, "[daemon]\nstuck_ms = 0\nlog_level = info\n");
	assert_int_equal(daemon_start(&d, 3, extra), 0);
	assert_int_equal(tally_connect(d.sock, &a), 0);
	assert_int_equal(tally_connect(d.sock, &b), 0);
	assert_int_equal(wait_log(&d, "client rank 1 admitted", 1, 5000), 0);
	ba = submit(a, 1, &ra);		/* waits for b and c: stuck */
	usleep(300000);
	assert_int_equal(daemon_log_count(&d, "stuck: key 7"), 0);

	/* the watchdog starts, the log goes quieter, a restart key stays */
	write_file(conf, "[daemon]\nstuck_ms = 200\nlog_level = warn\n"
		   "idle_spin_us = 20\n[cluster]\nheartbeat_ms = 500\n");
	assert_int_equal(kill(d.pid, SIGHUP), 0);
	assert_int_equal(wait_log(&d, "reload: 3 keys applied, 1 kept", 1,
				  5000), 0);
	assert_int_equal(daemon_log_count(&d, "reload: daemon.stuck_ms 0 -> "
					  "200"), 1);
	assert_int_equal(daemon_log_count(&d, "reload: daemon.log_level info "
					  "-> warn"), 1);
	assert_int_equal(daemon_log_count(&d, "reload: daemon.idle_spin_us "
					  "50 -> 20"), 1);
	assert_int_equal(daemon_log_count(&d, "cluster.heartbeat_ms changed "
					  "(200 -> 500) but needs a restart"),
			 1);
	assert_int_equal(wait_log(&d, "stuck: key 7 iteration 1", 1, 5000),
			 0);
	/* an admission is logged at info, now below the level */
	assert_int_equal(tally_connect(d.sock, &c), 0);
	assert_int_equal(tally_rank(c), 2);

	/* a file with an error: refused, nothing of it applied */
	write_file(conf, "[daemon]\nstuck_ms = 100000\nlog_level = debug\n"
		   "no_such_key = 1\n");
	assert_int_equal(kill(d.pid, SIGHUP), 0);
	assert_int_equal(wait_log(&d, "refused, the running "
				  "configuration stays", 1, 5000), 0);
	assert_int_equal(daemon_log_count(&d, ":4: unknown key 'no_such_key'"),
			 1);
	assert_true(daemon_alive(&d));

	/* the clients were never dropped: the operation completes */
	bb = submit(b, 2, &rb);
	bc = submit(c, 3, &rc);
	assert_int_equal(tally_wait(a, ra, 5000), 0);
	assert_int_equal(tally_wait(b, rb, 5000), 0);
	assert_int_equal(tally_wait(c, rc, 5000), 0);
	for (int i = 0; i < COUNT; i++) {
		assert_int_equal(ba[i], 6 + 3 * i);
		assert_int_equal(bb[i], 6 + 3 * i);
		assert_int_equal(bc[i], 6 + 3 * i);
	}
	tally_disconnect(a);
	tally_disconnect(b);
	tally_disconnect(c);
	/* still at warn: no info line since the first reload */
	assert_int_equal(daemon_log_count(&d, "client rank 2 admitted"), 0);
	assert_int_equal(daemon_log_count(&d, "no longer stuck"), 0);

	/* the file fixed: the next SIGHUP applies it */
	write_file(conf, "[daemon]\nstuck_ms = 200\nlog_level = info\n"
		   "idle_spin_us = 20\n[cluster]\nheartbeat_ms = 500\n");
	assert_int_equal(kill(d.pid, SIGHUP), 0);
	assert_int_equal(wait_log(&d, "reload: 1 key applied, 1 kept", 1,
				  5000), 0);
	kill(d.pid, SIGTERM);
	assert_int_equal(waitpid(d.pid, &status, 0), d.pid);
	d.pid = 0;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(daemon_log_count(&d, "SIGHUP: reloading"), 2);
	unlink(conf);
	daemon_stop(&d);
}

/* Without --config a SIGHUP is logged and changes nothing. */
static void test_reload_without_config(void **state)
{
	struct test_daemon d;

	(void)state;
	assert_int_equal(daemon_start(&d, 1, NULL), 0);
	assert_int_equal(kill(d.pid, SIGHUP), 0);
	assert_int_equal(wait_log(&d, "started without --config, nothing "
				  "to reload", 1, 5000), 0);
	assert_true(daemon_alive(&d));
	assert_int_equal(daemon_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reload_applies_and_refuses),
		cmocka_unit_test(test_reload_without_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
