// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_switch_allreduce.c - all-reduce end to end in the switch profile
 * (docs/switch-profile.md) over the faulty fabric: dedicated and
 * co-located aggregators, 2..32 workers, K 64 .. 832, loss up to 10 %
 * (20 % in the sweep), duplication, reordering, pools down to 2 slots,
 * every worker its own order.  int32 results bit-exact, float results
 * within quant.h's bound and identical on every worker; afterwards every
 * slot is free and every release done (duplicates included: the sweep
 * clears their partials).  Then a stray DATA after its slot was freed:
 * the next job completes because of the sweep, and hangs without it.
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

#define MAX_T DP_MAX_TENSORS

struct scenario {
	const char *name;
	struct cl_cfg cl;
	enum tly_dtype dtype;
	uint32_t n_tensors;
	size_t sizes[MAX_T];
	uint64_t max_ns;	/* virtual time allowed (0: 4 s) */
};

static void submit_set(struct cluster *cl, const struct scenario *sc,
		       struct dp_tensors *b, uint32_t iteration)
{
	uint16_t w;
	uint32_t i;

	for (w = 0; w < sc->cl.n_workers; w++)
		for (i = 0; i < sc->n_tensors; i++) {
			uint32_t t = (i + w) % sc->n_tensors;
			struct tly_tensor_desc d = {
				.id = tly_tensor_id(0x2000 + t, iteration, 0),
				.dtype = sc->dtype, .algo = TLY_ALGO_AGG,
				.src = b->in[w][t], .dst = b->out[w][t],
				.count = sc->sizes[t],
				.prio = (uint8_t)((t * 3 + w) % 4),
			};

			assert_int_equal(tly_worker_submit(cl->w[w], &d, 0),
					 0);
		}
}

static void check_results(const struct scenario *sc, struct dp_tensors *b)
{
	uint16_t w;
	uint32_t t;

	for (t = 0; t < sc->n_tensors; t++) {
		for (w = 1; w < sc->cl.n_workers; w++)
			assert_memory_equal(b->out[0][t], b->out[w][t],
					    sc->sizes[t] *
					    dp_dtype_size(sc->dtype));
		if (sc->dtype == TLY_DT_I32)
			dp_check_int(sc->cl.n_workers,
				     dp_tensor_inputs(b, t), b->out[0][t],
				     sc->sizes[t], t);
		else
			dp_check_float(sc->dtype, sc->cl.n_workers, sc->cl.k,
				       false, dp_tensor_inputs(b, t),
				       b->out[0][t], sc->sizes[t], t);
	}
}

/* what the aggregators and workers counted, summed */
static void totals(const struct cluster *cl, struct tly_counters *s)
{
	uint16_t i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < cl->n_nodes; i++) {
		const struct tly_counters *c[2] = {
			i < cl->cfg.n_workers ? tly_worker_counters(cl->w[i]) :
						NULL,
			cl->a[i] ? tly_agg_counters(cl->a[i]) : NULL,
		};

		for (int j = 0; j < 2; j++) {
			if (!c[j])
				continue;
			s->retx += c[j]->retx;
			s->dups += c[j]->dups;
			s->busy += c[j]->busy;
			s->fallback += c[j]->fallback;
			s->confirms += c[j]->confirms;
			s->acks += c[j]->acks;
		}
	}
}

/* every slot free and every release acknowledged, once things settle */
static void check_drained(struct cluster *cl)
{
	uint16_t w;

	cl_settle(cl, 4 * cl->evict_ns);
	assert_int_equal(cl_slots_busy(cl), 0);
	for (w = 0; w < cl->cfg.n_workers; w++) {
		assert_int_equal(tly_worker_releasing(cl->w[w]), 0);
		assert_int_equal(tly_worker_active(cl->w[w]), 0);
		assert_int_equal(tly_worker_inflight(cl->w[w]), 0);
	}
}

static void test_scenario(void **state)
{
	const struct scenario *sc = *state;
	struct cluster *cl = cl_create(&sc->cl);
	struct dp_tensors b;
	struct tly_counters s;

	assert_non_null(cl);
	dp_tensors_alloc(&b, sc->dtype, sc->cl.n_workers, sc->n_tensors,
			 sc->sizes, sc->cl.fab.seed * 7919 + 1);
	submit_set(cl, sc, &b, 7);
	assert_int_equal(cl_run(cl, sc->n_tensors, sc->max_ns ? sc->max_ns :
						    4000000000ull), 0);
	check_results(sc, &b);
	totals(cl, &s);
	/* no fallback store; each placed chunk confirmed and ACKed */
	assert_int_equal(s.fallback, 0);
	assert_true(s.confirms > 0);
	if (sc->cl.fab.loss * (double)fab_sent(cl->fab) >= 20) {
		assert_true(fab_dropped(cl->fab) > 0);
		assert_true(s.retx > 0);
	}
	if (sc->cl.fab.dup * (double)fab_sent(cl->fab) >= 20)
		assert_true(s.dups > 0);
	if (sc->cl.n_slots <= 2)
		assert_true(s.busy > 0);
	check_drained(cl);
	dp_tensors_free(&b);
	cl_destroy(cl);
}

/*
 * A duplicate DATA of a chunk whose slot every worker already released
 * claims that slot as a partial nobody completes.  The next job's chunks
 * that hash there get BUSY until the control plane's sweep frees it.
 */
static void stray_case(int sweep)
{
	struct scenario sc = {
		.cl = { .n_workers = 4, .k = 64, .role = CL_DEDICATED,
			.n_slots = 2, .window = 4, .chunk_rotate = 3,
			.profile = TLY_PROFILE_SWITCH, .no_sweep = !sweep,
			.fab = { .seed = 77, .loss = 0.05, .dup = 0.02,
				 .delay_ns = 2000, .reorder_ns = 3000 } },
		.dtype = TLY_DT_I32, .n_tensors = 2,
		.sizes = { 64 * 9 + 5, 64 * 4 },
	};
	struct cluster *cl;
	struct dp_tensors b1, b2;
	uint8_t f[TLY_HDR_LEN + 4 * 64] = { 0 };
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = TLY_F_INT, .job = 0x7a11,
		.rank = 2, .tensor = tly_tensor_id(0x2000, 7, 0), .chunk = 3,
		.cookie = 0xc0ffee11u,		/* cluster.c's */
	};
	struct tly_agg *agg;
	uint64_t busy_before;

	if (!sweep) {
		sc.cl.fab.dup = 0;
		sc.cl.fab.reorder_ns = 0;
	}
	cl = cl_create(&sc.cl);
	assert_non_null(cl);
	agg = cl->a[4];
	assert_non_null(agg);
	dp_tensors_alloc(&b1, sc.dtype, 4, 2, sc.sizes, 11);
	dp_tensors_alloc(&b2, sc.dtype, 4, 2, sc.sizes, 12);
	submit_set(cl, &sc, &b1, 7);
	assert_int_equal(cl_run(cl, 2, 2000000000ull), 0);
	check_results(&sc, &b1);
	/* with the sweep, after the first job's own duplicates too;
	 * without, there were none (no duplication, no reordering) */
	check_drained(cl);
	/* the stray: chunk 3 of the first job's tensor 0 */
	h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, 0, 2);
	tly_hdr_write(f, &h);
	tly_agg_rx(agg, f, sizeof(f), fab_now(cl->fab));
	assert_int_equal(tly_agg_slots_busy(agg), 1);
	busy_before = tly_agg_counters(agg)->busy;
	submit_set(cl, &sc, &b2, 8);
	if (!sweep) {
		/* half the pool is held for good: the job cannot finish */
		assert_int_equal(cl_run(cl, 4, 50 * cl->evict_ns), -1);
		assert_true(tly_agg_counters(agg)->busy > busy_before);
		dp_tensors_free(&b1);
		dp_tensors_free(&b2);
		cl_destroy(cl);
		return;
	}
	assert_int_equal(cl_run(cl, 4, 2000000000ull), 0);
	check_results(&sc, &b2);
	assert_true(tly_agg_counters(agg)->busy > busy_before);
	assert_true(cl->swept > 0);
	check_drained(cl);
	dp_tensors_free(&b1);
	dp_tensors_free(&b2);
	cl_destroy(cl);
}

static void test_stray_swept(void **state)
{
	(void)state;
	stray_case(1);
}

static void test_stray_unswept_hangs(void **state)
{
	(void)state;
	stray_case(0);
}

#pragma GCC diagnostic ignored "-Woverride-init"

#define FAB(s, l, d, ro) { .seed = (s), .loss = (l), .dup = (d), \
			   .delay_ns = 2000, .reorder_ns = (ro) }
#define SCN(nm, nw, role_, dt, fabc, s0, s1, s2, ...) { \
	.name = nm, \
	.cl = { .n_workers = nw, .k = 64, .role = role_, .n_slots = 256, \
		.window = 8, .chunk_rotate = 5, \
		.profile = TLY_PROFILE_SWITCH, .fab = fabc, __VA_ARGS__ }, \
	.dtype = dt, .n_tensors = 3, .sizes = { s0, s1, s2 } }
#define SC(nm, nw, role_, dt, fabc, ...) { \
	.name = nm, \
	.cl = { .n_workers = nw, .k = 64, .role = role_, .n_slots = 256, \
		.window = 8, .chunk_rotate = 5, \
		.profile = TLY_PROFILE_SWITCH, .fab = fabc, __VA_ARGS__ }, \
	.dtype = dt, .n_tensors = 3, .sizes = { 64 * 40 + 13, 5, 64 * 17 } }

static struct scenario scenarios[] = {
	SC("sw ded n2 i32 clean", 2, CL_DEDICATED, TLY_DT_I32,
	   FAB(1, 0, 0, 0)),
	SC("sw ded n3 i32 loss1", 3, CL_DEDICATED, TLY_DT_I32,
	   FAB(2, 0.01, 0, 0)),
	SC("sw ded n4 i32 loss10 dup reorder", 4, CL_DEDICATED, TLY_DT_I32,
	   FAB(3, 0.10, 0.05, 8000)),
	SC("sw ded n8 i32 loss10 dup reorder", 8, CL_DEDICATED, TLY_DT_I32,
	   FAB(4, 0.10, 0.05, 8000)),
	SC("sw ded n4 f32 loss10 dup reorder", 4, CL_DEDICATED, TLY_DT_F32,
	   FAB(5, 0.10, 0.05, 8000)),
	SC("sw ded n8 f32 loss10 l2l4 multicast", 8, CL_DEDICATED,
	   TLY_DT_F32, FAB(6, 0.10, 0.05, 8000), .l2l4 = 1, .multicast = 1),
	SC("sw ded n4 f16 loss10 dup reorder", 4, CL_DEDICATED, TLY_DT_F16,
	   FAB(7, 0.10, 0.05, 8000)),
	SC("sw ded n3 bf16 loss1", 3, CL_DEDICATED, TLY_DT_BF16,
	   FAB(8, 0.01, 0.01, 2000)),
	SC("sw ded n4 i32 pool2 loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_I32, FAB(9, 0.10, 0.05, 8000), .n_slots = 2),
	SC("sw ded n4 f32 pool2 loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_F32, FAB(10, 0.10, 0.05, 8000), .n_slots = 2),
	SC("sw ded n4 f16 pool2 loss10", 4, CL_DEDICATED, TLY_DT_F16,
	   FAB(11, 0.10, 0.02, 4000), .n_slots = 2),
	SC("sw ded n4 i32 k128 two aggs loss10", 4, CL_DEDICATED, TLY_DT_I32,
	   FAB(12, 0.10, 0.05, 8000), .k = 128, .n_dedicated = 2),
	SC("sw ded n4 f32 k256 loss10", 4, CL_DEDICATED, TLY_DT_F32,
	   FAB(13, 0.10, 0.05, 8000), .k = 256),
	/* the daemon's default K (a 1500-byte MTU's whole half passes),
	 * the most whole passes, and a K of half passes (96) */
	SC("sw ded n4 f32 k352 ack8 loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_F32, FAB(25, 0.10, 0.05, 8000), .k = 352, .ack_every = 8,
	   .window = 16),
	SC("sw ded n4 f32 k320 ack8 loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_F32, FAB(27, 0.10, 0.05, 8000), .k = 320, .ack_every = 8,
	   .window = 16),
	/* jumbo frames: the most half passes one XDP buffer holds */
	SC("sw ded n4 f32 k832 ack8 loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_F32, FAB(41, 0.10, 0.05, 8000), .k = 832, .ack_every = 8,
	   .window = 16),
	SC("sw colo n3 i32 k832 pool2 loss10", 3, CL_COLOCATED, TLY_DT_I32,
	   FAB(42, 0.10, 0.05, 8000), .k = 832, .n_slots = 2),
	SC("sw ded n3 i32 k96 loss10 dup reorder", 3, CL_DEDICATED,
	   TLY_DT_I32, FAB(28, 0.10, 0.05, 8000), .k = 96),
	SC("sw colo n3 i32 k192 pool2 loss10", 3, CL_COLOCATED, TLY_DT_I32,
	   FAB(26, 0.10, 0.02, 4000), .k = 192, .n_slots = 2),
	SC("sw colo n4 i32 pool2 loss10 dup reorder", 4, CL_COLOCATED,
	   TLY_DT_I32, FAB(14, 0.10, 0.05, 8000), .n_slots = 2),
	SC("sw colo n8 f32 loss10 l2l4", 8, CL_COLOCATED, TLY_DT_F32,
	   FAB(15, 0.10, 0.05, 8000), .l2l4 = 1),
	SCN("sw ded n32 i32 loss10 dup reorder", 32, CL_DEDICATED,
	    TLY_DT_I32, FAB(16, 0.10, 0.05, 8000), 64 * 12 + 1, 64 * 3, 7),
	SCN("sw ded n32 f32 pool2 loss10", 32, CL_DEDICATED, TLY_DT_F32,
	    FAB(17, 0.10, 0.02, 4000), 64 * 6 + 3, 64 * 2, 9, .n_slots = 2),
	SCN("sw colo n32 f16 loss1", 32, CL_COLOCATED, TLY_DT_F16,
	    FAB(18, 0.01, 0.01, 2000), 64 * 8, 64 * 2 + 1, 3),
	SC("sw ded n4 i32 tiny release table", 4, CL_DEDICATED, TLY_DT_I32,
	   FAB(19, 0.10, 0.05, 8000), .release_max = 2, .window = 16),
	/* one DATA in ack_every asks for its ACK (worker_ack.c): lost DATA
	 * taken as placed come back through the ACKED probes */
	SC("sw ded n4 i32 ack4 loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_I32, FAB(21, 0.10, 0.05, 8000), .ack_every = 4,
	   .window = 16),
	SC("sw ded n4 f32 pool2 ack4 loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_F32, FAB(22, 0.10, 0.05, 8000), .n_slots = 2,
	   .ack_every = 4),
	SC("sw colo n8 f16 ack8 loss10 l2l4", 8, CL_COLOCATED, TLY_DT_F16,
	   FAB(23, 0.10, 0.05, 8000), .l2l4 = 1, .ack_every = 8,
	   .window = 32),
	SC("sw ded n3 bf16 ack8 loss1", 3, CL_DEDICATED, TLY_DT_BF16,
	   FAB(24, 0.01, 0.01, 2000), .ack_every = 8, .window = 64),
	/*
	 * Many more chunks refused than the window re-offers per back-off,
	 * every worker on another tensor first: the pool fills with partial
	 * sums that each wait for a worker busy re-offering its own first
	 * tensor.  Re-offering refused chunks in turn (tensors and chunks)
	 * is what lets them complete (tallyd's test_cluster_switch found it).
	 */
	{ .name = "sw ded n4 i32 pool64 window64 4 tensors in other orders",
	  .cl = { .n_workers = 4, .k = 128, .role = CL_DEDICATED,
		  .n_slots = 64, .window = 64, .max_tensors = 8,
		  .profile = TLY_PROFILE_SWITCH,
		  .fab = FAB(20, 0.01, 0.005, 300) },
	  .dtype = TLY_DT_I32, .n_tensors = 4,
	  .sizes = { 547 * 128 - 5, 547 * 128, 300 * 128 + 1, 547 * 128 },
	  .max_ns = 400000000 },	/* it takes about 90 ms */
	/* the same race in the software profile, whose fallback store and
	 * eviction did not save it either: refused chunks in turn there too */
	{ .name = "software ded n4 i32 pool64 window64 4 tensors in other orders",
	  .cl = { .n_workers = 4, .k = 128, .role = CL_DEDICATED,
		  .n_slots = 64, .window = 64, .max_tensors = 8,
		  .profile = TLY_PROFILE_SOFTWARE,
		  .fab = FAB(20, 0.01, 0.005, 300) },
	  .dtype = TLY_DT_I32, .n_tensors = 4,
	  .sizes = { 547 * 128 - 5, 547 * 128, 300 * 128 + 1, 547 * 128 },
	  .max_ns = 400000000 },
};

/* a seeded sweep over random switch-profile configurations */
#define N_RANDOM 30

static struct scenario random_sc[N_RANDOM];
static char random_names[N_RANDOM][112];

static void make_random(void)
{
	static const enum tly_dtype dts[] = { TLY_DT_F32, TLY_DT_I32,
					      TLY_DT_F16, TLY_DT_BF16 };
	static const uint16_t ks[] = { 64, 128, 256 };
	uint64_t rng = 0x5e1ec7;
	unsigned int i, t;

	for (i = 0; i < N_RANDOM; i++) {
		struct scenario *sc = &random_sc[i];
		struct cl_cfg *c = &sc->cl;

		c->profile = TLY_PROFILE_SWITCH;
		/* mostly small, now and then up to 32 */
		c->n_workers = (uint16_t)(fab_rand(&rng) % 4 ?
					  2 + fab_rand(&rng) % 7 :
					  9 + fab_rand(&rng) % 24);
		c->k = ks[fab_rand(&rng) % 3];
		c->role = fab_rand(&rng) % 2 ? CL_COLOCATED : CL_DEDICATED;
		c->n_dedicated = (uint16_t)(1 + fab_rand(&rng) % 2);
		c->n_slots = (uint32_t)(fab_rand(&rng) % 3 ?
					2 + fab_rand(&rng) % 6 :
					8 + fab_rand(&rng) % 200);
		c->window = (uint32_t)(1 + fab_rand(&rng) % 16);
		c->chunk_rotate = (uint32_t)(fab_rand(&rng) % 7);
		c->l2l4 = (int)(fab_rand(&rng) % 2);
		c->multicast = (int)(fab_rand(&rng) % 2);
		c->release_max = (uint32_t)(fab_rand(&rng) % 3 ? 0 :
					    1 + fab_rand(&rng) % 8);
		/* not drawn, so that the other draws stay as they were */
		c->ack_every = i % 3 ? 0 : 2 + i % 7;
		c->fab.seed = 2000 + i;
		c->fab.loss = (double)(fab_rand(&rng) % 21) / 100;
		c->fab.dup = (double)(fab_rand(&rng) % 11) / 100;
		c->fab.delay_ns = 500 + fab_rand(&rng) % 3000;
		c->fab.reorder_ns = fab_rand(&rng) % 10000;
		sc->dtype = dts[fab_rand(&rng) % 4];
		sc->n_tensors = (uint32_t)(1 + fab_rand(&rng) % MAX_T);
		for (t = 0; t < sc->n_tensors; t++)
			sc->sizes[t] = 1 + fab_rand(&rng) %
				       (c->k * (c->n_workers > 8 ? 6 : 20));
		snprintf(random_names[i], sizeof(random_names[i]),
			 "random %u: %s n%u k%u slots%u win%u rel%u ack%u "
			 "loss%.2f dup%.2f", i,
			 c->role == CL_COLOCATED ? "colo" : "ded",
			 c->n_workers, c->k, c->n_slots, c->window,
			 c->release_max, c->ack_every, c->fab.loss,
			 c->fab.dup);
		sc->name = random_names[i];
	}
}

int main(void)
{
	size_t n_fixed = sizeof(scenarios) / sizeof(scenarios[0]), i;
	struct CMUnitTest tests[sizeof(scenarios) / sizeof(scenarios[0]) +
				N_RANDOM + 2];

	make_random();
	for (i = 0; i < n_fixed + N_RANDOM; i++) {
		const struct scenario *sc = i < n_fixed ? &scenarios[i] :
					    &random_sc[i - n_fixed];

		tests[i] = (struct CMUnitTest){
			.name = sc->name,
			.test_func = test_scenario,
			.initial_state = (void *)sc,
		};
	}
	tests[i++] = (struct CMUnitTest){
		.name = "stray DATA after release: swept",
		.test_func = test_stray_swept,
	};
	tests[i++] = (struct CMUnitTest){
		.name = "stray DATA after release: hangs without the sweep",
		.test_func = test_stray_unswept_hangs,
	};
	return _cmocka_run_group_tests("switch_allreduce", tests, i, NULL,
				       NULL);
}
