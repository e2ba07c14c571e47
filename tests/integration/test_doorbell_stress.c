// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_doorbell_stress.c - lost wake-ups in the doorbell handshake.
 *
 * Both sides of a ring sleep the same way: spin a while, then set 'asleep'
 * on the ring, re-check it, and sleep on an eventfd; a producer publishes,
 * then rings the eventfd only if it sees 'asleep' (shm/ring.h).  Without
 * the re-check, an entry published just before 'asleep' was set is never
 * rung for: the daemon sleeps on a submission (in a local job, forever),
 * or a client sleeps on a completion until its wait's deadline.
 *
 * The windows are a few hundred nanoseconds to a few microseconds, so
 * random timing alone rarely hits them.  These tests follow the other
 * side through the shared ring pages and submit, or start waiting, a
 * random gap after it set off towards sleep (its idle spin over), many
 * thousand times, with a timeout on every wait: a wait that reaches it is
 * a lost wake-up.  All clients live in this process, which runs on
 * another core than the daemon's loop when there are two (on one core the
 * two sides do not interleave: each runs until it sleeps).
 *
 * Daemon side: N clients.  The daemon announces sleep ring by ring, the
 * last client's ring last; this process reads the other rings' 'asleep'
 * words first, so each announcement costs the daemon a cache miss, and
 * the way from the first to the last takes a microsecond or more.  For
 * each operation N - 1 helpers submit; the last client sends a NOP, and
 * once it is completed (the daemon's last work) and the daemon has
 * announced sleep on the first ring, the last client submits its part
 * after a random gap.  With an idle spin of 0 and of 20 us.
 *
 * Client side: two clients and a daemon that never sleeps.  Client 0
 * submits, then client 1 completes the operation; the daemon pushes
 * client 0's completion a short, steady time after it takes client 1's
 * submission.  When it has taken it, client 0 enters tally_wait() after a
 * random gap, mostly with no spin budget (its sleep then follows its first
 * look at the ring at once), sometimes with a small one.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "harness.h"
#include "shm/client_internal.h"

#define RUN_MS 2000
/* a healthy wait takes microseconds; one that reaches this was lost */
#define WAIT_MS 1500
#define WAIT_NS (WAIT_MS * 1000000ull)
/* watch the daemon without yielding the core this long */
#define BUSY_NS 200000ull
#define N_MAX 32

struct member {
	struct tally_client *c;
	int32_t *buf;
	uint64_t req;
};

static struct test_daemon dmn;
static struct member m[N_MAX];
static int n_members;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* uniform in [lo, hi] */
static uint64_t uniform(uint64_t *rng, uint64_t lo, uint64_t hi)
{
	uint64_t x = (*rng += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return lo + x % (hi - lo + 1);
}

/* busy: a sleep would round the gap up to the timer slack */
static void spin_for(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		;
}

/*
 * Spin until *@word == @want; false after @limit_ns.  The clock is read
 * only now and then, so the loop sees a change within nanoseconds; the
 * core is yielded after BUSY_NS in case the daemon needs it.
 */
static bool watch_u32(_Atomic uint32_t *word, uint32_t want,
		      uint64_t limit_ns)
{
	uint64_t t0 = now_ns(), t;
	unsigned int k = 0;

	while (atomic_load(word) != want) {
		if (++k & 1023)
			continue;
		t = now_ns() - t0;
		if (t > limit_ns)
			return false;
		if (t > BUSY_NS)
			sched_yield();
	}
	return true;
}

/* the daemon's loop on one core, this process on another, if two */
static void pin_apart(pid_t daemon)
{
	cpu_set_t allowed, one;
	int first = -1, second = -1;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return;
	for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
		if (CPU_ISSET(c, &allowed)) {
			if (first < 0)
				first = c;
			else
				second = c;
		}
	if (second < 0)
		return;
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	sched_setaffinity(daemon, sizeof(one), &one);
	CPU_ZERO(&one);
	CPU_SET(second, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

static void start(int n, const char *idle_spin_us)
{
	const char *const extra[] = { "--idle-spin-us", idle_spin_us, NULL };

	assert_int_equal(daemon_start(&dmn, n, extra), 0);
	pin_apart(dmn.pid);
	for (; n_members < n; n_members++) {	/* ranks in this order */
		struct member *mb = &m[n_members];

		assert_int_equal(tally_connect(dmn.sock, &mb->c), 0);
		mb->buf = tally_alloc(mb->c, 4096);
		assert_non_null(mb->buf);
	}
}

/* also after a failed assertion: nothing may outlive the test */
static int teardown(void **state)
{
	static cpu_set_t all;

	(void)state;
	for (int r = 0; r < n_members; r++)
		tally_disconnect(m[r].c);
	n_members = 0;
	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	sched_setaffinity(0, sizeof(all), &all);
	return dmn.pid ? daemon_stop(&dmn) : 0;
}

/* member @r of @n contributes (i, r): the sum is (n * i, n(n-1)/2) */
static void submit(struct member *mb, int r, uint64_t i)
{
	struct tally_allreduce_args a = {
		.key = 7, .iteration = i, .sendbuf = mb->buf,
		.recvbuf = mb->buf, .count = 2, .dtype = TALLY_INT32,
	};

	mb->buf[0] = (int32_t)i;
	mb->buf[1] = r;
	assert_int_equal(tally_allreduce(mb->c, &a, &mb->req), 0);
}

/* a wait that must not reach its timeout, and the exact sum */
static void wait_done(struct member *mb, int n, uint64_t i, const char *who)
{
	uint64_t t0 = now_ns(), took;
	int ret = tally_wait(mb->c, mb->req, WAIT_MS);

	took = now_ns() - t0;
	if (ret || took >= WAIT_NS)
		fail_msg("%s, operation %llu: wait returned %d after %llu "
			 "ms: lost wake-up", who, (unsigned long long)i, ret,
			 (unsigned long long)(took / 1000000));
	assert_int_equal(mb->buf[0], n * (int32_t)i);
	assert_int_equal(mb->buf[1], n * (n - 1) / 2);
}

static void daemon_side_op(int n, uint64_t i, uint64_t *rng)
{
	const int last = n - 1;
	struct tally_client *lc = m[last].c;
	struct tally_sqe nop = { .opcode = TALLY_OP_NOP };
	uint32_t done;
	uint64_t nop_req;

	for (int r = 0; r < last; r++)
		submit(&m[r], r, i);
	if (!watch_u32(&m[last - 1].c->sq.sh->head,
		       m[last - 1].c->sq.local, WAIT_NS))
		fail_msg("operation %llu: a helper's submission was never "
			 "taken: lost wake-up", (unsigned long long)i);
	/* the daemon's last work: a NOP of ours */
	done = atomic_load(&lc->cq.sh->tail) + 1;
	assert_int_equal(client_submit_sqe(lc, &nop, &nop_req), 0);
	if (!watch_u32(&lc->cq.sh->tail, done, WAIT_NS))
		fail_msg("operation %llu: a NOP was never taken: lost "
			 "wake-up", (unsigned long long)i);
	/* its idle spin over, it reads every ring, then announces sleep
	 * ring by ring, ours last: submit in between */
	for (int r = 1; r < last; r++)
		(void)atomic_load(&m[r].c->sq.sh->asleep);
	watch_u32(&m[0].c->sq.sh->asleep, 1, WAIT_NS / 4);
	spin_for(uniform(rng, 0, 1000));
	submit(&m[last], last, i);
	wait_done(&m[last], n, i, "the last client");
	for (int r = 0; r < last; r++)
		wait_done(&m[r], n, i, "a helper");
	assert_int_equal(tally_wait(lc, nop_req, WAIT_MS), 0);
}

static void daemon_side(const char *idle_spin_us)
{
	uint64_t rng = 99, i, end;

	start(N_MAX, idle_spin_us);
	end = test_now_ms() + RUN_MS;
	for (i = 0; test_now_ms() < end; i++)
		daemon_side_op(N_MAX, i, &rng);
	printf("%llu operations\n", (unsigned long long)i);
}

/* the daemon sleeps as soon as it is idle */
static void test_daemon_sleeps_at_once(void **state)
{
	(void)state;
	daemon_side("0");
}

/* the daemon spins 20 us first */
static void test_daemon_spins_first(void **state)
{
	(void)state;
	daemon_side("20");
}

/* make tally_wait() spin @budget ns before sleeping (shm/client_ops.c) */
static void set_spin_budget(struct tally_client *c, uint64_t budget)
{
	c->spin_ewma_ns = budget ? budget / 2 : CLIENT_SPIN_MAX_NS + 1;
}

static void test_client_sleep_races_completion(void **state)
{
	uint64_t rng = 5, i, end;

	(void)state;
	start(2, "1000000");		/* the daemon never sleeps */
	end = test_now_ms() + RUN_MS;
	for (i = 0; test_now_ms() < end; i++) {
		submit(&m[0], 0, i);
		submit(&m[1], 1, i);
		if (!watch_u32(&m[1].c->sq.sh->head, m[1].c->sq.local,
			       WAIT_NS))
			fail_msg("operation %llu never taken",
				 (unsigned long long)i);
		/* client 0's completion is on its way */
		set_spin_budget(m[0].c, uniform(&rng, 0, 3) ? 0 :
				uniform(&rng, 100, 1000));
		spin_for(uniform(&rng, 0, 300));
		wait_done(&m[0], 2, i, "the waiting client");
		wait_done(&m[1], 2, i, "the other client");
	}
	printf("%llu operations\n", (unsigned long long)i);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_daemon_sleeps_at_once,
					  teardown),
		cmocka_unit_test_teardown(test_daemon_spins_first, teardown),
		cmocka_unit_test_teardown(test_client_sleep_races_completion,
					  teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
