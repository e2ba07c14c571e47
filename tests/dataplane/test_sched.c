// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_sched.c - the scheduling policies, driven with hand-made clocks:
 * BSP holding, WFBP order, MG-WFBP merge decisions computed by hand,
 * ByteScheduler partitions, credit, preemption and autotune.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/sched/sched.h"

#define US 1000ull		/* ns */
#define KEY(p) ((uint64_t)(uintptr_t)(p) - 1)

static struct sched *mk(enum sched_policy pol, uint32_t max_items)
{
	struct sched_cfg c = {
		.policy = pol, .max_items = max_items,
		.a_ns = 100.0 * US, .b_ns_per_byte = 1.0,
		.partition_bytes = 4096, .credit_bytes = 1 << 30,
	};
	struct sched *s = sched_create(&c);

	assert_non_null(s);
	return s;
}

static int rdy(struct sched *s, uint64_t key, uint64_t iter, uint32_t prio,
	       uint64_t bytes, bool last, uint64_t now)
{
	struct sched_item it = {
		.key = key, .iteration = iter, .priority = prio,
		.bytes = bytes, .last = last,
		.user = (void *)(uintptr_t)(key + 1),
	};

	return sched_ready(s, &it, now);
}

/* The next unit must be one whole item with this key. */
static uint64_t expect_whole(struct sched *s, uint64_t now, uint64_t key,
			     uint64_t bytes)
{
	struct sched_unit u;

	assert_int_equal(sched_next(s, now, &u), 1);
	assert_int_equal(u.n_segments, 1);
	assert_int_equal(KEY(u.seg[0].user), key);
	assert_int_equal(u.seg[0].offset, 0);
	assert_int_equal(u.seg[0].bytes, bytes);
	assert_true(u.seg[0].item_last_piece);
	assert_int_equal(u.bytes, bytes);
	assert_int_not_equal(u.id, 0);
	return u.id;
}

static void expect_none(struct sched *s, uint64_t now)
{
	struct sched_unit u;

	assert_int_equal(sched_next(s, now, &u), 0);
}

static void test_names(void **state)
{
	(void)state;
	assert_int_equal(sched_policy_parse("bsp"), SCHED_BSP);
	assert_int_equal(sched_policy_parse("wfbp"), SCHED_WFBP);
	assert_int_equal(sched_policy_parse("mgwfbp"), SCHED_MGWFBP);
	assert_int_equal(sched_policy_parse("bytescheduler"),
			 SCHED_BYTESCHEDULER);
	assert_int_equal(sched_policy_parse("fifo"), -1);
	assert_int_equal(sched_policy_parse(NULL), -1);
	assert_string_equal(sched_policy_name(SCHED_MGWFBP), "mgwfbp");
	assert_string_equal(sched_policy_name((enum sched_policy)9),
			    "unknown");
}

static void test_create_rejects(void **state)
{
	struct sched_cfg c = { .policy = SCHED_WFBP, .max_items = 0 };

	(void)state;
	assert_null(sched_create(&c));
	c.max_items = 4;
	c.policy = (enum sched_policy)7;
	assert_null(sched_create(&c));
	c.policy = SCHED_BYTESCHEDULER;
	c.autotune = true;
	c.credit_min = 100;
	c.credit_max = 50;
	assert_null(sched_create(&c));
	assert_null(sched_create(NULL));
}

static void test_bsp_holds_then_releases(void **state)
{
	struct sched *s = mk(SCHED_BSP, 16);

	(void)state;
	assert_int_equal(rdy(s, 10, 1, 5, 100, false, 0), 0);
	expect_none(s, 1);
	assert_int_equal(rdy(s, 11, 1, 1, 200, false, 2), 0);
	assert_int_equal(rdy(s, 20, 2, 0, 50, false, 3), 0);	/* next iter */
	expect_none(s, 4);
	assert_int_equal(sched_next_deadline(s), UINT64_MAX);
	assert_int_equal(rdy(s, 12, 1, 0, 300, true, 5), 0);
	/* ready order, not priority; iteration 2 still held */
	expect_whole(s, 6, 10, 100);
	expect_whole(s, 6, 11, 200);
	expect_whole(s, 6, 12, 300);
	expect_none(s, 6);
	assert_int_equal(sched_stats(s)->units, 3);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 600);
	assert_int_equal(rdy(s, 21, 2, 0, 60, true, 7), 0);
	expect_whole(s, 8, 20, 50);
	expect_whole(s, 8, 21, 60);
	expect_none(s, 8);
	sched_destroy(s);
}

/* An iteration with more gradients than a client may have pending goes
 * once that many are held (its last one could never come), the rest of
 * it as it comes; another iteration's held ones do not count. */
static void test_bsp_hold_bound(void **state)
{
	struct sched_cfg c = {
		.policy = SCHED_BSP, .max_items = 16, .bsp_hold_max = 3,
	};
	struct sched *s = sched_create(&c);

	(void)state;
	assert_non_null(s);
	assert_int_equal(rdy(s, 20, 2, 0, 50, false, 0), 0);	/* next iter */
	assert_int_equal(rdy(s, 10, 1, 0, 100, false, 1), 0);
	assert_int_equal(rdy(s, 11, 1, 0, 200, false, 2), 0);
	expect_none(s, 3);
	assert_int_equal(rdy(s, 12, 1, 0, 300, false, 4), 0);
	expect_whole(s, 5, 10, 100);
	expect_whole(s, 5, 11, 200);
	expect_whole(s, 5, 12, 300);
	expect_none(s, 5);			/* iteration 2: 1 held */
	assert_int_equal(rdy(s, 13, 1, 0, 400, false, 6), 0);
	expect_whole(s, 7, 13, 400);		/* after the bound: at once */
	assert_int_equal(rdy(s, 14, 1, 0, 500, true, 8), 0);
	expect_whole(s, 9, 14, 500);
	expect_none(s, 9);
	sched_destroy(s);

	/* tallyd's configuration holds up to a client's requests */
	sched_cfg_daemon(&c, SCHED_BSP, 512, 0, 0, false, false);
	assert_int_equal(c.bsp_hold_max, SCHED_DAEMON_BSP_HOLD);
	s = sched_create(&c);
	assert_non_null(s);
	for (uint64_t k = 0; k < SCHED_DAEMON_BSP_HOLD - 1; k++)
		assert_int_equal(rdy(s, k, 1, 0, 8, false, k), 0);
	expect_none(s, 1000);
	assert_int_equal(rdy(s, 1000, 1, 0, 8, false, 1000), 0);
	expect_whole(s, 1001, 0, 8);
	sched_destroy(s);
}

static void test_wfbp_fifo(void **state)
{
	struct sched *s = mk(SCHED_WFBP, 16);
	uint64_t id;

	(void)state;
	expect_none(s, 0);
	rdy(s, 1, 1, 9, 1000, false, 0);
	rdy(s, 2, 1, 0, 10, false, 1);
	rdy(s, 3, 2, 0, 20, true, 2);
	id = expect_whole(s, 3, 1, 1000);	/* no merge, no priority */
	expect_whole(s, 3, 2, 10);
	expect_whole(s, 3, 3, 20);
	expect_none(s, 3);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 1030);
	sched_unit_done(s, id, 10);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 30);
	sched_unit_done(s, id, 11);	/* twice: ignored */
	assert_int_equal(sched_stats(s)->bytes_in_flight, 30);
	assert_int_equal(sched_stats(s)->merged_items, 0);
	sched_destroy(s);
}

/*
 * a = 100 us, b = 1 ns/B.  A 1 MB (10^6 B) gradient ready at t = 0 on an
 * idle network goes alone; the model says it ends at 0 + 100 us + 1000 us
 * = 1100 us.  Ten 10 KB gradients ready every 5 us (5..50 us) wait: the
 * deadline is 1100 + 100 = 1200 us.  The 1 MB unit completes at 1150 us:
 * the ten leave as one unit of 100 KB, in ready order.
 */
static void test_mgwfbp_merge_while_busy(void **state)
{
	struct sched *s = mk(SCHED_MGWFBP, 32);
	struct sched_unit u;
	uint64_t id, t;
	uint32_t i;

	(void)state;
	assert_int_equal(sched_next_deadline(s), UINT64_MAX);
	rdy(s, 100, 1, 0, 1000000, false, 0);
	id = expect_whole(s, 0, 100, 1000000);
	for (i = 0; i < 10; i++) {
		t = (i + 1) * 5 * US;
		rdy(s, i, 1, 0, 10000, false, t);
		expect_none(s, t);
		assert_int_equal(sched_next_deadline(s), 1200 * US);
	}
	expect_none(s, 1149 * US);
	sched_unit_done(s, id, 1150 * US);
	assert_int_equal(sched_next_deadline(s), 0);	/* due now */
	assert_int_equal(sched_next(s, 1150 * US, &u), 1);
	assert_int_equal(u.n_segments, 10);
	assert_int_equal(u.bytes, 100000);
	for (i = 0; i < 10; i++) {
		assert_int_equal(KEY(u.seg[i].user), i);
		assert_int_equal(u.seg[i].offset, 0);
		assert_int_equal(u.seg[i].bytes, 10000);
		assert_true(u.seg[i].item_last_piece);
	}
	expect_none(s, 1150 * US);
	assert_int_equal(sched_stats(s)->merged_items, 10);
	assert_int_equal(sched_stats(s)->units, 2);
	sched_destroy(s);
}

/* A gradient that is ready on an idle network goes alone at once. */
static void test_mgwfbp_idle_goes_alone(void **state)
{
	struct sched *s = mk(SCHED_MGWFBP, 8);
	uint64_t id;

	(void)state;
	rdy(s, 1, 1, 0, 10000, false, 0);
	id = expect_whole(s, 0, 1, 10000);	/* ends at 110 us */
	sched_unit_done(s, id, 110 * US);
	rdy(s, 2, 1, 0, 10000, false, 200 * US);
	expect_whole(s, 200 * US, 2, 10000);
	assert_int_equal(sched_stats(s)->merged_items, 0);
	sched_destroy(s);
}

/*
 * The completion is late: 1 MB at t = 0 should end at 1100 us; a 10 KB
 * gradient at 10 us waits until 1100 + a = 1200 us and then leaves without
 * the completion.  Its model end is max(1200, 1100) + 100 + 10 = 1310 us.
 */
static void test_mgwfbp_deadline(void **state)
{
	struct sched *s = mk(SCHED_MGWFBP, 8);

	(void)state;
	rdy(s, 1, 1, 0, 1000000, false, 0);
	expect_whole(s, 0, 1, 1000000);
	rdy(s, 2, 1, 0, 10000, false, 10 * US);
	assert_int_equal(sched_next_deadline(s), 1200 * US);
	expect_none(s, 1200 * US - 1);
	expect_whole(s, 1200 * US, 2, 10000);
	assert_int_equal(sched_next_deadline(s), UINT64_MAX);
	rdy(s, 3, 1, 0, 0, false, 1201 * US);
	assert_int_equal(sched_next_deadline(s), 1410 * US);
	sched_destroy(s);
}

/* Waiting gradients of two iterations leave as two units. */
static void test_mgwfbp_never_mixes_iterations(void **state)
{
	struct sched *s = mk(SCHED_MGWFBP, 16);
	struct sched_unit u;
	uint64_t id;

	(void)state;
	rdy(s, 1, 1, 0, 1000, false, 0);
	id = expect_whole(s, 0, 1, 1000);
	rdy(s, 2, 1, 0, 100, false, 1);
	rdy(s, 3, 2, 0, 100, false, 2);
	rdy(s, 4, 1, 0, 100, true, 3);
	rdy(s, 5, 2, 0, 100, false, 4);
	expect_none(s, 5);
	sched_unit_done(s, id, 10);
	assert_int_equal(sched_next(s, 10, &u), 1);
	assert_int_equal(u.n_segments, 2);
	assert_int_equal(KEY(u.seg[0].user), 2);
	assert_int_equal(KEY(u.seg[1].user), 4);
	/* iteration 2 waits for the network like any other merge */
	expect_none(s, 10);
	sched_unit_done(s, u.id, 20);
	assert_int_equal(sched_next(s, 20, &u), 1);
	assert_int_equal(u.n_segments, 2);
	assert_int_equal(KEY(u.seg[0].user), 3);
	assert_int_equal(KEY(u.seg[1].user), 5);
	sched_destroy(s);
}

/* A full merge (SCHED_MAX_SEGMENTS) leaves at once, busy or not. */
static void test_mgwfbp_segment_cap(void **state)
{
	struct sched *s = mk(SCHED_MGWFBP, 128);
	struct sched_unit u;
	uint64_t id;
	uint32_t i;

	(void)state;
	rdy(s, 1000, 1, 0, 1000000, false, 0);
	id = expect_whole(s, 0, 1000, 1000000);
	for (i = 0; i < SCHED_MAX_SEGMENTS - 1; i++) {
		rdy(s, i, 1, 0, 10, false, 1 + i);
		expect_none(s, 1 + i);
	}
	rdy(s, i, 1, 0, 10, false, 100);
	assert_int_equal(sched_next_deadline(s), 0);
	assert_int_equal(sched_next(s, 100, &u), 1);
	assert_int_equal(u.n_segments, SCHED_MAX_SEGMENTS);
	assert_int_equal(u.bytes, 10 * SCHED_MAX_SEGMENTS);
	for (i = 0; i < SCHED_MAX_SEGMENTS; i++)
		assert_int_equal(KEY(u.seg[i].user), i);
	for (i = 0; i < 6; i++)
		rdy(s, 500 + i, 1, 0, 10, false, 200 + i);
	expect_none(s, 300);
	sched_unit_done(s, id, 400);
	sched_unit_done(s, u.id, 400);
	assert_int_equal(sched_next(s, 400, &u), 1);
	assert_int_equal(u.n_segments, 6);
	expect_none(s, 400);
	sched_destroy(s);
}

static struct sched *mk_bs(uint64_t part, uint64_t credit, uint32_t max)
{
	struct sched_cfg c = {
		.policy = SCHED_BYTESCHEDULER, .max_items = max,
		.partition_bytes = part, .credit_bytes = credit,
	};
	struct sched *s = sched_create(&c);

	assert_non_null(s);
	return s;
}

static void expect_piece(struct sched *s, uint64_t now, uint64_t key,
			 uint64_t off, uint64_t bytes, bool last,
			 uint64_t *id)
{
	struct sched_unit u;

	assert_int_equal(sched_next(s, now, &u), 1);
	assert_int_equal(u.n_segments, 1);
	assert_int_equal(KEY(u.seg[0].user), key);
	assert_int_equal(u.seg[0].offset, off);
	assert_int_equal(u.seg[0].bytes, bytes);
	assert_int_equal(u.seg[0].item_last_piece, last);
	assert_int_equal(u.bytes, bytes);
	if (id)
		*id = u.id;
}

static void test_bs_partition_sizes(void **state)
{
	struct sched *s = mk_bs(4096, 1 << 30, 8);

	(void)state;
	rdy(s, 1, 1, 0, 10000, false, 0);	/* not a multiple */
	rdy(s, 2, 1, 1, 4096, false, 0);	/* exactly one */
	expect_piece(s, 1, 1, 0, 4096, false, NULL);
	expect_piece(s, 1, 1, 4096, 4096, false, NULL);
	expect_piece(s, 1, 1, 8192, 1808, true, NULL);
	expect_piece(s, 1, 2, 0, 4096, true, NULL);
	expect_none(s, 1);
	assert_int_equal(sched_stats(s)->partitions, 4);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 14096);
	sched_destroy(s);

	s = mk_bs(0, 1 << 30, 8);		/* 0: whole tensors */
	rdy(s, 1, 1, 0, 10000, false, 0);
	expect_piece(s, 1, 1, 0, 10000, true, NULL);
	sched_destroy(s);
}

/* Lower priority first, ties by ready order, older iteration first. */
static void test_bs_priority_order(void **state)
{
	struct sched *s = mk_bs(1000, 1000, 16);
	uint64_t id;

	(void)state;
	rdy(s, 9, 1, 7, 1000, false, 0);
	expect_piece(s, 0, 9, 0, 1000, true, &id);	/* fills the credit */
	rdy(s, 1, 1, 3, 1000, false, 1);
	rdy(s, 2, 1, 1, 1000, false, 2);
	rdy(s, 3, 1, 2, 1000, false, 3);
	rdy(s, 4, 1, 1, 1000, false, 4);
	rdy(s, 5, 2, 0, 1000, false, 5);
	expect_none(s, 6);
	sched_unit_done(s, id, 10);
	expect_piece(s, 10, 2, 0, 1000, true, &id);
	expect_none(s, 10);
	sched_unit_done(s, id, 11);
	expect_piece(s, 11, 4, 0, 1000, true, &id);
	sched_unit_done(s, id, 12);
	expect_piece(s, 12, 3, 0, 1000, true, &id);
	sched_unit_done(s, id, 13);
	expect_piece(s, 13, 1, 0, 1000, true, &id);
	sched_unit_done(s, id, 14);
	expect_piece(s, 14, 5, 0, 1000, true, &id);
	sched_destroy(s);
}

/* bytes in flight + next <= credit, except a lone unit. */
static void test_bs_credit(void **state)
{
	struct sched *s = mk_bs(4096, 10000, 16);
	uint64_t id1, id2, id3;

	(void)state;
	rdy(s, 1, 1, 0, 5 * 4096, false, 0);
	expect_piece(s, 0, 1, 0, 4096, false, &id1);
	expect_piece(s, 0, 1, 4096, 4096, false, &id2);
	expect_none(s, 0);			/* 12288 > 10000 */
	assert_int_equal(sched_stats(s)->bytes_in_flight, 8192);
	sched_unit_done(s, id1, 5);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 4096);
	expect_piece(s, 5, 1, 8192, 4096, false, &id3);
	expect_none(s, 5);
	sched_unit_done(s, id2, 6);
	sched_unit_done(s, id3, 7);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 0);
	sched_destroy(s);

	/* a partition larger than the credit goes alone */
	s = mk_bs(20000, 10000, 16);
	rdy(s, 1, 1, 0, 40000, false, 0);
	expect_piece(s, 0, 1, 0, 20000, false, &id1);
	expect_none(s, 0);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 20000);
	sched_unit_done(s, id1, 5);
	expect_piece(s, 5, 1, 20000, 20000, true, &id1);
	expect_none(s, 5);
	sched_destroy(s);
}

/*
 * The stall rule: with the credit full and no completion for stall_ns,
 * exactly one partition goes past the credit per stall_ns, the deadline
 * says when, and a completion restarts the clock.
 */
static void test_bs_stall(void **state)
{
	struct sched_cfg c = {
		.policy = SCHED_BYTESCHEDULER, .max_items = 16,
		.partition_bytes = 4096, .credit_bytes = 8192,
		.stall_ns = 1000 * US, .stall_adapt = true,
	};
	struct sched *s = sched_create(&c);
	uint64_t id1, id2, id3;

	(void)state;
	assert_non_null(s);
	assert_int_equal(sched_next_deadline(s), UINT64_MAX);
	rdy(s, 1, 1, 0, 6 * 4096, false, 10 * US);
	expect_piece(s, 10 * US, 1, 0, 4096, false, &id1);
	expect_piece(s, 10 * US, 1, 4096, 4096, false, &id2);
	expect_none(s, 10 * US);			/* credit full */
	assert_int_equal(sched_next_deadline(s), 1010 * US);
	expect_none(s, 1009 * US);
	expect_piece(s, 1010 * US, 1, 8192, 4096, false, &id3);
	expect_none(s, 1010 * US);			/* one per stall */
	assert_int_equal(sched_stats(s)->stall_releases, 1);
	assert_int_equal(sched_next_deadline(s), 2010 * US);
	expect_none(s, 2009 * US);
	expect_piece(s, 2010 * US, 1, 12288, 4096, false, NULL);
	assert_int_equal(sched_stats(s)->stall_releases, 2);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 4 * 4096);
	/* a completion is progress: the clock starts again from it, and
	 * units that take 2490 us (a slow link) make a stall twice that */
	sched_unit_done(s, id1, 2500 * US);
	assert_int_equal(sched_next_deadline(s), 7480 * US);
	expect_none(s, 7479 * US);
	expect_piece(s, 7480 * US, 1, 16384, 4096, false, NULL);
	assert_int_equal(sched_stats(s)->stall_releases, 3);
	/* released at 10 us and 1010 us, done at 8000 us: the usual unit
	 * time is now (7 * (7 * 2490 + 7990) / 8 + 6990) / 8 = 3654.062 us
	 * (in ns, rounded down at each step) */
	sched_unit_done(s, id2, 8000 * US);
	sched_unit_done(s, id3, 8000 * US);
	expect_none(s, 8000 * US);			/* 12288 > 8192 */
	assert_int_equal(sched_next_deadline(s), 8000 * US + 2 * 3654062);
	expect_none(s, 8000 * US + 2 * 3654062 - 1);
	expect_piece(s, 8000 * US + 2 * 3654062, 1, 20480, 4096, true, NULL);
	assert_int_equal(sched_stats(s)->stall_releases, 4);
	assert_int_equal(sched_next_deadline(s), UINT64_MAX);	/* none */
	sched_destroy(s);

	/* without stall_adapt the bound stays stall_ns */
	s = sched_create(&(struct sched_cfg){ .policy = SCHED_BYTESCHEDULER,
		.max_items = 16, .partition_bytes = 4096,
		.credit_bytes = 8192, .stall_ns = 1000 * US });
	assert_non_null(s);
	rdy(s, 1, 1, 0, 3 * 4096, false, 0);
	expect_piece(s, 0, 1, 0, 4096, false, &id1);
	expect_piece(s, 0, 1, 4096, 4096, false, NULL);
	sched_unit_done(s, id1, 5000 * US);	/* a 5 ms unit */
	rdy(s, 2, 1, 0, 2 * 4096, false, 5000 * US);
	expect_piece(s, 5000 * US, 1, 8192, 4096, true, NULL);
	expect_none(s, 5999 * US);
	expect_piece(s, 6000 * US, 2, 0, 4096, false, NULL);
	sched_destroy(s);

	/* stall_ns = 0: the credit holds forever */
	c.stall_ns = 0;
	s = sched_create(&c);
	assert_non_null(s);
	rdy(s, 1, 1, 0, 3 * 4096, false, 0);
	expect_piece(s, 0, 1, 0, 4096, false, NULL);
	expect_piece(s, 0, 1, 4096, 4096, false, NULL);
	expect_none(s, 1000000000 * US);
	assert_int_equal(sched_next_deadline(s), UINT64_MAX);
	sched_destroy(s);
}

/*
 * A low-priority gradient is half sent when an urgent one arrives: every
 * partition of the urgent one goes before the rest of the first.
 */
static void test_bs_preemption(void **state)
{
	struct sched *s = mk_bs(1000, 1000, 16);
	uint64_t id;
	uint32_t i;

	(void)state;
	rdy(s, 1, 1, 50, 4000, false, 0);
	expect_piece(s, 0, 1, 0, 1000, false, &id);
	sched_unit_done(s, id, 1);
	expect_piece(s, 1, 1, 1000, 1000, false, &id);
	rdy(s, 2, 1, 0, 3000, false, 2);
	assert_int_equal(sched_stats(s)->preemptions, 1);
	rdy(s, 3, 1, 60, 1000, false, 2);	/* less urgent: no reorder */
	assert_int_equal(sched_stats(s)->preemptions, 1);
	for (i = 0; i < 3; i++) {
		sched_unit_done(s, id, 3 + i);
		expect_piece(s, 3 + i, 2, 1000 * i, 1000, i == 2, &id);
	}
	sched_unit_done(s, id, 10);
	expect_piece(s, 10, 1, 2000, 1000, false, &id);
	sched_unit_done(s, id, 11);
	expect_piece(s, 11, 1, 3000, 1000, true, &id);
	sched_unit_done(s, id, 12);
	expect_piece(s, 12, 3, 0, 1000, true, &id);
	sched_destroy(s);
}

/*
 * Autotune against a synthetic network: a serial link whose rate depends
 * on the credit the unit was released under, rate(C) in bytes/ns.  The
 * scheduler always has work; run for `units` completions.
 */
#define MB 1000000ull

struct netsim {
	uint64_t done_at[64], id[64];
	unsigned int n;
	uint64_t free_at;
};

static double rate_peaked(uint64_t c)
{
	double d = (double)c - 9.0 * MB;

	return 10.0 * (1.0 - (d < 0 ? -d : d) / (20.0 * MB));
}

static double rate_rising(uint64_t c)
{
	return (double)c / (1.0 * MB);
}

static uint64_t run_autotune(double (*rate)(uint64_t), uint64_t start,
			     unsigned int units, uint64_t *lo, uint64_t *hi)
{
	struct sched_cfg c = {
		.policy = SCHED_BYTESCHEDULER, .max_items = 64,
		.partition_bytes = MB, .credit_bytes = start,
		.autotune = true, .credit_min = 1 * MB, .credit_max = 17 * MB,
	};
	struct sched *s = sched_create(&c);
	struct netsim net = { .n = 0 };
	struct sched_unit u;
	uint64_t now = 0, key = 0, credit;
	unsigned int i, first, done = 0;

	assert_non_null(s);
	*lo = UINT64_MAX;
	*hi = 0;
	while (done < units) {
		for (; key < 40 + done / 4; key++)
			assert_int_equal(rdy(s, key, 1, 0, 4 * MB, false,
					     now), 0);
		while (sched_next(s, now, &u) == 1) {
			uint64_t start = now > net.free_at ? now : net.free_at;
			double r = rate(sched_stats(s)->credit_bytes);

			assert_true(net.n < 64);
			net.free_at = start + (uint64_t)((double)u.bytes / r);
			net.done_at[net.n] = net.free_at;
			net.id[net.n++] = u.id;
			assert_true(sched_stats(s)->bytes_in_flight <=
				    sched_stats(s)->credit_bytes ||
				    net.n == 1);
		}
		assert_true(net.n > 0);
		first = 0;
		for (i = 1; i < net.n; i++)
			if (net.done_at[i] < net.done_at[first])
				first = i;
		now = net.done_at[first];
		sched_unit_done(s, net.id[first], now);
		net.done_at[first] = net.done_at[net.n - 1];
		net.id[first] = net.id[--net.n];
		done++;
		credit = sched_stats(s)->credit_bytes;
		if (credit < *lo)
			*lo = credit;
		if (credit > *hi)
			*hi = credit;
	}
	credit = sched_stats(s)->credit_bytes;
	sched_destroy(s);
	return credit;
}

static void test_bs_autotune(void **state)
{
	uint64_t lo, hi, c;

	(void)state;
	/* peaked at 9 MB: climbs from 1 MB and stays near the peak */
	c = run_autotune(rate_peaked, 1 * MB, 2000, &lo, &hi);
	assert_true(lo >= 1 * MB && hi <= 17 * MB);
	assert_true(c >= 8 * MB && c <= 10 * MB);
	/* from the top it comes down toward the peak too */
	c = run_autotune(rate_peaked, 17 * MB, 2000, &lo, &hi);
	assert_true(lo >= 1 * MB && hi <= 17 * MB);
	assert_true(c >= 8 * MB && c <= 10 * MB);
	/* more credit is always better: it goes to the top bound */
	c = run_autotune(rate_rising, 1 * MB, 2000, &lo, &hi);
	assert_true(lo >= 1 * MB && hi <= 17 * MB);
	assert_true(c >= 15 * MB);
	/* deterministic */
	assert_int_equal(run_autotune(rate_peaked, 1 * MB, 700, &lo, &hi),
			 run_autotune(rate_peaked, 1 * MB, 700, &lo, &hi));
}

static void test_enospc(void **state)
{
	struct sched *s = mk(SCHED_WFBP, 4);
	uint32_t i;

	(void)state;
	for (i = 0; i < 4; i++)
		assert_int_equal(rdy(s, i, 1, 0, 10, false, 0), 0);
	assert_int_equal(rdy(s, 4, 1, 0, 10, false, 0), -ENOSPC);
	expect_whole(s, 1, 0, 10);
	assert_int_equal(rdy(s, 4, 1, 0, 10, false, 2), 0);
	assert_int_equal(rdy(s, 5, 1, 0, 10, false, 2), -ENOSPC);
	sched_destroy(s);
}

/* At most max_items units are in flight. */
static void test_units_bounded(void **state)
{
	struct sched *s = mk(SCHED_WFBP, 2);
	uint64_t id;

	(void)state;
	rdy(s, 1, 1, 0, 10, false, 0);
	rdy(s, 2, 1, 0, 10, false, 0);
	id = expect_whole(s, 0, 1, 10);
	expect_whole(s, 0, 2, 10);
	rdy(s, 3, 1, 0, 10, false, 1);
	expect_none(s, 1);
	sched_unit_done(s, id, 2);
	expect_whole(s, 2, 3, 10);
	sched_destroy(s);
}

static int rdy_group(struct sched *s, uint64_t key, uint64_t iter,
		     uint32_t group, uint64_t bytes, bool last, uint64_t now)
{
	struct sched_item it = {
		.key = key, .iteration = iter, .bytes = bytes, .last = last,
		.group = group, .user = (void *)(uintptr_t)(key + 1),
	};

	return sched_ready(s, &it, now);
}

/*
 * With a merge plan, units follow the groups alone, whatever the timing:
 * a group leaves once closed (another group behind it, or the iteration's
 * last item), idle network or not.
 */
static void test_mgwfbp_plan_groups(void **state)
{
	struct sched *s = mk(SCHED_MGWFBP, 16);
	struct sched_unit u;

	(void)state;
	assert_int_equal(rdy_group(s, 0, 0, 1, 100, false, 0), 0);
	expect_none(s, 0);		/* idle, but group 1 may grow */
	assert_int_equal(sched_next_deadline(s), UINT64_MAX);
	expect_none(s, 1000 * US);	/* nor does time close it */
	assert_int_equal(rdy_group(s, 1, 0, 1, 200, false, 1000 * US), 0);
	assert_int_equal(rdy_group(s, 2, 0, 2, 300, false, 1000 * US), 0);
	assert_int_equal(sched_next(s, 1000 * US, &u), 1);
	assert_int_equal(u.n_segments, 2);	/* keys 0 and 1 */
	assert_int_equal(KEY(u.seg[0].user), 0);
	assert_int_equal(KEY(u.seg[1].user), 1);
	assert_int_equal(u.bytes, 300);
	expect_none(s, 1000 * US);	/* group 2 is still open */
	assert_int_equal(rdy_group(s, 3, 0, 2, 400, true, 2000 * US), 0);
	assert_int_equal(sched_next(s, 2000 * US, &u), 1);
	assert_int_equal(u.n_segments, 2);	/* keys 2 and 3, closed by last */
	assert_int_equal(u.bytes, 700);
	expect_none(s, 2000 * US);
	/* a new iteration closes the old one's group too */
	assert_int_equal(rdy_group(s, 0, 1, 1, 100, false, 3000 * US), 0);
	assert_int_equal(rdy_group(s, 0, 2, 1, 100, false, 3000 * US), 0);
	assert_int_equal(sched_next(s, 3000 * US, &u), 1);
	assert_int_equal(u.n_segments, 1);
	expect_none(s, 3000 * US);
	sched_destroy(s);
}

/* A group larger than SCHED_MAX_MERGED_BYTES leaves as several units, each
 * closed before the item that would take it past the bound; an item
 * larger than the bound goes alone. */
static void test_mgwfbp_plan_byte_bound(void **state)
{
	const uint64_t q = SCHED_MAX_MERGED_BYTES / 4;
	struct sched *s = mk(SCHED_MGWFBP, 16);
	struct sched_unit u;

	(void)state;
	rdy_group(s, 0, 0, 1, q, false, 0);
	rdy_group(s, 1, 0, 1, 2 * q, false, 0);
	rdy_group(s, 2, 0, 1, q, false, 0);		/* exactly the bound */
	rdy_group(s, 3, 0, 1, 2, false, 0);
	assert_int_equal(sched_next(s, 0, &u), 1);
	assert_int_equal(u.n_segments, 3);
	assert_int_equal(u.bytes, SCHED_MAX_MERGED_BYTES);
	expect_none(s, 0);		/* key 3: its group is still open */
	rdy_group(s, 4, 0, 1, 5 * q, false, 0);	/* alone: over the bound */
	assert_int_equal(sched_next(s, 0, &u), 1);
	assert_int_equal(u.n_segments, 1);	/* key 3 */
	assert_int_equal(KEY(u.seg[0].user), 3);
	rdy_group(s, 5, 0, 1, 1, true, 0);
	assert_int_equal(sched_next(s, 0, &u), 1);
	assert_int_equal(u.n_segments, 1);	/* key 4 */
	assert_int_equal(u.bytes, 5 * q);
	assert_int_equal(sched_next(s, 0, &u), 1);
	assert_int_equal(KEY(u.seg[0].user), 5);
	expect_none(s, 0);
	sched_destroy(s);
}

/*
 * mg_plan_only (what the daemon sets): the timing of test_mgwfbp_merge_
 * while_busy merges nothing, since another host's timing would merge
 * differently; a plan's groups still merge.
 */
static void test_mgwfbp_plan_only(void **state)
{
	struct sched_cfg c = {
		.policy = SCHED_MGWFBP, .max_items = 32,
		.a_ns = 100.0 * US, .b_ns_per_byte = 1.0, .mg_plan_only = true,
	};
	struct sched *s = sched_create(&c);
	struct sched_unit u;
	uint32_t i;

	(void)state;
	assert_non_null(s);
	rdy(s, 100, 1, 0, 1000000, false, 0);
	expect_whole(s, 0, 100, 1000000);
	for (i = 0; i < 10; i++) {	/* busy network: still one each */
		rdy(s, i, 1, 0, 10000, false, (i + 1) * 5 * US);
		expect_whole(s, (i + 1) * 5 * US, i, 10000);
		assert_int_equal(sched_next_deadline(s), UINT64_MAX);
	}
	assert_int_equal(sched_stats(s)->merged_items, 0);
	assert_int_equal(rdy_group(s, 20, 1, 1, 100, false, 100 * US), 0);
	assert_int_equal(rdy_group(s, 21, 1, 1, 200, true, 100 * US), 0);
	assert_int_equal(sched_next(s, 100 * US, &u), 1);
	assert_int_equal(u.n_segments, 2);
	assert_int_equal(u.bytes, 300);
	expect_none(s, 100 * US);
	sched_destroy(s);
}

static void test_reset(void **state)
{
	struct sched *s = mk_bs(100, 1000, 4);
	uint64_t id;
	uint32_t i;

	(void)state;
	rdy(s, 1, 1, 0, 1000, false, 0);
	rdy(s, 2, 1, 0, 1000, false, 0);
	expect_piece(s, 0, 1, 0, 100, false, &id);
	sched_reset(s);
	assert_int_equal(sched_stats(s)->bytes_in_flight, 0);
	expect_none(s, 1);
	sched_unit_done(s, id, 2);		/* from before: ignored */
	assert_int_equal(sched_stats(s)->bytes_in_flight, 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(rdy(s, 10 + i, 1, 0, 100, false, 3), 0);
	assert_int_equal(rdy(s, 20, 1, 0, 100, false, 3), -ENOSPC);
	expect_piece(s, 4, 10, 0, 100, true, NULL);
	sched_destroy(s);

	/* BSP forgets which iterations were closed */
	s = mk(SCHED_BSP, 8);
	rdy(s, 1, 1, 0, 10, true, 0);
	sched_reset(s);
	rdy(s, 2, 1, 0, 10, false, 1);
	expect_none(s, 1);
	sched_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_create_rejects),
		cmocka_unit_test(test_bsp_holds_then_releases),
		cmocka_unit_test(test_bsp_hold_bound),
		cmocka_unit_test(test_wfbp_fifo),
		cmocka_unit_test(test_mgwfbp_merge_while_busy),
		cmocka_unit_test(test_mgwfbp_idle_goes_alone),
		cmocka_unit_test(test_mgwfbp_deadline),
		cmocka_unit_test(test_mgwfbp_never_mixes_iterations),
		cmocka_unit_test(test_mgwfbp_segment_cap),
		cmocka_unit_test(test_mgwfbp_plan_groups),
		cmocka_unit_test(test_mgwfbp_plan_byte_bound),
		cmocka_unit_test(test_mgwfbp_plan_only),
		cmocka_unit_test(test_bs_partition_sizes),
		cmocka_unit_test(test_bs_priority_order),
		cmocka_unit_test(test_bs_credit),
		cmocka_unit_test(test_bs_preemption),
		cmocka_unit_test(test_bs_stall),
		cmocka_unit_test(test_bs_autotune),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_units_bounded),
		cmocka_unit_test(test_reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
