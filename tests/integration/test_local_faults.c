// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_local_faults.c - bad input against a real tallyd: every case gets a
 * clear error, nothing is lost, nothing hangs, and the daemon keeps
 * serving.  Raw descriptors go through the library's internal submit call
 * to reach the daemon's own validation past the library's.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "harness.h"
#include "shm/client_internal.h"
#include "shm/fdpass.h"

static struct test_daemon dmn;

static int setup_one(void **state)
{
	(void)state;
	return daemon_start(&dmn, 1, NULL);
}

static int setup_two(void **state)
{
	(void)state;
	return daemon_start(&dmn, 2, NULL);
}

static int setup_three(void **state)
{
	(void)state;
	return daemon_start(&dmn, 3, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return daemon_stop(&dmn);	/* non-zero if it crashed */
}

static int do_allreduce(struct tally_client *c, uint64_t key, uint64_t iter,
			float *buf, uint64_t count)
{
	struct tally_allreduce_args a = {
		.key = key, .iteration = iter, .sendbuf = buf, .recvbuf = buf,
		.count = count,
	};
	uint64_t req;
	int ret = tally_allreduce(c, &a, &req);

	return ret ? ret : tally_wait(c, req, 5000);
}

/* A one-member group: a plain op must still work after each bad one. */
static void assert_still_serving(struct tally_client *c)
{
	float *b = tally_alloc(c, 4096);

	assert_non_null(b);
	b[0] = 3;
	assert_int_equal(do_allreduce(c, 999, 0, b, 1), 0);
	assert_true(b[0] == 3.0f);
	tally_free(c, b);
	assert_true(daemon_alive(&dmn));
}

static void test_api_argument_errors(void **state)
{
	struct tally_client *c;
	struct tally_allreduce_args a = { .count = 4 };
	float *buf, stack[4];
	uint64_t req;

	(void)state;
	assert_int_equal(tally_connect("/nonexistent/tally.sock", &c),
			 -TALLY_ECONNECT);
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	buf = tally_alloc(c, 4096);
	assert_non_null(buf);
	assert_null(tally_alloc(c, 0));

	a.sendbuf = a.recvbuf = buf;
	assert_int_equal(tally_allreduce(c, NULL, &req), -TALLY_EINVAL);
	a.dtype = TALLY_DTYPE_MAX;
	assert_int_equal(tally_allreduce(c, &a, &req), -TALLY_EINVAL);
	a.dtype = TALLY_FLOAT32;
	a.op = TALLY_OP_MAX;
	assert_int_equal(tally_allreduce(c, &a, &req), -TALLY_EINVAL);
	a.op = TALLY_SUM;
	a.count = 0;
	assert_int_equal(tally_allreduce(c, &a, &req), -TALLY_EINVAL);
	a.count = UINT64_MAX / 2;
	assert_int_equal(tally_allreduce(c, &a, &req), -TALLY_EINVAL);
	/* memory the daemon cannot see, or running past the segment */
	a.count = 4;
	a.sendbuf = a.recvbuf = stack;
	assert_int_equal(tally_allreduce(c, &a, &req), -TALLY_ERANGE);
	a.sendbuf = a.recvbuf = buf;
	a.count = 4096 / 4 + 1;
	assert_int_equal(tally_allreduce(c, &a, &req), -TALLY_ERANGE);
	/* not aligned to the element size */
	a.count = 4;
	a.sendbuf = a.recvbuf = (char *)buf + 2;
	assert_int_equal(tally_allreduce(c, &a, &req), -TALLY_EINVAL);
	a.sendbuf = buf;
	/* partial overlap of send and receive */
	a.count = 8;
	a.recvbuf = buf + 4;
	assert_int_equal(tally_allreduce(c, &a, &req), -TALLY_EINVAL);

	/* unknown and already-consumed handles */
	assert_int_equal(tally_wait(c, 12345, 0), -TALLY_ENOENT);
	a.recvbuf = buf;
	assert_int_equal(tally_allreduce(c, &a, &req), 0);
	assert_int_equal(tally_wait(c, req, 5000), 0);
	assert_int_equal(tally_wait(c, req, 0), -TALLY_ENOENT);
	assert_int_equal(tally_test(c, req), -TALLY_ENOENT);
	assert_string_equal(tally_strerror(-TALLY_EPEERLOST),
			    tally_strerror(TALLY_EPEERLOST));
	assert_still_serving(c);
	tally_disconnect(c);
}

static void test_admission_refused_when_group_full(void **state)
{
	struct tally_client *a, *b;

	(void)state;
	assert_int_equal(tally_connect(dmn.sock, &a), 0);
	assert_int_equal(tally_connect(dmn.sock, &b), -TALLY_EDENIED);
	tally_disconnect(a);
	/* the seat is free again once the member left */
	for (int i = 0; i < 100; i++) {
		if (tally_connect(dmn.sock, &b) == 0)
			break;
		b = NULL;
		usleep(10000);
	}
	assert_non_null(b);
	assert_still_serving(b);
	tally_disconnect(b);
}

static int raw_submit(struct tally_client *c, struct tally_sqe *s)
{
	uint64_t req;
	int ret = client_submit_sqe(c, s, &req);

	return ret ? ret : tally_wait(c, req, 5000);
}

static void test_daemon_rejects_bad_descriptors(void **state)
{
	struct tally_client *c;
	struct tally_sqe good, s;
	uint32_t seg;
	uint64_t off;
	float *buf;

	(void)state;
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	buf = tally_alloc(c, 4096);
	assert_int_equal(client_translate(c, buf, 4096, &seg, &off), 0);
	good = (struct tally_sqe){ .opcode = TALLY_OP_ALLREDUCE,
		.dtype = TALLY_FLOAT32, .redop = TALLY_SUM, .count = 16,
		.send_seg = seg, .recv_seg = seg, .key = 5 };

	s = good;
	s.opcode = 99;
	assert_int_equal(raw_submit(c, &s), -TALLY_EBADOP);
	s = good;
	s.dtype = 77;
	assert_int_equal(raw_submit(c, &s), -TALLY_EBADOP);
	s = good;
	s.redop = 9;
	assert_int_equal(raw_submit(c, &s), -TALLY_EBADOP);
	s = good;
	s.count = UINT64_MAX;
	assert_int_equal(raw_submit(c, &s), -TALLY_EINVAL);
	s = good;
	s.send_seg = 42;	/* never registered */
	assert_int_equal(raw_submit(c, &s), -TALLY_ERANGE);
	s = good;
	s.recv_seg = TALLY_CTRL_SEG_ID;	/* the rings: never a buffer */
	assert_int_equal(raw_submit(c, &s), -TALLY_ERANGE);
	s = good;
	s.send_off = 4096 - 8;	/* runs past the end */
	assert_int_equal(raw_submit(c, &s), -TALLY_ERANGE);
	s = good;
	s.recv_off = UINT64_MAX - 7;	/* offset + length overflows */
	assert_int_equal(raw_submit(c, &s), -TALLY_ERANGE);
	s = good;
	s.recv_off = 8;		/* partial overlap with the send range */
	assert_int_equal(raw_submit(c, &s), -TALLY_ERANGE);
	s = good;
	s.send_off = s.recv_off = 1;	/* misaligned floats (fuzz-submit) */
	assert_int_equal(raw_submit(c, &s), -TALLY_EINVAL);
	s = good;
	s.dtype = TALLY_FLOAT16;
	s.send_off = s.recv_off = 3;	/* odd half-words */
	assert_int_equal(raw_submit(c, &s), -TALLY_EINVAL);
	s = good;
	s.opcode = TALLY_OP_NOP;
	assert_int_equal(raw_submit(c, &s), 0);
	assert_int_equal(raw_submit(c, &good), 0);
	assert_still_serving(c);
	tally_disconnect(c);
}

/* A control message with a wrong magic, and a HELLO without its fds. */
static void test_malformed_control_messages(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct tally_client *c;
	struct tally_msg m;
	int fds[3], nfds, s;

	(void)state;
	strcpy(sa.sun_path, dmn.sock);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(s, "garbage that is not a message of ours!!"
			       "........", 48), 48);
	/* told it speaks another protocol, then closed */
	assert_int_equal(msg_recv(s, &m, fds, &nfds), 1);
	assert_int_equal(m.status, -TALLY_EPROTO);
	assert_int_equal(msg_recv(s, &m, fds, &nfds), 0);
	close(s);

	s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	msg_init(&m, TALLY_MSG_HELLO);
	m.arg[0] = m.arg[1] = 256;
	m.arg[2] = 1 << 20;
	assert_int_equal(msg_send(s, &m, NULL, 0), 0);
	assert_int_equal(msg_recv(s, &m, fds, &nfds), 1);
	assert_int_equal(m.type, TALLY_MSG_WELCOME);
	assert_int_equal(m.status, -TALLY_EINVAL);
	close(s);

	/* half a message, then silence: dropped after its timeout */
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(s, &m, 10), 10);
	assert_int_equal(msg_recv(s, &m, fds, &nfds), 0);
	close(s);

	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	assert_still_serving(c);
	tally_disconnect(c);
}

/*
 * Back-pressure at the API: with the peer silent, a client fills its
 * TALLY_MAX_INFLIGHT requests and the next submit says EAGAIN; when the
 * peer catches up every request completes correctly.
 */
struct bp_arg {
	int go[2];
};

static int bp_late_peer(void *p)
{
	struct bp_arg *a = p;
	struct tally_client *c;
	float *buf;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	buf = tally_alloc(c, TALLY_MAX_INFLIGHT * sizeof(float));
	CHECK(buf, 3);
	CHECK(sync_wait(a->go[0], 10000) == 0, 4);
	for (int k = 0; k < TALLY_MAX_INFLIGHT; k++) {
		buf[k] = 1;
		CHECK(do_allreduce(c, (uint64_t)k, 0, buf + k, 1) == 0, 5);
		CHECK(buf[k] == 1 + (float)k, 6);
	}
	tally_disconnect(c);
	return 0;
}

static void test_full_rings_push_back_and_lose_nothing(void **state)
{
	struct tally_allreduce_args a = { .count = 1 };
	struct tally_client *c;
	uint64_t req[TALLY_MAX_INFLIGHT], extra;
	struct bp_arg arg;
	float *buf;
	pid_t peer;

	(void)state;
	assert_int_equal(pipe(arg.go), 0);
	peer = child_start(bp_late_peer, &arg);
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	buf = tally_alloc(c, (TALLY_MAX_INFLIGHT + 1) * sizeof(float));
	for (int k = 0; k < TALLY_MAX_INFLIGHT; k++) {
		buf[k] = (float)k;
		a.key = (uint64_t)k;
		a.sendbuf = a.recvbuf = buf + k;
		assert_int_equal(tally_allreduce(c, &a, &req[k]), 0);
	}
	a.key = TALLY_MAX_INFLIGHT;
	a.sendbuf = a.recvbuf = buf + TALLY_MAX_INFLIGHT;
	assert_int_equal(tally_allreduce(c, &a, &extra), -TALLY_EAGAIN);
	assert_int_equal(tally_test(c, req[0]), -TALLY_EINPROGRESS);
	assert_int_equal(tally_wait(c, req[0], 50), -TALLY_ETIMEDOUT);

	sync_signal(arg.go[1]);
	for (int k = 0; k < TALLY_MAX_INFLIGHT; k++) {
		assert_int_equal(tally_wait(c, req[k], 10000), 0);
		assert_true(buf[k] == 1 + (float)k);
	}
	assert_int_equal(child_wait(peer, 20000), 0);
	tally_disconnect(c);
	close(arg.go[0]);
	close(arg.go[1]);
}

/*
 * Back-pressure inside the daemon: a client that pushes descriptors
 * straight into its ring and does not reap.  The daemon stops taking them
 * when the completion ring could overflow; once the client reaps, every
 * one of them completes exactly once.
 */
static void test_daemon_never_overflows_completion_ring(void **state)
{
	enum { TOTAL = CLIENT_SQ_ENTRIES + CLIENT_CQ_ENTRIES };
	static unsigned char seen[TOTAL];
	struct tally_client *c;
	struct tally_sqe s = { .opcode = TALLY_OP_NOP };
	struct tally_cqe cqe;
	uint64_t one = 1, start;
	int pushed = 0, reaped = 0;

	(void)state;
	memset(seen, 0, sizeof(seen));
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	start = test_now_ms();
	while (pushed < TOTAL && test_now_ms() - start < 5000) {
		s.user_data = (uint64_t)pushed;
		if (ring_push(&c->sq, &s) == 0)
			pushed++;
		else
			usleep(1000);
		(void)!write(c->sq_kick_fd, &one, sizeof(one));
	}
	assert_int_equal(pushed, TOTAL);	/* daemon took the first half */
	usleep(200000);
	s.user_data = TOTAL;
	assert_int_equal(ring_push(&c->sq, &s), -1);	/* and stopped */

	start = test_now_ms();
	while (reaped < TOTAL && test_now_ms() - start < 10000) {
		if (ring_pop(&c->cq, &cqe) == 1) {
			assert_true(cqe.user_data < TOTAL);
			assert_int_equal(seen[cqe.user_data], 0);
			assert_int_equal(cqe.res, 0);
			seen[cqe.user_data] = 1;
			reaped++;
		} else {
			(void)!write(c->sq_kick_fd, &one, sizeof(one));
			usleep(1000);
		}
	}
	assert_int_equal(reaped, TOTAL);
	tally_disconnect(c);
}

/* Members disagreeing on count or dtype: all of them fail, later members
 * of the same (key, iteration) too, and the next key works. */
struct mm_arg {
	int rank_count[3];
	int rank_dtype[3];
	int order[2];	/* rank 2 starts after ranks 0 and 1 finished */
};

static int mm_member(void *p, int want_mismatch)
{
	struct mm_arg *a = p;
	struct tally_client *c;
	float *buf;
	uint64_t req;
	int rank;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 3);
	if (rank == 2)
		CHECK(sync_wait(a->order[0], 10000) == 0 &&
		      sync_wait(a->order[0], 10000) == 0, 4);
	{
		struct tally_allreduce_args args = {
			.key = 7, .sendbuf = buf, .recvbuf = buf,
			.count = (uint64_t)a->rank_count[rank],
			.dtype = a->rank_dtype[rank],
		};

		CHECK(tally_allreduce(c, &args, &req) == 0, 5);
		CHECK(tally_wait(c, req, 5000) ==
		      (want_mismatch ? -TALLY_EMISMATCH : 0), 6);
	}
	if (rank < 2)
		sync_signal(a->order[1]);
	buf[0] = (float)rank;
	CHECK(do_allreduce(c, 8, 0, buf, 1) == 0, 7);
	CHECK(buf[0] == 3.0f, 8);
	tally_disconnect(c);
	return 0;
}

static int mm_expect_mismatch(void *p)
{
	return mm_member(p, 1);
}

static void run_mismatch(const int *counts, const int *dtypes)
{
	struct mm_arg a;
	pid_t pid[3];

	memcpy(a.rank_count, counts, sizeof(a.rank_count));
	memcpy(a.rank_dtype, dtypes, sizeof(a.rank_dtype));
	assert_int_equal(pipe(a.order), 0);
	for (int i = 0; i < 3; i++)
		pid[i] = child_start(mm_expect_mismatch, &a);
	for (int i = 0; i < 3; i++)
		assert_int_equal(child_wait(pid[i], 20000), 0);
	close(a.order[0]);
	close(a.order[1]);
	assert_true(daemon_alive(&dmn));
}

static void test_count_mismatch_fails_every_member(void **state)
{
	static const int counts[3] = { 16, 32, 16 };
	static const int dtypes[3] = { 0, 0, 0 };

	(void)state;
	run_mismatch(counts, dtypes);
}

static void test_dtype_mismatch_fails_every_member(void **state)
{
	static const int counts[3] = { 16, 16, 16 };
	static const int dtypes[3] = { TALLY_FLOAT32, TALLY_INT32,
				       TALLY_FLOAT32 };

	(void)state;
	run_mismatch(counts, dtypes);
}

/* Submitting the same (key, iteration) twice is refused; the first stays. */
static int dup_member(void *p)
{
	int *go = p;
	struct tally_client *c;
	uint64_t r1, r2;
	float *buf;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	buf = tally_alloc(c, 4096);
	buf[0] = 1;
	if (tally_rank(c) == 0) {
		struct tally_allreduce_args a = { .key = 1, .sendbuf = buf,
			.recvbuf = buf, .count = 1 };

		CHECK(tally_allreduce(c, &a, &r1) == 0, 3);
		CHECK(tally_allreduce(c, &a, &r2) == 0, 4);
		CHECK(tally_wait(c, r2, 5000) == -TALLY_EBADOP, 5);
		sync_signal(go[1]);
		CHECK(tally_wait(c, r1, 5000) == 0, 6);
	} else {
		CHECK(sync_wait(go[0], 10000) == 0, 7);
		CHECK(do_allreduce(c, 1, 0, buf, 1) == 0, 8);
	}
	CHECK(buf[0] == 2.0f, 9);
	tally_disconnect(c);
	return 0;
}

static void test_duplicate_submission_is_refused(void **state)
{
	int go[2];
	pid_t a, b;

	(void)state;
	assert_int_equal(pipe(go), 0);
	a = child_start(dup_member, go);
	b = child_start(dup_member, go);
	assert_int_equal(child_wait(a, 20000), 0);
	assert_int_equal(child_wait(b, 20000), 0);
	close(go[0]);
	close(go[1]);
}

int main(void)
{
	const struct CMUnitTest one[] = {
		cmocka_unit_test_setup_teardown(test_api_argument_errors,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(
			test_admission_refused_when_group_full, setup_one,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_daemon_rejects_bad_descriptors, setup_one,
			teardown),
		cmocka_unit_test_setup_teardown(test_malformed_control_messages,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(
			test_daemon_never_overflows_completion_ring,
			setup_one, teardown),
		cmocka_unit_test_setup_teardown(
			test_full_rings_push_back_and_lose_nothing, setup_two,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_count_mismatch_fails_every_member, setup_three,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_dtype_mismatch_fails_every_member, setup_three,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_duplicate_submission_is_refused, setup_two,
			teardown),
	};

	return cmocka_run_group_tests(one, NULL, NULL);
}
