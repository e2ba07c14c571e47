// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_retx_timer.c - the worker's retransmission timer, deterministically:
 * two workers and a dedicated aggregator over the in-memory fabric, and a
 * tap in front of worker 0 that drops the first transmission (or the first
 * few) of one chosen DATA, exponent-round or RING packet, and nothing
 * else.  Nothing but the timer can bring that packet back, so the worker
 * must send it again with RETX once rto has passed (doubling per try): not
 * before, and within a few polling ticks after; and the tensor must
 * complete with the exact sum.  A timer that never fires, fires late or
 * does not back off fails here within milliseconds of simulated time
 * instead of stalling a cluster test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/engine/agg.h"
#include "dataplane/engine/worker.h"
#include "fabric.h"

#define K 64
#define N_WORKERS 2
#define AGG_NODE N_WORKERS
#define N_NODES (N_WORKERS + 1)
#define CHUNKS 4
#define COUNT (CHUNKS * K)
#define TICK_NS 1000ull
#define RTO_NS 20000ull
#define MAX_NS (200 * RTO_NS)
#define MAX_SEEN 16

/* which of worker 0's packets the tap drops, and how many times */
struct victim {
	uint8_t type;		/* TLY_T_DATA or TLY_T_RING */
	uint8_t exp;		/* DATA: the exponent round's packet */
	uint16_t chunk;		/* DATA: chunk (group for exp) */
	unsigned int drops;	/* its first transmissions lost (0: 1) */
};

struct tap {
	struct tly_tx_ops inner;
	uint16_t node;
	struct scene *sc;
};

struct scene {
	struct fab *fab;
	struct tly_worker *w[N_WORKERS];
	struct tly_agg *agg;
	struct tap taps[N_NODES];
	uint32_t done[N_WORKERS];
	struct victim v;
	int matched;		/* RING: the chunk the first RING carried */
	uint16_t ring_chunk;
	unsigned int n_seen;	/* transmissions of the victim packet */
	uint64_t seen_at[MAX_SEEN];
	uint8_t seen_flags[MAX_SEEN];
};

static const struct tly_wire_limits lim = {
	.job = 0x7a11, .k = K, .n_ranks = N_WORKERS, .n_slots = 64,
	.n_hops = 2 * (N_WORKERS - 1),
};

static uint8_t *tap_alloc(void *ctx, size_t len)
{
	struct tap *t = ctx;

	return t->inner.alloc(t->inner.ctx, len);
}

static int is_victim(struct scene *sc, const struct tly_hdr *h)
{
	if (h->type != sc->v.type)
		return 0;
	if (h->type == TLY_T_RING) {	/* whichever hop goes out first */
		if (!sc->matched) {
			sc->matched = 1;
			sc->ring_chunk = h->chunk;
		}
		return h->chunk == sc->ring_chunk && h->slot == 0;
	}
	return h->chunk == sc->v.chunk &&
	       !!(h->flags & TLY_F_EXP) == sc->v.exp;
}

static void tap_send(void *ctx, uint16_t dst, uint8_t *frame, size_t len)
{
	struct tap *t = ctx;
	struct scene *sc = t->sc;
	struct tly_hdr h;

	assert_int_equal(tly_hdr_parse(frame, len, &lim, &h), TLY_OK);
	if (t->node == 0 && is_victim(sc, &h)) {
		assert_true(sc->n_seen < MAX_SEEN);
		sc->seen_at[sc->n_seen] = fab_now(sc->fab);
		sc->seen_flags[sc->n_seen] = h.flags;
		if (sc->n_seen++ < sc->v.drops) {
			free(frame);	/* fabric buffers are malloc'd */
			return;
		}
	}
	t->inner.send(t->inner.ctx, dst, frame, len);
}

static void node_rx(void *ctx, const uint8_t *frame, size_t len,
		    uint64_t now)
{
	struct tap *t = ctx;
	struct scene *sc = t->sc;

	if (t->node == AGG_NODE)
		tly_agg_rx(sc->agg, frame, len, now);
	else
		tly_worker_rx(sc->w[t->node], frame, len, now);
}

static void done_cb(void *ctx, const struct tly_tensor_desc *d)
{
	uint32_t *n = ctx;

	(void)d;
	(*n)++;
}

static struct scene *scene_create(const struct victim *v)
{
	static const uint16_t aggs[1] = { AGG_NODE };
	struct fab_cfg fc = { .seed = 1, .delay_ns = 2000 };
	struct scene *sc = calloc(1, sizeof(*sc));
	struct tly_net net = { .n_nodes = N_NODES, .port = 9191 };
	uint16_t i;

	assert_non_null(sc);
	sc->v = *v;
	if (!sc->v.drops)
		sc->v.drops = 1;
	sc->fab = fab_create(N_NODES, &fc);
	assert_non_null(sc->fab);
	for (i = 0; i < N_NODES; i++) {
		sc->taps[i] = (struct tap){
			.inner = fab_ops(sc->fab, i, 0, NULL),
			.node = i, .sc = sc,
		};
		fab_attach(sc->fab, i, node_rx, &sc->taps[i]);
	}
	for (i = 0; i < N_WORKERS; i++) {
		struct tly_worker_cfg wc = {
			.job = lim.job, .k = K, .n_workers = N_WORKERS,
			.rank = i, .n_slots = lim.n_slots, .n_aggs = 1,
			.agg_nodes = aggs, .window = 8, .max_tensors = 2,
			.rto_ns = RTO_NS, .rto_max_ns = 8 * RTO_NS,
			.acked_ns = 10 * RTO_NS, .busy_ns = RTO_NS / 2,
			.confirm_ns = RTO_NS / 4, .net = net,
			.ops = { .alloc = tap_alloc, .send = tap_send,
				 .ctx = &sc->taps[i] },
			.done = done_cb, .done_ctx = &sc->done[i],
		};

		sc->w[i] = tly_worker_create(&wc);
		assert_non_null(sc->w[i]);
	}
	struct tly_agg_cfg ac = {
		.job = lim.job, .k = K, .n_workers = N_WORKERS,
		.self = AGG_NODE, .n_slots = lim.n_slots, .n_fallback = 4,
		.evict_ns = 1000 * RTO_NS, .probe_ns = 50 * RTO_NS,
		.net = net,
		.ops = { .alloc = tap_alloc, .send = tap_send,
			 .ctx = &sc->taps[AGG_NODE] },
	};
	sc->agg = tly_agg_create(&ac);
	assert_non_null(sc->agg);
	return sc;
}

static void scene_destroy(struct scene *sc)
{
	uint16_t i;

	for (i = 0; i < N_WORKERS; i++)
		tly_worker_destroy(sc->w[i]);
	tly_agg_destroy(sc->agg);
	fab_destroy(sc->fab);
	free(sc);
}

/* poll everything on the virtual clock until both workers are done */
static int scene_run(struct scene *sc)
{
	uint16_t i;

	while (fab_now(sc->fab) < MAX_NS) {
		uint64_t now = fab_now(sc->fab);

		if (sc->done[0] && sc->done[1])
			return 0;
		for (i = 0; i < N_WORKERS; i++)
			tly_worker_poll(sc->w[i], now);
		tly_agg_poll(sc->agg, now);
		fab_advance(sc->fab, TICK_NS);
	}
	return -1;
}

/*
 * Every dropped transmission came back by the timer, with RETX, after
 * the timeout of its try (rto, then doubled each time): not early (no
 * answer could have come), not late (within a few polling ticks).
 */
static void check_resent(const struct scene *sc)
{
	unsigned int i;

	assert_true(sc->n_seen >= sc->v.drops + 1);
	assert_int_equal(sc->seen_flags[0] & TLY_F_RETX, 0);
	for (i = 1; i <= sc->v.drops; i++) {
		uint64_t rto = RTO_NS << (i - 1);

		assert_int_equal(sc->seen_flags[i] & TLY_F_RETX, TLY_F_RETX);
		assert_true(sc->seen_at[i] >= sc->seen_at[i - 1] + rto);
		assert_true(sc->seen_at[i] <=
			    sc->seen_at[i - 1] + rto + 4 * TICK_NS);
	}
	assert_true(tly_worker_counters(sc->w[0])->retx >= sc->v.drops);
}

static void run_i32(enum tly_algo algo, const struct victim *v)
{
	struct scene *sc = scene_create(v);
	static int32_t buf[N_WORKERS][COUNT];
	uint16_t r;
	size_t i;

	for (r = 0; r < N_WORKERS; r++) {
		struct tly_tensor_desc d = {
			.id = 0x51, .dtype = TLY_DT_I32, .algo = algo,
			.src = buf[r], .dst = buf[r], .count = COUNT,
		};

		for (i = 0; i < COUNT; i++)
			buf[r][i] = (int32_t)(i * (r + 1)) - 7;
		assert_int_equal(tly_worker_submit(sc->w[r], &d, 0), 0);
	}
	assert_int_equal(scene_run(sc), 0);
	for (r = 0; r < N_WORKERS; r++)
		for (i = 0; i < COUNT; i++)
			assert_int_equal(buf[r][i], (int32_t)(3 * i) - 14);
	check_resent(sc);
	scene_destroy(sc);
}

static void test_lost_data_resent(void **state)
{
	struct victim v = { .type = TLY_T_DATA, .chunk = 1 };

	(void)state;
	run_i32(TLY_ALGO_AGG, &v);
}

/* lost again and again: each retry waits twice as long */
static void test_lost_thrice_backs_off(void **state)
{
	struct victim v = { .type = TLY_T_DATA, .chunk = 2, .drops = 3 };

	(void)state;
	run_i32(TLY_ALGO_AGG, &v);
}

static void test_lost_ring_hop_resent(void **state)
{
	struct victim v = { .type = TLY_T_RING };

	(void)state;
	run_i32(TLY_ALGO_RING, &v);
}

/* float data waits for the exponent round: lose its packet */
static void test_lost_exponent_round_resent(void **state)
{
	struct victim v = { .type = TLY_T_DATA, .exp = 1, .chunk = 0 };
	struct scene *sc = scene_create(&v);
	static float buf[N_WORKERS][COUNT];
	uint16_t r;
	size_t i;

	(void)state;
	for (r = 0; r < N_WORKERS; r++) {
		struct tly_tensor_desc d = {
			.id = 0x52, .dtype = TLY_DT_F32, .algo = TLY_ALGO_AGG,
			.src = buf[r], .dst = buf[r], .count = COUNT,
		};

		for (i = 0; i < COUNT; i++)	/* quarter steps: exact */
			buf[r][i] = (float)((int)(i % 17) - 8) * 0.25f *
				    (float)(r + 1);
		assert_int_equal(tly_worker_submit(sc->w[r], &d, 0), 0);
	}
	assert_int_equal(scene_run(sc), 0);
	for (r = 0; r < N_WORKERS; r++)
		for (i = 0; i < COUNT; i++)
			assert_true(buf[r][i] ==
				    (float)((int)(i % 17) - 8) * 0.75f);
	check_resent(sc);
	scene_destroy(sc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_data_resent),
		cmocka_unit_test(test_lost_thrice_backs_off),
		cmocka_unit_test(test_lost_ring_hop_resent),
		cmocka_unit_test(test_lost_exponent_round_resent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
