// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_membership_async.c - a member joins without blocking the loop, and
 * several jobs share one epoll set.  Real coordinators and members
 * (membership.c) over loopback TCP, all in one process driving one epoll
 * set as tallyd does: events go to the membership whose job slot the tag
 * names (TAG_JOB), every membership ticks.
 *
 * A member's membership_start() returns at once when nothing listens; a
 * member started before its coordinator joins once the coordinator
 * starts; one whose coordinator never appears, or never sends its
 * CHALLENGE, loses its job after connect_timeout_ms saying why; two jobs
 * in one epoll set each form their own roster.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
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
#include "ctrl/loop_tags.h"
#include "ctrl/membership.h"

#define SECRET "the job's shared secret, 32 bytes"
#define MAX_JOBS 8

/* What one membership's callbacks saw. */
struct seen {
	int rosters;
	struct boot_msg roster;		/* the last one */
	int lost;
	char lost_why[256];
	uint64_t lost_ms;
};

static struct membership mbs[MAX_JOBS];	/* by tag_job */
static struct seen seen[MAX_JOBS];
static bool started[MAX_JOBS];
static int epfd = -1;
static int n_foreign;			/* events of no started job */

static void on_roster(void *ctx, const struct boot_msg *r)
{
	struct seen *s = ctx;

	s->rosters++;
	s->roster = *r;
}

static void on_down(void *ctx, int rank, const char *why)
{
	(void)ctx;
	(void)rank;
	(void)why;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_lost(void *ctx, const char *why)
{
	struct seen *s = ctx;

	s->lost++;
	s->lost_ms = now_ms();
	snprintf(s->lost_why, sizeof(s->lost_why), "%s", why);
}

static void keys_of(struct auth_keys *k, const char *secret)
{
	char err[256];

	assert_int_equal(auth_keys_from_secret(k, secret, strlen(secret),
					       err, sizeof(err)), 0);
}

/* A loopback port nobody listens on (bound, read, closed). */
static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static struct membership_cfg cfg_of(uint16_t rank, uint16_t port,
				    uint32_t job_key, uint16_t tag_job,
				    uint32_t connect_timeout_ms)
{
	struct membership_cfg cfg = {
		.self = { .rank = rank, .role = ROLE_WORKER, .local_size = 1,
			  .ip = 0x7f000001u, .port = (uint16_t)(9 + rank) },
		.world = 2, .algorithm = ALGO_AGGREGATE, .job_key = job_key,
		.k = 64, .pool_slots = 128, .coord_ip = 0x7f000001u,
		.coord_port = port, .heartbeat_ms = 100,
		.peer_timeout_ms = 5000,
		.connect_timeout_ms = connect_timeout_ms,
		.tag_job = tag_job,
	};

	keys_of(&cfg.keys, SECRET);
	return cfg;
}

/* [compression] method of the next start() (enum tly_codec) */
static uint8_t start_compression;

/* Start the membership of job slot @job; membership_start's result. */
static int start(uint16_t job, uint16_t rank, uint16_t port,
		 uint32_t job_key, uint32_t connect_timeout_ms)
{
	struct membership_cfg cfg = cfg_of(rank, port, job_key, job,
					   connect_timeout_ms);

	cfg.compression = start_compression;
	struct membership_ops ops = { on_roster, on_down, on_lost,
				      &seen[job] };
	int ret;

	assert_true(job < MAX_JOBS && !started[job]);
	memset(&seen[job], 0, sizeof(seen[job]));
	ret = membership_start(&mbs[job], &cfg, &ops, epfd);
	started[job] = true;
	return ret;
}

/* The daemon's loop for @ms: events to their job, ticks to all. */
static void pump(int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end) {
		struct epoll_event ev[16];
		int n = epoll_wait(epfd, ev, 16, 10);

		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64;
			int job = TAG_JOB(tag);

			assert_true(TAG_KIND(tag) == TAG_BOOT ||
				    TAG_KIND(tag) == TAG_BOOT_LISTEN);
			if (job >= MAX_JOBS || !started[job]) {
				n_foreign++;
				continue;
			}
			membership_event(&mbs[job], tag, now_ms());
		}
		for (int j = 0; j < MAX_JOBS; j++)
			if (started[j])
				membership_tick(&mbs[j], now_ms());
	}
}

/* pump until @done or @ms pass */
static void pump_until(bool (*done)(void), int ms)
{
	for (int i = 0; i < ms / 10 && !done(); i++)
		pump(10);
}

static int setup(void **state)
{
	(void)state;
	if (auth_init())
		return -1;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	memset(started, 0, sizeof(started));
	n_foreign = 0;
	return epfd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int j = 0; j < MAX_JOBS; j++)
		if (started[j])
			membership_stop(&mbs[j]);
	memset(started, 0, sizeof(started));
	close(epfd);
	return 0;
}

/* How many fds the epoll set watches (from /proc/self/fdinfo). */
static int epoll_watched(void)
{
	char path[64], line[256];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strncmp(line, "tfd:", 4) == 0;
	fclose(f);
	return n;
}

static void test_start_returns_at_once(void **state)
{
	uint16_t port = free_port();
	uint64_t t0 = now_ms(), took;

	(void)state;
	assert_int_equal(start(1, 1, port, 7, 10000), 0);
	took = now_ms() - t0;
	assert_true(took < 50);
	assert_int_equal(seen[1].lost, 0);
	assert_false(mbs[1].dead);
	assert_int_equal(mbs[1].connect_tries, 1);
	/* stopped while its first try is in flight or waiting: nothing
	 * stays open or watched */
	membership_stop(&mbs[1]);
	assert_int_equal(mbs[1].conn[0].fd, -1);
	assert_int_equal(epoll_watched(), 0);
	pump(150);			/* and no tick connects again */
	assert_int_equal(mbs[1].connect_tries, 1);
	assert_int_equal(epoll_watched(), 0);
	assert_int_equal(seen[1].lost, 0);
}

static bool lost1(void)
{
	return seen[1].lost > 0;
}

static void test_coordinator_never_appears(void **state)
{
	uint16_t port = free_port();
	char who[64];
	uint64_t t0 = now_ms(), after;

	(void)state;
	assert_int_equal(start(1, 1, port, 7, 300), 0);
	pump(200);
	assert_int_equal(seen[1].lost, 0);	/* still trying */
	assert_true(mbs[1].connect_tries >= 2);
	pump_until(lost1, 3000);
	assert_int_equal(seen[1].lost, 1);
	after = seen[1].lost_ms - t0;
	assert_true(after >= 300);
	assert_true(after < 2000);
	snprintf(who, sizeof(who), "coordinator 127.0.0.1:%u unreachable",
		 port);
	assert_non_null(strstr(seen[1].lost_why, who));
	assert_non_null(strstr(seen[1].lost_why, " ms "));
	assert_non_null(strstr(seen[1].lost_why, "refused"));
	assert_int_equal(seen[1].rosters, 0);
	assert_int_equal(mbs[1].conn[0].fd, -1);
	pump(100);				/* told once */
	assert_int_equal(seen[1].lost, 1);
}

static void test_no_challenge(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint64_t t0;

	(void)state;
	/* listens, never accepts: TCP connects, no CHALLENGE comes */
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	t0 = now_ms();
	assert_int_equal(start(1, 1, ntohs(sa.sin_port), 7, 200), 0);
	assert_true(now_ms() - t0 < 50);
	pump_until(lost1, 4000);
	close(lfd);
	assert_int_equal(seen[1].lost, 1);
	assert_true(seen[1].lost_ms - t0 >= MB_CHALLENGE_MS);
	assert_non_null(strstr(seen[1].lost_why, "sent no challenge"));
	assert_int_equal(mbs[1].connect_tries, 1);
}

static bool both_rostered(void)
{
	return seen[1].rosters > 0 && seen[2].rosters > 0;
}

/* the roster of a two-member job with key @key */
static void expect_roster(int job, uint32_t key)
{
	assert_int_equal(seen[job].rosters, 1);
	assert_int_equal(seen[job].lost, 0);
	assert_int_equal(seen[job].roster.roster.job_key, key);
	assert_int_equal(seen[job].roster.roster.n, 2);
	assert_int_equal(seen[job].roster.roster.m[0].rank, 0);
	assert_int_equal(seen[job].roster.roster.m[1].rank, 1);
}

static void test_member_before_coordinator(void **state)
{
	uint16_t port = free_port();

	(void)state;
	/* the member (a daemon's job slot 1) first, the coordinator (another
	 * daemon's slot 2) 300 ms later */
	assert_int_equal(start(1, 1, port, 11, 5000), 0);
	pump(300);
	assert_int_equal(seen[1].lost, 0);
	assert_int_equal(seen[1].rosters, 0);
	assert_true(mbs[1].connect_tries >= 2);
	assert_int_equal(start(2, 0, port, 11, 5000), 0);
	pump_until(both_rostered, 3000);
	expect_roster(1, 11);
	expect_roster(2, 11);
	assert_int_equal(mbs[1].join, MB_JOIN_REGISTERED);
	assert_true(mbs[2].present[1]);
	assert_int_equal(mbs[1].auth_failures + mbs[2].auth_failures, 0);
	/* heartbeats flow: both stay for a while past a heartbeat */
	pump(300);
	assert_int_equal(seen[1].lost, 0);
	assert_true(mbs[2].present[1]);
	assert_int_equal(n_foreign, 0);
}

/* a member with another [compression] method than rank 0's is refused:
 * its lanes would be dropped by every aggregator (mismatch) */
static void test_compression_differs_refused(void **state)
{
	uint16_t port = free_port();

	(void)state;
	start_compression = 0;
	assert_int_equal(start(2, 0, port, 13, 5000), 0);
	start_compression = 2;		/* int8 */
	assert_int_equal(start(1, 1, port, 13, 5000), 0);
	start_compression = 0;
	pump_until(lost1, 3000);
	assert_int_equal(seen[1].lost, 1);
	assert_non_null(strstr(seen[1].lost_why, "configuration differs"));
	assert_int_equal(seen[1].rosters, 0);
}

static bool all_rostered(void)
{
	for (int j = 1; j <= 4; j++)
		if (!seen[j].rosters)
			return false;
	return true;
}

static void test_two_jobs_one_epoll(void **state)
{
	uint16_t pa = free_port(), pb = free_port();

	(void)state;
	while (pb == pa)
		pb = free_port();
	/* job A: coordinator in slot 1, member in slot 3; job B: 2 and 4.
	 * Both members connect first, before any coordinator listens. */
	assert_int_equal(start(3, 1, pa, 101, 5000), 0);
	assert_int_equal(start(4, 1, pb, 202, 5000), 0);
	pump(100);
	assert_int_equal(start(1, 0, pa, 101, 5000), 0);
	assert_int_equal(start(2, 0, pb, 202, 5000), 0);
	pump_until(all_rostered, 3000);
	expect_roster(1, 101);
	expect_roster(3, 101);
	expect_roster(2, 202);
	expect_roster(4, 202);
	assert_int_equal(n_foreign, 0);
	/* a tag of another job is not ours: job A's listener tag given to
	 * job B's coordinator does nothing */
	membership_event(&mbs[2], TAG_JOB_SOCK(TAG_BOOT_LISTEN, 1, 0),
			 now_ms());
	membership_event(&mbs[4], TAG_JOB_SOCK(TAG_BOOT, 3, 0), now_ms());
	/* one job's member leaves: only that job sees it */
	membership_stop(&mbs[3]);
	started[3] = false;
	pump(200);
	assert_false(mbs[1].present[1]);
	assert_true(mbs[2].present[1]);
	assert_int_equal(seen[4].lost, 0);
	assert_int_equal(seen[2].rosters, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_start_returns_at_once,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_coordinator_never_appears,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_challenge,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_member_before_coordinator,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_jobs_one_epoll,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_compression_differs_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
