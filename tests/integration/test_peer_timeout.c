// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_peer_timeout.c - the failure detector's timeout path: a daemon that
 * hangs with its connections open (SIGSTOP) sends nothing and closes
 * nothing, so only the silence of peer_timeout_ms can reveal it (a killed
 * daemon's closed TCP connection is noticed at once, which is what the
 * other failure tests exercise).
 *
 * Two daemons over UDP on the loopback, one client each.  After a checked
 * all-reduce, the survivor's client submits one more that can never
 * complete, and the victim is stopped.  The survivor's client must get
 * TALLY_EPEERLOST within peer_timeout_ms plus a margin, and not before
 * peer_timeout_ms less a heartbeat and a margin (the victim's last
 * heartbeat may predate the stop by up to 1.5 heartbeat intervals), and the
 * survivor's log must say it was the silence.  Both directions: the
 * coordinator loses a member, a member loses the coordinator.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "cluster_harness.h"

#define HEARTBEAT_MS 50
#define TIMEOUT_MS 1200
/* a stop is seen within [TIMEOUT_MS - EARLY_MS, TIMEOUT_MS + LATE_MS] */
#define EARLY_MS (3 * HEARTBEAT_MS / 2 + 100)
#define LATE_MS (TIMEOUT_MS / 2)

#define STR_(x) #x
#define STR(x) STR_(x)

struct victim_arg {
	const char *sock;
	int ready[2];		/* its client -> parent: first op done */
};

/* One all-reduce of 1.0 from each host: 2.0 proves the job formed. */
static int first_op(struct tally_client *c, float *buf)
{
	struct tally_allreduce_args a = { .key = 0, .count = 1 };
	uint64_t req;

	buf[0] = 1.0f;
	a.sendbuf = a.recvbuf = buf;
	if (tally_allreduce(c, &a, &req) || tally_wait(c, req, 20000))
		return -1;
	return buf[0] == 2.0f ? 0 : -1;
}

/* The stopped host's client: the first op, then stays connected (its
 * leaving would be another, faster way to fail the job). */
static int victim_client(void *p)
{
	struct victim_arg *a = p;
	struct tally_client *c;
	float *buf;

	CHECK(tally_connect(a->sock, &c) == 0, 2);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 3);
	CHECK(first_op(c, buf) == 0, 4);
	sync_signal(a->ready[1]);
	pause();		/* the parent kills us */
	return 5;
}

static int start_daemons(struct test_daemon d[2])
{
	int base = test_port_base(16);
	char coord[32], addr[2][32], rank[2][8], key[16];

	snprintf(coord, sizeof(coord), "127.0.0.1:%d", base);
	snprintf(key, sizeof(key), "%d", 3000 + getpid() % 1000);
	cluster_default_secret();	/* a multi-host job needs one */
	for (int r = 0; r < 2; r++) {
		const char *argv[] = {
			"--rank", rank[r], "--world", "2",
			"--role", "worker+aggregator",
			"--algorithm", "aggregate",
			"--coordinator", coord, "--job-key", key,
			"--address", addr[r], "--transport", "udp",
			"--log-level", "info",
			"--set", "cluster.heartbeat_ms=" STR(HEARTBEAT_MS),
			"--set", "cluster.peer_timeout_ms=" STR(TIMEOUT_MS),
			NULL,
		};

		snprintf(rank[r], sizeof(rank[r]), "%d", r);
		snprintf(addr[r], sizeof(addr[r]), "127.0.0.1:%d",
			 base + 1 + r);
		if (daemon_start(&d[r], 1, argv)) {
			if (r)
				daemon_stop(&d[0]);
			return -1;
		}
	}
	return 0;
}

/*
 * Stop daemon @v while the other one's client waits on an operation that
 * needs it: the wait must end with TALLY_EPEERLOST in the window above,
 * and the survivor's log must say @survivor_says.
 */
static void stop_one(int v, const char *survivor_says)
{
	struct test_daemon d[2];
	struct victim_arg va;
	struct tally_allreduce_args a = { .key = 1, .count = 1 };
	struct tally_client *c = NULL;
	int s = 1 - v, res = 1, first = -1, vc_ret;
	uint64_t req, t0, took = 0;
	bool said;
	pid_t vc;
	float *buf = NULL;

	assert_int_equal(pipe(va.ready), 0);
	assert_int_equal(start_daemons(d), 0);
	va.sock = d[v].sock;
	vc = child_start(victim_client, &va);
	if (tally_connect(d[s].sock, &c) == 0)
		buf = tally_alloc(c, 4096);
	if (buf)
		first = first_op(c, buf);
	if (first == 0 && sync_wait(va.ready[0], 20000) == 0) {
		a.sendbuf = a.recvbuf = buf;
		if (tally_allreduce(c, &a, &req) == 0) {
			kill(d[v].pid, SIGSTOP);
			t0 = test_now_ms();
			res = tally_wait(c, req, 4 * TIMEOUT_MS);
			took = test_now_ms() - t0;
		}
	}
	said = daemon_log_count(&d[s], survivor_says) > 0;
	/* clean up before any assertion can leave a stopped daemon */
	kill(d[v].pid, SIGCONT);
	kill(vc, SIGKILL);
	vc_ret = child_wait(vc, 5000);
	if (c)
		tally_disconnect(c);
	daemon_stop(&d[v]);	/* it lost its job: any exit is fine */
	assert_int_equal(daemon_stop(&d[s]), 0);
	close(va.ready[0]);
	close(va.ready[1]);

	assert_int_equal(first, 0);
	assert_int_equal(vc_ret, -1);		/* killed while waiting */
	assert_int_equal(res, -TALLY_EPEERLOST);
	fprintf(stderr, "stop seen after %llu ms (peer_timeout_ms %d)\n",
		(unsigned long long)took, TIMEOUT_MS);
	assert_true(took >= TIMEOUT_MS - EARLY_MS);
	assert_true(took <= TIMEOUT_MS + LATE_MS);
	assert_true(said);
}

static void test_member_hangs(void **state)
{
	(void)state;
	stop_one(1, "rank 1 stopped answering");
}

static void test_coordinator_hangs(void **state)
{
	(void)state;
	stop_one(0, "coordinator stopped answering");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_member_hangs),
		cmocka_unit_test(test_coordinator_hangs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
