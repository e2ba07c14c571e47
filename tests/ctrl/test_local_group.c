// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_local_group.c - unit tests of (key, iteration) matching of local
 * submissions (ctrl/local_group.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctrl/local_group.h"

static struct lg_op make_op(uint64_t key, uint64_t iteration)
{
	return (struct lg_op){
		.key = key, .iteration = iteration, .count = 1000,
		.dtype = 0, .redop = 0, .priority = 10,
	};
}

static struct lg_member make_member(unsigned int rank, uint64_t tag)
{
	return (struct lg_member){
		.user_data = tag * 100 + rank,
		.send = (const void *)(uintptr_t)(0x1000 + rank),
		.recv = (void *)(uintptr_t)(0x2000 + rank),
		.send_ref = (void *)(uintptr_t)(0x3000 + rank),
		.recv_ref = (void *)(uintptr_t)(0x4000 + rank),
	};
}

static enum lg_result add(struct local_group *lg, unsigned int rank,
			  const struct lg_op *op, struct lg_group **g)
{
	struct lg_member m = make_member(rank, op->key);

	return local_group_add(lg, rank, op, &m, g);
}

/* Count the groups on the free list: with n_used, must cover the pool. */
static uint32_t free_list_length(const struct local_group *lg)
{
	uint32_t n = 0;

	for (uint32_t i = lg->free_head; i != UINT32_MAX; i = lg->pool[i].next) {
		assert_false(lg->pool[i].used);
		n++;
		assert_true(n <= lg->n_pool);
	}
	return n;
}

static void assert_pool_consistent(const struct local_group *lg)
{
	assert_int_equal(free_list_length(lg) + lg->n_used, lg->n_pool);
}

static void test_lg_init_rejects_bad_sizes(void **state)
{
	struct local_group lg;

	(void)state;
	assert_int_equal(local_group_init(&lg, 0, 8), -1);
	assert_int_equal(local_group_init(&lg, 65, 8), -1);
	assert_int_equal(local_group_init(&lg, 4, 0), -1);
	assert_int_equal(local_group_init(&lg, 64, 1), 0);
	assert_int_equal(lg_all(&lg), ~0ull);
	local_group_destroy(&lg);
	assert_int_equal(local_group_init(&lg, 3, 5), 0);
	assert_int_equal(lg_all(&lg), 7);
	assert_int_equal(lg.n_used, 0);
	assert_pool_consistent(&lg);
	local_group_destroy(&lg);
}

static void test_lg_ready_only_when_all_arrived(void **state)
{
	struct local_group lg;
	struct lg_op op = make_op(42, 7);
	struct lg_group *g, *first;

	(void)state;
	assert_int_equal(local_group_init(&lg, 4, 8), 0);
	/* out of rank order on purpose */
	assert_int_equal(add(&lg, 2, &op, &g), LG_WAITING);
	assert_int_equal(lg.n_used, 1);
	assert_int_equal(add(&lg, 0, &op, &g), LG_WAITING);
	assert_int_equal(add(&lg, 3, &op, &g), LG_WAITING);
	assert_int_equal(lg.n_used, 1);		/* one group for the key */
	assert_int_equal(add(&lg, 1, &op, &first), LG_READY);
	assert_non_null(first);
	assert_int_equal(first->arrived, 0xf);
	assert_int_equal(first->op.key, 42);
	assert_int_equal(first->op.iteration, 7);
	assert_false(first->failed);
	/* every member's submission is kept at its rank */
	for (unsigned int r = 0; r < 4; r++) {
		struct lg_member m = make_member(r, 42);

		assert_memory_equal(&first->m[r], &m, sizeof(m));
	}
	local_group_release(&lg, first);
	assert_int_equal(lg.n_used, 0);
	assert_pool_consistent(&lg);
	local_group_destroy(&lg);
}

static void test_lg_single_member_group(void **state)
{
	struct local_group lg;
	struct lg_op op = make_op(1, 1);
	struct lg_group *g;

	(void)state;
	assert_int_equal(local_group_init(&lg, 1, 2), 0);
	for (uint64_t it = 0; it < 10; it++) {
		op.iteration = it;
		assert_int_equal(add(&lg, 0, &op, &g), LG_READY);
		local_group_release(&lg, g);
	}
	assert_int_equal(lg.n_used, 0);
	local_group_destroy(&lg);
}

static void test_lg_iterations_are_separate_groups(void **state)
{
	struct local_group lg;
	struct lg_op op1 = make_op(5, 1), op2 = make_op(5, 2);
	struct lg_group *g1, *g2, *g;

	(void)state;
	assert_int_equal(local_group_init(&lg, 2, 4), 0);
	assert_int_equal(add(&lg, 0, &op1, &g1), LG_WAITING);
	/* same rank, same key, next iteration: not a duplicate */
	assert_int_equal(add(&lg, 0, &op2, &g2), LG_WAITING);
	assert_ptr_not_equal(g1, g2);
	assert_int_equal(lg.n_used, 2);
	assert_int_equal(add(&lg, 1, &op2, &g), LG_READY);
	assert_ptr_equal(g, g2);
	local_group_release(&lg, g);
	assert_int_equal(add(&lg, 1, &op1, &g), LG_READY);
	assert_ptr_equal(g, g1);
	local_group_release(&lg, g);
	assert_int_equal(lg.n_used, 0);
	local_group_destroy(&lg);
}

static void check_mismatch(const struct lg_op *bad)
{
	struct local_group lg;
	struct lg_op op = make_op(9, 3);
	struct lg_group *g, *tomb;

	assert_int_equal(local_group_init(&lg, 4, 4), 0);
	assert_int_equal(add(&lg, 0, &op, &g), LG_WAITING);
	assert_int_equal(add(&lg, 1, &op, &g), LG_WAITING);
	/* rank 2 disagrees: the group fails, members so far are told */
	assert_int_equal(add(&lg, 2, bad, &tomb), LG_MISMATCH);
	assert_non_null(tomb);
	assert_true(tomb->failed);
	assert_int_equal(tomb->arrived, 0x7);
	local_group_settle(&lg, tomb);		/* not all there: stays */
	assert_int_equal(lg.n_used, 1);

	/* the last member, agreeing or not, fails alone */
	assert_int_equal(add(&lg, 3, &op, &g), LG_MISMATCH_ONE);
	assert_ptr_equal(g, tomb);
	assert_int_equal(g->arrived, 0xf);
	local_group_settle(&lg, g);		/* all arrived: freed */
	assert_int_equal(lg.n_used, 0);
	assert_pool_consistent(&lg);

	/* the key can be used again: a fresh, healthy group */
	assert_int_equal(add(&lg, 3, &op, &g), LG_WAITING);
	assert_false(g->failed);
	assert_int_equal(g->arrived, 0x8);
	assert_int_equal(add(&lg, 0, &op, &g), LG_WAITING);
	assert_int_equal(add(&lg, 1, &op, &g), LG_WAITING);
	assert_int_equal(add(&lg, 2, &op, &g), LG_READY);
	local_group_release(&lg, g);
	assert_int_equal(lg.n_used, 0);
	local_group_destroy(&lg);
}

static void test_lg_mismatch_count(void **state)
{
	struct lg_op bad = make_op(9, 3);

	(void)state;
	bad.count++;
	check_mismatch(&bad);
}

static void test_lg_mismatch_dtype(void **state)
{
	struct lg_op bad = make_op(9, 3);

	(void)state;
	bad.dtype = 2;
	check_mismatch(&bad);
}

static void test_lg_mismatch_op(void **state)
{
	struct lg_op bad = make_op(9, 3);

	(void)state;
	bad.redop = 1;
	check_mismatch(&bad);
}

static void test_lg_priority_difference_is_no_mismatch(void **state)
{
	struct local_group lg;
	struct lg_op op = make_op(1, 1);
	struct lg_group *g;

	(void)state;
	assert_int_equal(local_group_init(&lg, 4, 4), 0);
	op.priority = 30;
	assert_int_equal(add(&lg, 0, &op, &g), LG_WAITING);
	op.priority = 5;
	assert_int_equal(add(&lg, 1, &op, &g), LG_WAITING);
	assert_int_equal(g->op.priority, 5);
	op.priority = 20;			/* less urgent: min is kept */
	assert_int_equal(add(&lg, 2, &op, &g), LG_WAITING);
	assert_int_equal(g->op.priority, 5);
	op.priority = 0;
	assert_int_equal(add(&lg, 3, &op, &g), LG_READY);
	assert_int_equal(g->op.priority, 0);
	local_group_release(&lg, g);
	local_group_destroy(&lg);
}

static void test_lg_mismatch_by_last_member_frees_at_once(void **state)
{
	struct local_group lg;
	struct lg_op op = make_op(2, 2), bad = make_op(2, 2);
	struct lg_group *g;

	(void)state;
	bad.count = 1;
	assert_int_equal(local_group_init(&lg, 2, 2), 0);
	assert_int_equal(add(&lg, 1, &op, &g), LG_WAITING);
	assert_int_equal(add(&lg, 0, &bad, &g), LG_MISMATCH);
	assert_int_equal(g->arrived, 0x3);
	local_group_settle(&lg, g);
	assert_int_equal(lg.n_used, 0);
	assert_pool_consistent(&lg);
	local_group_destroy(&lg);
}

static void test_lg_duplicate_rank(void **state)
{
	struct local_group lg;
	struct lg_op op = make_op(77, 0);
	struct lg_group *g, *first;
	struct lg_member m = make_member(0, 77), other = make_member(0, 1234);

	(void)state;
	assert_int_equal(local_group_init(&lg, 3, 4), 0);
	assert_int_equal(local_group_add(&lg, 0, &op, &m, &first), LG_WAITING);
	assert_int_equal(local_group_add(&lg, 0, &op, &other, &g),
			 LG_DUPLICATE);
	assert_null(g);
	/* the first submission is kept, not overwritten */
	assert_memory_equal(&first->m[0], &m, sizeof(m));
	assert_int_equal(first->arrived, 0x1);
	assert_int_equal(lg.n_used, 1);

	/* a duplicate on a failed group is still a duplicate */
	op.count++;
	assert_int_equal(add(&lg, 1, &op, &g), LG_MISMATCH);
	assert_int_equal(add(&lg, 1, &op, &g), LG_DUPLICATE);
	op.count--;
	assert_int_equal(add(&lg, 2, &op, &g), LG_MISMATCH_ONE);
	local_group_settle(&lg, g);
	assert_int_equal(lg.n_used, 0);
	local_group_destroy(&lg);
}

/* A rank outside the group is refused and changes nothing. */
static void test_lg_rank_out_of_range(void **state)
{
	struct local_group lg;
	struct lg_op op = make_op(5, 0);
	struct lg_member m = make_member(0, 5);
	struct lg_group *g;

	(void)state;
	assert_int_equal(local_group_init(&lg, 3, 4), 0);
	assert_int_equal(local_group_add(&lg, 3, &op, &m, &g), LG_BAD_RANK);
	assert_int_equal(local_group_add(&lg, 64, &op, &m, &g), LG_BAD_RANK);
	assert_null(g);
	assert_int_equal(lg.n_used, 0);
	local_group_destroy(&lg);
}

static void test_lg_pool_exhaustion(void **state)
{
	struct local_group lg;
	struct lg_group *g, *groups[8];

	(void)state;
	assert_int_equal(local_group_init(&lg, 2, 8), 0);
	for (uint64_t k = 0; k < 8; k++) {
		struct lg_op op = make_op(k, 0);

		assert_int_equal(add(&lg, 0, &op, &groups[k]), LG_WAITING);
	}
	assert_int_equal(lg.n_used, 8);
	{
		struct lg_op op = make_op(100, 0);

		assert_int_equal(add(&lg, 0, &op, &g), LG_FULL);
		assert_null(g);
		assert_int_equal(lg.n_used, 8);
		/* existing groups still take members while full */
		op = make_op(3, 0);
		assert_int_equal(add(&lg, 1, &op, &g), LG_READY);
		assert_ptr_equal(g, groups[3]);
		local_group_release(&lg, g);
		/* and the freed group is there for the next key */
		op = make_op(100, 0);
		assert_int_equal(add(&lg, 0, &op, &g), LG_WAITING);
		op = make_op(101, 0);
		assert_int_equal(add(&lg, 0, &op, &g), LG_FULL);
	}
	assert_pool_consistent(&lg);
	local_group_destroy(&lg);
}

static void test_lg_release_and_reuse_many_times(void **state)
{
	struct local_group lg;
	struct lg_group *g;

	(void)state;
	assert_int_equal(local_group_init(&lg, 3, 4), 0);
	for (uint64_t it = 0; it < 10000; it++) {
		/* four keys in flight at once, completed in varying order */
		for (uint64_t k = 0; k < 4; k++) {
			struct lg_op op = make_op(k, it);

			for (unsigned int r = 0; r < 2; r++)
				assert_int_equal(add(&lg, r, &op, &g),
						 LG_WAITING);
		}
		assert_int_equal(lg.n_used, 4);
		for (uint64_t j = 0; j < 4; j++) {
			struct lg_op op = make_op((j + it) % 4, it);

			if ((it + j) % 5 == 0) {	/* some fail */
				op.dtype = 3;
				assert_int_equal(add(&lg, 2, &op, &g),
						 LG_MISMATCH);
				local_group_settle(&lg, g);
			} else {
				assert_int_equal(add(&lg, 2, &op, &g),
						 LG_READY);
				local_group_release(&lg, g);
			}
		}
		assert_int_equal(lg.n_used, 0);
	}
	assert_pool_consistent(&lg);
	local_group_destroy(&lg);
}

/* Copy of the module's bucket hash, used only to pick colliding keys; if
 * the module changes its hash the test still runs, with fewer collisions. */
static uint32_t bucket_of(uint64_t key, uint64_t iteration, uint32_t nb)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull ^ iteration;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h & (nb - 1);
}

static void test_lg_many_keys_with_collisions(void **state)
{
	enum { POOL = 64, SIZE = 2 };
	struct local_group lg;
	uint64_t keys[POOL];
	struct lg_group *groups[POOL], *g;
	int n = 0;

	(void)state;
	assert_int_equal(local_group_init(&lg, SIZE, POOL), 0);
	/* keys falling into two buckets only: long chains */
	for (uint64_t k = 1; n < POOL; k++) {
		uint32_t b = bucket_of(k, 11, lg.n_buckets);

		if (b == 0 || b == 1)
			keys[n++] = k;
	}
	for (int i = 0; i < POOL; i++) {
		struct lg_op op = make_op(keys[i], 11);

		assert_int_equal(add(&lg, 0, &op, &groups[i]), LG_WAITING);
	}
	/* all distinct */
	for (int i = 0; i < POOL; i++)
		for (int j = 0; j < i; j++)
			assert_ptr_not_equal(groups[i], groups[j]);
	/* complete in an order that unlinks heads, tails and middles */
	for (int pass = 0; pass < 3; pass++) {
		for (int i = pass; i < POOL; i += 3) {
			struct lg_op op = make_op(keys[i], 11);

			assert_int_equal(add(&lg, 1, &op, &g), LG_READY);
			assert_ptr_equal(g, groups[i]);
			assert_int_equal(g->op.key, keys[i]);
			local_group_release(&lg, g);
			/* everyone not yet done is still found */
			for (int j = 0; j < POOL; j++) {
				struct lg_group *again;
				struct lg_op o = make_op(keys[j], 11);
				bool done = j % 3 < pass ||
					    (j % 3 == pass && j <= i);

				if (done)
					continue;
				assert_int_equal(add(&lg, 0, &o, &again),
						 LG_DUPLICATE);
			}
		}
	}
	assert_int_equal(lg.n_used, 0);
	assert_pool_consistent(&lg);
	for (uint32_t b = 0; b < lg.n_buckets; b++)
		assert_int_equal(lg.buckets[b], UINT32_MAX);
	local_group_destroy(&lg);
}

static void test_lg_same_key_different_iteration_collide_ok(void **state)
{
	struct local_group lg;
	struct lg_group *g;

	(void)state;
	assert_int_equal(local_group_init(&lg, 2, 16), 0);
	for (uint64_t it = 0; it < 16; it++) {
		struct lg_op op = make_op(123, it);

		assert_int_equal(add(&lg, 0, &op, &g), LG_WAITING);
	}
	for (uint64_t it = 16; it-- > 0;) {
		struct lg_op op = make_op(123, it);

		assert_int_equal(add(&lg, 1, &op, &g), LG_READY);
		assert_int_equal(g->op.iteration, it);
		local_group_release(&lg, g);
	}
	assert_int_equal(lg.n_used, 0);
	local_group_destroy(&lg);
}

static void test_lg_full_64_members(void **state)
{
	struct local_group lg;
	struct lg_op op = make_op(64, 64);
	struct lg_group *g;

	(void)state;
	assert_int_equal(local_group_init(&lg, 64, 2), 0);
	for (unsigned int r = 63; r > 0; r--)
		assert_int_equal(add(&lg, r, &op, &g), LG_WAITING);
	assert_int_equal(add(&lg, 0, &op, &g), LG_READY);
	assert_int_equal(g->arrived, ~0ull);
	assert_int_equal(g->m[63].user_data, 64 * 100 + 63);
	local_group_release(&lg, g);
	assert_int_equal(lg.n_used, 0);
	local_group_destroy(&lg);
}

static void test_lg_release_on_abort(void **state)
{
	struct local_group lg;
	struct lg_op op = make_op(8, 8);
	struct lg_group *g;

	(void)state;
	assert_int_equal(local_group_init(&lg, 3, 2), 0);
	assert_int_equal(add(&lg, 1, &op, &g), LG_WAITING);
	local_group_release(&lg, g);		/* a member died: abort */
	assert_int_equal(lg.n_used, 0);
	/* the same (key, iteration) starts over */
	assert_int_equal(add(&lg, 1, &op, &g), LG_WAITING);
	assert_int_equal(g->arrived, 0x2);
	local_group_release(&lg, g);
	assert_pool_consistent(&lg);
	local_group_destroy(&lg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lg_init_rejects_bad_sizes),
		cmocka_unit_test(test_lg_ready_only_when_all_arrived),
		cmocka_unit_test(test_lg_single_member_group),
		cmocka_unit_test(test_lg_rank_out_of_range),
		cmocka_unit_test(test_lg_iterations_are_separate_groups),
		cmocka_unit_test(test_lg_mismatch_count),
		cmocka_unit_test(test_lg_mismatch_dtype),
		cmocka_unit_test(test_lg_mismatch_op),
		cmocka_unit_test(test_lg_priority_difference_is_no_mismatch),
		cmocka_unit_test(test_lg_mismatch_by_last_member_frees_at_once),
		cmocka_unit_test(test_lg_duplicate_rank),
		cmocka_unit_test(test_lg_pool_exhaustion),
		cmocka_unit_test(test_lg_release_and_reuse_many_times),
		cmocka_unit_test(test_lg_many_keys_with_collisions),
		cmocka_unit_test(test_lg_same_key_different_iteration_collide_ok),
		cmocka_unit_test(test_lg_full_64_members),
		cmocka_unit_test(test_lg_release_on_abort),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
