// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_switch_held.c - what a worker holds at an aggregator in the switch
 * profile (docs/protocol.md, "What a worker holds"; docs/xdp-aggregator.md,
 * "Under load"), over the fault fabric:
 *
 *  - workers ahead of a late one hold at most their share of the pool
 *    (held_max = n_slots / n_workers, at most 4 windows) however many
 *    chunks the tensor has, and the same run without the bound holds
 *    many times more; a large pool bounds at 4 windows;
 *  - two workers each ahead on another tensor (another priority order)
 *    both at the bound: the escape launches past it and the job finishes;
 *  - a worker holding 3000 ACKed chunks probes at most acked_probes of
 *    them a round, where each every acked_ns was 30 000 probes a
 *    millisecond.
 * Results are exact (int32) in every case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cluster.h"
#include "expect.h"

#define K 64

static void submit(struct cluster *cl, struct dp_tensors *b, uint16_t w,
		   uint32_t t, size_t count, uint8_t prio)
{
	struct tly_tensor_desc d = {
		.id = tly_tensor_id(0x3000 + t, 1, 0),
		.dtype = TLY_DT_I32, .algo = TLY_ALGO_AGG,
		.src = b->in[w][t], .dst = b->out[w][t],
		.count = count, .prio = prio,
	};

	assert_int_equal(tly_worker_submit(cl->w[w], &d, fab_now(cl->fab)),
			 0);
}

static void check_exact(struct dp_tensors *b, uint16_t n, uint32_t t,
			size_t count)
{
	uint16_t w;

	for (w = 1; w < n; w++)
		assert_memory_equal(b->out[0][t], b->out[w][t], count * 4);
	dp_check_int(n, dp_tensor_inputs(b, t), b->out[0][t], count, t);
}

static struct tly_worker_held held_of(struct cluster *cl, uint16_t w)
{
	struct tly_worker_held h;

	/* the dedicated aggregator is node n_workers */
	assert_int_equal(tly_worker_held(cl->w[w], cl->cfg.n_workers, &h), 0);
	return h;
}

/*
 * 4 workers, a pool of 256 (a share of 64), 1500 chunks; worker 3 starts
 * 150 us late (under one rto, so no escape is due).  Returns the most
 * any of workers 0-2 held.
 */
static uint32_t late_worker_run(uint32_t held_max, uint32_t *escapes)
{
	struct cl_cfg c = {
		.n_workers = 4, .k = K, .role = CL_DEDICATED, .n_slots = 256,
		.window = 16, .rto_ns = 200000, .held_max = held_max,
		.profile = TLY_PROFILE_SWITCH,
		.fab = { .seed = 41, .loss = 0.01, .dup = 0.005,
			 .delay_ns = 2000, .reorder_ns = 1000 },
	};
	size_t count = 1500 * K - 7;
	struct cluster *cl = cl_create(&c);
	struct dp_tensors b;
	uint32_t peak = 0;
	uint16_t w;

	assert_non_null(cl);
	dp_tensors_alloc(&b, TLY_DT_I32, 4, 1, &count, 5);
	for (w = 0; w < 3; w++)
		submit(cl, &b, w, 0, count, 0);
	cl_settle(cl, 150000);
	submit(cl, &b, 3, 0, count, 0);
	assert_int_equal(cl_run(cl, 1, 2000000000ull), 0);
	check_exact(&b, 4, 0, count);
	*escapes = 0;
	for (w = 0; w < 4; w++) {
		struct tly_worker_held h = held_of(cl, w);

		assert_int_equal(h.held, 0);	/* every chunk placed */
		if (h.peak > peak)
			peak = h.peak;
		*escapes += h.escapes;
		if (!held_max)
			assert_int_equal(h.max, 64);	/* 256 / 4 */
	}
	dp_tensors_free(&b);
	cl_destroy(cl);
	return peak;
}

static void test_share_of_pool(void **state)
{
	struct cl_cfg c = {
		.n_workers = 2, .k = K, .role = CL_DEDICATED,
		.n_slots = 0x10000, .window = 16,
		.profile = TLY_PROFILE_SWITCH,
	};
	struct cluster *cl = cl_create(&c);
	uint32_t escapes, peak;

	(void)state;
	assert_non_null(cl);
	assert_int_equal(held_of(cl, 0).max, 4 * 16);	/* not 32768 */
	cl_destroy(cl);
	peak = late_worker_run(0, &escapes);
	/* the bound was reached and held: no launch past it was due */
	assert_int_equal(escapes, 0);
	assert_int_equal(peak, 64);
	/* the same run unbounded: the workers ahead take far more */
	peak = late_worker_run(1u << 30, &escapes);
	print_message("unbounded: a worker held %u chunks\n", peak);
	assert_true(peak > 4 * 64);
}

/*
 * Worker 0 is on tensor A (prio 1), worker 1 on tensor B (prio 0), each
 * up to the bound, before either sees the other's tensor: each holds
 * what the other has not sent.  Without a launch past the bound neither
 * would move again.
 */
static void test_escape_live(void **state)
{
	struct cl_cfg c = {
		.n_workers = 2, .k = K, .role = CL_DEDICATED, .n_slots = 64,
		.window = 8, .rto_ns = 20000,
		.profile = TLY_PROFILE_SWITCH,
		.fab = { .seed = 43, .loss = 0.02, .dup = 0.01,
			 .delay_ns = 2000, .reorder_ns = 2000 },
	};
	size_t sizes[2] = { 300 * K, 300 * K + 3 };
	struct cluster *cl = cl_create(&c);
	struct tly_worker_held h0, h1;
	struct dp_tensors b;

	(void)state;
	assert_non_null(cl);
	dp_tensors_alloc(&b, TLY_DT_I32, 2, 2, sizes, 6);
	submit(cl, &b, 0, 0, sizes[0], 1);
	submit(cl, &b, 1, 1, sizes[1], 0);
	cl_settle(cl, 100000);
	h0 = held_of(cl, 0);
	h1 = held_of(cl, 1);
	assert_true(h0.held >= h0.max && h1.held >= h1.max);	/* stuck */
	submit(cl, &b, 0, 1, sizes[1], 0);
	submit(cl, &b, 1, 0, sizes[0], 1);
	assert_int_equal(cl_run(cl, 2, 2000000000ull), 0);
	check_exact(&b, 2, 0, sizes[0]);
	check_exact(&b, 2, 1, sizes[1]);
	h0 = held_of(cl, 0);
	h1 = held_of(cl, 1);
	print_message("escapes %u + %u\n", h0.escapes, h1.escapes);
	assert_true(h0.escapes + h1.escapes >= 1);
	assert_int_equal(h0.held + h1.held, 0);
	dp_tensors_free(&b);
	cl_destroy(cl);
}

/*
 * Worker 0 launches 3000 chunks (held_max raised to let it) that wait in
 * partials for worker 1, which starts 3 ms later.  Over 1 ms of that
 * wait each chunk was due every acked_ns (100 us): 30 000 probes.  Now
 * the aggregator's round (rto_ns, cc_off) carries acked_probes.
 */
static void test_probes_per_round(void **state)
{
	struct cl_cfg c = {
		.n_workers = 2, .k = K, .role = CL_DEDICATED,
		.n_slots = 0x10000, .window = 16, .rto_ns = 20000,
		.cc_off = 1, .held_max = 1u << 20, .acked_probes = 3,
		.profile = TLY_PROFILE_SWITCH,
		.fab = { .seed = 47, .delay_ns = 2000 },
	};
	size_t count = 3000 * K;
	struct cluster *cl = cl_create(&c);
	struct tly_worker_held h;
	struct dp_tensors b;
	uint64_t retx0, probes0, retx, probes;

	(void)state;
	assert_non_null(cl);
	dp_tensors_alloc(&b, TLY_DT_I32, 2, 1, &count, 7);
	submit(cl, &b, 0, 0, count, 0);
	cl_settle(cl, 2000000);
	h = held_of(cl, 0);
	assert_int_equal(h.held, 3000);
	retx0 = tly_worker_counters(cl->w[0])->retx;
	probes0 = h.probes;
	cl_settle(cl, 1000000);			/* 50 rounds of 20 us */
	retx = tly_worker_counters(cl->w[0])->retx - retx0;
	probes = held_of(cl, 0).probes - probes0;
	print_message("probes in 1 ms: %llu\n", (unsigned long long)probes);
	/* nothing lost: every retransmission is a probe */
	assert_int_equal(retx, probes);
	assert_true(probes > 0);		/* still probing */
	assert_true(probes <= 3 * (1000000 / 20000 + 1));
	submit(cl, &b, 1, 0, count, 0);
	assert_int_equal(cl_run(cl, 1, 2000000000ull), 0);
	check_exact(&b, 2, 0, count);
	assert_int_equal(held_of(cl, 0).held, 0);
	dp_tensors_free(&b);
	cl_destroy(cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_share_of_pool),
		cmocka_unit_test(test_escape_live),
		cmocka_unit_test(test_probes_per_round),
	};

	return cmocka_run_group_tests_name("switch_held", tests, NULL, NULL);
}
