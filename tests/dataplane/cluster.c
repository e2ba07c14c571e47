// SPDX-License-Identifier: BSD-3-Clause
/*
 * cluster.c - wiring engines to the fabric for tests and benchmarks.
 */
#include "cluster.h"

#include <stdlib.h>

#define TICK_NS 1000

static void done_cb(void *ctx, const struct tly_tensor_desc *d)
{
	struct cl_node *nd = ctx;
	struct cluster *cl = nd->cl;

	cl->done[nd->node]++;
	if (cl->cfg.on_done)
		cl->cfg.on_done(cl->cfg.on_done_ctx, nd->node, d);
}

static void node_rx(void *ctx, const uint8_t *frame, size_t len,
		    uint64_t now)
{
	struct cl_node *nd = ctx;
	struct cluster *cl = nd->cl;
	struct tly_net net = {
		.addrs = cl->addrs, .n_nodes = cl->n_nodes, .port = 9191,
	};
	int type = tly_frame_type(&net, frame, len);
	struct tly_agg *a = cl->a[nd->node];

	if (a && (type == TLY_T_DATA || type == TLY_T_CONFIRM ||
		  nd->node >= cl->cfg.n_workers))
		tly_agg_rx(a, frame, len, now);
	else if (nd->node < cl->cfg.n_workers)
		tly_worker_rx(cl->w[nd->node], frame, len, now);
}

struct cluster *cl_create(const struct cl_cfg *cfg)
{
	struct cluster *cl = calloc(1, sizeof(*cl));
	uint16_t n = cfg->n_workers, n_aggs = 0, i;
	uint16_t agg_nodes[TLY_MAX_NODES];
	uint64_t rto = cfg->rto_ns ? cfg->rto_ns : 20000;

	if (!cl)
		return NULL;
	cl->cfg = *cfg;
	if (cfg->role == CL_DEDICATED) {
		n_aggs = cfg->n_dedicated ? cfg->n_dedicated : 1;
		for (i = 0; i < n_aggs; i++)
			agg_nodes[i] = n + i;
	} else if (cfg->role == CL_COLOCATED) {
		n_aggs = n;
		for (i = 0; i < n; i++)
			agg_nodes[i] = i;
	}
	cl->n_nodes = n + (cfg->role == CL_DEDICATED ? n_aggs : 0);
	cl->evict_ns = 250 * rto;
	cl->next_sweep = cl->evict_ns;
	cl->fab = fab_create(cl->n_nodes, &cfg->fab);
	cl->a = calloc(cl->n_nodes, sizeof(*cl->a));
	cl->nodes = calloc(cl->n_nodes, sizeof(*cl->nodes));
	if (!cl->fab || !cl->a || !cl->nodes)
		goto fail;
	if (cfg->l2l4) {
		cl->addrs = calloc(cl->n_nodes, sizeof(*cl->addrs));
		if (!cl->addrs)
			goto fail;
		for (i = 0; i < cl->n_nodes; i++) {
			struct tly_addr *ad = &cl->addrs[i];

			ad->mac[0] = 0x02;
			ad->mac[5] = (uint8_t)i;
			ad->mac[4] = (uint8_t)(i >> 8);
			ad->ip = 0x0a000001u + i;
			ad->port = 9191;
		}
	}
	struct tly_net net = {
		.addrs = cl->addrs, .n_nodes = cl->n_nodes, .port = 9191,
	};
	for (i = 0; i < cl->n_nodes; i++) {
		cl->nodes[i] = (struct cl_node){ .cl = cl, .node = i };
		fab_attach(cl->fab, i, node_rx, &cl->nodes[i]);
		if (i < n) {
			struct tly_worker_cfg wc = {
				.job = 0x7a11, .cookie = 0xc0ffee11u,
				.k = cfg->k, .n_workers = n,
				.rank = i, .n_slots = cfg->n_slots,
				.n_aggs = n_aggs, .agg_nodes = agg_nodes,
				.window = cfg->window,
				.max_tensors = cfg->max_tensors ?
					       cfg->max_tensors : 8,
				.rto_ns = rto, .rto_max_ns = 10 * rto,
				.acked_ns = 5 * rto, .busy_ns = rto / 2,
				.cc_off = cfg->cc_off,
				.confirm_ns = 5000,
				.confirm_batch = cfg->confirm_batch ?
						 cfg->confirm_batch : 64,
				.chunk_rotate = cfg->chunk_rotate,
				.profile = cfg->profile,
				.release_max = cfg->release_max,
				.held_max = cfg->held_max,
				.acked_probes = cfg->acked_probes,
				.ack_every = cfg->ack_every,
				.keep_bytes = cfg->keep_bytes,
				.net = net,
				.ops = fab_ops(cl->fab, i, 0, cl->addrs),
				.done = done_cb, .done_ctx = &cl->nodes[i],
			};

			cl->w[i] = tly_worker_create(&wc);
			if (!cl->w[i])
				goto fail;
		}
		if ((cfg->role == CL_COLOCATED && i < n) ||
		    (cfg->role == CL_DEDICATED && i >= n)) {
			struct tly_agg_cfg ac = {
				.job = 0x7a11, .cookie = 0xc0ffee11u,
				.k = cfg->k, .n_workers = n,
				.self = i, .n_slots = cfg->n_slots,
				.n_fallback = cfg->n_fallback,
				.evict_ns = cl->evict_ns,
				.probe_ns = rto * 5 / 2,
				.profile = cfg->profile,
				.net = net,
				.ops = fab_ops(cl->fab, i, cfg->multicast,
					       cl->addrs),
			};

			cl->a[i] = tly_agg_create(&ac);
			if (!cl->a[i])
				goto fail;
		}
	}
	return cl;
fail:
	cl_destroy(cl);
	return NULL;
}

void cl_destroy(struct cluster *cl)
{
	uint16_t i;

	if (!cl)
		return;
	for (i = 0; i < cl->cfg.n_workers; i++)
		tly_worker_destroy(cl->w[i]);
	for (i = 0; cl->a && i < cl->n_nodes; i++)
		tly_agg_destroy(cl->a[i]);
	fab_destroy(cl->fab);
	free(cl->a);
	free(cl->nodes);
	free(cl->addrs);
	free(cl);
}

static void poll_all(struct cluster *cl)
{
	uint64_t now = fab_now(cl->fab);
	uint16_t i;

	int sweep = cl->cfg.profile == TLY_PROFILE_SWITCH &&
		    !cl->cfg.no_sweep && now >= cl->next_sweep;

	for (i = 0; i < cl->n_nodes; i++) {
		if (i < cl->cfg.n_workers)
			tly_worker_poll(cl->w[i], now);
		if (cl->a[i])
			tly_agg_poll(cl->a[i], now);
		if (cl->a[i] && sweep)
			cl->swept += tly_agg_sweep(cl->a[i], now);
	}
	if (sweep)
		cl->next_sweep = now + cl->evict_ns;
}

int cl_run(struct cluster *cl, uint32_t tensors, uint64_t max_ns)
{
	uint64_t end = fab_now(cl->fab) + max_ns;

	for (;;) {
		uint16_t i, all = 1;

		for (i = 0; i < cl->cfg.n_workers; i++)
			if (cl->done[i] < tensors)
				all = 0;
		if (all)
			return 0;
		if (fab_now(cl->fab) >= end)
			return -1;
		poll_all(cl);
		fab_advance(cl->fab, TICK_NS);
	}
}

void cl_settle(struct cluster *cl, uint64_t ns)
{
	uint64_t end = fab_now(cl->fab) + ns;

	while (fab_now(cl->fab) < end) {
		poll_all(cl);
		fab_advance(cl->fab, TICK_NS);
	}
}

uint32_t cl_slots_busy(const struct cluster *cl)
{
	uint32_t n = 0;
	uint16_t i;

	for (i = 0; i < cl->n_nodes; i++)
		if (cl->a[i])
			n += tly_agg_slots_busy(cl->a[i]);
	return n;
}

void cl_cfg_random(struct cl_cfg *c, uint64_t *rng, unsigned int n_roles,
		   uint32_t seed)
{
	c->n_workers = (uint16_t)(2 + fab_rand(rng) % 7);
	c->k = fab_rand(rng) % 2 ? 64 : 16;
	c->role = (enum cl_role)(fab_rand(rng) % n_roles);
	c->n_dedicated = (uint16_t)(1 + fab_rand(rng) % 2);
	c->n_slots = (uint32_t)(2 + fab_rand(rng) % 200);
	c->n_fallback = (uint32_t)(fab_rand(rng) % 6);
	c->window = (uint32_t)(1 + fab_rand(rng) % 16);
	c->chunk_rotate = (uint32_t)(fab_rand(rng) % 7);
	c->l2l4 = (int)(fab_rand(rng) % 2);
	c->multicast = (int)(fab_rand(rng) % 2);
	c->fab.seed = seed;
	c->fab.loss = (double)(fab_rand(rng) % 21) / 100;
	c->fab.dup = (double)(fab_rand(rng) % 11) / 100;
	c->fab.delay_ns = 500 + fab_rand(rng) % 3000;
	c->fab.reorder_ns = fab_rand(rng) % 10000;
}

int cl_codec_bytes(uint16_t n_workers, uint8_t codec, size_t count,
		   float *const *x, float *const *y, uint64_t *tx,
		   uint64_t *rx)
{
	struct cl_cfg c = { .n_workers = n_workers, .k = 64,
			    .role = CL_DEDICATED, .n_slots = 512,
			    .window = 16,
			    .fab = { .seed = 9, .delay_ns = 1000 } };
	struct cluster *cl = cl_create(&c);
	int ret = 0;

	if (!cl)
		return -1;
	for (uint16_t w = 0; w < n_workers && !ret; w++) {
		struct tly_tensor_desc d = { .id = 77, .dtype = TLY_DT_F32,
					     .algo = TLY_ALGO_AGG,
					     .codec = codec, .src = x[w],
					     .dst = y[w], .count = count };

		ret = tly_worker_submit(cl->w[w], &d, 0) ? -1 : 0;
	}
	if (!ret)
		ret = cl_run(cl, 1, 2000000000ull);
	*tx = tly_worker_counters(cl->w[0])->tx_bytes;
	*rx = tly_worker_counters(cl->w[0])->rx_bytes;
	cl_destroy(cl);
	return ret;
}

const char *cl_run_end_fault(struct cluster *cl, const struct cl_cfg *cfg)
{
	for (uint16_t w = 0; w < cfg->n_workers; w++)
		if (tly_worker_inflight(cl->w[w]) ||
		    tly_worker_active(cl->w[w]))
			return "a worker still has chunks or tensors";
	if (cfg->fab.loss * (double)fab_sent(cl->fab) >= 20 &&
	    !fab_dropped(cl->fab))
		return "the fabric's loss dropped nothing";
	cl_settle(cl, 3000000);
	if (cfg->fab.dup == 0 && cfg->fab.loss == 0 && cl_slots_busy(cl))
		return "slots still busy on a clean fabric";
	return NULL;
}
