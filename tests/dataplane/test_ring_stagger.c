// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_ring_stagger.c - workers that submit a tensor later than the others,
 * as hosts do when their local groups become ready at different times.
 *
 * A RING hop for a tensor the receiver has not submitted yet must be
 * refused (RING_ACK+REFUSE) and sent again after the back-off; it must
 * never be acknowledged as if the receiver had finished the tensor.  The
 * regression: the "finished ring tensors" memory started as 1024 zeros, so
 * a hop for tensor id 0 (what tly_tensor_id(0, 0, 0) gives, the first
 * tensor of key 0) was acknowledged by a receiver that had never seen it,
 * and the ring stalled for good.
 *
 * Every scenario includes a tensor with id 0.  Ring at n = 2, 3, 4, 8 with
 * the late worker first, in the middle, last, or two late workers; loss 0,
 * 1 and 10 %, duplication and reordering; several tensors submitted in a
 * different order by each worker, also spread out in time; sizes that are
 * not multiples of K.  The dedicated and co-located aggregation roles get
 * the same staggering.  int32 results exact, float results within the
 * documented bound, all workers bit-identical.
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
#include "dataplane/half.h"

#define MAX_T		3
#define MAX_LATE	2
#define LATE_NS		300000ull	/* 30 x busy_ns: several refusals */

struct scenario {
	const char *name;
	struct cl_cfg cl;
	enum tly_dtype dtype;
	uint32_t n_tensors;
	size_t sizes[MAX_T];
	int n_late;
	uint16_t late[MAX_LATE];	/* ranks that submit late ... */
	uint64_t late_ns[MAX_LATE];	/* ... by this much */
	uint64_t gap_ns;		/* between one worker's tensors */
};

struct run {
	const struct scenario *sc;
	struct cluster *cl;
	struct dp_tensors b;
};

static uint32_t tensor_id(uint32_t t)
{
	/* tensor 0 is the first tensor of key 0: id 0 */
	return tly_tensor_id(t ? 0x5000 + t : 0, 0, 0);
}

static void run_setup(struct run *r, const struct scenario *sc)
{
	memset(r, 0, sizeof(*r));
	r->sc = sc;
	r->cl = cl_create(&sc->cl);
	assert_non_null(r->cl);
	dp_tensors_alloc(&r->b, sc->dtype, sc->cl.n_workers, sc->n_tensors,
			 sc->sizes, sc->cl.fab.seed * 104729 + 3);
}

static void run_teardown(struct run *r)
{
	dp_tensors_free(&r->b);
	cl_destroy(r->cl);
}

static uint64_t late_of(const struct scenario *sc, uint16_t w)
{
	int i;

	for (i = 0; i < sc->n_late; i++)
		if (sc->late[i] == w)
			return sc->late_ns[i];
	return 0;
}

/*
 * Worker w submits its i-th tensor, (i + w) mod T, at late(w) + i * gap:
 * every submission in time order, the cluster running in between.
 */
static void submit_staggered(struct run *r)
{
	const struct scenario *sc = r->sc;
	uint16_t n = sc->cl.n_workers, w;
	uint32_t total = n * sc->n_tensors, k, i;
	uint8_t sent[TLY_MAX_WORKERS][MAX_T] = { { 0 } };
	uint64_t t0 = fab_now(r->cl->fab);

	for (k = 0; k < total; k++) {
		struct tly_tensor_desc d = { 0 };
		uint64_t best = UINT64_MAX, at;
		uint16_t bw = 0;
		uint32_t bi = 0, t;

		for (w = 0; w < n; w++)
			for (i = 0; i < sc->n_tensors; i++) {
				at = late_of(sc, w) + i * sc->gap_ns;
				if (!sent[w][i] && at < best) {
					best = at;
					bw = w;
					bi = i;
				}
			}
		sent[bw][bi] = 1;
		if (t0 + best > fab_now(r->cl->fab))
			cl_settle(r->cl, t0 + best - fab_now(r->cl->fab));
		t = (bi + bw) % sc->n_tensors;
		d = (struct tly_tensor_desc){
			.id = tensor_id(t),
			.dtype = sc->dtype,
			.algo = sc->cl.role == CL_RING ? TLY_ALGO_RING :
							 TLY_ALGO_AGG,
			.src = r->b.in[bw][t], .dst = r->b.out[bw][t],
			.count = sc->sizes[t],
			.prio = (uint8_t)((t * 3 + bw) % 4),
		};
		assert_int_equal(tly_worker_submit(r->cl->w[bw], &d,
						   fab_now(r->cl->fab)), 0);
	}
}

static void test_scenario(void **state)
{
	const struct scenario *sc = *state;
	uint64_t busy = 0, retx = 0;
	struct run r;
	uint16_t w;
	uint32_t t;

	run_setup(&r, sc);
	submit_staggered(&r);
	assert_int_equal(cl_run(r.cl, sc->n_tensors, 200000000ull), 0);
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
		const struct tly_counters *c = tly_worker_counters(r.cl->w[w]);

		assert_int_equal(tly_worker_inflight(r.cl->w[w]), 0);
		assert_int_equal(tly_worker_active(r.cl->w[w]), 0);
		assert_int_equal(c->completions, sc->n_tensors);
		busy += c->busy;
		retx += c->retx;
	}
	/* the late workers refused hops: the retry path really ran */
	if (sc->cl.role == CL_RING && sc->n_late)
		assert_true(busy > 0);
	if (sc->cl.fab.loss * (double)fab_sent(r.cl->fab) >= 20)
		assert_true(retx > 0);
	run_teardown(&r);
}

/*
 * The exact regression at the packet level: a worker that has finished
 * nothing receives a hop for tensor id 0, which it has not submitted.  It
 * must refuse it, not acknowledge it as finished.
 */
static void test_unsubmitted_id0_refused(void **state)
{
	struct cl_cfg cfg = {
		.n_workers = 2, .k = 64, .role = CL_RING, .n_slots = 64,
		.window = 8, .fab = { .seed = 1, .delay_ns = 2000 },
	};
	struct cluster *cl = cl_create(&cfg);
	int32_t in[2][100], out[2][100];
	struct tly_tensor_desc d = {
		.id = 0, .dtype = TLY_DT_I32, .algo = TLY_ALGO_RING,
		.src = in[0], .dst = out[0], .count = 100,
	};
	const struct tly_counters *c0, *c1;
	int i;

	(void)state;
	assert_non_null(cl);
	assert_int_equal(tly_tensor_id(0, 0, 0), 0);
	for (i = 0; i < 100; i++) {
		in[0][i] = i;
		in[1][i] = 1000 * i;
	}
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), 0);
	cl_settle(cl, 20000);
	c0 = tly_worker_counters(cl->w[0]);
	c1 = tly_worker_counters(cl->w[1]);
	assert_true(c1->busy > 0);	/* refused ... */
	assert_int_equal(c1->acks, 0);	/* ... and never acknowledged */
	assert_true(c0->busy > 0);
	assert_int_equal(cl->done[0], 0);

	d.src = in[1];
	d.dst = out[1];
	assert_int_equal(tly_worker_submit(cl->w[1], &d, fab_now(cl->fab)),
			 0);
	assert_int_equal(cl_run(cl, 1, 100000000ull), 0);
	for (i = 0; i < 100; i++) {
		assert_int_equal(out[0][i], 1001 * i);
		assert_int_equal(out[1][i], 1001 * i);
	}
	cl_destroy(cl);
}

/*
 * The refused hops go again as soon as the late rank takes one, not at the
 * end of their back-off.  Worker 0 is refused for 2 ms, long enough for
 * its hops' back-off to reach the longest, busy_ns << 6 = 640 us here; once
 * worker 1 submits, the ring completes within a few round trips (2 us
 * each way) and 20 chunks, well inside a quarter of that.
 */
static void test_refused_go_at_once(void **state)
{
	struct cl_cfg cfg = {
		.n_workers = 2, .k = 64, .role = CL_RING, .n_slots = 64,
		.window = 8, .fab = { .seed = 2, .delay_ns = 2000 },
	};
	struct cluster *cl = cl_create(&cfg);
	enum { N = 64 * 20 };
	static int32_t in[2][N], out[2][N];
	struct tly_tensor_desc d = {
		.id = 0x77, .dtype = TLY_DT_I32, .algo = TLY_ALGO_RING,
		.src = in[0], .dst = out[0], .count = N,
	};
	uint64_t late;
	int i;

	(void)state;
	assert_non_null(cl);
	for (i = 0; i < N; i++) {
		in[0][i] = i;
		in[1][i] = 3 * i;
	}
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), 0);
	cl_settle(cl, 2000000);
	assert_true(tly_worker_counters(cl->w[1])->busy > 0);
	d.src = in[1];
	d.dst = out[1];
	late = fab_now(cl->fab);
	assert_int_equal(tly_worker_submit(cl->w[1], &d, late), 0);
	assert_int_equal(cl_run(cl, 1, 100000000ull), 0);
	assert_true(fab_now(cl->fab) - late < 160000);
	for (i = 0; i < N; i++) {
		assert_int_equal(out[0][i], 4 * i);
		assert_int_equal(out[1][i], 4 * i);
	}
	cl_destroy(cl);
}

/* scenarios override the defaults of SC() with designated initialisers */
#pragma GCC diagnostic ignored "-Woverride-init"

#define FAB(s, l, d, ro) { .seed = (s), .loss = (l), .dup = (d), \
			   .delay_ns = 2000, .reorder_ns = (ro) }
#define LATE1(r) .n_late = 1, .late = { r }, .late_ns = { LATE_NS }
#define LATE2(r1, r2) .n_late = 2, .late = { r1, r2 }, \
		      .late_ns = { LATE_NS, 2 * LATE_NS }
#define SC(nm, nw, role_, dt, fabc, ...) { \
	.name = nm, \
	.cl = { .n_workers = nw, .k = 64, .role = role_, .n_slots = 512, \
		.n_fallback = 64, .window = 8, .chunk_rotate = 5, \
		.fab = fabc }, \
	.dtype = dt, .n_tensors = 3, .sizes = { 64 * 12 + 13, 5, 64 * 7 }, \
	__VA_ARGS__ }

static const struct scenario scenarios[] = {
	SC("ring n2 i32 late last", 2, CL_RING, TLY_DT_I32, FAB(1, 0, 0, 0),
	   LATE1(1)),
	SC("ring n2 f32 late first", 2, CL_RING, TLY_DT_F32, FAB(2, 0, 0, 0),
	   LATE1(0)),
	SC("ring n2 i32 late first one tensor", 2, CL_RING, TLY_DT_I32,
	   FAB(3, 0, 0, 0), LATE1(0), .n_tensors = 1),
	SC("ring n3 i32 late middle loss1", 3, CL_RING, TLY_DT_I32,
	   FAB(4, 0.01, 0, 0), LATE1(1)),
	SC("ring n3 f32 late last loss10 dup reorder", 3, CL_RING,
	   TLY_DT_F32, FAB(5, 0.10, 0.05, 8000), LATE1(2)),
	SC("ring n4 i32 late first loss10 dup reorder", 4, CL_RING,
	   TLY_DT_I32, FAB(6, 0.10, 0.05, 8000), LATE1(0)),
	SC("ring n4 f32 two late loss1 reorder", 4, CL_RING, TLY_DT_F32,
	   FAB(7, 0.01, 0, 3000), LATE2(1, 3)),
	SC("ring n4 i32 two late spread loss1", 4, CL_RING, TLY_DT_I32,
	   FAB(8, 0.01, 0.01, 2000), LATE2(3, 0), .gap_ns = 40000),
	SC("ring n4 f16 late middle loss1", 4, CL_RING, TLY_DT_F16,
	   FAB(9, 0.01, 0.01, 2000), LATE1(2)),
	SC("ring n8 i32 late middle loss1", 8, CL_RING, TLY_DT_I32,
	   FAB(10, 0.01, 0, 2000), LATE1(4)),
	SC("ring n8 f32 late last clean", 8, CL_RING, TLY_DT_F32,
	   FAB(11, 0, 0, 0), LATE1(7)),
	SC("ring n8 f32 two late loss10 dup reorder", 8, CL_RING, TLY_DT_F32,
	   FAB(12, 0.10, 0.05, 8000), LATE2(0, 5)),
	SC("ring n8 i32 two late spread loss10 window4", 8, CL_RING,
	   TLY_DT_I32, FAB(13, 0.10, 0.02, 5000), LATE2(6, 2),
	   .gap_ns = 100000, .cl.window = 4),
	SC("ring n3 bf16 spread loss1", 3, CL_RING, TLY_DT_BF16,
	   FAB(14, 0.01, 0, 2000), LATE1(1), .gap_ns = 70000),
	SC("ded n2 i32 late first", 2, CL_DEDICATED, TLY_DT_I32,
	   FAB(21, 0, 0, 0), LATE1(0)),
	SC("ded n3 f32 late last loss1", 3, CL_DEDICATED, TLY_DT_F32,
	   FAB(22, 0.01, 0.01, 2000), LATE1(2)),
	SC("ded n4 i32 two late loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_I32, FAB(23, 0.10, 0.05, 8000), LATE2(1, 3)),
	SC("ded n8 f32 late middle spread loss1", 8, CL_DEDICATED, TLY_DT_F32,
	   FAB(24, 0.01, 0.01, 2000), LATE1(3), .gap_ns = 50000),
	SC("colo n2 f32 late last", 2, CL_COLOCATED, TLY_DT_F32,
	   FAB(31, 0, 0, 0), LATE1(1)),
	SC("colo n4 f32 late middle loss10 dup reorder", 4, CL_COLOCATED,
	   TLY_DT_F32, FAB(32, 0.10, 0.05, 8000), LATE1(2)),
	SC("colo n8 i32 two late spread loss1", 8, CL_COLOCATED, TLY_DT_I32,
	   FAB(33, 0.01, 0.01, 2000), LATE2(0, 7), .gap_ns = 60000),
};

#define N_SC (sizeof(scenarios) / sizeof(scenarios[0]))

int main(void)
{
	struct CMUnitTest tests[N_SC + 2];
	size_t i;

	tests[0] = (struct CMUnitTest){
		.name = "ring: unsubmitted tensor id 0 is refused",
		.test_func = test_unsubmitted_id0_refused,
	};
	tests[1] = (struct CMUnitTest){
		.name = "ring: refused hops go again when one is taken",
		.test_func = test_refused_go_at_once,
	};
	for (i = 0; i < N_SC; i++)
		tests[i + 2] = (struct CMUnitTest){
			.name = scenarios[i].name,
			.test_func = test_scenario,
			.initial_state = (void *)&scenarios[i],
		};
	return _cmocka_run_group_tests("ring_stagger", tests, N_SC + 2, NULL,
				       NULL);
}
