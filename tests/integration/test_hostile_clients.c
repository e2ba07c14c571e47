// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_hostile_clients.c - a hostile local process against a real tallyd,
 * one case per class of attack (issue 9, "Hostile local processes"):
 * malformed and half-sent control messages, wrong fds, shared memory
 * shrunk, grown,
 * hole-punched and rewritten under the daemon, corrupt ring indices,
 * descriptors pointing anywhere (other clients' segments too), floods of
 * connections and submissions, disconnects at every step, and the limits.
 *
 * The attacker speaks the wire format itself (shm/proto.h, shm/ring.h),
 * with nothing of libtally between it and the daemon.  After each attack
 * an honest pair of clients (libtally, local size 2) must get exact int32
 * sums, the daemon must be alive, and it must hold no more descriptors
 * than before the attack.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "harness.h"
#include "shm/client_internal.h"
#include "shm/fdpass.h"

#define HONEST_COUNT 1000	/* int32 elements per honest all-reduce */
#define EOF_WAIT_MS 6000	/* the daemon drops a silent HELLO in 2 s */

static struct test_daemon dmn;

/* The attacks below are on the daemon's path: a small all-reduce of an
 * honest libtally member would take the fast path, where an attacker
 * speaking the daemon's protocol is never met (test_hostile_fast_table
 * attacks that one). */
static int setup_two(void **state)
{
	static const char *const no_fast[] = {
		"--set", "daemon.fast_path_bytes=0", NULL,
	};

	(void)state;
	return daemon_start(&dmn, 2, no_fast);
}

static int setup_two_fast(void **state)
{
	static const char *const fast[] = {
		"--set", "daemon.stuck_ms=40", NULL,
	};

	(void)state;
	return daemon_start(&dmn, 2, fast);
}

static int teardown(void **state)
{
	(void)state;
	return daemon_stop(&dmn);	/* non-zero if it crashed */
}

/* ---- the attacker: the wire protocol by hand ---- */

struct attacker {
	int sock;
	int fast_fd;		/* the job's fast-path table, or -1 */
	uint64_t fast_bytes;
	struct segment ctrl;
	struct ring sq, cq;
	int sq_kick, cq_kick;
	int rank;
};

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(s >= 0);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	strcpy(sa.sun_path, dmn.sock);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return s;
}

/* The reply's status, or 1000 + errno-ish when no reply came (EOF: 1000). */
static int raw_reply(int s, struct tally_msg *m, int *fds, int *nfds)
{
	int tmp[TALLY_MSG_MAX_FDS], tn, ret;

	if (!fds) {
		fds = tmp;
		nfds = &tn;
	}
	ret = msg_recv(s, m, fds, nfds);
	if (fds == tmp)
		for (int i = 0; i < tn; i++)
			close(tmp[i]);
	if (ret != 1)
		return 1000 - ret;
	return m->status;
}

static int raw_call(int s, struct tally_msg *m, const int *fds, int nfds)
{
	if (msg_send(s, m, fds, nfds))
		return 2000;
	return raw_reply(s, m, NULL, NULL);
}

/* Does the daemon close @s within @ms (after any replies it still sends)? */
static bool sees_eof(int s, int ms)
{
	uint64_t end = test_now_ms() + (uint64_t)ms;
	char buf[256];

	while (test_now_ms() < end) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
	}
	return false;
}

static void hello_msg(struct tally_msg *m, size_t ctrl_size)
{
	msg_init(m, TALLY_MSG_HELLO);
	m->arg[0] = CLIENT_SQ_ENTRIES;
	m->arg[1] = CLIENT_CQ_ENTRIES;
	m->arg[2] = ctrl_size;
}

/* A well-formed admission with rings of @n entries; the WELCOME status. */
static int atk_join_sized(struct attacker *a, uint32_t n)
{
	size_t sq_bytes = ring_bytes(n, sizeof(struct tally_sqe));
	size_t cq_off = (sq_bytes + RING_CACHELINE - 1) &
			~(size_t)(RING_CACHELINE - 1);
	struct tally_msg m;
	int fds[TALLY_MSG_MAX_FDS], nfds = 0, ret;

	memset(a, 0, sizeof(*a));
	a->sq_kick = a->cq_kick = a->fast_fd = -1;
	a->sock = raw_connect();
	assert_int_equal(segment_create(&a->ctrl, cq_off + ring_bytes(n,
					sizeof(struct tally_cqe)), "atk"), 0);
	ring_attach(&a->sq, a->ctrl.base, n, sizeof(struct tally_sqe), true,
		    true);
	ring_attach(&a->cq, (char *)a->ctrl.base + cq_off, n,
		    sizeof(struct tally_cqe), false, true);
	hello_msg(&m, a->ctrl.size);
	m.arg[0] = m.arg[1] = n;
	assert_int_equal(msg_send(a->sock, &m, &a->ctrl.fd, 1), 0);
	ret = raw_reply(a->sock, &m, fds, &nfds);
	if (ret == 0) {
		/* and the fast-path table when the job has one */
		assert_int_equal(nfds, m.arg[3] ? 3 : 2);
		a->fast_fd = nfds == 3 ? fds[2] : -1;
		a->fast_bytes = m.arg[3];
		a->sq_kick = fds[0];
		a->cq_kick = fds[1];
		a->rank = (int)m.arg[0];
	} else {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
	}
	return ret;
}

static void atk_close(struct attacker *a)
{
	segment_destroy(&a->ctrl);
	if (a->sock >= 0)
		close(a->sock);
	if (a->sq_kick >= 0)
		close(a->sq_kick);
	if (a->cq_kick >= 0)
		close(a->cq_kick);
	if (a->fast_fd >= 0)
		close(a->fast_fd);
	a->sock = a->sq_kick = a->cq_kick = a->fast_fd = -1;
}

/* Admitted, retrying while the daemon has not yet seen an earlier
 * attacker leave (its seat, or its job, is not free until then). */
static int atk_join(struct attacker *a)
{
	uint64_t end = test_now_ms() + 5000;
	int ret;

	while ((ret = atk_join_sized(a, CLIENT_SQ_ENTRIES)) ==
	       -TALLY_EDENIED && test_now_ms() < end) {
		atk_close(a);
		usleep(10000);
	}
	return ret;
}

static int atk_seg_add(struct attacker *a, uint32_t id, int fd, uint64_t sz)
{
	struct tally_msg m;

	msg_init(&m, TALLY_MSG_SEG_ADD);
	m.arg[0] = id;
	m.arg[1] = sz;
	return raw_call(a->sock, &m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
}

static void atk_kick(struct attacker *a)
{
	char one = 1;

	(void)!write(a->sq_kick, &one, 1);
}

static int atk_push(struct attacker *a, const struct tally_sqe *s)
{
	int ret = ring_push(&a->sq, s);

	atk_kick(a);
	return ret;
}

/* Next completion within @ms: 1, or 0 on timeout. */
static int atk_reap(struct attacker *a, struct tally_cqe *cqe, int ms)
{
	uint64_t end = test_now_ms() + (uint64_t)ms;

	while (test_now_ms() < end) {
		if (ring_pop(&a->cq, cqe) == 1)
			return 1;
		atk_kick(a);
		usleep(1000);
	}
	return 0;
}

/* Submit one descriptor, return its completion's result (or 9999). */
static int atk_result(struct attacker *a, struct tally_sqe *s)
{
	static uint64_t tag = 1;
	struct tally_cqe cqe;

	s->user_data = ++tag;
	assert_int_equal(atk_push(a, s), 0);
	if (!atk_reap(a, &cqe, 5000))
		return 9999;
	assert_int_equal(cqe.user_data, tag);
	return cqe.res;
}

/* A buffer segment of the attacker's own: id, memfd kept open, mapping. */
struct atk_buf {
	struct segment seg;
	uint32_t id;
};

static void atk_buf_add(struct attacker *a, struct atk_buf *b, uint32_t id,
			size_t bytes)
{
	assert_int_equal(segment_create(&b->seg, bytes, "atk-buf"), 0);
	b->id = id;
	assert_int_equal(atk_seg_add(a, id, b->seg.fd, b->seg.size), 0);
}

/* ---- the daemon's health ---- */

static int daemon_fd_count(void)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", dmn.pid);
	dir = opendir(path);
	assert_non_null(dir);
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* The daemon's descriptor count settles back to @base (drops are handled
 * as their events arrive). */
static void assert_fds_back_to(int base)
{
	int n = 0;

	for (int i = 0; i < 300; i++) {
		n = daemon_fd_count();
		if (n <= base)
			break;
		usleep(10000);
	}
	if (n > base)
		fprintf(stderr, "daemon holds %d fds, %d before\n", n, base);
	assert_true(n <= base);
}

struct honest_arg {
	uint64_t key;
	int rounds;
	int go[2];		/* when not -1: wait for a byte first */
	int connected[2];	/* when not -1: say so after admission */
};

/* Connect (retrying while a dropped attacker's seat frees up), then
 * all-reduce int32 vectors whose exact sums are known. */
static int honest_member(void *p)
{
	struct honest_arg *a = p;
	struct tally_client *c = NULL;
	uint64_t end = test_now_ms() + 10000;
	int32_t *buf;
	int rank;

	while (tally_connect(dmn.sock, &c) != 0) {
		CHECK(test_now_ms() < end, 2);
		usleep(20000);
	}
	rank = tally_rank(c);
	CHECK(tally_size(c) == 2, 3);
	buf = tally_alloc(c, HONEST_COUNT * sizeof(int32_t));
	CHECK(buf, 4);
	if (a->connected[1] >= 0)
		sync_signal(a->connected[1]);
	if (a->go[0] >= 0)
		CHECK(sync_wait(a->go[0], 20000) == 0, 5);
	for (int it = 0; it < a->rounds; it++) {
		struct tally_allreduce_args args = {
			.key = a->key, .iteration = (uint64_t)it,
			.sendbuf = buf, .recvbuf = buf, .count = HONEST_COUNT,
			.dtype = TALLY_INT32, .op = TALLY_SUM,
		};
		uint64_t req;

		for (int i = 0; i < HONEST_COUNT; i++)
			buf[i] = rank * 100000 + i * 3 - it;
		CHECK(tally_allreduce(c, &args, &req) == 0, 6);
		CHECK(tally_wait(c, req, 10000) == 0, 7);
		for (int i = 0; i < HONEST_COUNT; i++)
			CHECK(buf[i] == 100000 + 2 * (i * 3 - it), 8);
	}
	tally_disconnect(c);
	return 0;
}

static void honest_arg_init(struct honest_arg *a, uint64_t key)
{
	a->key = key;
	a->rounds = 5;
	a->go[0] = a->go[1] = a->connected[0] = a->connected[1] = -1;
}

/* An honest pair gets exact results; the daemon lives. */
static void assert_honest_pair(uint64_t key)
{
	struct honest_arg a;
	pid_t p0, p1;

	honest_arg_init(&a, key);
	p0 = child_start(honest_member, &a);
	p1 = child_start(honest_member, &a);
	assert_int_equal(child_wait(p0, 30000), 0);
	assert_int_equal(child_wait(p1, 30000), 0);
	assert_true(daemon_alive(&dmn));
}

/* ---- the attacks ---- */

/* Garbage, wrong versions and types, bad HELLO fields, half messages:
 * each is refused or dropped, none stalls the daemon. */
static void test_hostile_malformed_messages(void **state)
{
	struct tally_msg m;
	struct attacker a;
	int base, s, silent;

	(void)state;
	base = daemon_fd_count();

	s = raw_connect();	/* garbage: told the protocol is wrong */
	assert_int_equal(write(s, "not a tally message, just 48 bytes of "
			       "noise....", 48), 48);
	assert_int_equal(raw_reply(s, &m, NULL, NULL), -TALLY_EPROTO);
	assert_true(sees_eof(s, EOF_WAIT_MS));
	close(s);

	s = raw_connect();	/* the previous protocol version */
	hello_msg(&m, 1 << 20);
	m.version = 1;
	assert_int_equal(raw_call(s, &m, NULL, 0), -TALLY_EPROTO);
	close(s);

	/* wrong first message, and HELLOs with impossible fields */
	for (int k = 0; k < 6; k++) {
		struct segment seg;

		assert_int_equal(segment_create(&seg, client_ctrl_bytes(),
						"bad-hello"), 0);
		s = raw_connect();
		hello_msg(&m, seg.size);
		switch (k) {
		case 0: m.type = TALLY_MSG_SEG_ADD; break;
		case 1: m.type = 999; break;
		case 2: m.arg[0] = 3; break;		/* not a power of 2 */
		case 3: m.arg[1] = 1u << 30; break;	/* too many entries */
		case 4: m.arg[2] = 64; break;		/* rings do not fit */
		case 5: m.arg[2] = UINT64_MAX; break;
		}
		assert_int_equal(raw_call(s, &m, &seg.fd, 1), -TALLY_EINVAL);
		assert_true(sees_eof(s, EOF_WAIT_MS));
		close(s);
		segment_destroy(&seg);
	}

	/* half a HELLO, then close; half a HELLO, then silence (held) */
	s = raw_connect();
	hello_msg(&m, 4096);
	assert_int_equal(write(s, &m, 47), 47);
	close(s);
	silent = raw_connect();
	assert_int_equal(write(silent, &m, 10), 10);

	/* an admitted client's junk control messages: answered, not fatal */
	assert_int_equal(atk_join(&a), 0);
	msg_init(&m, TALLY_MSG_WELCOME);	/* a daemon's message */
	assert_int_equal(raw_call(a.sock, &m, NULL, 0), -TALLY_EBADOP);
	msg_init(&m, TALLY_MSG_SEG_DEL);
	m.arg[0] = 77;				/* never added */
	assert_int_equal(raw_call(a.sock, &m, NULL, 0), -TALLY_EINVAL);
	msg_init(&m, TALLY_MSG_SEG_DEL);
	m.arg[0] = TALLY_CTRL_SEG_ID;		/* the rings */
	assert_int_equal(raw_call(a.sock, &m, NULL, 0), -TALLY_EINVAL);
	/* half a control message, then silence: the loop goes on */
	assert_int_equal(write(a.sock, &m, 20), 20);

	/* the daemon answers others while both halves hang */
	{
		struct attacker b;

		assert_int_equal(atk_join(&b), 0);	/* the second seat */
		assert_int_equal(b.rank, 1 - a.rank);
		atk_close(&b);
	}
	/* the silent HELLO is dropped at its deadline */
	assert_true(sees_eof(silent, EOF_WAIT_MS));
	close(silent);
	atk_close(&a);
	assert_honest_pair(1);
	assert_fds_back_to(base);
}

/* fds that are no memfd, too many fds, memfds that could shrink or are
 * sparse or shorter than declared: all refused, none leaked. */
static int open_bad_fd(int kind, int *extra)
{
	int p[2], fd = -1;

	*extra = -1;
	switch (kind) {
	case 0:
		assert_int_equal(pipe(p), 0);
		*extra = p[1];
		return p[0];
	case 1:
		return open("/dev/zero", O_RDWR | O_CLOEXEC);
	case 2:
		return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	case 3:
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
		*extra = p[1];
		return p[0];
	case 4:			/* a memfd that forbids sealing */
		fd = memfd_create("noseal", MFD_CLOEXEC);
		assert_int_equal(ftruncate(fd, 1 << 20), 0);
		return fd;
	case 5:			/* sealable but sparse: no memory behind */
		fd = memfd_create("sparse", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		assert_int_equal(ftruncate(fd, 1 << 30), 0);
		return fd;
	case 7:			/* sealed against the daemon's writes */
		fd = memfd_create("ro", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		assert_int_equal(ftruncate(fd, 1 << 20), 0);
		assert_int_equal(fallocate(fd, 0, 0, 1 << 20), 0);
		assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK |
				       F_SEAL_WRITE), 0);
		return fd;
	default:		/* sealed, but shorter than declared */
		fd = memfd_create("short", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		assert_int_equal(ftruncate(fd, 4096), 0);
		return fd;
	}
}

static void test_hostile_fds(void **state)
{
	struct tally_msg m;
	struct attacker a;
	int base, many[200];

	(void)state;
	base = daemon_fd_count();
	for (int kind = 0; kind < 8; kind++) {
		int extra, fd = open_bad_fd(kind, &extra);
		int s = raw_connect();

		assert_true(fd >= 0);
		hello_msg(&m, client_ctrl_bytes());
		if (kind == 6)
			m.arg[2] = 1 << 20;
		assert_int_equal(raw_call(s, &m, &fd, 1), -TALLY_EINVAL);
		close(s);
		close(fd);
		if (extra >= 0)
			close(extra);
	}

	/* one message with 200 fds: HELLO wants one */
	for (int i = 0; i < 200; i++)
		many[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	{
		char ctl[CMSG_SPACE(sizeof(many))];
		struct iovec iov = { &m, sizeof(m) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		int s = raw_connect();

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(many));
		memcpy(CMSG_DATA(cm), many, sizeof(many));
		hello_msg(&m, client_ctrl_bytes());
		assert_int_equal(sendmsg(s, &mh, 0), (ssize_t)sizeof(m));
		assert_int_equal(raw_reply(s, &m, NULL, NULL), -TALLY_EINVAL);
		close(s);
	}

	/* the same fds as segments of an admitted client */
	assert_int_equal(atk_join(&a), 0);
	for (int kind = 0; kind < 8; kind++) {
		int extra, fd = open_bad_fd(kind, &extra);

		assert_int_equal(atk_seg_add(&a, 5, fd,
					     kind == 5 ? 1u << 30 : 1u << 20),
				 -TALLY_EINVAL);
		close(fd);
		if (extra >= 0)
			close(extra);
	}
	assert_int_equal(atk_seg_add(&a, 5, -1, 4096), -TALLY_EINVAL);
	{	/* two fds where one belongs */
		struct segment seg;
		int two[2];

		assert_int_equal(segment_create(&seg, 4096, "two"), 0);
		two[0] = two[1] = seg.fd;
		msg_init(&m, TALLY_MSG_SEG_ADD);
		m.arg[0] = 5;
		m.arg[1] = 4096;
		assert_int_equal(raw_call(a.sock, &m, two, 2), -TALLY_EINVAL);
		/* a SEG_DEL carrying fds */
		msg_init(&m, TALLY_MSG_SEG_DEL);
		m.arg[0] = 5;
		assert_int_equal(raw_call(a.sock, &m, two, 1), -TALLY_EINVAL);
		segment_destroy(&seg);
	}
	for (int i = 0; i < 200; i++)
		close(many[i]);
	atk_close(&a);
	assert_honest_pair(2);
	assert_fds_back_to(base);
}

/* The attacker's own memory, shared with the daemon, changing under it. */
struct churn {
	struct attacker *a;
	struct atk_buf *b;
	atomic_bool stop;
};

static void *churn_memory(void *p)
{
	struct churn *c = p;
	uint32_t *v = c->b->seg.base;
	size_t n = c->b->seg.size / sizeof(*v);
	unsigned int x = 1;

	while (!atomic_load(&c->stop)) {
		/* rewrite, try to punch holes (refused), grow */
		for (size_t i = 0; i < n; i += 7)
			v[i] = x++;
		fallocate(c->b->seg.fd, FALLOC_FL_PUNCH_HOLE |
			  FALLOC_FL_KEEP_SIZE, 0, (off_t)(c->b->seg.size / 2));
		(void)!ftruncate(c->b->seg.fd, (off_t)c->b->seg.size +
				 (off_t)(x % 8) * 4096);
	}
	return NULL;
}

static void test_hostile_shared_memory_changes(void **state)
{
	struct attacker a;
	struct atk_buf b, unsealed;
	struct churn ch = { .a = &a, .b = &b };
	pthread_t th;
	int base;

	(void)state;
	base = daemon_fd_count();
	assert_int_equal(atk_join(&a), 0);
	atk_buf_add(&a, &b, 1, HONEST_COUNT * sizeof(int32_t));

	/* shrinking a registered segment is impossible: sealed; and so is
	 * punching holes into it */
	assert_int_equal(ftruncate(b.seg.fd, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fallocate(b.seg.fd, FALLOC_FL_PUNCH_HOLE |
				   FALLOC_FL_KEEP_SIZE, 0, 4096), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(a.ctrl.fd, 0), -1);	/* the rings too */
	/* one that arrived unsealed: the daemon sealed it on arrival */
	unsealed.seg.fd = memfd_create("unsealed", MFD_CLOEXEC |
				       MFD_ALLOW_SEALING);
	assert_int_equal(ftruncate(unsealed.seg.fd, 8192), 0);
	unsealed.seg.base = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_POPULATE, unsealed.seg.fd,
				 0);
	memset(unsealed.seg.base, 0, 8192);
	unsealed.seg.size = 8192;
	assert_int_equal(atk_seg_add(&a, 2, unsealed.seg.fd, 8192), 0);
	assert_int_equal(ftruncate(unsealed.seg.fd, 0), -1);
	assert_int_equal(errno, EPERM);

	/* the attacker is a member next to an honest one; it rewrites,
	 * hole-punches and grows its buffer while the daemon reduces it.
	 * The honest member's operations all complete (values are the
	 * attacker's to spoil), the daemon lives. */
	assert_int_equal(pthread_create(&th, NULL, churn_memory, &ch), 0);
	{
		struct tally_client *c;
		int32_t *buf;

		assert_int_equal(tally_connect(dmn.sock, &c), 0);
		buf = tally_alloc(c, 8192);
		assert_non_null(buf);
		for (int it = 0; it < 50; it++) {
			struct tally_allreduce_args args = {
				.key = 3, .iteration = (uint64_t)it,
				.sendbuf = buf, .recvbuf = buf,
				.count = HONEST_COUNT, .dtype = TALLY_INT32,
			};
			struct tally_sqe s = {
				.opcode = TALLY_OP_ALLREDUCE,
				.dtype = TALLY_INT32, .key = 3,
				.iteration = (uint64_t)it,
				.count = HONEST_COUNT,
				.send_seg = it % 2 ? 1 : 2,
				.recv_seg = it % 2 ? 1 : 2,
			};
			uint64_t req;

			if (!(it % 2))
				s.count = 8192 / 4;
			args.count = s.count;
			assert_int_equal(tally_allreduce(c, &args, &req), 0);
			assert_int_equal(atk_result(&a, &s), 0);
			assert_int_equal(tally_wait(c, req, 10000), 0);
		}
		tally_disconnect(c);
	}
	atomic_store(&ch.stop, true);
	pthread_join(th, NULL);
	assert_true(daemon_alive(&dmn));
	/* the attacker unmaps its side and goes: nothing of it lingers */
	segment_destroy(&b.seg);
	segment_destroy(&unsealed.seg);
	atk_close(&a);
	assert_honest_pair(4);
	assert_fds_back_to(base);
}

/* An honest member with an operation pending when the other member is
 * dropped or leaves: it gets an error, not a hang. */
static int peer_expect_lost(void *p)
{
	struct honest_arg *a = p;
	struct tally_client *c;
	int32_t *buf;
	uint64_t req;
	int ret;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	buf = tally_alloc(c, 64);
	CHECK(buf, 3);
	sync_signal(a->connected[1]);
	{
		struct tally_allreduce_args args = {
			.key = a->key, .sendbuf = buf, .recvbuf = buf,
			.count = 16, .dtype = TALLY_INT32,
		};

		CHECK(tally_allreduce(c, &args, &req) == 0, 4);
		ret = tally_wait(c, req, 10000);
		CHECK(ret == -TALLY_EPEERLOST, 5);	/* an error, no hang */
	}
	tally_disconnect(c);
	return 0;
}

/* Ring indices jumping anywhere: the offender is dropped. */
static void test_hostile_ring_indices(void **state)
{
	struct ring_shared *sq, *cq;
	struct attacker a;
	int base;

	(void)state;
	base = daemon_fd_count();
	for (int k = 0; k < 5; k++) {
		struct tally_sqe nop = { .opcode = TALLY_OP_NOP };
		struct tally_cqe cqe;

		assert_int_equal(atk_join(&a), 0);
		sq = a.ctrl.base;
		cq = (void *)((char *)a.ctrl.base + client_cq_offset());
		assert_int_equal(atk_result(&a, &nop), 0);	/* works */
		switch (k) {
		case 0:		/* tail far beyond the ring */
			atomic_store(&sq->tail, sq->tail + 100000);
			break;
		case 1:		/* tail behind the daemon's head */
			atomic_store(&sq->tail, sq->tail - 1);
			break;
		case 2:		/* completion head ahead of the tail */
			atomic_store(&cq->head, cq->head + 5000);
			ring_push(&a.sq, &nop);
			break;
		case 3:		/* completion head run backwards */
			atomic_store(&cq->head, cq->head - 1000);
			ring_push(&a.sq, &nop);
			break;
		case 4:		/* asleep forced on, rings wrapped, then a
				 * full ring of garbage: each answered */
			for (int i = 0; i < 3 * CLIENT_SQ_ENTRIES; i++) {
				struct tally_sqe junk;

				memset(&junk, 0xa5 ^ i, sizeof(junk));
				junk.opcode = (uint8_t)(i % 2 ? 7 : 1);
				atomic_store(&cq->asleep, 1);
				if (ring_push(&a.sq, &junk))
					break;
				atk_kick(&a);
				assert_int_equal(atk_reap(&a, &cqe, 5000), 1);
				assert_true(cqe.res < 0);
			}
			break;
		}
		atk_kick(&a);
		if (k < 4) {
			assert_true(sees_eof(a.sock, EOF_WAIT_MS));
		} else {
			assert_int_equal(atk_result(&a, &nop), 0);
		}
		atk_close(&a);
	}

	/* the offender is a member next to an honest one who waits: the
	 * honest one gets TALLY_EPEERLOST, not a hang */
	{
		struct honest_arg h;
		pid_t peer;

		honest_arg_init(&h, 21);
		assert_int_equal(pipe(h.connected), 0);
		peer = child_start(peer_expect_lost, &h);
		assert_int_equal(sync_wait(h.connected[0], 20000), 0);
		assert_int_equal(atk_join(&a), 0);
		sq = a.ctrl.base;
		atomic_store(&sq->tail, sq->tail + 7777);
		atk_kick(&a);
		assert_true(sees_eof(a.sock, EOF_WAIT_MS));
		atk_close(&a);
		assert_int_equal(child_wait(peer, 20000), 0);
		close(h.connected[0]);
		close(h.connected[1]);
	}
	assert_honest_pair(5);
	assert_fds_back_to(base);
}

/* Descriptors naming anything: every one refused with its error, the
 * other client's segment (same id, its namespace) untouched. */
static void test_hostile_descriptors(void **state)
{
	struct tally_sqe good, s;
	struct tally_client *c;
	struct attacker a;
	struct atk_buf b;
	int32_t *victim;
	uint32_t vseg;
	uint64_t voff;
	int base;

	(void)state;
	base = daemon_fd_count();
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	victim = tally_alloc(c, 4096);
	assert_non_null(victim);
	for (int i = 0; i < 1024; i++)
		victim[i] = i;
	assert_int_equal(client_translate(c, victim, 4, &vseg, &voff), 0);

	assert_int_equal(atk_join(&a), 0);
	atk_buf_add(&a, &b, vseg + 10, 4096);
	good = (struct tally_sqe){ .opcode = TALLY_OP_ALLREDUCE,
		.dtype = TALLY_INT32, .redop = TALLY_SUM, .count = 16,
		.send_seg = b.id, .recv_seg = b.id, .key = 77 };

	s = good;
	s.send_seg = s.recv_seg = vseg;	/* the victim's segment id */
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.recv_seg = vseg;
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.send_seg = TALLY_CTRL_SEG_ID;	/* its own rings */
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.send_seg = UINT32_MAX;
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.send_off = b.seg.size;	/* starts at the end */
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.recv_off = b.seg.size - 60;	/* one element past the end */
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.recv_off = b.seg.size - 63;	/* misaligned: refused first */
	assert_int_equal(atk_result(&a, &s), -TALLY_EINVAL);
	s = good;
	s.send_off = UINT64_MAX - 15;	/* offset + length overflows */
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.count = UINT64_MAX / 2;	/* count * 4 overflows */
	assert_int_equal(atk_result(&a, &s), -TALLY_EINVAL);
	s = good;
	s.count = (1ull << 40);		/* fits 64 bits, not the segment */
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.count = 0;
	assert_int_equal(atk_result(&a, &s), -TALLY_EINVAL);
	s = good;
	s.dtype = 200;
	assert_int_equal(atk_result(&a, &s), -TALLY_EBADOP);
	s = good;
	s.flags = 0x80;
	assert_int_equal(atk_result(&a, &s), -TALLY_EBADOP);
	s.flags = TALLY_F_COMPRESS(7);	/* a method after block_topk1_ef */
	assert_int_equal(atk_result(&a, &s), -TALLY_EBADOP);
	s = good;
	s.recv_off = 4;			/* partial overlap */
	assert_int_equal(atk_result(&a, &s), -TALLY_ERANGE);
	s = good;
	s.opcode = TALLY_OP_NOP;	/* after all that, it still works */
	assert_int_equal(atk_result(&a, &s), 0);

	/* the victim's memory is as it was; it still works */
	for (int i = 0; i < 1024; i++)
		assert_int_equal(victim[i], i);
	atk_close(&a);
	segment_destroy(&b.seg);
	tally_disconnect(c);
	assert_honest_pair(6);
	assert_fds_back_to(base);
}

/* Floods: connections (refused beyond the pending limit with
 * TALLY_ELIMIT, while admitted clients keep working) and submissions. */
static void test_hostile_floods(void **state)
{
	enum { FLOOD = 200 };
	static int socks[FLOOD];
	struct honest_arg h;
	struct tally_msg m;
	struct attacker a;
	int base, limited = 0;
	pid_t p0, p1;

	(void)state;
	base = daemon_fd_count();
	/* an honest pair admitted first, waiting for the word */
	honest_arg_init(&h, 7);
	assert_int_equal(pipe(h.go), 0);
	assert_int_equal(pipe(h.connected), 0);
	p0 = child_start(honest_member, &h);
	p1 = child_start(honest_member, &h);
	assert_int_equal(sync_wait(h.connected[0], 20000), 0);
	assert_int_equal(sync_wait(h.connected[0], 20000), 0);

	/* 200 connections that never say HELLO */
	for (int i = 0; i < FLOOD; i++) {
		socks[i] = raw_connect();
		hello_msg(&m, 0);
		/* refused ones may be closed already: no check */
		(void)!send(socks[i], &m, 1, MSG_NOSIGNAL);
	}
	/* the pair works meanwhile */
	sync_signal(h.go[1]);
	sync_signal(h.go[1]);
	assert_int_equal(child_wait(p0, 30000), 0);
	assert_int_equal(child_wait(p1, 30000), 0);
	/* each one ends: told why (beyond the limit), or dropped at its
	 * deadline; none is left hanging */
	{
		uint64_t end = test_now_ms() + 15000;
		int dropped = 0;

		for (int i = 0; i < FLOOD; i++) {
			struct pollfd p = { .fd = socks[i], .events = POLLIN };
			int left = (int)(end - test_now_ms());

			assert_int_equal(poll(&p, 1, left > 0 ? left : 0), 1);
			if (raw_reply(socks[i], &m, NULL, NULL) ==
			    -TALLY_ELIMIT)
				limited++;
			else
				dropped++;
			close(socks[i]);
		}
		assert_true(limited > 0);
		assert_true(dropped >= TALLY_MAX_PENDING / 2);
		assert_int_equal(limited + dropped, FLOOD);
	}
	/* once the flood has passed, new clients get in */
	assert_honest_pair(8);

	/* a submission flood: rings full of junk and NOPs, never reaped
	 * beyond what keeps the daemon busy, next to an honest member */
	assert_int_equal(atk_join(&a), 0);
	{
		struct tally_client *c;
		int32_t *buf;
		uint64_t end = test_now_ms() + 1500;
		int reaped = 0;

		assert_int_equal(tally_connect(dmn.sock, &c), 0);
		while (test_now_ms() < end) {
			struct tally_sqe s = { .opcode = TALLY_OP_NOP };
			struct tally_cqe cqe;

			s.opcode = (uint8_t)(reaped % 3 ? TALLY_OP_NOP : 42);
			while (ring_push(&a.sq, &s) == 0)
				;
			atk_kick(&a);
			while (ring_pop(&a.cq, &cqe) == 1)
				reaped++;
			/* the honest one's control path is not starved */
			buf = tally_alloc(c, 4096);
			assert_non_null(buf);
			tally_free(c, buf);
		}
		assert_true(reaped > CLIENT_SQ_ENTRIES);
		tally_disconnect(c);
	}
	atk_close(&a);
	assert_honest_pair(9);

	/* doorbell flood: the attacker makes its doorbell ends blocking,
	 * asks for a wake-up on every completion and never drains the pipe
	 * (it fills at 64 KiB): the daemon's end is its own, non-blocking */
	assert_int_equal(atk_join(&a), 0);
	{
		struct ring_shared *cq = (void *)((char *)a.ctrl.base +
						  client_cq_offset());
		struct tally_sqe nop = { .opcode = TALLY_OP_NOP };
		uint64_t end = test_now_ms() + 20000;
		struct tally_cqe cqe;
		long reaped = 0;

		fcntl(a.sq_kick, F_SETFL, 0);
		fcntl(a.cq_kick, F_SETFL, 0);
		while (reaped < 70000 && test_now_ms() < end) {
			atomic_store(&cq->asleep, 1);
			while (ring_push(&a.sq, &nop) == 0)
				;
			{	/* a kick that cannot block us, the pipe
				 * may be full */
				char one = 1;
				int fl = fcntl(a.sq_kick, F_GETFL);

				fcntl(a.sq_kick, F_SETFL, fl | O_NONBLOCK);
				(void)!write(a.sq_kick, &one, 1);
				fcntl(a.sq_kick, F_SETFL, fl);
			}
			while (ring_pop(&a.cq, &cqe) == 1)
				reaped++;
		}
		assert_true(reaped >= 70000);
		assert_true(daemon_alive(&dmn));
	}
	atk_close(&a);
	assert_honest_pair(10);

	/* control flood: requests sent, replies never read, until the
	 * socket is full: the daemon drops it rather than block on it */
	assert_int_equal(atk_join(&a), 0);
	{
		uint64_t end = test_now_ms() + 10000;
		long sent = 0;

		msg_init(&m, TALLY_MSG_SEG_DEL);
		m.arg[0] = 99;
		while (test_now_ms() < end) {
			ssize_t n = send(a.sock, &m, sizeof(m),
					 MSG_DONTWAIT | MSG_NOSIGNAL);

			if (n == (ssize_t)sizeof(m)) {
				sent++;
				continue;
			}
			if (n < 0 && errno == EAGAIN) {
				usleep(1000);	/* the daemon reads more */
				if (sent > 100000)
					break;
				continue;
			}
			break;		/* dropped: EPIPE/ECONNRESET */
		}
		assert_true(sent > 100);	/* more than any reply room */
		assert_true(sees_eof(a.sock, EOF_WAIT_MS));
	}
	atk_close(&a);
	assert_honest_pair(15);
	close(h.go[0]);
	close(h.go[1]);
	close(h.connected[0]);
	close(h.connected[1]);
	assert_fds_back_to(base);
}

/* Leaving at every step of the handshake and of an operation. */
static void test_hostile_disconnects(void **state)
{
	struct tally_msg m;
	struct attacker a;
	int base;

	(void)state;
	base = daemon_fd_count();
	for (int round = 0; round < 3; round++) {
		struct segment seg;
		int s;

		close(raw_connect());		/* connect, close */
		s = raw_connect();		/* half a HELLO */
		hello_msg(&m, 4096);
		assert_int_equal(write(s, &m, 30), 30);
		close(s);
		/* whole HELLO with its fd, gone before the WELCOME */
		assert_int_equal(segment_create(&seg, client_ctrl_bytes(),
						"gone"), 0);
		s = raw_connect();
		hello_msg(&m, seg.size);
		assert_int_equal(msg_send(s, &m, &seg.fd, 1), 0);
		close(s);
		segment_destroy(&seg);
		/* admitted, then gone */
		assert_int_equal(atk_join(&a), 0);
		atk_close(&a);
		/* SEG_ADD sent, gone before the ACK */
		assert_int_equal(atk_join(&a), 0);
		assert_int_equal(segment_create(&seg, 4096, "gone2"), 0);
		msg_init(&m, TALLY_MSG_SEG_ADD);
		m.arg[0] = 3;
		m.arg[1] = 4096;
		assert_int_equal(msg_send(a.sock, &m, &seg.fd, 1), 0);
		atk_close(&a);
		segment_destroy(&seg);
		/* its doorbells closed first, then a submission */
		assert_int_equal(atk_join(&a), 0);
		close(a.cq_kick);
		a.cq_kick = -1;
		{
			struct tally_sqe nop = { .opcode = TALLY_OP_NOP };

			atomic_store(&((struct ring_shared *)((char *)
				a.ctrl.base + client_cq_offset()))->asleep, 1);
			atk_push(&a, &nop);
		}
		assert_true(sees_eof(a.sock, EOF_WAIT_MS));
		atk_close(&a);
	}

	/* a member submits and leaves mid-operation: the other one gets
	 * an error, not a hang */
	{
		struct honest_arg h;
		struct atk_buf b;
		struct tally_sqe s;
		pid_t peer;

		honest_arg_init(&h, 11);
		assert_int_equal(pipe(h.connected), 0);
		/* the peer first: a child must not inherit our sockets */
		peer = child_start(peer_expect_lost, &h);
		assert_int_equal(sync_wait(h.connected[0], 20000), 0);
		assert_int_equal(atk_join(&a), 0);
		atk_buf_add(&a, &b, 1, 4096);
		s = (struct tally_sqe){ .opcode = TALLY_OP_ALLREDUCE,
			.dtype = TALLY_INT32, .count = 16, .key = 12,
			.send_seg = 1, .recv_seg = 1 };
		atk_push(&a, &s);	/* another key: the peer still waits */
		usleep(100000);
		atk_close(&a);
		segment_destroy(&b.seg);
		assert_int_equal(child_wait(peer, 20000), 0);
		close(h.connected[0]);
		close(h.connected[1]);
	}
	assert_honest_pair(13);
	assert_fds_back_to(base);
}

/* The socket is 0660 and ours; each limit says which one it is. */
static void test_hostile_limits_and_access(void **state)
{
	struct tally_client *c, *c2, *c3;
	void *bufs[TALLY_MAX_SEGMENTS + 1];
	struct attacker a;
	struct stat st;
	char path[64], line[512];
	int n = 0;
	FILE *f;

	(void)state;
	assert_int_equal(stat(dmn.sock, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	assert_int_equal(st.st_uid, getuid());

	/* max clients: the third of a local size 2 is refused */
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	assert_int_equal(tally_connect(dmn.sock, &c2), 0);
	assert_int_equal(tally_connect(dmn.sock, &c3), -TALLY_EDENIED);
	tally_disconnect(c2);

	/* max segments: TALLY_MAX_SEGMENTS, then TALLY_ELIMIT */
	for (n = 0; n <= TALLY_MAX_SEGMENTS; n++) {
		bufs[n] = tally_alloc(c, 4096);
		if (!bufs[n])
			break;
	}
	assert_int_equal(n, TALLY_MAX_SEGMENTS);
	assert_int_equal(tally_last_error(c), -TALLY_ELIMIT);
	assert_string_equal(tally_strerror(tally_last_error(c)),
			    tally_strerror(TALLY_ELIMIT));
	for (int i = 0; i < n; i++)
		tally_free(c, bufs[i]);
	assert_int_equal(tally_last_error(c), 0);
	assert_null(tally_alloc(c, 0));
	assert_int_equal(tally_last_error(c), -TALLY_EINVAL);
	assert_null(tally_alloc(c, SEGMENT_MAX_BYTES + 1));
	assert_int_equal(tally_last_error(c), -TALLY_ELIMIT);

	/* the daemon maps only memfds: no path, nothing in /dev/shm */
	bufs[0] = tally_alloc(c, 4096);
	assert_non_null(bufs[0]);
	snprintf(path, sizeof(path), "/proc/%d/maps", dmn.pid);
	f = fopen(path, "r");
	assert_non_null(f);
	n = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "tally-buf") || strstr(line, "tally-rings")) {
			assert_non_null(strstr(line, "/memfd:"));
			n++;
		}
		assert_null(strstr(line, "/dev/shm"));
	}
	fclose(f);
	assert_true(n >= 2);
	tally_disconnect(c);

	/* segment size: above SEGMENT_MAX_BYTES, TALLY_ELIMIT */
	assert_int_equal(atk_join(&a), 0);
	{
		int fd = memfd_create("big", MFD_CLOEXEC | MFD_ALLOW_SEALING);

		assert_int_equal(atk_seg_add(&a, 1, fd, SEGMENT_MAX_BYTES + 1),
				 -TALLY_ELIMIT);
		close(fd);
	}
	atk_close(&a);
	/* in flight: a client with rings larger than the API's gets no
	 * more than TALLY_MAX_INFLIGHT operations taken (so it cannot fill
	 * the pool of local groups); the rest waits in its ring */
	assert_int_equal(atk_join_sized(&a, 4 * TALLY_MAX_INFLIGHT), 0);
	{
		struct tally_sqe s = { .opcode = TALLY_OP_ALLREDUCE,
			.dtype = TALLY_INT32, .count = 1 };
		struct ring_shared *sq = a.ctrl.base;
		struct atk_buf b;
		int pushed = 0;

		atk_buf_add(&a, &b, 2, 4096);
		s.send_seg = s.recv_seg = 2;
		for (int i = 0; i < 4 * TALLY_MAX_INFLIGHT; i++) {
			s.key = (uint64_t)i;
			pushed += ring_push(&a.sq, &s) == 0;
		}
		atk_kick(&a);
		assert_int_equal(pushed, 4 * TALLY_MAX_INFLIGHT);
		for (int i = 0; i < 300 && atomic_load(&sq->head) <
					    TALLY_MAX_INFLIGHT; i++)
			usleep(10000);
		usleep(100000);	/* and would it take more? */
		assert_int_equal(atomic_load(&sq->head), TALLY_MAX_INFLIGHT);
		/* every one waits for the other member: none completed */
		assert_int_equal(ring_ready(&a.cq), 0);
		segment_destroy(&b.seg);
	}
	atk_close(&a);
	assert_honest_pair(14);
}

/* Scribbles random bytes over the whole fast-path table until stopped. */
struct scribble {
	unsigned char *table;
	size_t bytes;
	atomic_bool stop;
};

static void *scribble_table(void *p)
{
	struct scribble *sc = p;
	uint64_t x = 88172645463325252ull;

	while (!atomic_load(&sc->stop)) {
		for (size_t i = 0; i + 8 <= sc->bytes; i += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* keys and iterations the honest member uses, too */
			if (i % 64 == 8)
				x = (x & ~0xffull) | 5;
			memcpy(sc->table + i, &x, 8);
		}
		usleep(200);
	}
	return NULL;
}

/* The attacker writes garbage over the fast-path table it shares with an
 * honest member, while they all-reduce through the daemon and the daemon
 * scans the table (watchdog, mismatch checks): the daemon lives, and the
 * honest member's operations end, exactly or with an error, never hang
 * and never crash it. */
static void test_hostile_fast_table(void **state)
{
	struct scribble sc = { 0 };
	struct tally_client *c;
	struct attacker a;
	struct atk_buf b;
	pthread_t th;
	size_t big = 2 * 32768 / sizeof(int32_t);	/* the daemon's path */
	int32_t *buf;
	int exact = 0;

	(void)state;
	assert_int_equal(atk_join(&a), 0);
	assert_true(a.fast_fd >= 0);
	sc.bytes = a.fast_bytes;
	sc.table = mmap(NULL, sc.bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			a.fast_fd, 0);
	assert_true(sc.table != MAP_FAILED);
	atk_buf_add(&a, &b, 1, big * sizeof(int32_t));
	assert_int_equal(tally_connect(dmn.sock, &c), 0);
	buf = tally_alloc(c, big * sizeof(int32_t));
	assert_non_null(buf);
	assert_int_equal(pthread_create(&th, NULL, scribble_table, &sc), 0);
	for (int it = 0; it < 20; it++) {
		struct tally_allreduce_args args = {
			.key = 5, .iteration = (uint64_t)it, .sendbuf = buf,
			.recvbuf = buf, .count = big, .dtype = TALLY_INT32,
		};
		struct tally_sqe s = {
			.opcode = TALLY_OP_ALLREDUCE, .dtype = TALLY_INT32,
			.key = 5, .iteration = (uint64_t)it, .count = big,
			.send_seg = 1, .recv_seg = 1,
		};
		uint64_t req;
		int ra, rc;

		for (size_t i = 0; i < big; i++) {
			buf[i] = (int32_t)i;
			((int32_t *)b.seg.base)[i] = 1;
		}
		assert_int_equal(tally_allreduce(c, &args, &req), 0);
		usleep(it % 2 ? 0 : 20000);	/* past the mismatch check */
		ra = atk_result(&a, &s);
		rc = tally_wait(c, req, 10000);
		assert_true(rc == 0 || rc == -TALLY_EMISMATCH);
		assert_int_equal(ra, rc);
		if (rc == 0) {
			for (size_t i = 0; i < big; i++)
				assert_int_equal(buf[i], (int32_t)i + 1);
			exact++;
		}
		/* a small one: the table's, which is garbage now */
		args.count = 16;
		args.iteration += 1000;
		assert_int_equal(tally_allreduce(c, &args, &req), 0);
		rc = tally_wait(c, req, 50);
		assert_true(rc <= 0);
	}
	atomic_store(&sc.stop, true);
	pthread_join(th, NULL);
	print_message("%d of 20 exact, the others refused\n", exact);
	assert_true(daemon_alive(&dmn));
	tally_disconnect(c);
	munmap(sc.table, sc.bytes);
	segment_destroy(&b.seg);
	atk_close(&a);
	assert_true(daemon_alive(&dmn));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hostile_malformed_messages,
						setup_two, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_fds, setup_two,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_hostile_shared_memory_changes, setup_two,
			teardown),
		cmocka_unit_test_setup_teardown(test_hostile_ring_indices,
						setup_two, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_descriptors,
						setup_two, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_floods, setup_two,
						teardown),
		cmocka_unit_test_setup_teardown(test_hostile_disconnects,
						setup_two, teardown),
		cmocka_unit_test_setup_teardown(
			test_hostile_limits_and_access, setup_two, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_fast_table,
						setup_two_fast, teardown),
	};

	signal(SIGPIPE, SIG_IGN);	/* writes to refused connections */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
