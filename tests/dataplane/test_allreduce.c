// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_allreduce.c - end to end over the faulty fabric: every role, worker
 * counts 2..8 (and 33, past a 32-bit bitmap), loss 0/1/10 %, duplication,
 * reordering, different send orders per worker, sizes that are not
 * multiples of K.  int32 results must be bit-exact; float results within
 * the documented bound of the exact sum and identical on every worker.
 */
#include <math.h>
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
#include "dataplane/engine/quant.h"
#include "dataplane/half.h"

#define MAX_T 4

struct scenario {
	const char *name;
	struct cl_cfg cl;
	enum tly_dtype dtype;
	uint32_t n_tensors;
	size_t sizes[MAX_T];
	int expect_refusals;	/* the pool is small enough to refuse */
};

struct run {
	const struct scenario *sc;
	struct cluster *cl;
	struct dp_tensors b;
};

static void run_setup(struct run *r, const struct scenario *sc)
{
	memset(r, 0, sizeof(*r));
	r->sc = sc;
	r->cl = cl_create(&sc->cl);
	assert_non_null(r->cl);
	dp_tensors_alloc(&r->b, sc->dtype, sc->cl.n_workers, sc->n_tensors,
			 sc->sizes, sc->cl.fab.seed * 7919 + 1);
}

static void run_teardown(struct run *r)
{
	dp_tensors_free(&r->b);
	cl_destroy(r->cl);
}

/* every worker submits the tensors in its own order and priorities */
static void submit_all(struct run *r)
{
	const struct scenario *sc = r->sc;
	uint16_t w;
	uint32_t i;

	for (w = 0; w < sc->cl.n_workers; w++)
		for (i = 0; i < sc->n_tensors; i++) {
			uint32_t t = (i + w) % sc->n_tensors;
			struct tly_tensor_desc d = {
				.id = tly_tensor_id(0x1000 + t, 7, 0),
				.dtype = sc->dtype,
				.algo = sc->cl.role == CL_RING ? TLY_ALGO_RING :
								 TLY_ALGO_AGG,
				.src = r->b.in[w][t], .dst = r->b.out[w][t],
				.count = sc->sizes[t],
				.prio = (uint8_t)((t * 3 + w) % 4),
			};

			assert_int_equal(tly_worker_submit(r->cl->w[w], &d,
							   0), 0);
		}
}

static void sum_counters(const struct tly_counters *c,
			 struct tly_counters *s)
{
	s->retx += c->retx;
	s->dups += c->dups;
	s->busy += c->busy;
	s->fallback += c->fallback;
	s->acks += c->acks;
}

/* the faults were really injected and the recovery paths really ran */
static void check_paths(struct run *r)
{
	const struct scenario *sc = r->sc;
	struct cluster *cl = r->cl;
	struct tly_counters s = { 0 };
	uint16_t i;

	for (i = 0; i < cl->n_nodes; i++) {
		if (i < sc->cl.n_workers)
			sum_counters(tly_worker_counters(cl->w[i]), &s);
		if (cl->a[i])
			sum_counters(tly_agg_counters(cl->a[i]), &s);
	}
	/* where at least ~20 faults were expected */
	if (sc->cl.fab.loss * (double)fab_sent(cl->fab) >= 20) {
		assert_true(fab_dropped(cl->fab) > 0);
		assert_true(s.retx > 0);
	}
	if (sc->cl.fab.dup * (double)fab_sent(cl->fab) >= 20) {
		assert_true(fab_duplicated(cl->fab) > 0);
		assert_true(s.dups > 0);
	}
	if (sc->expect_refusals)
		assert_true(s.busy + s.fallback > 0);
	if (sc->cl.role == CL_RING)
		assert_true(s.acks > 0);
}

static void test_scenario(void **state)
{
	const struct scenario *sc = *state;
	struct run r;
	uint16_t w;
	uint32_t t;

	run_setup(&r, sc);
	submit_all(&r);
	assert_int_equal(cl_run(r.cl, sc->n_tensors, 2000000000ull), 0);
	for (t = 0; t < sc->n_tensors; t++) {
		for (w = 1; w < sc->cl.n_workers; w++)
			assert_memory_equal(r.b.out[0][t], r.b.out[w][t],
					    sc->sizes[t] * dp_dtype_size(sc->dtype));
		if (sc->dtype == TLY_DT_I32)
			dp_check_int(sc->cl.n_workers, dp_tensor_inputs(&r.b, t), r.b.out[0][t],
				     sc->sizes[t], t);
		else
			dp_check_float(sc->dtype, sc->cl.n_workers, sc->cl.k,
				       sc->cl.role == CL_RING, dp_tensor_inputs(&r.b, t),
				       r.b.out[0][t], sc->sizes[t], t);
	}
	for (w = 0; w < sc->cl.n_workers; w++) {
		assert_int_equal(tly_worker_inflight(r.cl->w[w]), 0);
		assert_int_equal(tly_worker_active(r.cl->w[w]), 0);
	}
	check_paths(&r);
	/* receipts release every slot unless the network made strays */
	cl_settle(r.cl, 3000000);
	if (sc->cl.role != CL_RING && sc->cl.fab.dup == 0 &&
	    sc->cl.fab.loss == 0)
		assert_int_equal(cl_slots_busy(r.cl), 0);
	run_teardown(&r);
}

/* scenarios override the defaults of SC() with designated initialisers */
#pragma GCC diagnostic ignored "-Woverride-init"

#define FAB(s, l, d, ro) { .seed = (s), .loss = (l), .dup = (d), \
			   .delay_ns = 2000, .reorder_ns = (ro) }
#define SC(nm, nw, role_, dt, fabc, ...) { \
	.name = nm, \
	.cl = { .n_workers = nw, .k = 64, .role = role_, .n_slots = 512, \
		.n_fallback = 64, .window = 8, .chunk_rotate = 5, \
		.fab = fabc, __VA_ARGS__ }, \
	.dtype = dt, .n_tensors = 3, .sizes = { 64 * 40 + 13, 5, 64 * 17 } }

static struct scenario scenarios[] = {
	SC("ded n2 i32 clean", 2, CL_DEDICATED, TLY_DT_I32, FAB(1, 0, 0, 0)),
	SC("ded n3 i32 loss1", 3, CL_DEDICATED, TLY_DT_I32,
	   FAB(2, 0.01, 0, 0)),
	SC("ded n4 i32 loss10 dup reorder", 4, CL_DEDICATED, TLY_DT_I32,
	   FAB(3, 0.10, 0.05, 8000)),
	SC("ded n8 i32 loss10 dup reorder", 8, CL_DEDICATED, TLY_DT_I32,
	   FAB(4, 0.10, 0.05, 8000)),
	SC("ded n2 f32 clean", 2, CL_DEDICATED, TLY_DT_F32, FAB(5, 0, 0, 0)),
	SC("ded n3 f32 loss1 dup", 3, CL_DEDICATED, TLY_DT_F32,
	   FAB(6, 0.01, 0.02, 3000)),
	SC("ded n4 f32 loss10 dup reorder", 4, CL_DEDICATED, TLY_DT_F32,
	   FAB(7, 0.10, 0.05, 8000)),
	SC("ded n8 f32 loss10 l2l4 multicast", 8, CL_DEDICATED, TLY_DT_F32,
	   FAB(8, 0.10, 0.05, 8000), .l2l4 = 1, .multicast = 1),
	SC("ded n4 f16 loss1", 4, CL_DEDICATED, TLY_DT_F16,
	   FAB(9, 0.01, 0.01, 2000)),
	SC("ded n3 bf16 loss1", 3, CL_DEDICATED, TLY_DT_BF16,
	   FAB(10, 0.01, 0.01, 2000)),
	SC("ded n4 f32 k256 two aggs", 4, CL_DEDICATED, TLY_DT_F32,
	   FAB(11, 0.01, 0.01, 2000), .k = 256, .n_dedicated = 2),
	SC("ded n4 i32 tiny pool fallback busy", 4, CL_DEDICATED, TLY_DT_I32,
	   FAB(12, 0.01, 0.01, 4000), .n_slots = 3, .n_fallback = 2),
	SC("ded n4 i32 no fallback busy", 4, CL_DEDICATED, TLY_DT_I32,
	   FAB(13, 0, 0, 0), .n_slots = 2, .n_fallback = 0, .window = 4),
	SC("colo n4 f32 tiny pools loss10", 4, CL_COLOCATED, TLY_DT_F32,
	   FAB(15, 0.10, 0.03, 5000), .n_slots = 3, .n_fallback = 1),
	SC("ded n33 i32 loss1", 33, CL_DEDICATED, TLY_DT_I32,
	   FAB(14, 0.01, 0.01, 2000)),
	SC("colo n2 i32 clean", 2, CL_COLOCATED, TLY_DT_I32, FAB(21, 0, 0, 0)),
	SC("colo n3 f32 loss1", 3, CL_COLOCATED, TLY_DT_F32,
	   FAB(22, 0.01, 0.01, 2000)),
	SC("colo n4 i32 loss10 dup reorder", 4, CL_COLOCATED, TLY_DT_I32,
	   FAB(23, 0.10, 0.05, 8000)),
	SC("colo n8 f32 loss10 l2l4", 8, CL_COLOCATED, TLY_DT_F32,
	   FAB(24, 0.10, 0.05, 8000), .l2l4 = 1),
	SC("ring n2 i32 clean", 2, CL_RING, TLY_DT_I32, FAB(31, 0, 0, 0)),
	SC("ring n3 f32 loss1", 3, CL_RING, TLY_DT_F32,
	   FAB(32, 0.01, 0.01, 2000)),
	SC("ring n4 i32 loss10 dup reorder", 4, CL_RING, TLY_DT_I32,
	   FAB(33, 0.10, 0.05, 8000)),
	SC("ring n8 f32 loss10 l2l4", 8, CL_RING, TLY_DT_F32,
	   FAB(34, 0.10, 0.05, 8000), .l2l4 = 1),
	SC("ring n4 bf16 loss1", 4, CL_RING, TLY_DT_BF16,
	   FAB(35, 0.01, 0.01, 2000)),
};

/*
 * A seeded sweep over random configurations: worker count, role, element
 * type, K, pool and fallback sizes down to a few slots (collisions, BUSY,
 * eviction), window, loss up to 20 %, duplication, reordering, sizes.
 */
#define N_RANDOM 40

static struct scenario random_sc[N_RANDOM];
static char random_names[N_RANDOM][96];

static void make_random(void)
{
	static const enum tly_dtype dts[] = { TLY_DT_F32, TLY_DT_I32,
					      TLY_DT_F16, TLY_DT_BF16 };
	uint64_t rng = 0x5eed;
	unsigned int i, t;

	for (i = 0; i < N_RANDOM; i++) {
		struct scenario *sc = &random_sc[i];
		struct cl_cfg *c = &sc->cl;

		cl_cfg_random(c, &rng, 3, 1000u + i);
		sc->dtype = dts[fab_rand(&rng) % 4];
		sc->n_tensors = (uint32_t)(1 + fab_rand(&rng) % MAX_T);
		for (t = 0; t < sc->n_tensors; t++)
			sc->sizes[t] = 1 + fab_rand(&rng) % (c->k * 30);
		snprintf(random_names[i], sizeof(random_names[i]),
			 "random %u: %s n%u k%u slots%u fb%u win%u loss%.2f "
			 "dup%.2f", i, c->role == CL_RING ? "ring" :
			 c->role == CL_COLOCATED ? "colo" : "ded",
			 c->n_workers, c->k, c->n_slots, c->n_fallback,
			 c->window, c->fab.loss, c->fab.dup);
		sc->name = random_names[i];
	}
}

int main(void)
{
	size_t n_fixed = sizeof(scenarios) / sizeof(scenarios[0]), i;
	struct CMUnitTest tests[sizeof(scenarios) / sizeof(scenarios[0]) +
				N_RANDOM];

	make_random();
	for (i = 0; i < n_fixed; i++)
		scenarios[i].expect_refusals = scenarios[i].cl.n_slots < 8;
	for (i = 0; i < n_fixed + N_RANDOM; i++) {
		const struct scenario *sc = i < n_fixed ? &scenarios[i] :
					    &random_sc[i - n_fixed];

		tests[i] = (struct CMUnitTest){
			.name = sc->name,
			.test_func = test_scenario,
			.initial_state = (void *)sc,
		};
	}
	return _cmocka_run_group_tests("allreduce", tests, i, NULL, NULL);
}
