// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_fdpass.c - unit tests of msg_send/msg_recv (shm/fdpass.c) over a
 * Unix socketpair.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "shm/fdpass.h"

#define FD_SCAN_MAX 1024

struct pair {
	int tx;
	int rx;
	int open_before;	/* open descriptors when the test began */
};

static int count_open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < FD_SCAN_MAX; fd++)
		if (fcntl(fd, F_GETFD) != -1)
			n++;
	return n;
}

static bool fd_is_open(int fd)
{
	return fd >= 0 && fcntl(fd, F_GETFD) != -1;
}

static int pair_setup(void **state)
{
	static struct pair p;
	int sv[2];

	p.open_before = count_open_fds();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	p.tx = sv[0];
	p.rx = sv[1];
	*state = &p;
	return 0;
}

/* Every test must leave exactly the descriptors it found. */
static int pair_teardown(void **state)
{
	struct pair *p = *state;

	if (p->tx >= 0)
		close(p->tx);
	if (p->rx >= 0)
		close(p->rx);
	if (count_open_fds() != p->open_before) {
		print_error("descriptor leak: %d open, %d before\n",
			    count_open_fds(), p->open_before);
		return -1;
	}
	return 0;
}

static void fill_msg(struct tally_msg *m, uint64_t tag)
{
	msg_init(m, TALLY_MSG_SEG_ADD);
	m->status = -(int32_t)(tag & 0xff);
	for (int i = 0; i < 4; i++)
		m->arg[i] = tag * 0x100000001ull + (uint64_t)i;
}

static void assert_msg_equal(const struct tally_msg *a,
			     const struct tally_msg *b)
{
	assert_memory_equal(a, b, sizeof(*a));
}

/* Data written into @w comes out of @r: the two fds are ends of one pipe
 * (possibly through received duplicates). */
static void assert_pipe_works(int w, int r, const char *text)
{
	char buf[64] = { 0 };
	size_t len = strlen(text);

	assert_int_equal(write(w, text, len), (ssize_t)len);
	assert_int_equal(read(r, buf, sizeof(buf)), (ssize_t)len);
	assert_memory_equal(buf, text, len);
}

static void test_msg_init_fills_header(void **state)
{
	struct tally_msg m;

	(void)state;
	memset(&m, 0xff, sizeof(m));
	msg_init(&m, TALLY_MSG_WELCOME);
	assert_int_equal(m.magic, TALLY_MSG_MAGIC);
	assert_int_equal(m.version, TALLY_PROTO_VERSION);
	assert_int_equal(m.type, TALLY_MSG_WELCOME);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.pad, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(m.arg[i], 0);
}

static void test_fdpass_message_without_fds(void **state)
{
	struct pair *p = *state;
	struct tally_msg out, in;
	int fds[TALLY_MSG_MAX_FDS] = { 7, 7, 7 }, nfds = 99;

	fill_msg(&out, 0x1234);
	assert_int_equal(msg_send(p->tx, &out, NULL, 0), 0);
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), 1);
	assert_msg_equal(&in, &out);
	assert_int_equal(nfds, 0);
	for (int i = 0; i < TALLY_MSG_MAX_FDS; i++)
		assert_int_equal(fds[i], -1);
}

static void check_send_n_fds(struct pair *p, int n)
{
	struct tally_msg out, in;
	int pipes[TALLY_MSG_MAX_FDS][2];
	int send_fds[TALLY_MSG_MAX_FDS];
	int fds[TALLY_MSG_MAX_FDS], nfds = -1;

	for (int i = 0; i < n; i++) {
		assert_int_equal(pipe(pipes[i]), 0);
		send_fds[i] = pipes[i][1];	/* send the write ends */
	}
	fill_msg(&out, 0x55u + (unsigned int)n);
	assert_int_equal(msg_send(p->tx, &out, send_fds, n), 0);
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), 1);
	assert_msg_equal(&in, &out);
	assert_int_equal(nfds, n);
	for (int i = 0; i < n; i++) {
		char text[64];

		assert_true(fd_is_open(fds[i]));
		assert_int_not_equal(fds[i], pipes[i][1]);	/* a new fd */
		assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
		/* in order: received fd i is pipe i's write end */
		snprintf(text, sizeof(text), "through fd %d of %d", i, n);
		assert_pipe_works(fds[i], pipes[i][0], text);
	}
	for (int i = n; i < TALLY_MSG_MAX_FDS; i++)
		assert_int_equal(fds[i], -1);
	for (int i = 0; i < n; i++) {
		close(fds[i]);
		close(pipes[i][0]);
		close(pipes[i][1]);
	}
}

static void test_fdpass_one_fd(void **state)
{
	check_send_n_fds(*state, 1);
}

static void test_fdpass_three_fds(void **state)
{
	check_send_n_fds(*state, 3);
}

static void test_fdpass_several_messages_in_a_row(void **state)
{
	struct pair *p = *state;

	for (int i = 0; i < 10; i++)
		check_send_n_fds(p, i % (TALLY_MSG_MAX_FDS + 1));
}

static void test_fdpass_send_rejects_bad_count(void **state)
{
	struct pair *p = *state;
	struct tally_msg m;
	int fds[4] = { 0, 1, 2, 0 };

	fill_msg(&m, 1);
	assert_int_equal(msg_send(p->tx, &m, fds, TALLY_MSG_MAX_FDS + 1),
			 -EINVAL);
	assert_int_equal(msg_send(p->tx, &m, fds, -1), -EINVAL);
}

static void test_fdpass_send_on_closed_peer(void **state)
{
	struct pair *p = *state;
	struct tally_msg m;

	fill_msg(&m, 1);
	close(p->rx);
	p->rx = -1;
	/* MSG_NOSIGNAL: an error, not SIGPIPE */
	assert_int_equal(msg_send(p->tx, &m, NULL, 0), -EPIPE);
}

static void test_fdpass_bad_magic_closes_fds(void **state)
{
	struct pair *p = *state;
	struct tally_msg out, in;
	int pfd[2], fds[TALLY_MSG_MAX_FDS], nfds = -1;
	int send_fds[2];

	assert_int_equal(pipe(pfd), 0);
	send_fds[0] = pfd[0];
	send_fds[1] = pfd[1];
	fill_msg(&out, 9);
	out.magic ^= 1;
	assert_int_equal(msg_send(p->tx, &out, send_fds, 2), 0);
	close(pfd[0]);
	close(pfd[1]);
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), -EPROTO);
	assert_int_equal(nfds, 0);
	for (int i = 0; i < TALLY_MSG_MAX_FDS; i++)
		assert_int_equal(fds[i], -1);
	/* the teardown's count proves the two received fds were closed */
}

static void test_fdpass_bad_version_closes_fds(void **state)
{
	struct pair *p = *state;
	struct tally_msg out, in;
	int pfd[2], fds[TALLY_MSG_MAX_FDS], nfds = -1;

	assert_int_equal(pipe(pfd), 0);
	fill_msg(&out, 10);
	out.version = TALLY_PROTO_VERSION + 1;
	assert_int_equal(msg_send(p->tx, &out, pfd, 1), 0);
	close(pfd[0]);
	close(pfd[1]);
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), -EPROTO);
	assert_int_equal(nfds, 0);
	assert_int_equal(fds[0], -1);
}

static void test_fdpass_eof_returns_zero(void **state)
{
	struct pair *p = *state;
	struct tally_msg in;
	int fds[TALLY_MSG_MAX_FDS], nfds = -1;

	close(p->tx);
	p->tx = -1;
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), 0);
	assert_int_equal(nfds, 0);
	for (int i = 0; i < TALLY_MSG_MAX_FDS; i++)
		assert_int_equal(fds[i], -1);
}

static void test_fdpass_eof_after_whole_message(void **state)
{
	struct pair *p = *state;
	struct tally_msg out, in;
	int fds[TALLY_MSG_MAX_FDS], nfds;

	fill_msg(&out, 3);
	assert_int_equal(msg_send(p->tx, &out, NULL, 0), 0);
	close(p->tx);
	p->tx = -1;
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), 1);
	assert_msg_equal(&in, &out);
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), 0);
}

static void test_fdpass_truncated_message_then_eof(void **state)
{
	struct pair *p = *state;
	struct tally_msg out, in;
	int fds[TALLY_MSG_MAX_FDS], nfds = -1;

	fill_msg(&out, 4);
	assert_int_equal(write(p->tx, &out, 20), 20);
	close(p->tx);
	p->tx = -1;
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), -ECONNRESET);
	assert_int_equal(nfds, 0);
}

static void test_fdpass_truncated_with_fd_closes_it(void **state)
{
	struct pair *p = *state;
	struct tally_msg out, in;
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov;
	struct msghdr mh = { 0 };
	struct cmsghdr *cm;
	int pfd[2], fds[TALLY_MSG_MAX_FDS], nfds = -1;

	assert_int_equal(pipe(pfd), 0);
	fill_msg(&out, 5);
	iov.iov_base = &out;
	iov.iov_len = 30;		/* part of a message, with an fd */
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl;
	mh.msg_controllen = sizeof(ctl);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &pfd[1], sizeof(int));
	assert_int_equal(sendmsg(p->tx, &mh, 0), 30);
	close(pfd[1]);
	close(p->tx);
	p->tx = -1;
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), -ECONNRESET);
	assert_int_equal(nfds, 0);
	assert_int_equal(fds[0], -1);
	close(pfd[0]);
}

static void test_fdpass_message_in_pieces(void **state)
{
	struct pair *p = *state;
	struct tally_msg out, in;
	int pfd[2], fds[TALLY_MSG_MAX_FDS], nfds = -1;
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov;
	struct msghdr mh = { 0 };
	struct cmsghdr *cm;

	/* first 10 bytes with the fd, the rest in a second write: one
	 * message with the fd comes out */
	assert_int_equal(pipe(pfd), 0);
	fill_msg(&out, 6);
	iov.iov_base = &out;
	iov.iov_len = 10;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl;
	mh.msg_controllen = sizeof(ctl);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &pfd[1], sizeof(int));
	assert_int_equal(sendmsg(p->tx, &mh, 0), 10);
	assert_int_equal(write(p->tx, (char *)&out + 10, sizeof(out) - 10),
			 (ssize_t)(sizeof(out) - 10));
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), 1);
	assert_msg_equal(&in, &out);
	assert_int_equal(nfds, 1);
	assert_pipe_works(fds[0], pfd[0], "pieces");
	close(fds[0]);
	close(pfd[0]);
	close(pfd[1]);
}

/* A peer attaching more fds than a message may carry: the first
 * TALLY_MSG_MAX_FDS are delivered, the others closed (no leak). */
static void check_too_many_fds(struct pair *p, int n)
{
	struct tally_msg out, in;
	char ctl[CMSG_SPACE(sizeof(int) * 32)];
	struct iovec iov;
	struct msghdr mh = { 0 };
	struct cmsghdr *cm;
	int pipes[32][2], send_fds[32];
	int fds[TALLY_MSG_MAX_FDS], nfds = -1;
	int open_before;

	assert_true(n <= 32);
	memset(ctl, 0, sizeof(ctl));
	for (int i = 0; i < n; i++) {
		assert_int_equal(pipe(pipes[i]), 0);
		send_fds[i] = pipes[i][1];
	}
	fill_msg(&out, 7);
	iov.iov_base = &out;
	iov.iov_len = sizeof(out);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl;
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	memcpy(CMSG_DATA(cm), send_fds, sizeof(int) * (size_t)n);
	assert_int_equal(sendmsg(p->tx, &mh, 0), (ssize_t)sizeof(out));

	open_before = count_open_fds();
	assert_int_equal(msg_recv(p->rx, &in, fds, &nfds), 1);
	assert_msg_equal(&in, &out);
	assert_int_equal(nfds, TALLY_MSG_MAX_FDS);
	/* exactly TALLY_MSG_MAX_FDS new descriptors exist */
	assert_int_equal(count_open_fds(), open_before + TALLY_MSG_MAX_FDS);
	for (int i = 0; i < TALLY_MSG_MAX_FDS; i++)
		assert_pipe_works(fds[i], pipes[i][0], "kept");
	for (int i = 0; i < TALLY_MSG_MAX_FDS; i++)
		close(fds[i]);
	/* the dropped ones were closed: their pipes see only our own write
	 * end, so closing that gives EOF to the reader */
	for (int i = TALLY_MSG_MAX_FDS; i < n; i++) {
		char c;

		close(pipes[i][1]);
		assert_int_equal(read(pipes[i][0], &c, 1), 0);
	}
	for (int i = 0; i < n; i++) {
		close(pipes[i][0]);
		if (i < TALLY_MSG_MAX_FDS)
			close(pipes[i][1]);
	}
}

static void test_fdpass_extra_fds_are_closed(void **state)
{
	check_too_many_fds(*state, TALLY_MSG_MAX_FDS + 1);
}

static void test_fdpass_many_extra_fds_are_closed(void **state)
{
	check_too_many_fds(*state, 20);	/* more than the 16 of take_fds */
}

static void test_fdpass_recv_on_bad_socket(void **state)
{
	struct pair *p = *state;
	struct tally_msg in;
	int pfd[2], fds[TALLY_MSG_MAX_FDS], nfds = -1;

	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(msg_recv(pfd[0], &in, fds, &nfds), -ENOTSOCK);
	assert_int_equal(nfds, 0);
	close(pfd[0]);
	close(pfd[1]);
	(void)p;
}

/*
 * msg_recv_step: a message dribbled in byte by byte is assembled without
 * ever blocking, its fd kept with it; the next message and its fd stay
 * queued for the next call.
 */
static void test_step_assembles_pieces_without_blocking(void **state)
{
	struct pair *p = *state;
	struct tally_msg out, out2;
	struct msg_rx rx;
	int pfd[2];

	assert_int_equal(pipe(pfd), 0);
	fill_msg(&out, 7);
	fill_msg(&out2, 8);
	msg_rx_init(&rx);
	assert_int_equal(msg_recv_step(p->rx, &rx), -EAGAIN);	/* nothing */
	{	/* the first byte carries the fd */
		char ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { &out, 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pfd[1], sizeof(int));
		assert_int_equal(sendmsg(p->tx, &mh, 0), 1);
	}
	assert_int_equal(msg_recv_step(p->rx, &rx), -EAGAIN);
	assert_int_equal(rx.nfds, 1);
	for (size_t i = 1; i < sizeof(out) - 1; i++) {
		assert_int_equal(write(p->tx, (char *)&out + i, 1), 1);
		assert_int_equal(msg_recv_step(p->rx, &rx), -EAGAIN);
	}
	/* the last byte and the whole next message, with its own fd */
	assert_int_equal(write(p->tx, (char *)&out + sizeof(out) - 1, 1), 1);
	assert_int_equal(msg_send(p->tx, &out2, &pfd[0], 1), 0);
	assert_int_equal(msg_recv_step(p->rx, &rx), 1);
	assert_msg_equal(&rx.msg, &out);
	assert_int_equal(rx.nfds, 1);
	assert_pipe_works(rx.fds[0], pfd[0], "first");
	msg_rx_reset(&rx);
	assert_int_equal(msg_recv_step(p->rx, &rx), 1);
	assert_msg_equal(&rx.msg, &out2);
	assert_int_equal(rx.nfds, 1);
	assert_pipe_works(pfd[1], rx.fds[0], "second");
	msg_rx_reset(&rx);
	close(pfd[0]);
	close(pfd[1]);
}

/* EOF: clean between messages, a reset inside one (its fds closed); a
 * wrong magic is -EPROTO. */
static void test_step_eof_and_garbage(void **state)
{
	struct pair *p = *state;
	struct tally_msg out;
	struct msg_rx rx;
	int fd, pfd[2];

	assert_int_equal(pipe(pfd), 0);
	fill_msg(&out, 9);
	msg_rx_init(&rx);
	fd = pfd[0];
	assert_int_equal(msg_send(p->tx, &out, &fd, 1), 0);
	assert_int_equal(msg_recv_step(p->rx, &rx), 1);
	msg_rx_reset(&rx);
	out.magic = 0xdeadbeef;
	assert_int_equal(msg_send(p->tx, &out, NULL, 0), 0);
	assert_int_equal(msg_recv_step(p->rx, &rx), -EPROTO);
	fill_msg(&out, 10);
	fd = pfd[0];
	assert_int_equal(msg_send(p->tx, &out, &fd, 1), 0);
	assert_int_equal(msg_recv_step(p->rx, &rx), 1);
	msg_rx_reset(&rx);
	{	/* half a message with an fd, then EOF */
		char ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { &out, 20 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		fd = pfd[0];
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
		assert_int_equal(sendmsg(p->tx, &mh, 0), 20);
	}
	assert_int_equal(msg_recv_step(p->rx, &rx), -EAGAIN);
	close(p->tx);
	p->tx = -1;
	assert_int_equal(msg_recv_step(p->rx, &rx), -ECONNRESET);
	assert_int_equal(rx.nfds, 0);		/* closed: teardown counts */
	msg_rx_init(&rx);
	assert_int_equal(msg_recv_step(p->rx, &rx), 0);
	close(pfd[0]);
	close(pfd[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_msg_init_fills_header),
		cmocka_unit_test_setup_teardown(test_fdpass_message_without_fds,
						pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(test_fdpass_one_fd,
						pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(test_fdpass_three_fds,
						pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_several_messages_in_a_row,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_send_rejects_bad_count,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(test_fdpass_send_on_closed_peer,
						pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_bad_magic_closes_fds,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_bad_version_closes_fds,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(test_fdpass_eof_returns_zero,
						pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_eof_after_whole_message,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_truncated_message_then_eof,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_truncated_with_fd_closes_it,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(test_fdpass_message_in_pieces,
						pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_extra_fds_are_closed,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_fdpass_many_extra_fds_are_closed,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(test_fdpass_recv_on_bad_socket,
						pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(
			test_step_assembles_pieces_without_blocking,
			pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(test_step_eof_and_garbage,
						pair_setup, pair_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
