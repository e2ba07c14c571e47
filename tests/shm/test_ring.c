// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_ring.c - unit tests of the SPSC ring in shm/ring.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <cmocka.h>

#include "shm/ring.h"

struct entry {
	uint64_t seq;
	uint64_t check;		/* ~seq: catches torn or stale copies */
};

struct ring_pair {
	void *mem;
	uint32_t entries;
	struct ring prod;
	struct ring cons;
};

static void ring_pair_init(struct ring_pair *p, uint32_t entries)
{
	p->entries = entries;
	p->mem = aligned_alloc(RING_CACHELINE,
			       (ring_bytes(entries, sizeof(struct entry)) +
				RING_CACHELINE - 1) & ~(size_t)(RING_CACHELINE - 1));
	assert_non_null(p->mem);
	memset(p->mem, 0xa5, ring_bytes(entries, sizeof(struct entry)));
	ring_attach(&p->prod, p->mem, entries, sizeof(struct entry), true, true);
	ring_attach(&p->cons, p->mem, entries, sizeof(struct entry), false,
		    false);
}

/* Both sides attach to a ring whose indices already stand at @start. */
static void ring_pair_init_at(struct ring_pair *p, uint32_t entries,
			      uint32_t start)
{
	struct ring_shared *sh;

	p->entries = entries;
	p->mem = aligned_alloc(RING_CACHELINE,
			       (ring_bytes(entries, sizeof(struct entry)) +
				RING_CACHELINE - 1) & ~(size_t)(RING_CACHELINE - 1));
	assert_non_null(p->mem);
	memset(p->mem, 0, ring_bytes(entries, sizeof(struct entry)));
	sh = p->mem;
	atomic_store(&sh->tail, start);
	atomic_store(&sh->head, start);
	ring_attach(&p->prod, p->mem, entries, sizeof(struct entry), true,
		    false);
	ring_attach(&p->cons, p->mem, entries, sizeof(struct entry), false,
		    false);
}

static void ring_pair_fini(struct ring_pair *p)
{
	free(p->mem);
	p->mem = NULL;
}

static struct entry make_entry(uint64_t seq)
{
	return (struct entry){ .seq = seq, .check = ~seq };
}

static void test_ring_layout_keeps_indices_on_own_lines(void **state)
{
	(void)state;
	assert_int_equal(offsetof(struct ring_shared, tail) / RING_CACHELINE,
			 0);
	assert_int_not_equal(offsetof(struct ring_shared, head) /
			     RING_CACHELINE,
			     offsetof(struct ring_shared, tail) /
			     RING_CACHELINE);
	assert_int_not_equal(offsetof(struct ring_shared, asleep) /
			     RING_CACHELINE,
			     offsetof(struct ring_shared, head) /
			     RING_CACHELINE);
	assert_int_equal(ring_bytes(8, 16),
			 sizeof(struct ring_shared) + 8 * 16);
}

static void test_ring_push_pop_keeps_order(void **state)
{
	struct ring_pair p;
	struct entry e;

	(void)state;
	ring_pair_init(&p, 8);
	assert_int_equal(ring_free(&p.prod), 8);
	assert_int_equal(ring_ready(&p.cons), 0);

	for (uint64_t i = 0; i < 5; i++) {
		e = make_entry(100 + i);
		assert_int_equal(ring_push(&p.prod, &e), 0);
	}
	assert_int_equal(ring_free(&p.prod), 3);
	assert_int_equal(ring_ready(&p.cons), 5);
	for (uint64_t i = 0; i < 5; i++) {
		assert_int_equal(ring_pop(&p.cons, &e), 1);
		assert_int_equal(e.seq, 100 + i);
		assert_int_equal(e.check, ~(100 + i));
	}
	assert_int_equal(ring_ready(&p.cons), 0);
	assert_int_equal(ring_free(&p.prod), 8);
	ring_pair_fini(&p);
}

static void test_ring_pop_empty_returns_zero(void **state)
{
	struct ring_pair p;
	struct entry e = make_entry(7), out = make_entry(99);

	(void)state;
	ring_pair_init(&p, 4);
	assert_int_equal(ring_pop(&p.cons, &out), 0);
	assert_int_equal(out.seq, 99);		/* untouched */

	assert_int_equal(ring_push(&p.prod, &e), 0);
	assert_int_equal(ring_pop(&p.cons, &out), 1);
	assert_int_equal(out.seq, 7);
	assert_int_equal(ring_pop(&p.cons, &out), 0);
	assert_int_equal(ring_pop(&p.cons, &out), 0);
	ring_pair_fini(&p);
}

static void test_ring_push_full_returns_minus_one(void **state)
{
	struct ring_pair p;
	struct entry e;

	(void)state;
	ring_pair_init(&p, 4);
	for (uint64_t i = 0; i < 4; i++) {
		e = make_entry(i);
		assert_int_equal(ring_push(&p.prod, &e), 0);
	}
	assert_int_equal(ring_free(&p.prod), 0);
	e = make_entry(1000);
	assert_int_equal(ring_push(&p.prod, &e), -1);
	assert_int_equal(ring_push(&p.prod, &e), -1);
	assert_int_equal(ring_ready(&p.cons), 4);

	/* one pop makes room for exactly one push */
	assert_int_equal(ring_pop(&p.cons, &e), 1);
	assert_int_equal(e.seq, 0);
	e = make_entry(4);
	assert_int_equal(ring_push(&p.prod, &e), 0);
	assert_int_equal(ring_push(&p.prod, &e), -1);

	for (uint64_t i = 1; i <= 4; i++) {
		assert_int_equal(ring_pop(&p.cons, &e), 1);
		assert_int_equal(e.seq, i);
	}
	assert_int_equal(ring_pop(&p.cons, &e), 0);
	ring_pair_fini(&p);
}

static void test_ring_single_entry_ring(void **state)
{
	struct ring_pair p;
	struct entry e;

	(void)state;
	ring_pair_init(&p, 1);
	for (uint64_t i = 0; i < 10; i++) {
		e = make_entry(i);
		assert_int_equal(ring_push(&p.prod, &e), 0);
		assert_int_equal(ring_push(&p.prod, &e), -1);
		assert_int_equal(ring_pop(&p.cons, &e), 1);
		assert_int_equal(e.seq, i);
		assert_int_equal(ring_pop(&p.cons, &e), 0);
	}
	ring_pair_fini(&p);
}

static void check_wrap_from(uint32_t start)
{
	struct ring_pair p;
	struct ring_shared *sh;
	struct entry e;
	uint64_t pushed = 0, popped = 0;

	ring_pair_init_at(&p, 8, start);
	sh = p.mem;
	/* cross 2^32 several times over with the ring at all fill levels */
	for (int round = 0; round < 40; round++) {
		int burst = round % 9;

		for (int i = 0; i < burst; i++) {
			e = make_entry(pushed);
			assert_int_equal(ring_push(&p.prod, &e), 0);
			pushed++;
		}
		assert_int_equal(ring_ready(&p.cons), (int64_t)(pushed - popped));
		assert_int_equal(ring_free(&p.prod),
				 8 - (int64_t)(pushed - popped));
		if (pushed - popped == 8) {
			e = make_entry(~0ull);
			assert_int_equal(ring_push(&p.prod, &e), -1);
		}
		while (popped < pushed) {
			assert_int_equal(ring_pop(&p.cons, &e), 1);
			assert_int_equal(e.seq, popped);
			assert_int_equal(e.check, ~popped);
			popped++;
		}
		assert_int_equal(ring_pop(&p.cons, &e), 0);
	}
	assert_true(pushed > 100);
	/* the shared indices wrapped modulo 2^32 */
	assert_int_equal(atomic_load(&sh->tail), (uint32_t)(start + pushed));
	assert_int_equal(atomic_load(&sh->head), (uint32_t)(start + popped));
	ring_pair_fini(&p);
}

static void test_ring_wraps_past_uint32_max(void **state)
{
	(void)state;
	check_wrap_from(UINT32_MAX - 2);
	check_wrap_from(UINT32_MAX);
	check_wrap_from(UINT32_MAX - 7);
	check_wrap_from(0x7ffffffcu);	/* sign boundary of int32 */
}

static void test_ring_full_across_wrap(void **state)
{
	struct ring_pair p;
	struct entry e;

	(void)state;
	ring_pair_init_at(&p, 4, UINT32_MAX - 1);
	for (uint64_t i = 0; i < 4; i++) {
		e = make_entry(i);
		assert_int_equal(ring_push(&p.prod, &e), 0);
	}
	/* tail = head + 4 with tail < head numerically */
	assert_true(atomic_load(&((struct ring_shared *)p.mem)->tail) <
		    atomic_load(&((struct ring_shared *)p.mem)->head));
	assert_int_equal(ring_free(&p.prod), 0);
	assert_int_equal(ring_ready(&p.cons), 4);
	assert_int_equal(ring_push(&p.prod, &e), -1);
	for (uint64_t i = 0; i < 4; i++) {
		assert_int_equal(ring_pop(&p.cons, &e), 1);
		assert_int_equal(e.seq, i);
	}
	assert_int_equal(ring_pop(&p.cons, &e), 0);
	ring_pair_fini(&p);
}

/* A consumer index ahead of the producer, or more than a ring behind it,
 * is impossible: the producer reports -1 and writes nothing. */
static void test_ring_producer_detects_corrupt_head(void **state)
{
	static const uint32_t bad_head[] = { 1, 0x80000000u, 100, 0xfffffff0u };
	struct entry e = make_entry(5);

	(void)state;
	for (size_t k = 0; k < sizeof(bad_head) / sizeof(bad_head[0]); k++) {
		struct ring_pair p;
		struct ring_shared *sh;

		ring_pair_init(&p, 8);
		sh = p.mem;
		/* tail 0: head 1 is ahead of it, 0xfffffff0 is 16 behind */
		atomic_store(&sh->head, bad_head[k]);
		assert_int_equal(ring_free(&p.prod), -1);
		assert_int_equal(ring_push(&p.prod, &e), -1);
		assert_int_equal(atomic_load(&sh->tail), 0);

		/* and again after some legitimate traffic */
		atomic_store(&sh->head, 0);
		ring_attach(&p.prod, p.mem, 8, sizeof(struct entry), true,
			    false);
		for (int i = 0; i < 8; i++)
			assert_int_equal(ring_push(&p.prod, &e), 0);
		atomic_store(&sh->head, 8 + bad_head[k]);
		assert_int_equal(ring_push(&p.prod, &e), -1);
		assert_int_equal(ring_free(&p.prod), -1);
		assert_int_equal(atomic_load(&sh->tail), 8);
		ring_pair_fini(&p);
	}
}

static void test_ring_consumer_detects_corrupt_tail(void **state)
{
	struct ring_pair p;
	struct ring_shared *sh;
	struct entry e = make_entry(1);

	(void)state;
	ring_pair_init(&p, 8);
	sh = p.mem;

	/* more than a ring ahead */
	atomic_store(&sh->tail, 9);
	assert_int_equal(ring_ready(&p.cons), -1);
	assert_int_equal(ring_pop(&p.cons, &e), -1);
	assert_int_equal(atomic_load(&sh->head), 0);

	/* behind the consumer */
	atomic_store(&sh->tail, 0);
	ring_attach(&p.prod, p.mem, 8, sizeof(struct entry), true, false);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ring_push(&p.prod, &e), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ring_pop(&p.cons, &e), 1);
	atomic_store(&sh->tail, 2);
	assert_int_equal(ring_ready(&p.cons), -1);
	assert_int_equal(ring_pop(&p.cons, &e), -1);
	assert_int_equal(atomic_load(&sh->head), 3);

	/* exactly full is fine */
	atomic_store(&sh->tail, 3 + 8);
	assert_int_equal(ring_ready(&p.cons), 8);
	ring_pair_fini(&p);
}

/* A consumer attaching (reset = false) to a ring whose tail a hostile
 * producer already set to an impossible value must not trust it. */
static void test_ring_consumer_attach_detects_corrupt_tail(void **state)
{
	static const uint32_t bad_tail[] = { 9, 1000, 0x80000000u, UINT32_MAX };

	(void)state;
	for (size_t k = 0; k < sizeof(bad_tail) / sizeof(bad_tail[0]); k++) {
		struct ring_pair p;
		struct ring_shared *sh;
		struct ring cons;
		struct entry e;

		ring_pair_init(&p, 8);
		sh = p.mem;
		atomic_store(&sh->tail, bad_tail[k]);
		ring_attach(&cons, p.mem, 8, sizeof(struct entry), false,
			    false);
		assert_int_equal(ring_pop(&cons, &e), -1);
		assert_int_equal(ring_ready(&cons), -1);
		assert_int_equal(atomic_load(&sh->head), 0);
		ring_pair_fini(&p);
	}
}

static void test_ring_producer_attach_detects_corrupt_head(void **state)
{
	struct ring_pair p;
	struct ring_shared *sh;
	struct ring prod;
	struct entry e = make_entry(3);

	(void)state;
	ring_pair_init(&p, 8);
	sh = p.mem;
	atomic_store(&sh->head, 1000);
	ring_attach(&prod, p.mem, 8, sizeof(struct entry), true, false);
	assert_int_equal(ring_push(&prod, &e), -1);
	assert_int_equal(atomic_load(&sh->tail), 0);
	ring_pair_fini(&p);
}

static void test_ring_reset_clears_indices_and_flag(void **state)
{
	struct ring_pair p;
	struct ring_shared *sh;
	struct entry e = make_entry(0);

	(void)state;
	ring_pair_init_at(&p, 8, 12345);
	sh = p.mem;
	atomic_store(&sh->asleep, 1);
	ring_attach(&p.prod, p.mem, 8, sizeof(struct entry), true, true);
	ring_attach(&p.cons, p.mem, 8, sizeof(struct entry), false, false);
	assert_int_equal(atomic_load(&sh->tail), 0);
	assert_int_equal(atomic_load(&sh->head), 0);
	assert_false(ring_needs_wakeup(&p.prod));
	assert_int_equal(ring_push(&p.prod, &e), 0);
	assert_int_equal(atomic_load(&sh->tail), 1);
	ring_pair_fini(&p);
}

static void test_ring_sleep_wakeup_handshake(void **state)
{
	struct ring_pair p;
	struct entry e = make_entry(42);

	(void)state;
	ring_pair_init(&p, 8);
	assert_false(ring_needs_wakeup(&p.prod));

	/* consumer finds the ring empty and goes to sleep */
	assert_int_equal(ring_pop(&p.cons, &e), 0);
	ring_sleep_prepare(&p.cons);
	assert_int_equal(ring_ready(&p.cons), 0);	/* re-check: still empty */

	/* producer publishes, then must see that a doorbell is needed */
	assert_int_equal(ring_push(&p.prod, &e), 0);
	assert_true(ring_needs_wakeup(&p.prod));
	assert_true(ring_needs_wakeup(&p.prod));	/* reading keeps it */

	/* consumer woken: clears the flag, finds the entry */
	ring_sleep_done(&p.cons);
	assert_false(ring_needs_wakeup(&p.prod));
	assert_int_equal(ring_pop(&p.cons, &e), 1);
	assert_int_equal(e.seq, 42);

	/* a push while the consumer is awake needs no doorbell */
	assert_int_equal(ring_push(&p.prod, &e), 0);
	assert_false(ring_needs_wakeup(&p.prod));

	/* the re-check after sleep_prepare sees what was pushed before */
	ring_sleep_prepare(&p.cons);
	assert_int_equal(ring_ready(&p.cons), 1);
	ring_sleep_done(&p.cons);
	ring_pair_fini(&p);
}

#define STRESS_ENTRIES 1500000u

struct stress {
	struct ring_pair p;
	uint64_t prod_errors;	/* written by the producer thread only */
	uint64_t cons_errors;	/* written by the consumer thread only */
	uint64_t received;
};

static void *stress_producer(void *arg)
{
	struct stress *s = arg;

	for (uint64_t i = 0; i < STRESS_ENTRIES; i++) {
		struct entry e = make_entry(i);
		int ret;

		while ((ret = ring_push(&s->p.prod, &e)) == -1) {
			if (ring_free(&s->p.prod) < 0) {	/* corrupt */
				s->prod_errors++;
				return NULL;
			}
			sched_yield();		/* full: let the consumer run */
		}
	}
	return NULL;
}

static void *stress_consumer(void *arg)
{
	struct stress *s = arg;
	uint64_t expect = 0;

	while (expect < STRESS_ENTRIES) {
		struct entry e;
		int ret = ring_pop(&s->p.cons, &e);

		if (ret == 0) {
			sched_yield();
			continue;
		}
		if (ret < 0 || e.seq != expect || e.check != ~expect) {
			s->cons_errors++;
			break;
		}
		expect++;
	}
	s->received = expect;
	return NULL;
}

static void test_ring_two_thread_stress(void **state)
{
	struct stress s = { .received = 0 };
	pthread_t prod, cons;
	struct entry e;

	(void)state;
	ring_pair_init(&s.p, 64);
	assert_int_equal(pthread_create(&cons, NULL, stress_consumer, &s), 0);
	assert_int_equal(pthread_create(&prod, NULL, stress_producer, &s), 0);
	pthread_join(prod, NULL);
	pthread_join(cons, NULL);
	assert_int_equal(s.prod_errors, 0);
	assert_int_equal(s.cons_errors, 0);
	assert_int_equal(s.received, STRESS_ENTRIES);
	assert_int_equal(ring_pop(&s.p.cons, &e), 0);
	assert_int_equal(ring_free(&s.p.prod), 64);
	ring_pair_fini(&s.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_layout_keeps_indices_on_own_lines),
		cmocka_unit_test(test_ring_push_pop_keeps_order),
		cmocka_unit_test(test_ring_pop_empty_returns_zero),
		cmocka_unit_test(test_ring_push_full_returns_minus_one),
		cmocka_unit_test(test_ring_single_entry_ring),
		cmocka_unit_test(test_ring_wraps_past_uint32_max),
		cmocka_unit_test(test_ring_full_across_wrap),
		cmocka_unit_test(test_ring_producer_detects_corrupt_head),
		cmocka_unit_test(test_ring_consumer_detects_corrupt_tail),
		cmocka_unit_test(test_ring_consumer_attach_detects_corrupt_tail),
		cmocka_unit_test(test_ring_producer_attach_detects_corrupt_head),
		cmocka_unit_test(test_ring_reset_clears_indices_and_flag),
		cmocka_unit_test(test_ring_sleep_wakeup_handshake),
		cmocka_unit_test(test_ring_two_thread_stress),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
