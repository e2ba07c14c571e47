// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_membership_auth.c - the coordinator's side of authentication, in
 * one process: a real coordinator (membership.c in an epoll loop) and
 * hand-made members over loopback TCP.  A registration under another
 * secret, a forged tag, a replayed registration and a forged message on a
 * registered connection are each refused and counted; an honest member
 * gets its roster.  Then the member's side: a real member against a
 * hand-made coordinator takes a sealed roster and loses its job on a
 * forged heartbeat, counting it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctrl/auth.h"
#include "ctrl/bootstrap.h"
#include "dataplane/engine/wire.h"
#include "ctrl/membership.h"

#define SECRET "the job's shared secret, 32 bytes"
#define JOB_KEY 4242

static struct membership mb;
static int epfd = -1;
static uint16_t port;
static int n_rosters, n_down;

static void on_roster(void *ctx, const struct boot_msg *r)
{
	(void)ctx;
	(void)r;
	n_rosters++;
}

static void on_down(void *ctx, int rank, const char *why)
{
	(void)ctx;
	(void)rank;
	(void)why;
	n_down++;
}

static char lost_why[256];

static void on_lost(void *ctx, const char *why)
{
	(void)ctx;
	snprintf(lost_why, sizeof(lost_why), "%s", why);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* run a membership's loop for @ms */
static void pump_on(struct membership *m, int ep, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end) {
		struct epoll_event ev[8];
		int n = epoll_wait(ep, ev, 8, 10);

		for (int i = 0; i < n; i++)
			membership_event(m, ev[i].data.u64, now_ms());
	}
}

/* the coordinator's */
static void pump(int ms)
{
	pump_on(&mb, epfd, ms);
}

static void keys_of(struct auth_keys *k, const char *secret)
{
	char err[256];

	assert_int_equal(auth_keys_from_secret(k, secret, strlen(secret),
					       err, sizeof(err)), 0);
}

static int setup(void **state)
{
	struct membership_ops ops = { on_roster, on_down, on_lost, NULL };
	struct membership_cfg cfg = {
		.self = { .rank = 0, .role = ROLE_WORKER, .local_size = 1,
			  .ip = 0x7f000001u, .port = 9 },
		.world = 2, .algorithm = ALGO_AGGREGATE, .job_key = JOB_KEY,
		.k = 64, .pool_slots = 128, .coord_ip = 0x7f000001u,
		.heartbeat_ms = 1000, .peer_timeout_ms = 60000,
		.connect_timeout_ms = 1000,
	};

	(void)state;
	if (auth_init())
		return -1;
	keys_of(&cfg.keys, SECRET);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	/* a free port: several tries from the pid */
	for (int i = 0; i < 20; i++) {
		port = (uint16_t)(30000 + (getpid() * 7 + i * 131) % 30000);
		cfg.coord_port = port;
		if (membership_start(&mb, &cfg, &ops, epfd) == 0)
			return 0;
		membership_stop(&mb);
	}
	return -1;
}

static int teardown(void **state)
{
	(void)state;
	membership_stop(&mb);
	close(epfd);
	return 0;
}

/* A hand-made member: connected, the coordinator's CHALLENGE read. */
struct fake {
	int fd;
	uint8_t nc[AUTH_NONCE_LEN], nm[AUTH_NONCE_LEN];
	struct auth_stream tx, rx;
	uint8_t buf[BOOT_MAX_MSG];
	size_t len;
};

/* the next whole message from the coordinator, 0 at EOF */
static int fake_recv(struct fake *f, struct boot_msg *m)
{
	for (int tries = 0; tries < 100; tries++) {
		int len = boot_decode(f->buf, f->len, m);
		ssize_t n;

		assert_true(len >= 0);
		if (len > 0)
			return len;
		pump(10);
		n = recv(f->fd, f->buf + f->len, sizeof(f->buf) - f->len,
			 MSG_DONTWAIT);
		if (n == 0)
			return 0;
		if (n > 0)
			f->len += (size_t)n;
	}
	fail_msg("no message from the coordinator within 1 s");
	return -1;
}

static void fake_consume(struct fake *f, int len)
{
	f->len -= (size_t)len;
	memmove(f->buf, f->buf + len, f->len);
}

static void fake_connect(struct fake *f, const char *secret)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct auth_keys k;
	struct boot_msg m;
	int len;

	memset(f, 0, sizeof(*f));
	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->fd >= 0);
	assert_int_equal(connect(f->fd, (struct sockaddr *)&sa, sizeof(sa)),
			 0);
	len = fake_recv(f, &m);
	assert_true(len > 0);
	assert_int_equal(m.type, BOOT_CHALLENGE);
	memcpy(f->nc, m.challenge.nonce, AUTH_NONCE_LEN);
	fake_consume(f, len);
	auth_nonce(f->nm);
	keys_of(&k, secret);
	auth_stream_init(&f->tx, &k, AUTH_M2C, f->nc, f->nm);
	auth_stream_init(&f->rx, &k, AUTH_C2M, f->nc, f->nm);
}

/* encode, seal (or forge: flip a tag bit), send; the bytes in @raw */
static int fake_send(struct fake *f, struct boot_msg *m, bool forge,
		     uint8_t *raw)
{
	uint8_t buf[BOOT_MAX_MSG];
	int len = boot_encode(m, buf, sizeof(buf));

	assert_true(len > 0);
	auth_seal(&f->tx, buf, (size_t)len);
	if (forge)
		buf[len - 1] ^= 1;
	if (raw)
		memcpy(raw, buf, (size_t)len);
	assert_int_equal(send(f->fd, buf, (size_t)len, MSG_NOSIGNAL), len);
	return len;
}

static void fake_register_full(struct fake *f, bool forge, uint8_t *raw,
			       uint8_t threads, uint8_t profile)
{
	struct boot_msg m = { .type = BOOT_REGISTER };

	m.reg.self = (struct boot_member){ .rank = 1, .role = ROLE_WORKER,
		.local_size = 1, .ip = 0x7f000001u, .port = 10 };
	m.reg.job_key = JOB_KEY;
	m.reg.world = 2;
	m.reg.algorithm = ALGO_AGGREGATE;
	m.reg.threads = threads;
	m.reg.profile = profile;
	memcpy(m.reg.nonce, f->nm, AUTH_NONCE_LEN);
	fake_send(f, &m, forge, raw);
}

static void fake_register_threads(struct fake *f, bool forge, uint8_t *raw,
				  uint8_t threads)
{
	fake_register_full(f, forge, raw, threads, 0);
}

static void fake_register(struct fake *f, bool forge, uint8_t *raw)
{
	fake_register_threads(f, forge, raw, 1);
}

/* the coordinator answers a refused registration, then closes */
static void expect_refused(struct fake *f, uint16_t reason)
{
	struct boot_msg m;
	int len = fake_recv(f, &m);

	assert_true(len > 0);
	assert_int_equal(m.type, BOOT_REFUSE);
	assert_int_equal(m.refuse.reason, reason);
	fake_consume(f, len);
	assert_int_equal(fake_recv(f, &m), 0);
	close(f->fd);
}

static void test_other_secret_refused(void **state)
{
	uint64_t before = mb.auth_failures;
	struct fake f;

	(void)state;
	fake_connect(&f, SECRET " (another job)");
	fake_register(&f, false, NULL);
	expect_refused(&f, REFUSE_AUTH);
	assert_int_equal(mb.auth_failures, before + 1);
	assert_false(mb.present[1]);
	assert_int_equal(n_rosters, 0);
}

/* A daemon with another dataplane.threads would talk to shards nobody
 * answers: refused at registration, with the job's secret and key. */
static void test_other_thread_count_refused(void **state)
{
	struct fake f;

	(void)state;
	fake_connect(&f, SECRET);
	fake_register_threads(&f, false, NULL, 2);
	expect_refused(&f, REFUSE_CONFIG);
	assert_false(mb.present[1]);
	assert_int_equal(n_rosters, 0);
}

/* A daemon in the other dataplane.profile would send receipts its
 * aggregators do not take: refused at registration too. */
static void test_other_profile_refused(void **state)
{
	struct fake f;

	(void)state;
	fake_connect(&f, SECRET);
	fake_register_full(&f, false, NULL, 1, TLY_PROFILE_SWITCH);
	expect_refused(&f, REFUSE_CONFIG);
	assert_false(mb.present[1]);
	assert_int_equal(n_rosters, 0);
}

static void test_forged_tag_refused(void **state)
{
	uint64_t before = mb.auth_failures;
	struct fake f;

	(void)state;
	fake_connect(&f, SECRET);
	fake_register(&f, true, NULL);
	expect_refused(&f, REFUSE_AUTH);
	assert_int_equal(mb.auth_failures, before + 1);
	assert_false(mb.present[1]);
}

/*
 * An honest member registers and gets the roster; its recorded
 * registration replayed on a new connection is refused; a forged message
 * on its own connection ends its membership.
 */
static void test_honest_then_replay_then_forgery(void **state)
{
	uint8_t recorded[BOOT_MAX_MSG];
	uint64_t before = mb.auth_failures;
	struct boot_msg m = { .type = BOOT_REGISTER };
	struct fake f, g;
	int len;

	(void)state;
	fake_connect(&f, SECRET);
	fake_register(&f, false, recorded);
	len = fake_recv(&f, &m);
	assert_true(len > 0);
	assert_int_equal(m.type, BOOT_ROSTER);
	assert_int_equal(auth_open(&f.rx, f.buf, (size_t)len), 0);
	fake_consume(&f, len);
	assert_true(mb.present[1]);
	assert_int_equal(n_rosters, 1);
	assert_int_equal(mb.auth_failures, before);

	/* the same bytes on another connection: another challenge */
	fake_connect(&g, SECRET);
	len = boot_decode(recorded, sizeof(recorded), &m);
	assert_true(len > 0);
	assert_int_equal(send(g.fd, recorded, (size_t)len, MSG_NOSIGNAL),
			 len);
	expect_refused(&g, REFUSE_AUTH);
	assert_int_equal(mb.auth_failures, before + 1);
	assert_true(mb.present[1]);		/* the honest one stays */

	/* a replayed heartbeat on the member's own connection */
	memset(&m, 0, sizeof(m));
	m.type = BOOT_HEARTBEAT;
	m.peer.rank = 1;
	fake_send(&f, &m, false, recorded);
	pump(50);
	assert_true(mb.present[1]);
	len = boot_decode(recorded, sizeof(recorded), &m);
	assert_int_equal(send(f.fd, recorded, (size_t)len, MSG_NOSIGNAL),
			 len);
	pump(50);
	assert_int_equal(mb.auth_failures, before + 2);
	assert_false(mb.present[1]);
	assert_int_equal(n_down, 1);
	assert_int_equal(lost_why[0], '\0');
	close(f.fd);
}

/* ---- the member's side ------------------------------------------------ */

struct fake_coord {
	int listen_fd;
	struct auth_keys keys;
	bool registered;	/* the member's REGISTER verified */
	bool closed;		/* the member hung up after the forgery */
};

/* read one whole message, blocking (at most 5 s); its length or -1 */
static int read_msg(int fd, uint8_t *buf, struct boot_msg *m)
{
	size_t len = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int got = boot_decode(buf, len, m);
		ssize_t n;

		if (got != 0)
			return got;
		if (poll(&p, 1, 5000) != 1)
			return -1;
		n = recv(fd, buf + len, BOOT_MAX_MSG - len, 0);
		if (n <= 0)
			return -1;
		len += (size_t)n;
	}
}

static void send_sealed(int fd, struct auth_stream *tx, struct boot_msg *m,
			bool forge)
{
	uint8_t buf[BOOT_MAX_MSG];
	int len = boot_encode(m, buf, sizeof(buf));

	auth_seal(tx, buf, (size_t)len);
	if (forge)	/* the padding: still decodes, but the tag fails */
		buf[BOOT_HDR_LEN + 2] ^= 1;
	(void)!send(fd, buf, (size_t)len, MSG_NOSIGNAL);
}

static void *fake_coordinator(void *arg)
{
	struct fake_coord *fc = arg;
	struct pollfd p = { .fd = fc->listen_fd, .events = POLLIN };
	struct boot_msg ch = { .type = BOOT_CHALLENGE }, m;
	struct auth_stream rx, tx;
	uint8_t buf[BOOT_MAX_MSG];
	int fd, len;

	if (poll(&p, 1, 5000) != 1)
		return NULL;
	fd = accept(fc->listen_fd, NULL, NULL);
	if (fd < 0)
		return NULL;
	auth_nonce(ch.challenge.nonce);
	len = boot_encode(&ch, buf, sizeof(buf));
	(void)!send(fd, buf, (size_t)len, MSG_NOSIGNAL);
	len = read_msg(fd, buf, &m);
	if (len > 0 && m.type == BOOT_REGISTER) {
		auth_stream_init(&rx, &fc->keys, AUTH_M2C, ch.challenge.nonce,
				 m.reg.nonce);
		auth_stream_init(&tx, &fc->keys, AUTH_C2M, ch.challenge.nonce,
				 m.reg.nonce);
		fc->registered = auth_open(&rx, buf, (size_t)len) == 0;
	}
	if (fc->registered) {
		struct boot_msg r = { .type = BOOT_ROSTER, .epoch = 1 };
		struct boot_msg hb = { .type = BOOT_HEARTBEAT, .epoch = 1 };

		r.roster.job_key = JOB_KEY;
		r.roster.k = 64;
		r.roster.pool_slots = 128;
		r.roster.algorithm = ALGO_AGGREGATE;
		r.roster.n = 2;
		r.roster.m[0] = (struct boot_member){ .rank = 0,
			.role = ROLE_WORKER, .ip = 0x7f000001u, .port = 9 };
		r.roster.m[1] = (struct boot_member){ .rank = 1,
			.role = ROLE_WORKER, .ip = 0x7f000001u, .port = 10 };
		send_sealed(fd, &tx, &r, false);
		send_sealed(fd, &tx, &hb, true);
		fc->closed = read_msg(fd, buf, &m) < 0;
	}
	close(fd);
	return NULL;
}

static void test_member_drops_forged_coordinator(void **state)
{
	struct fake_coord fc = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	struct membership_ops ops = { on_roster, on_down, on_lost, NULL };
	struct membership_cfg cfg = {
		.self = { .rank = 1, .role = ROLE_WORKER, .local_size = 1,
			  .ip = 0x7f000001u, .port = 10 },
		.world = 2, .algorithm = ALGO_AGGREGATE, .job_key = JOB_KEY,
		.k = 64, .pool_slots = 128, .coord_ip = 0x7f000001u,
		.heartbeat_ms = 1000, .peer_timeout_ms = 60000,
		.connect_timeout_ms = 2000,
	};
	static struct membership member;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	pthread_t th;

	(void)state;
	keys_of(&fc.keys, SECRET);
	cfg.keys = fc.keys;
	fc.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(fc.listen_fd, (struct sockaddr *)&sa,
			      sizeof(sa)), 0);
	assert_int_equal(listen(fc.listen_fd, 4), 0);
	assert_int_equal(getsockname(fc.listen_fd, (struct sockaddr *)&sa,
				     &sl), 0);
	cfg.coord_port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&th, NULL, fake_coordinator, &fc), 0);
	n_rosters = 0;
	lost_why[0] = '\0';
	assert_int_equal(membership_start(&member, &cfg, &ops, ep), 0);
	for (int i = 0; i < 200 && !lost_why[0]; i++)
		pump_on(&member, ep, 10);
	pthread_join(th, NULL);
	membership_stop(&member);
	close(fc.listen_fd);
	close(ep);
	assert_true(fc.registered);
	assert_int_equal(n_rosters, 1);		/* the sealed roster */
	assert_non_null(strstr(lost_why, "failed authentication"));
	assert_int_equal(member.auth_failures, 1);
	assert_true(fc.closed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_other_secret_refused),
		cmocka_unit_test(test_other_thread_count_refused),
		cmocka_unit_test(test_other_profile_refused),
		cmocka_unit_test(test_forged_tag_refused),
		cmocka_unit_test(test_honest_then_replay_then_forgery),
		cmocka_unit_test(test_member_drops_forged_coordinator),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
