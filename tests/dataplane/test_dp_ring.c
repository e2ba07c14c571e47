// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_dp_ring.c - the in-process SPSC ring (dataplane/dp_ring.h): order,
 * full and empty, wrap-around (of the slots and of the 32-bit indices),
 * two threads passing every value once and in order, and the sleep
 * handshake: a consumer that always sleeps when the ring is empty is
 * woken for every entry (a lost wake-up fails on a bounded wait).
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dataplane/dp_ring.h"

/* a wait that must end: past it, the wake-up was lost */
#define WAKE_TIMEOUT_MS 10000

struct entry {
	uint64_t v;
	uint64_t check;		/* ~v: a torn entry fails */
};

static struct entry mk(uint64_t v)
{
	return (struct entry){ .v = v, .check = ~v };
}

static void test_order(void **state)
{
	struct dp_ring r;
	struct entry e;

	(void)state;
	assert_int_equal(dp_ring_init(&r, 16, sizeof(e)), 0);
	for (uint64_t i = 0; i < 10; i++) {
		e = mk(i);
		assert_int_equal(dp_ring_push(&r, &e), 0);
	}
	assert_int_equal(dp_ring_ready(&r), 10);
	for (uint64_t i = 0; i < 10; i++) {
		assert_int_equal(dp_ring_pop(&r, &e), 1);
		assert_int_equal(e.v, i);
		assert_int_equal(e.check, ~i);
	}
	assert_int_equal(dp_ring_pop(&r, &e), 0);
	dp_ring_fini(&r);
}

static void test_full_empty(void **state)
{
	struct dp_ring r;
	struct entry e = mk(7);

	(void)state;
	assert_int_not_equal(dp_ring_init(&r, 12, sizeof(e)), 0);
	assert_int_equal(dp_ring_init(&r, 8, sizeof(e)), 0);
	assert_null(dp_ring_peek(&r));
	assert_int_equal(dp_ring_pop(&r, &e), 0);
	assert_int_equal(dp_ring_free(&r), 8);
	for (int i = 0; i < 8; i++) {
		e = mk((uint64_t)i);
		assert_int_equal(dp_ring_push(&r, &e), 0);
	}
	assert_int_equal(dp_ring_free(&r), 0);
	e = mk(100);
	assert_int_equal(dp_ring_push(&r, &e), -1);
	assert_int_equal(dp_ring_ready(&r), 8);
	/* peek leaves the entry; consume gives its room back */
	assert_int_equal(((struct entry *)dp_ring_peek(&r))->v, 0);
	assert_int_equal(((struct entry *)dp_ring_peek(&r))->v, 0);
	assert_int_equal(dp_ring_push(&r, &e), -1);
	dp_ring_consume(&r);
	assert_int_equal(dp_ring_push(&r, &e), 0);
	for (uint64_t i = 1; i < 8; i++) {
		assert_int_equal(dp_ring_pop(&r, &e), 1);
		assert_int_equal(e.v, i);
	}
	assert_int_equal(dp_ring_pop(&r, &e), 1);
	assert_int_equal(e.v, 100);
	assert_int_equal(dp_ring_pop(&r, &e), 0);
	/* reset empties it */
	assert_int_equal(dp_ring_push(&r, &e), 0);
	dp_ring_reset(&r);
	assert_int_equal(dp_ring_ready(&r), 0);
	assert_int_equal(dp_ring_free(&r), 8);
	dp_ring_fini(&r);
}

/* Batches of changing size walk the slots round many times, and the
 * indices across 2^32. */
static void wrap(uint32_t start)
{
	struct dp_ring r;
	uint64_t next_in = 0, next_out = 0;
	struct entry e;

	assert_int_equal(dp_ring_init(&r, 4, sizeof(e)), 0);
	atomic_store(&r.tail, start);
	atomic_store(&r.head, start);
	r.cached_head = r.cached_tail = start;
	for (int round = 0; round < 1000; round++) {
		int n = round % 5;	/* 0..4: up to full */

		for (int i = 0; i < n; i++) {
			e = mk(next_in++);
			assert_int_equal(dp_ring_push(&r, &e), 0);
		}
		if (n == 4) {
			e = mk(0);
			assert_int_equal(dp_ring_push(&r, &e), -1);
		}
		assert_int_equal(dp_ring_ready(&r), n);
		for (int i = 0; i < n; i++) {
			assert_int_equal(dp_ring_pop(&r, &e), 1);
			assert_int_equal(e.v, next_out);
			assert_int_equal(e.check, ~next_out);
			next_out++;
		}
		assert_int_equal(dp_ring_pop(&r, &e), 0);
	}
	assert_int_equal(next_in, next_out);
	dp_ring_fini(&r);
}

static void test_wrap_around(void **state)
{
	(void)state;
	wrap(0);
	wrap(UINT32_MAX - 5);
}

/* ---- two threads ------------------------------------------------------- */

struct pair {
	struct dp_ring r;
	uint64_t n;
	bool ping_pong;		/* wait for each entry to be taken */
	bool always_sleep;	/* the consumer sleeps whenever it is empty */
	/* results, read after the join */
	uint64_t received, out_of_order, torn, lost_wakeups, sleeps;
};

static void *producer(void *arg)
{
	struct pair *p = arg;

	for (uint64_t i = 0; i < p->n; i++) {
		struct entry e = mk(i);

		while (dp_ring_push(&p->r, &e))
			sched_yield();	/* full: the consumer needs the core */
		dp_ring_notify(&p->r);
		while (p->ping_pong && dp_ring_free(&p->r) <
		       dp_ring_size(&p->r))
			sched_yield();
	}
	return NULL;
}

static void consumer(struct pair *p)
{
	uint64_t expect = 0;
	unsigned int spins = 0;

	while (expect < p->n) {
		struct entry e;

		if (dp_ring_pop(&p->r, &e)) {
			p->out_of_order += e.v != expect;
			p->torn += e.check != ~e.v;
			expect = e.v + 1;
			p->received++;
			spins = 0;
			continue;
		}
		if (!p->always_sleep && ++spins < 64) {
			sched_yield();
			continue;
		}
		if (dp_ring_sleep_prepare(&p->r) == 0) {
			struct pollfd pfd = { .fd = dp_ring_fd(&p->r),
					      .events = POLLIN };

			p->sleeps++;
			if (poll(&pfd, 1, WAKE_TIMEOUT_MS) == 0 &&
			    dp_ring_ready(&p->r) > 0) {
				p->lost_wakeups++;
				break;	/* fail, rather than wait again */
			}
		}
		dp_ring_sleep_done(&p->r);
	}
}

static void run_pair(struct pair *p, uint32_t entries)
{
	pthread_t t;

	assert_int_equal(dp_ring_init(&p->r, entries, sizeof(struct entry)),
			 0);
	assert_int_equal(pthread_create(&t, NULL, producer, p), 0);
	consumer(p);
	assert_int_equal(p->lost_wakeups, 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(p->received, p->n);
	assert_int_equal(p->out_of_order, 0);
	assert_int_equal(p->torn, 0);
	assert_int_equal(dp_ring_ready(&p->r), 0);
	dp_ring_fini(&p->r);
}

static void test_stress(void **state)
{
	struct pair p = { .n = 300000 };

	(void)state;
	run_pair(&p, 64);
	print_message("stress: %llu values, %llu sleeps\n",
		      (unsigned long long)p.received,
		      (unsigned long long)p.sleeps);
}

/* Every entry arrives at a sleeping consumer (or one about to sleep): the
 * handshake's race is run on each of them. */
static void test_no_lost_wakeup(void **state)
{
	struct pair p = { .n = 20000, .ping_pong = true,
			  .always_sleep = true };
	struct pair q = { .n = 200000, .always_sleep = true };

	(void)state;
	run_pair(&p, 16);
	assert_true(p.sleeps > 0);
	run_pair(&q, 16);
	print_message("ping-pong: %llu sleeps; free-running: %llu sleeps\n",
		      (unsigned long long)p.sleeps,
		      (unsigned long long)q.sleeps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_full_empty),
		cmocka_unit_test(test_wrap_around),
		cmocka_unit_test(test_stress),
		cmocka_unit_test(test_no_lost_wakeup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
