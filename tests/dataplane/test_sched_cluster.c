// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_sched_cluster.c - the ByteScheduler policy driving real engines over
 * the in-memory fabric, each host with its own scheduler and its own,
 * scripted, order in which gradients become ready.
 *
 * The hang of tools/experiment's bytescheduler-ps cell: host 0 fills its
 * credit with partitions of a gradient X that host 1 has not produced yet,
 * host 1 fills its credit with partitions of Y, more urgent, that host 0
 * gets only later.  A partition completes only once every host has sent
 * it, so neither credit ever returns.  The scripted case reproduces that
 * exactly (nothing completes with the stall rule off) and shows the stall
 * rule (sched_cfg.stall_ns) ending it; the sweep runs random readiness
 * orders, priorities and sizes through every algorithm.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cluster.h"
#include "dataplane/engine/wire.h"
#include "dataplane/sched/sched.h"

#define US 1000ull
#define MS (1000 * US)
#define K 64
#define PART_ELEMS (2 * K)		/* a partition: two chunks */
#define PART_BYTES (PART_ELEMS * sizeof(int32_t))
#define MAX_GRADS 8
#define MAX_HOSTS 4
#define MAX_QUEUE 256

struct grad {
	uint64_t key;
	uint32_t prio;
	uint32_t count;			/* int32 elements */
	int32_t *buf[MAX_HOSTS];	/* in place: input, then the sum */
	int32_t *want;
};

struct event {
	uint64_t at_ns;
	uint32_t grad;
};

struct host {
	struct sched *s;
	struct event script[MAX_GRADS];
	uint32_t n_events, next_event;
	struct sched_unit queue[MAX_QUEUE];	/* released, engine full */
	uint32_t q_head, q_len;
	uint64_t bytes_done[MAX_GRADS];
	uint32_t grads_done;
};

struct rig {
	struct cluster *cl;
	uint16_t n_hosts;
	uint32_t n_grads;
	enum tly_algo algo;
	struct grad g[MAX_GRADS];
	struct host h[MAX_HOSTS];
};

static void unit_done(void *ctx, uint16_t rank, const struct tly_tensor_desc *d)
{
	struct rig *r = ctx;
	struct host *h = &r->h[rank];
	const struct sched_unit *u = d->user;
	uint32_t gi = (uint32_t)(uintptr_t)u->seg[0].user;

	sched_unit_done(h->s, u->id, fab_now(r->cl->fab));
	h->bytes_done[gi] += u->bytes;
	if (h->bytes_done[gi] == r->g[gi].count * sizeof(int32_t))
		h->grads_done++;
}

static int submit_unit(struct rig *r, uint16_t rank, struct sched_unit *u)
{
	const struct sched_segment *seg = &u->seg[0];
	struct grad *g = &r->g[(uintptr_t)seg->user];
	uint32_t first = (uint32_t)(seg->offset / sizeof(int32_t));
	struct tly_tensor_desc t = {
		.id = tly_tensor_id(g->key, 1, first),
		.dtype = TLY_DT_I32,
		.algo = r->algo,
		.src = g->buf[rank] + first,
		.dst = g->buf[rank] + first,
		.count = seg->bytes / sizeof(int32_t),
		.prio = g->prio > 7 ? 7 : (uint8_t)g->prio,
		.user = u,
	};

	assert_int_equal(u->n_segments, 1);
	return tly_worker_submit(r->cl->w[rank], &t, fab_now(r->cl->fab));
}

/* What the daemon's cluster_ops_pump() does: ready events, then every
 * unit the scheduler releases, in order, while the engine takes them. */
static void pump(struct rig *r, uint16_t rank)
{
	struct host *h = &r->h[rank];
	uint64_t now = fab_now(r->cl->fab);

	while (h->next_event < h->n_events &&
	       h->script[h->next_event].at_ns <= now) {
		struct grad *g = &r->g[h->script[h->next_event++].grad];
		struct sched_item it = {
			.key = g->key, .iteration = 1, .priority = g->prio,
			.bytes = g->count * sizeof(int32_t),
			.user = (void *)(uintptr_t)(g - r->g),
		};

		assert_int_equal(sched_ready(h->s, &it, now), 0);
	}
	for (;;) {
		struct sched_unit *u;

		if (h->q_len == 0) {
			u = &h->queue[(h->q_head + h->q_len) % MAX_QUEUE];
			if (sched_next(h->s, now, u) != 1)
				return;
			h->q_len++;
		}
		u = &h->queue[h->q_head];
		if (submit_unit(r, rank, u))
			return;		/* -EBUSY: the engine is full */
		h->q_head = (h->q_head + 1) % MAX_QUEUE;
		h->q_len--;
	}
}

static bool all_done(const struct rig *r)
{
	for (uint16_t i = 0; i < r->n_hosts; i++)
		if (r->h[i].grads_done < r->n_grads)
			return false;
	return true;
}

/* 0 when every host has every gradient back within max_ns. */
static int rig_run(struct rig *r, uint64_t max_ns)
{
	uint64_t end = fab_now(r->cl->fab) + max_ns;

	while (!all_done(r)) {
		if (fab_now(r->cl->fab) >= end)
			return -1;
		for (uint16_t i = 0; i < r->n_hosts; i++)
			pump(r, i);
		cl_settle(r->cl, US);
	}
	return 0;
}

static void rig_init(struct rig *r, uint16_t n_hosts, enum cl_role role,
		     uint64_t credit_parts, uint64_t stall_ns)
{
	struct cl_cfg cc = {
		.n_workers = n_hosts, .k = K, .role = role,
		.n_slots = 64, .n_fallback = 4, .window = 16,
		.max_tensors = 64, .on_done = unit_done, .on_done_ctx = r,
		.fab = { .seed = 7, .delay_ns = 2 * US },
	};
	struct sched_cfg sc = {
		.policy = SCHED_BYTESCHEDULER, .max_items = 64,
		.partition_bytes = PART_BYTES,
		.credit_bytes = credit_parts * PART_BYTES,
		.stall_ns = stall_ns,
	};

	memset(r, 0, sizeof(*r));
	r->n_hosts = n_hosts;
	r->algo = role == CL_RING ? TLY_ALGO_RING : TLY_ALGO_AGG;
	r->cl = cl_create(&cc);
	assert_non_null(r->cl);
	for (uint16_t i = 0; i < n_hosts; i++) {
		r->h[i].s = sched_create(&sc);
		assert_non_null(r->h[i].s);
	}
}

static void rig_add_grad(struct rig *r, uint64_t key, uint32_t prio,
			 uint32_t parts, uint64_t *seed)
{
	struct grad *g = &r->g[r->n_grads++];

	g->key = key;
	g->prio = prio;
	g->count = parts * PART_ELEMS;
	g->want = calloc(g->count, sizeof(int32_t));
	assert_non_null(g->want);
	for (uint16_t h = 0; h < r->n_hosts; h++) {
		g->buf[h] = malloc(g->count * sizeof(int32_t));
		assert_non_null(g->buf[h]);
		for (uint32_t i = 0; i < g->count; i++) {
			g->buf[h][i] = (int32_t)(fab_rand(seed) % 2000001) -
				       1000000;
			g->want[i] += g->buf[h][i];
		}
	}
}

static void ready_at(struct rig *r, uint16_t host, uint32_t grad, uint64_t t)
{
	struct host *h = &r->h[host];

	h->script[h->n_events++] = (struct event){ .at_ns = t, .grad = grad };
}

static void expect_sums(const struct rig *r)
{
	for (uint32_t gi = 0; gi < r->n_grads; gi++)
		for (uint16_t h = 0; h < r->n_hosts; h++)
			assert_memory_equal(r->g[gi].buf[h], r->g[gi].want,
					    r->g[gi].count * sizeof(int32_t));
}

static uint64_t rig_stall_releases(const struct rig *r)
{
	uint64_t n = 0;

	for (uint16_t i = 0; i < r->n_hosts; i++)
		n += sched_stats(r->h[i].s)->stall_releases;
	return n;
}

static void rig_fini(struct rig *r)
{
	for (uint16_t i = 0; i < r->n_hosts; i++)
		sched_destroy(r->h[i].s);
	for (uint32_t gi = 0; gi < r->n_grads; gi++) {
		for (uint16_t h = 0; h < r->n_hosts; h++)
			free(r->g[gi].buf[h]);
		free(r->g[gi].want);
	}
	cl_destroy(r->cl);
}

/*
 * X (priority 5) and Y (priority 0), four partitions each, a credit of two
 * partitions; host 0 gets X first, host 1 gets Y first, the other one
 * 100 us later.
 */
static void crossed_credits(struct rig *r, enum cl_role role, uint64_t stall)
{
	uint64_t seed = 42;

	rig_init(r, 2, role, 2, stall);
	rig_add_grad(r, 1, 5, 4, &seed);	/* X */
	rig_add_grad(r, 2, 0, 4, &seed);	/* Y */
	ready_at(r, 0, 0, 0);
	ready_at(r, 0, 1, 100 * US);
	ready_at(r, 1, 1, 0);
	ready_at(r, 1, 0, 100 * US);
}

static void test_crossed_credits_deadlock_without_stall_rule(void **state)
{
	static const enum cl_role roles[] = { CL_DEDICATED, CL_RING };
	struct rig r;

	(void)state;
	for (unsigned int i = 0; i < 2; i++) {
		crossed_credits(&r, roles[i], 0);
		/* the exact hang: a second of virtual time, not one gradient
		 * back, each credit full of the other host's missing pieces */
		assert_int_equal(rig_run(&r, 1000 * MS), -1);
		for (uint16_t h = 0; h < 2; h++) {
			assert_int_equal(r.h[h].grads_done, 0);
			assert_int_equal(sched_stats(r.h[h].s)->bytes_in_flight,
					 2 * PART_BYTES);
		}
		assert_int_equal(r.h[0].bytes_done[0] + r.h[0].bytes_done[1],
				 0);
		rig_fini(&r);
	}
}

static void test_crossed_credits_stall_rule(void **state)
{
	static const enum cl_role roles[] = { CL_DEDICATED, CL_RING };
	struct rig r;

	(void)state;
	for (unsigned int i = 0; i < 2; i++) {
		crossed_credits(&r, roles[i], 2 * MS);
		assert_int_equal(rig_run(&r, 1000 * MS), 0);
		expect_sums(&r);
		assert_true(rig_stall_releases(&r) >= 2);
		rig_fini(&r);
	}
}

/*
 * Random readiness orders: every host gets the same gradients (random
 * priorities and sizes) in its own random order with random gaps, under
 * a small credit; every algorithm must finish with exact sums.
 */
static void test_random_ready_orders(void **state)
{
	static const enum cl_role roles[] = {
		CL_DEDICATED, CL_COLOCATED, CL_RING,
	};
	struct rig r;

	(void)state;
	for (uint64_t seed0 = 1; seed0 <= 12; seed0++) {
		uint64_t seed = seed0 * 7919;
		enum cl_role role = roles[seed0 % 3];
		uint16_t n = (uint16_t)(2 + fab_rand(&seed) % 3);
		uint32_t n_grads = (uint32_t)(3 + fab_rand(&seed) % 4);

		rig_init(&r, n, role, 1 + fab_rand(&seed) % 3, 2 * MS);
		for (uint32_t gi = 0; gi < n_grads; gi++)
			rig_add_grad(&r, 100 + gi, (uint32_t)(fab_rand(&seed) % 8),
				     (uint32_t)(1 + fab_rand(&seed) % 5), &seed);
		for (uint16_t h = 0; h < n; h++) {
			uint32_t order[MAX_GRADS];
			uint64_t t = 0;

			for (uint32_t gi = 0; gi < n_grads; gi++)
				order[gi] = gi;
			for (uint32_t gi = n_grads - 1; gi > 0; gi--) {
				uint32_t j = (uint32_t)(fab_rand(&seed) %
							(gi + 1));
				uint32_t tmp = order[gi];

				order[gi] = order[j];
				order[j] = tmp;
			}
			for (uint32_t gi = 0; gi < n_grads; gi++) {
				ready_at(&r, h, order[gi], t);
				t += fab_rand(&seed) % (300 * US);
			}
		}
		if (rig_run(&r, 2000 * MS))
			fail_msg("seed %llu (%u hosts, role %d) did not finish",
				 (unsigned long long)seed0, n, role);
		expect_sums(&r);
		rig_fini(&r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crossed_credits_deadlock_without_stall_rule),
		cmocka_unit_test(test_crossed_credits_stall_rule),
		cmocka_unit_test(test_random_ready_orders),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
