// SPDX-License-Identifier: BSD-3-Clause
/*
 * worker.c - the worker's common machinery: tensors in priority order, the
 * poll loop (timers, then fresh chunks, then refused ones) and frame
 * dispatch.  What differs between aggregation and the ring lives behind
 * struct worker_algo (worker_agg.c, ring.c), chosen once per tensor.
 */
#include "dataplane/engine/worker_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct worker_algo *const algos[] = {
	[TLY_ALGO_AGG] = &worker_agg_algo,
	[TLY_ALGO_RING] = &worker_ring_algo,
};

struct tly_worker *tly_worker_create(const struct tly_worker_cfg *cfg)
{
	struct tly_worker *w;

	if (!cfg->n_workers || cfg->n_workers > TLY_MAX_WORKERS ||
	    cfg->rank >= cfg->n_workers || cfg->k < TLY_K_MIN ||
	    cfg->k > TLY_K_MAX || !cfg->n_slots ||
	    cfg->n_slots > TLY_MAX_SLOTS ||
	    !cfg->window || !cfg->max_tensors || !cfg->ops.alloc ||
	    !cfg->ops.send || (cfg->n_aggs && !cfg->agg_nodes))
		return NULL;
	if (cfg->profile > TLY_PROFILE_SWITCH ||
	    (cfg->profile == TLY_PROFILE_SWITCH &&
	     (cfg->n_workers > TLY_SWITCH_MAX_WORKERS ||
	      !tly_switch_k_ok(cfg->k))))
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->cfg = *cfg;
	if (!w->cfg.confirm_batch)
		w->cfg.confirm_batch = 256;
	if (!w->cfg.rto_max_ns)
		w->cfg.rto_max_ns = 64 * cfg->rto_ns;
	if (!w->cfg.release_batch ||
	    w->cfg.release_batch > TLY_SWITCH_RECEIPTS)
		w->cfg.release_batch = TLY_SWITCH_RECEIPTS;
	if (!w->cfg.held_max) {
		/* its share of the pool, at most 4 windows:
		 * docs/protocol.md, "What a worker holds" */
		w->cfg.held_max = cfg->n_slots / cfg->n_workers;
		if (w->cfg.held_max / 4 > cfg->window)
			w->cfg.held_max = 4 * cfg->window;
	}
	if (w->cfg.held_max < cfg->window)
		w->cfg.held_max = cfg->window;
	if (!w->cfg.release_max) {
		w->cfg.release_max = 2 * (w->cfg.held_max + cfg->window);
		if (w->cfg.release_max < 256)
			w->cfg.release_max = 256;
	}
	if (!w->cfg.acked_probes)
		w->cfg.acked_probes = 4;
	if (cfg->profile != TLY_PROFILE_SWITCH || !w->cfg.switch_busy_ns)
		w->cfg.switch_busy_ns = cfg->busy_ns;
	if (!w->cfg.keep_bytes)
		w->cfg.keep_bytes = TLY_WORKER_KEEP_BYTES;
	/* an ACK asked at least twice a window, so that a window is never
	 * all credits waiting for RESULTs (worker_ack.c) */
	if (w->cfg.ack_every > cfg->window / 2)
		w->cfg.ack_every = cfg->window / 2;
	w->lim = (struct tly_wire_limits){
		.job = cfg->job, .cookie = cfg->cookie, .k = cfg->k,
		.n_ranks = cfg->n_workers,
		.n_slots = cfg->n_slots,
		.n_hops = (uint16_t)(2 * (cfg->n_workers - 1)),
		.profile = cfg->profile,
		.rank_all = cfg->result_group,
	};
	w->tensors = calloc(cfg->max_tensors, sizeof(*w->tensors));
	w->order = calloc(cfg->max_tensors, sizeof(*w->order));
	w->cb = calloc(cfg->n_aggs ? cfg->n_aggs : 1, sizeof(*w->cb));
	w->aggs = calloc(cfg->n_aggs ? cfg->n_aggs : 1, sizeof(*w->aggs));
	if (!w->tensors || !w->order || !w->cb || !w->aggs)
		goto fail;
	if (cfg->n_aggs)
		memcpy(w->aggs, cfg->agg_nodes, cfg->n_aggs * sizeof(*w->aggs));
	w->cfg.agg_nodes = w->aggs;
	if (credit_init(w) || ack_init(w) || release_init(w))
		goto fail;
	return w;
fail:
	tly_worker_destroy(w);
	return NULL;
}

/* forget @t but for its slot's arrays (worker_mem.c) */
static void tensor_clear(struct wtensor *t)
{
	struct wbuf mem[WBUF_KINDS];

	memcpy(mem, t->mem, sizeof(mem));
	memset(t, 0, sizeof(*t));
	memcpy(t->mem, mem, sizeof(mem));
}

void tly_worker_destroy(struct tly_worker *w)
{
	uint32_t i;

	if (!w)
		return;
	if (w->tensors)
		for (i = 0; i < w->cfg.max_tensors; i++)
			tensor_bufs_free(w, &w->tensors[i]);
	ack_fini(w);
	credit_fini(w);
	release_fini(w);
	free(w->tensors);
	free(w->order);
	free(w->cb);
	free(w->aggs);
	free(w);
}

uint32_t tly_worker_inflight(const struct tly_worker *w)
{
	return w->inflight;
}

uint32_t tly_worker_active(const struct tly_worker *w)
{
	return w->n_active;
}

const struct tly_counters *tly_worker_counters(const struct tly_worker *w)
{
	return &w->c;
}

uint32_t tly_worker_cwnd(const struct tly_worker *w, uint16_t node)
{
	if (w->cfg.cc_off || node >= w->n_dests)
		return w->cfg.window;
	return tly_cc_window(&w->dests[node].cc, &w->ccp);
}

int tly_worker_path(const struct tly_worker *w, uint16_t node,
		    struct tly_worker_path *out)
{
	const struct tly_cc *cc;

	if (node >= w->n_dests)
		return -ENOENT;
	cc = &w->dests[node].cc;
	*out = (struct tly_worker_path){
		.cwnd = tly_worker_cwnd(w, node),
		.srtt_ns = cc->srtt, .base_rtt_ns = tly_cc_base_rtt(cc),
		.delay_decreases = cc->n_delay_dec,
		.loss_decreases = cc->n_loss_dec,
	};
	if (out->base_rtt_ns == UINT64_MAX)
		out->base_rtt_ns = 0;
	return 0;
}

/* insert into the send order: by priority, then submission order */
static void order_insert(struct tly_worker *w, struct wtensor *t)
{
	uint32_t i = w->n_active;

	while (i > 0 && w->order[i - 1]->d.prio > t->d.prio) {
		w->order[i] = w->order[i - 1];
		i--;
	}
	w->order[i] = t;
	w->n_active++;
}

static void worker_finish(struct tly_worker *w, struct wtensor *t)
{
	struct tly_tensor_desc d = t->d;
	uint32_t i, j;

	for (i = 0, j = 0; i < w->n_active; i++)
		if (w->order[i] != t)
			w->order[j++] = w->order[i];
	w->n_active = j;
	if (t->algo->retire)
		t->algo->retire(w, t);
	tensor_bufs_trim(w, t);
	tensor_clear(t);
	w->c.completions++;
	if (w->cfg.done)
		w->cfg.done(w->cfg.done_ctx, &d);
}

int tly_worker_submit(struct tly_worker *w, const struct tly_tensor_desc *d,
		      uint64_t now)
{
	const struct tly_codec_ops *codec = tly_codec(d->codec);
	struct wtensor *t = NULL;
	uint32_t i;
	int err;

	(void)now;
	if (!codec || !d->count || !d->src || !d->dst ||
	    (unsigned int)d->dtype > TLY_DT_I32 ||
	    (unsigned int)d->algo > TLY_ALGO_RING || worker_find(w, d->id))
		return -EINVAL;
	/* lossy lanes: float tensors through aggregators only
	 * (docs/compression.md, section 7) */
	if (d->codec != TLY_CODEC_NONE &&
	    (tly_dtype(d->dtype)->exact || d->algo != TLY_ALGO_AGG))
		return -EINVAL;
	/* results by group: the XDP aggregator's lanes are int32 only
	 * (docs/xdp-aggregator.md), it would drop narrow ones; tallyd's
	 * aggregator to a group is not tested with them */
	if (d->codec != TLY_CODEC_NONE && w->cfg.result_group)
		return -EINVAL;
	if (d->count > (size_t)TLY_MAX_CHUNKS * codec->chunk_elems(w->cfg.k))
		return -EINVAL;
	/* sign_ef's count lanes and vote, block_topk's partial blocks and
	 * PULL are the software aggregator's (docs/compression.md
	 * section 7) */
	if ((codec->lanes == TLY_F_SIGN || codec->topk_permille) &&
	    w->cfg.profile == TLY_PROFILE_SWITCH)
		return -EINVAL;
	if (w->cfg.profile == TLY_PROFILE_SWITCH && d->algo != TLY_ALGO_AGG)
		return -EINVAL;		/* the switch profile aggregates */
	for (i = 0; i < w->cfg.max_tensors && !t; i++)
		if (!w->tensors[i].active)
			t = &w->tensors[i];
	if (!t)
		return -EBUSY;
	tensor_clear(t);
	t->d = *d;
	t->algo = algos[d->algo];
	t->seq = w->seq++;
	t->next_deadline = NEVER;
	t->defer_deadline = NEVER;
	t->codec = codec;
	t->ck = (uint32_t)codec->chunk_elems(w->cfg.k);
	t->n_chunks = (uint32_t)((d->count + t->ck - 1) / t->ck);
	err = t->algo->setup(w, t);
	if (err) {
		tensor_bufs_trim(w, t);
		tensor_clear(t);
		return err;
	}
	t->active = 1;
	order_insert(w, t);
	if (tensor_complete(t))
		worker_finish(w, t);	/* a ring of one */
	return 0;
}

/* first transmission: takes a credit */
static void chunk_launch(struct tly_worker *w, struct wtensor *t,
			 uint32_t idx, uint64_t now)
{
	struct wchunk *ch = &t->chunks[idx];

	credit_take(w, t, idx, now);
	worker_arm(t, ch, now + credit_rto(w, t, idx, ch->retries));
	t->algo->send(w, t, idx, 0);
}

/* retransmit on timeout; no credit taken (the chunk holds one or none) */
static void timer_one(struct tly_worker *w, struct wtensor *t, uint32_t i,
		      uint64_t now)
{
	struct wchunk *ch = &t->chunks[i];

	switch (ch->state) {
	case C_INFLIGHT:
		if (ch->deadline <= now) {
			credit_timeout(w, t, i, now);
			ch->retries++;
			w->c.retx++;
			t->algo->send(w, t, i, TLY_F_RETX | TLY_F_ACK_REQ);
			ch->deadline = now + credit_rto(w, t, i, ch->retries);
		}
		break;
	case C_ACKED:
		if (ch->deadline <= now &&
		    !credit_probe(w, t, i, now, &ch->deadline))
			break;		/* the round's probes are spent */
		if (ch->deadline <= now) {
			w->c.retx++;
			t->algo->send(w, t, i, TLY_F_RETX | TLY_F_ACK_REQ);
			ch->deadline = now + w->cfg.acked_ns;
		}
		break;
	default:
		return;
	}
	if (ch->deadline < t->next_deadline)
		t->next_deadline = ch->deadline;
}

static void tensor_timers(struct tly_worker *w, struct wtensor *t,
			  uint64_t now)
{
	uint32_t i, p0, p1;

	t->next_deadline = NEVER;
	for (i = t->n_chunks; i < t->n_chunks + t->n_groups; i++)
		timer_one(w, t, i, now);
	t->algo->span(t, &p0, &p1);
	for (; p0 < p1; p0++)
		timer_one(w, t, t->algo->at(t, p0), now);
}

/* a refused chunk whose back-off is over, if the window has room */
static void deferred_one(struct tly_worker *w, struct wtensor *t,
			 uint32_t i, uint64_t now)
{
	struct wchunk *ch = &t->chunks[i];

	if (ch->state != C_DEFER)
		return;
	if (ch->deadline <= now && credit_room(w, t->algo->dest(w, t, i)))
		chunk_launch(w, t, i, now);
	else if (ch->deadline < t->defer_deadline)
		t->defer_deadline = ch->deadline;
}

/*
 * Refused chunks are scanned from where the last scan launched one, round
 * the span.  A partial sum completes only when every worker offers its
 * chunk again: with more refused chunks than the window launches per
 * back-off, a scan from the oldest offered the same front chunks over and
 * over and never the late ones the partials filling the pool waited for
 * (both profiles stalled; docs/protocol.md section 4, rule 2).  In
 * rotation every refused chunk comes round within (refused chunks /
 * window) round trips.
 */
static void tensor_deferred(struct tly_worker *w, struct wtensor *t,
			    uint64_t now)
{
	uint32_t i, p0, p1, mid, p;

	t->defer_deadline = NEVER;
	for (i = t->n_chunks; i < t->n_chunks + t->n_groups; i++)
		deferred_one(w, t, i, now);
	t->algo->span(t, &p0, &p1);
	mid = t->dnext > p0 && t->dnext < p1 ? t->dnext : p0;
	for (i = 0; i < p1 - p0; i++) {
		uint32_t c;

		p = mid + i < p1 ? mid + i : mid + i - (p1 - p0);
		c = t->algo->at(t, p);
		if (t->chunks[c].state != C_DEFER)
			continue;
		deferred_one(w, t, c, now);
		if (t->chunks[c].state != C_DEFER)
			t->dnext = p + 1;	/* launched */
	}
}

/* fresh chunks of @t, in its order, while their destinations have room */
static void tensor_fresh(struct tly_worker *w, struct wtensor *t,
			 uint64_t now)
{
	uint32_t idx;

	while (w->inflight < w->cfg.window && t->algo->next(w, t, &idx)) {
		uint16_t dst = t->algo->dest(w, t, idx);

		if (!credit_room(w, dst) || !credit_hold_room(w, dst, now)) {
			t->algo->unget(t, idx);
			return;
		}
		chunk_launch(w, t, idx, now);
	}
}

/*
 * Timers first, then chunks never sent, highest priority first; refused
 * chunks only get credit no fresh chunk wants.  That order is what makes
 * every worker offer every chunk at least once, so every started slot
 * eventually gets all its contributions (docs/protocol.md, deadlock
 * freedom): retried refusals cannot starve the chunks others wait for.
 */
void tly_worker_poll(struct tly_worker *w, uint64_t now)
{
	uint32_t i, a;

	for (a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
		if (algos[a]->flush)
			algos[a]->flush(w, now);
	for (i = 0; i < w->n_active; i++)
		if (w->order[i]->next_deadline <= now)
			tensor_timers(w, w->order[i], now);
	for (i = 0; i < w->n_active && w->inflight < w->cfg.window; i++)
		tensor_fresh(w, w->order[i], now);
	/* refused chunks: each tensor in turn first, for the reason
	 * tensor_deferred() gives */
	a = w->n_active ? w->defer_turn++ % w->n_active : 0;
	for (i = 0; i < w->n_active && w->inflight < w->cfg.window; i++) {
		struct wtensor *t = w->order[(a + i) % w->n_active];

		if (t->defer_deadline <= now)
			tensor_deferred(w, t, now);
	}
	for (a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
		if (algos[a]->flush_late)
			algos[a]->flush_late(w, now);
}

void tly_worker_rx(struct tly_worker *w, const uint8_t *frame, size_t len,
		   uint64_t now)
{
	tly_worker_rx_at(w, frame, len, now, 0);
}

static void worker_rx(struct tly_worker *w, const uint8_t *frame, size_t len,
		      uint64_t now)
{
	const struct worker_algo *algo;
	const uint8_t *pkt;
	struct tly_hdr h;
	struct wtensor *t;
	uint8_t dscp;

	if (tly_frame_rx(&w->cfg.net, &w->lim, frame, len, &h, &pkt, &dscp,
			 &w->c) != TLY_OK)
		return;
	switch (h.type) {
	case TLY_T_RESULT:
	case TLY_T_ACK:
	case TLY_T_BUSY:
		algo = &worker_agg_algo;
		break;
	case TLY_T_RING:
	case TLY_T_RING_ACK:
		algo = &worker_ring_algo;
		break;
	default:
		w->c.drops[TLY_E_ROLE]++;
		return;
	}
	t = algo->rx(w, &h, pkt, now);
	if (t)
		worker_finish(w, t);
}

void tly_worker_rx_at(struct tly_worker *w, const uint8_t *frame,
		      size_t len, uint64_t now, uint64_t arrival)
{
	w->rx_arrival = arrival;
	worker_rx(w, frame, len, now);
	w->rx_arrival = 0;
}
