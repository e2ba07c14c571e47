// SPDX-License-Identifier: BSD-3-Clause
/*
 * worker.c - tensors, the window, timers, and the aggregation algorithm.
 */
#include "dataplane/engine/worker_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/engine/quant.h"

#define NEVER UINT64_MAX

struct tly_worker *tly_worker_create(const struct tly_worker_cfg *cfg)
{
	struct tly_worker *w;

	if (!cfg->n_workers || cfg->n_workers > TLY_MAX_WORKERS ||
	    cfg->rank >= cfg->n_workers || cfg->k < TLY_K_MIN ||
	    cfg->k > TLY_K_MAX || !cfg->n_slots || cfg->n_slots > 0x10000 ||
	    !cfg->window || !cfg->max_tensors || !cfg->ops.alloc ||
	    !cfg->ops.send || (cfg->n_aggs && !cfg->agg_nodes))
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->cfg = *cfg;
	if (!w->cfg.confirm_batch)
		w->cfg.confirm_batch = 256;
	if (!w->cfg.rto_max_ns)
		w->cfg.rto_max_ns = 64 * cfg->rto_ns;
	w->lim = (struct tly_wire_limits){
		.job = cfg->job, .cookie = cfg->cookie, .k = cfg->k,
		.n_ranks = cfg->n_workers,
		.n_slots = cfg->n_slots,
		.n_hops = (uint16_t)(2 * (cfg->n_workers - 1)),
	};
	w->tensors = calloc(cfg->max_tensors, sizeof(*w->tensors));
	w->order = calloc(cfg->max_tensors, sizeof(*w->order));
	w->cb = calloc(cfg->n_aggs ? cfg->n_aggs : 1, sizeof(*w->cb));
	w->aggs = calloc(cfg->n_aggs ? cfg->n_aggs : 1, sizeof(*w->aggs));
	if (!w->tensors || !w->order || !w->cb || !w->aggs) {
		tly_worker_destroy(w);
		return NULL;
	}
	if (cfg->n_aggs)
		memcpy(w->aggs, cfg->agg_nodes, cfg->n_aggs * sizeof(*w->aggs));
	w->cfg.agg_nodes = w->aggs;
	return w;
}

static void tensor_free(struct wtensor *t)
{
	free(t->chunks);
	free(t->exp);
	free(t->acc);
	free(t->queue);
	memset(t, 0, sizeof(*t));
}

void tly_worker_destroy(struct tly_worker *w)
{
	uint32_t i;

	if (!w)
		return;
	if (w->tensors)
		for (i = 0; i < w->cfg.max_tensors; i++)
			tensor_free(&w->tensors[i]);
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

struct wtensor *worker_find(struct tly_worker *w, uint32_t id)
{
	uint32_t i;

	for (i = 0; i < w->n_active; i++)
		if (w->order[i]->d.id == id)
			return w->order[i];
	return NULL;
}

void worker_arm(struct wtensor *t, struct wchunk *ch, uint64_t deadline)
{
	ch->deadline = deadline;
	if (ch->state == C_DEFER) {
		if (deadline < t->defer_deadline)
			t->defer_deadline = deadline;
	} else if (deadline < t->next_deadline) {
		t->next_deadline = deadline;
	}
}

static uint64_t rto_after(const struct tly_worker *w, uint8_t retries)
{
	uint64_t rto = w->cfg.rto_ns << (retries < 16 ? retries : 16);

	return rto < w->cfg.rto_max_ns ? rto : w->cfg.rto_max_ns;
}

/* local block exponents, one per chunk, for the exponent round */
static void agg_local_exps(struct tly_worker *w, struct wtensor *t)
{
	uint16_t k = w->cfg.k;
	uint32_t c;

	for (c = 0; c < t->n_chunks; c++) {
		size_t n = chunk_elems(t, c, k), off = (size_t)c * k;

		switch (t->d.dtype) {
		case TLY_DT_F32:
			t->exp[c] = tly_block_exp_f32(
				(const float *)t->d.src + off, n);
			break;
		case TLY_DT_F16:
			t->exp[c] = tly_block_exp_f16(
				(const uint16_t *)t->d.src + off, n);
			break;
		default:
			t->exp[c] = tly_block_exp_bf16(
				(const uint16_t *)t->d.src + off, n);
			break;
		}
	}
}

static int agg_setup(struct tly_worker *w, struct wtensor *t)
{
	uint32_t c;

	if (!w->cfg.n_aggs)
		return -EINVAL;
	if (t->d.dtype != TLY_DT_I32) {
		t->n_groups = (t->n_chunks + w->cfg.k - 1) / w->cfg.k;
		t->exp = malloc(t->n_chunks * sizeof(*t->exp));
		if (!t->exp)
			return -ENOMEM;
		agg_local_exps(w, t);
	}
	t->chunks = calloc(t->n_chunks + t->n_groups, sizeof(*t->chunks));
	if (!t->chunks)
		return -ENOMEM;
	for (c = 0; c < t->n_chunks + t->n_groups; c++)
		t->chunks[c].state = c < t->n_chunks && t->n_groups ?
				     C_WAIT : C_READY;
	t->start = (uint32_t)(((uint64_t)w->cfg.rank * w->cfg.chunk_rotate) %
			      t->n_chunks);
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

int tly_worker_submit(struct tly_worker *w, const struct tly_tensor_desc *d,
		      uint64_t now)
{
	struct wtensor *t = NULL;
	uint32_t i;
	int err;

	(void)now;
	if (!d->count || !d->src || !d->dst ||
	    d->count > (size_t)0x10000 * w->cfg.k ||
	    (unsigned int)d->dtype > TLY_DT_I32 ||
	    (unsigned int)d->algo > TLY_ALGO_RING || worker_find(w, d->id))
		return -EINVAL;
	for (i = 0; i < w->cfg.max_tensors && !t; i++)
		if (!w->tensors[i].active)
			t = &w->tensors[i];
	if (!t)
		return -EBUSY;
	memset(t, 0, sizeof(*t));
	t->d = *d;
	t->seq = w->seq++;
	t->next_deadline = NEVER;
	t->defer_deadline = NEVER;
	t->n_chunks = (uint32_t)((d->count + w->cfg.k - 1) / w->cfg.k);
	err = d->algo == TLY_ALGO_AGG ? agg_setup(w, t) : ring_setup(w, t);
	if (err) {
		tensor_free(t);
		return err;
	}
	t->active = 1;
	order_insert(w, t);
	if (d->algo == TLY_ALGO_RING && t->done == t->n_chunks &&
	    !t->ring_unacked)
		worker_finish(w, t);	/* a ring of one */
	return 0;
}

void worker_finish(struct tly_worker *w, struct wtensor *t)
{
	struct tly_tensor_desc d = t->d;
	uint32_t i, j;

	for (i = 0, j = 0; i < w->n_active; i++)
		if (w->order[i] != t)
			w->order[j++] = w->order[i];
	w->n_active = j;
	if (d.algo == TLY_ALGO_RING) {
		w->retired[w->retired_pos] = d.id;
		w->retired_pos = (w->retired_pos + 1) % RETIRED;
		if (w->retired_n < RETIRED)
			w->retired_n++;
	}
	tensor_free(t);
	w->c.completions++;
	if (w->cfg.done)
		w->cfg.done(w->cfg.done_ctx, &d);
}

static uint32_t agg_index(const struct tly_worker *w, uint32_t tensor,
			  uint16_t chunk, uint8_t exp)
{
	return tly_shard_of(tensor, chunk, exp, w->cfg.n_aggs);
}

/* ---- receipts (CONFIRM) ---- */

static void confirm_flush(struct tly_worker *w, uint32_t a)
{
	struct confirm_batch *b = &w->cb[a];
	struct tly_hdr h = {
		.type = TLY_T_CONFIRM, .job = w->cfg.job,
		.cookie = w->cfg.cookie, .rank = w->cfg.rank,
		.aux = (uint8_t)b->n_ranges,
	};
	struct tly_out o;
	uint8_t *p;
	uint32_t i;

	if (!b->n_ranges)
		return;
	if (tly_out_begin(&o, &w->cfg.ops, &w->cfg.net, &w->c, w->cfg.rank,
			  w->aggs[a], 0, TLY_HDR_LEN + 8 * b->n_ranges))
		return;		/* keep the batch, try again next poll */
	tly_hdr_write(o.pkt, &h);
	p = o.pkt + TLY_HDR_LEN;
	for (i = 0; i < b->n_ranges; i++, p += 8) {
		uint32_t t = b->r[i].tensor;

		p[0] = (uint8_t)(t >> 24);
		p[1] = (uint8_t)(t >> 16);
		p[2] = (uint8_t)(t >> 8);
		p[3] = (uint8_t)t;
		p[4] = (uint8_t)(b->r[i].first >> 8);
		p[5] = (uint8_t)b->r[i].first;
		p[6] = (uint8_t)(b->r[i].exp << 7);
		p[7] = (uint8_t)(b->r[i].count - 1);
	}
	tly_out_send(&o, &w->cfg.ops, &w->cfg.net, &w->c);
	w->c.confirms += b->n_chunks;
	b->n_ranges = 0;
	b->n_chunks = 0;
}

static void confirm_add(struct tly_worker *w, uint32_t tensor, uint16_t chunk,
			uint8_t exp, uint64_t now)
{
	uint32_t a = agg_index(w, tensor, chunk, exp);
	struct confirm_batch *b = &w->cb[a];

	if (b->n_ranges) {
		__typeof__(b->r[0]) *r = &b->r[b->n_ranges - 1];
		uint32_t end = (uint32_t)r->first + r->count, c;

		/* extend over chunks other aggregators own: an aggregator
		 * applies a range to its own chunks only */
		if (r->tensor == tensor && r->exp == exp && chunk >= end &&
		    chunk - r->first < TLY_CONFIRM_RANGE_MAX) {
			for (c = end; c < chunk; c++)
				if (agg_index(w, tensor, (uint16_t)c, exp) == a)
					break;
			if (c == chunk) {
				r->count = (uint16_t)(chunk - r->first + 1);
				goto added;
			}
		}
	}
	if (b->n_ranges == CONFIRM_RANGES)
		confirm_flush(w, a);
	if (b->n_ranges == CONFIRM_RANGES)
		return;		/* no buffer: the aggregator will probe */
	if (!b->n_ranges)
		b->oldest = now;
	b->r[b->n_ranges].tensor = tensor;
	b->r[b->n_ranges].first = chunk;
	b->r[b->n_ranges].count = 1;
	b->r[b->n_ranges].exp = exp;
	b->n_ranges++;
added:
	b->n_chunks++;
	if (b->n_chunks >= w->cfg.confirm_batch)
		confirm_flush(w, a);
}

/* ---- aggregation: sending ---- */

static void agg_fill_payload(struct tly_worker *w, struct wtensor *t,
			     uint32_t idx, uint8_t *pl)
{
	uint16_t k = w->cfg.k;

	if (idx >= t->n_chunks) {		/* exponent group */
		uint32_t g = idx - t->n_chunks, i, first = g * k;
		uint8_t *p = pl;

		for (i = 0; i < k; i++, p += 4) {
			uint32_t e = first + i < t->n_chunks ?
				     (uint32_t)t->exp[first + i] :
				     (uint32_t)TLY_EXP_NONE;

			p[0] = (uint8_t)(e >> 24);
			p[1] = (uint8_t)(e >> 16);
			p[2] = (uint8_t)(e >> 8);
			p[3] = (uint8_t)e;
		}
		return;
	}
	size_t n = chunk_elems(t, idx, k), off = (size_t)idx * k;
	int s = t->chunks[idx].shift;

	switch (t->d.dtype) {
	case TLY_DT_F32:
		tly_quantize_f32(pl, (const float *)t->d.src + off, n, k, s);
		break;
	case TLY_DT_F16:
		tly_quantize_f16(pl, (const uint16_t *)t->d.src + off, n, k, s);
		break;
	case TLY_DT_BF16:
		tly_quantize_bf16(pl, (const uint16_t *)t->d.src + off, n, k,
				  s);
		break;
	case TLY_DT_I32:
		tly_pack_u32(pl, (const uint32_t *)t->d.src + off, n, k);
		break;
	}
}

static void agg_send(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		     uint8_t flags)
{
	struct wchunk *ch = &t->chunks[idx];
	uint8_t exp = idx >= t->n_chunks;
	uint16_t chunk = (uint16_t)(exp ? idx - t->n_chunks : idx);
	struct tly_hdr h = {
		.type = TLY_T_DATA, .job = w->cfg.job,
		.cookie = w->cfg.cookie, .rank = w->cfg.rank,
		.tensor = t->d.id, .chunk = chunk,
	};
	uint32_t a = agg_index(w, t->d.id, chunk, exp);
	struct tly_out o;

	h.flags = flags | (exp ? TLY_F_EXP : 0) |
		  (t->d.dtype == TLY_DT_I32 ? TLY_F_INT : 0);
	h.slot = (uint16_t)tly_slot_of(t->d.id, chunk, exp, w->cfg.n_slots);
	h.shift = exp || t->d.dtype == TLY_DT_I32 ? 0 : ch->shift;
	if (tly_out_begin(&o, &w->cfg.ops, &w->cfg.net, &w->c, w->cfg.rank,
			  w->aggs[a], prio_dscp(t->d.prio),
			  TLY_HDR_LEN + 4u * w->cfg.k))
		return;		/* the timer tries again */
	tly_hdr_write(o.pkt, &h);
	agg_fill_payload(w, t, idx, o.pkt + TLY_HDR_LEN);
	tly_out_send(&o, &w->cfg.ops, &w->cfg.net, &w->c);
}

/* the next chunk of @t to send for the first time, if any */
static int agg_next(struct wtensor *t, uint32_t *idx)
{
	if (t->gcursor < t->n_groups) {
		*idx = t->n_chunks + t->gcursor++;
		return 1;
	}
	while (t->cursor < t->n_chunks) {
		uint32_t c = (t->start + t->cursor) % t->n_chunks;

		if (t->chunks[c].state == C_WAIT)
			return 0;
		t->cursor++;
		if (t->chunks[c].state == C_READY) {
			*idx = c;
			return 1;
		}
	}
	return 0;
}

static void chunk_send(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		       uint8_t flags)
{
	if (t->d.algo == TLY_ALGO_AGG)
		agg_send(w, t, idx, flags);
	else
		ring_send(w, t, idx, flags);
}

/* first transmission: takes a credit */
static void chunk_launch(struct tly_worker *w, struct wtensor *t,
			 uint32_t idx, uint64_t now)
{
	struct wchunk *ch = &t->chunks[idx];

	ch->state = C_INFLIGHT;
	w->inflight++;
	worker_arm(t, ch, now + rto_after(w, ch->retries));
	chunk_send(w, t, idx, 0);
}

/*
 * The chunks that can hold a timer.  AGG sends data chunks in visit order,
 * so only the positions from the oldest unfinished one up to the cursor
 * (plus the few exponent groups); a ring tensor is scanned whole.
 */
static void live_span(struct wtensor *t, uint32_t *p0, uint32_t *p1)
{
	if (t->d.algo != TLY_ALGO_AGG) {
		*p0 = 0;
		*p1 = t->n_chunks;
		return;
	}
	while (t->lo < t->cursor &&
	       t->chunks[(t->start + t->lo) % t->n_chunks].state == C_DONE)
		t->lo++;
	*p0 = t->lo;
	*p1 = t->cursor;
}

static inline uint32_t pos_index(const struct wtensor *t, uint32_t pos)
{
	return t->d.algo == TLY_ALGO_AGG ? (t->start + pos) % t->n_chunks :
					   pos;
}

/* retransmit on timeout; no credit taken (the chunk holds one or none) */
static void timer_one(struct tly_worker *w, struct wtensor *t, uint32_t i,
		      uint64_t now)
{
	struct wchunk *ch = &t->chunks[i];

	switch (ch->state) {
	case C_INFLIGHT:
		if (ch->deadline <= now) {
			ch->retries++;
			w->c.retx++;
			chunk_send(w, t, i, TLY_F_RETX | TLY_F_ACK_REQ);
			ch->deadline = now + rto_after(w, ch->retries);
		}
		break;
	case C_ACKED:
		if (ch->deadline <= now) {
			w->c.retx++;
			chunk_send(w, t, i, TLY_F_RETX | TLY_F_ACK_REQ);
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
	live_span(t, &p0, &p1);
	for (; p0 < p1; p0++)
		timer_one(w, t, pos_index(t, p0), now);
}

/* a refused chunk whose back-off is over, if the window has room */
static void deferred_one(struct tly_worker *w, struct wtensor *t,
			 uint32_t i, uint64_t now)
{
	struct wchunk *ch = &t->chunks[i];

	if (ch->state != C_DEFER)
		return;
	if (ch->deadline <= now && w->inflight < w->cfg.window)
		chunk_launch(w, t, i, now);
	else if (ch->deadline < t->defer_deadline)
		t->defer_deadline = ch->deadline;
}

static void tensor_deferred(struct tly_worker *w, struct wtensor *t,
			    uint64_t now)
{
	uint32_t i, p0, p1;

	t->defer_deadline = NEVER;
	for (i = t->n_chunks; i < t->n_chunks + t->n_groups; i++)
		deferred_one(w, t, i, now);
	live_span(t, &p0, &p1);
	for (; p0 < p1; p0++)
		deferred_one(w, t, pos_index(t, p0), now);
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

	ring_ack_flush(w);
	for (i = 0; i < w->n_active; i++)
		if (w->order[i]->next_deadline <= now)
			tensor_timers(w, w->order[i], now);
	for (i = 0; i < w->n_active && w->inflight < w->cfg.window; i++) {
		struct wtensor *t = w->order[i];
		uint32_t idx;

		while (w->inflight < w->cfg.window &&
		       (t->d.algo == TLY_ALGO_AGG ? agg_next(t, &idx) :
						   ring_next(t, &idx)))
			chunk_launch(w, t, idx, now);
	}
	for (i = 0; i < w->n_active && w->inflight < w->cfg.window; i++)
		if (w->order[i]->defer_deadline <= now)
			tensor_deferred(w, w->order[i], now);
	for (a = 0; a < w->cfg.n_aggs; a++)
		if (w->cb[a].n_ranges &&
		    now - w->cb[a].oldest >= w->cfg.confirm_ns)
			confirm_flush(w, a);
}

/* ---- aggregation: receiving ---- */

static int32_t exp_word(const uint8_t *pl, uint32_t i)
{
	const uint8_t *p = pl + 4 * i;

	return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
			 ((uint32_t)p[2] << 8) | p[3]);
}

/*
 * The agreed block exponents.  A max over all workers can be neither
 * below ours nor outside what tly_block_exp_*() produce; a packet that
 * claims so is not trusted (counted as a mismatch, state untouched).
 */
static int agg_exp_result(struct tly_worker *w, struct wtensor *t,
			  uint32_t g, const uint8_t *pl)
{
	uint32_t i, first = g * w->cfg.k;

	for (i = 0; i < w->cfg.k && first + i < t->n_chunks; i++) {
		int32_t e = exp_word(pl, i);

		if (e < t->exp[first + i] ||
		    (e != TLY_EXP_NONE && (e < -148 || e > 129)))
			return -1;
	}
	for (i = 0; i < w->cfg.k && first + i < t->n_chunks; i++) {
		struct wchunk *ch = &t->chunks[first + i];

		ch->shift = (int8_t)tly_quant_shift(exp_word(pl, i),
						    w->cfg.n_workers);
		if (ch->state == C_WAIT)
			ch->state = C_READY;
	}
	return 0;
}

static void agg_data_result(struct tly_worker *w, struct wtensor *t,
			    uint32_t c, const uint8_t *pl)
{
	size_t n = chunk_elems(t, c, w->cfg.k), off = (size_t)c * w->cfg.k;
	int s = t->chunks[c].shift;

	switch (t->d.dtype) {
	case TLY_DT_F32:
		tly_dequantize_f32((float *)t->d.dst + off, pl, n, s);
		break;
	case TLY_DT_F16:
		tly_dequantize_f16((uint16_t *)t->d.dst + off, pl, n, s);
		break;
	case TLY_DT_BF16:
		tly_dequantize_bf16((uint16_t *)t->d.dst + off, pl, n, s);
		break;
	case TLY_DT_I32:
		tly_unpack_u32((uint32_t *)t->d.dst + off, pl, n);
		break;
	}
}

/* the chunk a RESULT/ACK/BUSY names, or NULL (counted as stale) */
static struct wchunk *agg_chunk_of(struct tly_worker *w, struct wtensor *t,
				   const struct tly_hdr *h, uint32_t *idx)
{
	uint8_t exp = !!(h->flags & TLY_F_EXP);

	if (!t || t->d.algo != TLY_ALGO_AGG ||
	    (exp ? h->chunk >= t->n_groups : h->chunk >= t->n_chunks) ||
	    !!(h->flags & TLY_F_INT) != (t->d.dtype == TLY_DT_I32)) {
		w->c.drops[TLY_E_STALE]++;
		return NULL;
	}
	*idx = exp ? t->n_chunks + h->chunk : h->chunk;
	return &t->chunks[*idx];
}

static void agg_rx_result(struct tly_worker *w, const struct tly_hdr *h,
			  const uint8_t *pkt, uint64_t now)
{
	struct wtensor *t = worker_find(w, h->tensor);
	uint8_t exp = !!(h->flags & TLY_F_EXP);
	struct wchunk *ch;
	uint32_t idx;

	if (!t) {
		/* finished (or foreign): receipt again so the slot frees */
		w->c.dups++;
		confirm_add(w, h->tensor, h->chunk, exp, now);
		return;
	}
	ch = agg_chunk_of(w, t, h, &idx);
	if (!ch)
		return;
	if (ch->state == C_DONE) {
		w->c.dups++;
		confirm_add(w, h->tensor, h->chunk, exp, now);
		return;
	}
	if (!exp && t->d.dtype != TLY_DT_I32 &&
	    (ch->state == C_WAIT || h->shift != ch->shift)) {
		w->c.drops[TLY_E_MISMATCH]++;
		return;
	}
	if (exp && agg_exp_result(w, t, h->chunk, pkt + TLY_HDR_LEN)) {
		w->c.drops[TLY_E_MISMATCH]++;
		return;
	}
	if (ch->state == C_INFLIGHT)
		w->inflight--;
	ch->state = C_DONE;
	if (!exp) {
		agg_data_result(w, t, h->chunk, pkt + TLY_HDR_LEN);
		t->done++;
	}
	confirm_add(w, h->tensor, h->chunk, exp, now);
	if (t->done == t->n_chunks)
		worker_finish(w, t);
}

static void agg_rx_ack(struct tly_worker *w, const struct tly_hdr *h,
		       uint64_t now)
{
	struct wtensor *t = worker_find(w, h->tensor);
	struct wchunk *ch;
	uint32_t idx;

	ch = agg_chunk_of(w, t, h, &idx);
	if (!ch)
		return;
	if (h->type == TLY_T_ACK) {
		w->c.acks++;
		if (ch->state == C_INFLIGHT) {
			w->inflight--;
			ch->state = C_ACKED;
			ch->retries = 0;
		}
		if (ch->state == C_ACKED)
			worker_arm(t, ch, now + w->cfg.acked_ns);
		return;
	}
	w->c.busy++;
	if (ch->state != C_INFLIGHT && ch->state != C_ACKED)
		return;
	if (ch->state == C_INFLIGHT)
		w->inflight--;
	ch->state = C_DEFER;
	if (ch->retries < 16)
		ch->retries++;
	worker_arm(t, ch, now + (w->cfg.busy_ns << (ch->retries < 6 ?
						      ch->retries : 6)));
}

void tly_worker_rx(struct tly_worker *w, const uint8_t *frame, size_t len,
		   uint64_t now)
{
	const uint8_t *pkt;
	struct tly_hdr h;
	uint8_t dscp;

	if (tly_frame_rx(&w->cfg.net, &w->lim, frame, len, &h, &pkt, &dscp,
			 &w->c) != TLY_OK)
		return;
	switch (h.type) {
	case TLY_T_RESULT:
	case TLY_T_ACK:
	case TLY_T_BUSY:
		if (h.rank != w->cfg.rank || !w->cfg.n_aggs) {
			w->c.drops[TLY_E_RANK]++;
			return;
		}
		if (h.type == TLY_T_RESULT)
			agg_rx_result(w, &h, pkt, now);
		else
			agg_rx_ack(w, &h, now);
		break;
	case TLY_T_RING:
		ring_rx(w, &h, pkt);
		break;
	case TLY_T_RING_ACK:
		ring_rx_ack(w, &h, now);
		break;
	default:
		w->c.drops[TLY_E_ROLE]++;
	}
}
