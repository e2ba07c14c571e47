// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_local_peer_loss.c - members and daemons that die mid-operation.
 *
 * A member that dies (killed, exits without a word, or corrupts its ring)
 * makes the others' pending operations fail with TALLY_EPEERLOST within a
 * second; the daemon keeps serving and admits a new job once the old one
 * is gone.  A daemon that dies makes its clients' waits return
 * TALLY_EDAEMONLOST instead of hanging.
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
#include "harness.h"
#include "shm/client_internal.h"

/* Detection must be this fast; the issue asks for 1 s. */
#define PEER_LOST_MS 1000

static struct test_daemon dmn;

static int setup_two(void **state)
{
	(void)state;
	return daemon_start(&dmn, 2, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return daemon_stop(&dmn);
}

enum victim_kind { VICTIM_KILLED, VICTIM_EXITS, VICTIM_CORRUPTS };

struct loss_arg {
	enum victim_kind kind;
	int submitted[2];	/* survivor -> victim: my op is pending */
	int victim_ready[2];	/* victim -> parent: connected */
};

static int survivor(void *p)
{
	struct loss_arg *a = p;
	struct tally_client *c;
	struct tally_allreduce_args args = { .key = 0, .count = 64 };
	uint64_t req, t0;
	float *buf;
	int ret;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 3);
	args.sendbuf = args.recvbuf = buf;
	CHECK(tally_allreduce(c, &args, &req) == 0, 4);
	t0 = test_now_ms();
	sync_signal(a->submitted[1]);
	ret = tally_wait(c, req, 5000);
	CHECK(ret == -TALLY_EPEERLOST, 5);
	CHECK(test_now_ms() - t0 < PEER_LOST_MS, 6);
	/* the job is over: new operations fail at once, never hang */
	args.iteration = 1;
	CHECK(tally_allreduce(c, &args, &req) == 0, 7);
	CHECK(tally_wait(c, req, 2000) == -TALLY_EPEERLOST, 8);
	tally_disconnect(c);
	return 0;
}

static int victim(void *p)
{
	struct loss_arg *a = p;
	struct tally_allreduce_args args = { .key = 1, .count = 64 };
	struct tally_client *c;
	uint64_t req, one = 1;
	float *buf;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	buf = tally_alloc(c, 4096);
	args.sendbuf = args.recvbuf = buf;
	CHECK(sync_wait(a->submitted[0], 10000) == 0, 3);
	switch (a->kind) {
	case VICTIM_KILLED:
		sync_signal(a->victim_ready[1]);
		pause();	/* the parent kills us */
		return 4;
	case VICTIM_EXITS:	/* a pending op of its own, then gone */
		CHECK(tally_allreduce(c, &args, &req) == 0, 5);
		_exit(0);
	case VICTIM_CORRUPTS:	/* a tail no consumer could believe */
		atomic_store(&c->sq.sh->tail,
			     atomic_load(&c->sq.sh->head) + 100000);
		(void)!write(c->sq_kick_fd, &one, sizeof(one));
		pause();	/* the daemon must drop us, not trust it */
		return 6;
	}
	return 7;
}

/* A fresh pair can run a job after the broken one is gone. */
static int fresh_member(void *p)
{
	struct tally_client *c = NULL;
	struct tally_allreduce_args args = { .key = 9, .count = 1 };
	uint64_t req;
	float *buf;

	(void)p;
	for (int i = 0; i < 200 && tally_connect(dmn.sock, &c); i++)
		usleep(10000);	/* refused until the old members left */
	CHECK(c, 2);
	buf = tally_alloc(c, 64);
	buf[0] = 2;
	args.sendbuf = args.recvbuf = buf;
	CHECK(tally_allreduce(c, &args, &req) == 0, 3);
	CHECK(tally_wait(c, req, 5000) == 0, 4);
	CHECK(buf[0] == 4.0f, 5);
	tally_disconnect(c);
	return 0;
}

static void run_loss(enum victim_kind kind)
{
	struct loss_arg a = { .kind = kind };
	pid_t s, v, f1, f2;
	int rs, rv;

	assert_int_equal(pipe(a.submitted), 0);
	assert_int_equal(pipe(a.victim_ready), 0);
	s = child_start(survivor, &a);
	v = child_start(victim, &a);
	if (kind == VICTIM_KILLED) {
		assert_int_equal(sync_wait(a.victim_ready[0], 10000), 0);
		kill(v, SIGKILL);
	}
	rs = child_wait(s, 10000);
	if (kind == VICTIM_CORRUPTS)
		kill(v, SIGKILL);
	rv = child_wait(v, 10000);
	assert_int_equal(rs, 0);
	assert_int_equal(rv, kind == VICTIM_EXITS ? 0 : -1);
	assert_true(daemon_alive(&dmn));

	f1 = child_start(fresh_member, NULL);
	f2 = child_start(fresh_member, NULL);
	assert_int_equal(child_wait(f1, 10000), 0);
	assert_int_equal(child_wait(f2, 10000), 0);
	for (int i = 0; i < 2; i++) {
		close(a.submitted[i]);
		close(a.victim_ready[i]);
	}
}

static void test_member_killed_mid_operation(void **state)
{
	(void)state;
	run_loss(VICTIM_KILLED);
}

static void test_member_exits_with_pending_operation(void **state)
{
	(void)state;
	run_loss(VICTIM_EXITS);
}

static void test_member_corrupting_its_ring_is_dropped(void **state)
{
	(void)state;
	run_loss(VICTIM_CORRUPTS);
}

static void test_daemon_death_fails_waits(void **state)
{
	struct tally_allreduce_args args = { .count = 16 };
	struct tally_client *c;
	uint64_t req, t0;
	float *buf;

	(void)state;
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	buf = tally_alloc(c, 4096);
	args.sendbuf = args.recvbuf = buf;
	/* pending: the second member never comes */
	assert_int_equal(tally_allreduce(c, &args, &req), 0);
	assert_int_equal(tally_wait(c, req, 100), -TALLY_ETIMEDOUT);
	kill(dmn.pid, SIGKILL);
	t0 = test_now_ms();
	assert_int_equal(tally_wait(c, req, 5000), -TALLY_EDAEMONLOST);
	assert_true(test_now_ms() - t0 < PEER_LOST_MS);
	args.iteration = 1;
	assert_int_equal(tally_allreduce(c, &args, &req), -TALLY_EDAEMONLOST);
	assert_null(tally_alloc(c, 4096));
	tally_disconnect(c);
}

/*
 * The daemon dies while the client is idle, then the client submits: the
 * submission rings the daemon's doorbell, a pipe nobody reads any more.
 * That must be an error the call returns, not a SIGPIPE that kills the
 * training process (this process keeps SIGPIPE's default action).
 */
static void test_submit_after_daemon_death_survives(void **state)
{
	struct tally_allreduce_args args = { .count = 16 };
	struct tally_client *c;
	uint64_t req, t0;
	float *buf;
	int r;

	(void)state;
	assert_true(signal(SIGPIPE, SIG_DFL) != SIG_ERR);
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	buf = tally_alloc(c, 4096);
	assert_non_null(buf);
	args.sendbuf = args.recvbuf = buf;
	usleep(100 * 1000);	/* the daemon goes to sleep on its doorbell */
	kill(dmn.pid, SIGKILL);
	t0 = test_now_ms();
	while (daemon_alive(&dmn))	/* reaps it: its fds are closed */
		assert_true(test_now_ms() - t0 < 5000);
	dmn.pid = 0;
	r = tally_allreduce(c, &args, &req);
	assert_true(r == 0 || r == -TALLY_EDAEMONLOST);
	if (r == 0)
		assert_int_equal(tally_wait(c, req, 5000), -TALLY_EDAEMONLOST);
	args.iteration = 1;
	assert_int_equal(tally_allreduce(c, &args, &req), -TALLY_EDAEMONLOST);
	tally_disconnect(c);
}

static int teardown_killed(void **state)
{
	(void)state;
	daemon_stop(&dmn);	/* reaps the daemon we killed */
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_member_killed_mid_operation, setup_two, teardown),
		cmocka_unit_test_setup_teardown(
			test_member_exits_with_pending_operation, setup_two,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_member_corrupting_its_ring_is_dropped, setup_two,
			teardown),
		cmocka_unit_test_setup_teardown(test_daemon_death_fails_waits,
						setup_two, teardown_killed),
		cmocka_unit_test_setup_teardown(
			test_submit_after_daemon_death_survives, setup_two,
			teardown_killed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
