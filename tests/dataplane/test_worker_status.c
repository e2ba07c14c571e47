// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_worker_status.c - what an unfinished tensor says it waits for
 * (tly_tensor_wait, the daemon watchdog's source): a float tensor whose
 * exponent round misses a worker waits on the exponent group's
 * aggregator; a ring tensor the next rank has not submitted waits on that
 * rank; a finished tensor is unknown.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cluster.h"
#include "dataplane/engine/wire.h"

#define K 64
#define N (3 * K)

static float buf[2][N];

static struct tly_tensor_desc desc(uint16_t rank, enum tly_algo algo)
{
	return (struct tly_tensor_desc){
		.id = tly_tensor_id(5, 1, 0), .dtype = TLY_DT_F32,
		.algo = algo, .src = buf[rank], .dst = buf[rank],
		.count = N, .prio = 3,
	};
}

static void run_case(enum cl_role role, const char *want_state,
		     uint16_t want_peer)
{
	struct cl_cfg cc = {
		.n_workers = 2, .k = K, .role = role, .n_slots = 64,
		.n_fallback = 4, .window = 16,
		.fab = { .seed = 3, .delay_ns = 2000 },
	};
	struct cluster *cl = cl_create(&cc);
	enum tly_algo algo = role == CL_RING ? TLY_ALGO_RING : TLY_ALGO_AGG;
	struct tly_tensor_desc d0 = desc(0, algo), d1 = desc(1, algo);
	struct tly_tensor_wait tw;

	assert_non_null(cl);
	for (int i = 0; i < N; i++) {
		buf[0][i] = (float)i;
		buf[1][i] = 1.0f;
	}
	assert_int_equal(tly_worker_submit(cl->w[0], &d0, 0), 0);
	cl_settle(cl, 2000000);			/* 2 ms: worker 1 silent */
	assert_int_equal(tly_worker_tensor_wait(cl->w[0], d0.id, &tw), 0);
	assert_int_equal(tw.n_chunks, 3);
	assert_int_equal(tw.done, 0);
	assert_int_equal(tw.first, 0);
	assert_string_equal(tly_chunk_state_name(tw.first_state), want_state);
	assert_int_equal(tw.peer, want_peer);
	assert_int_equal(tly_worker_tensor_wait(cl->w[1], d0.id, &tw),
			 -ENOENT);

	assert_int_equal(tly_worker_submit(cl->w[1], &d1, fab_now(cl->fab)), 0);
	assert_int_equal(cl_run(cl, 1, 1000000000ull), 0);
	assert_int_equal(tly_worker_tensor_wait(cl->w[0], d0.id, &tw),
			 -ENOENT);
	assert_true(buf[0][7] == 8.0f && buf[1][7] == 8.0f);
	cl_destroy(cl);
}

static void test_agg_waits_on_exponent_aggregator(void **state)
{
	uint32_t id = tly_tensor_id(5, 1, 0);
	uint32_t exp_shard = tly_shard_of(id, 0, 1, 2);

	(void)state;
	run_case(CL_DEDICATED, "exponent", 2);	/* node 2: the aggregator */
	/* co-located shards: the exponent group's shard, not chunk 0's */
	assert_int_not_equal(exp_shard, tly_shard_of(id, 0, 0, 2));
	run_case(CL_COLOCATED, "exponent", (uint16_t)exp_shard);
}

static void test_ring_waits_on_next_rank(void **state)
{
	(void)state;
	run_case(CL_RING, "deferred", 1);	/* refused by rank 1 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agg_waits_on_exponent_aggregator),
		cmocka_unit_test(test_ring_waits_on_next_rank),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
