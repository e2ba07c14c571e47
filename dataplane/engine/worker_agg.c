// SPDX-License-Identifier: BSD-3-Clause
/*
 * worker_agg.c - the worker's side of aggregation: chunks to aggregators
 * (chunk -> aggregator by hash), the exponent round of float tensors,
 * results placed into the tensor, receipts (CONFIRM) batched per
 * aggregator.  Reached through worker_agg_algo only.
 */
#include "dataplane/engine/worker_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/compress/sparse.h"
#include "dataplane/engine/quant.h"

static uint32_t agg_index(const struct tly_worker *w, uint32_t tensor,
			  uint16_t chunk, uint8_t exp)
{
	return tly_shard_of(tensor, chunk, exp, w->cfg.n_aggs);
}

/* local block exponents, one per chunk, for the exponent round; 0 or
 * -ENOMEM */
static int agg_local_exps(struct tly_worker *w, struct wtensor *t)
{
	uint32_t k = t->ck, c;
	const struct tly_dtype_info *dt = tly_dtype(t->d.dtype);

	(void)w;
	if (t->codec->exps)
		return t->codec->exps(t->exp, t->d.src, t->d.dtype,
				      t->d.count, k, t->codec->topk_permille);
	for (c = 0; c < t->n_chunks; c++) {
		size_t n = chunk_elems(t, c, k), off = (size_t)c * k;

		t->exp[c] = t->codec->exp((const uint8_t *)t->d.src +
					  off * dt->size, t->d.dtype, n);
	}
	return 0;
}

static int agg_setup(struct tly_worker *w, struct wtensor *t)
{
	uint32_t c;

	if (!w->cfg.n_aggs)
		return -EINVAL;
	if (!tly_dtype(t->d.dtype)->exact) {
		t->n_groups = (t->n_chunks + w->cfg.k - 1) / w->cfg.k;
		t->exp = tensor_buf(w, t, WBUF_EXP,
				    t->n_chunks * sizeof(*t->exp), false);
		if (!t->exp || agg_local_exps(w, t))
			return -ENOMEM;
	}
	t->chunks = tensor_buf(w, t, WBUF_CHUNKS, (t->n_chunks + t->n_groups) *
			       sizeof(*t->chunks), true);
	if (!t->chunks)
		return -ENOMEM;
	for (c = 0; c < t->n_chunks + t->n_groups; c++)
		t->chunks[c].state = c < t->n_chunks && t->n_groups ?
				     C_WAIT : C_READY;
	t->start = (uint32_t)(((uint64_t)w->cfg.rank * w->cfg.chunk_rotate) %
			      t->n_chunks);
	return 0;
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

		tly_put32(p, t);
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

/*
 * A receipt for a chunk whose RESULT is placed (@again: it was placed
 * before).  The software profile batches it; the switch profile releases
 * the chunk by a CONFIRM of its own (worker_release.c).
 */
static void agg_receipt(struct tly_worker *w, uint32_t tensor, uint16_t chunk,
			uint8_t exp, int again, uint64_t now)
{
	uint16_t dst;

	if (w->cfg.profile != TLY_PROFILE_SWITCH) {
		confirm_add(w, tensor, chunk, exp, now);
		return;
	}
	dst = w->aggs[agg_index(w, tensor, chunk, exp)];
	if (again)
		release_again(w, tensor, chunk, exp, dst, now);
	else
		release_start(w, tensor, chunk, exp, dst, now);
}

static void agg_flush_late(struct tly_worker *w, uint64_t now)
{
	uint32_t a;

	if (w->cfg.profile == TLY_PROFILE_SWITCH) {
		release_poll(w, now);
		release_flush_all(w);
		return;
	}
	for (a = 0; a < w->cfg.n_aggs; a++)
		if (w->cb[a].n_ranges &&
		    now - w->cb[a].oldest >= w->cfg.confirm_ns)
			confirm_flush(w, a);
}

/* ---- sending ---- */

/*
 * block_topk: a chunk some workers send but not this one (its own word
 * in the round was TLY_EXP_NONE).  It holds no credit and waits for the
 * RESULT in C_ACKED (LISTEN), PULLing it on that state's timer
 * (docs/compression.md section 4).
 */
static inline int agg_listener(const struct wtensor *t, uint32_t idx)
{
	return t->codec->topk_permille && idx < t->n_chunks &&
	       t->exp[idx] == TLY_EXP_NONE;
}

/* the aux byte of chunk @idx's DATA: the round's combine, m(b), PULL */
static uint8_t agg_aux(const struct wtensor *t, uint32_t idx)
{
	if (!t->codec->topk_permille)
		return 0;
	if (idx >= t->n_chunks)
		return TLY_AUX_COUNT;
	return (uint8_t)(t->chunks[idx].senders |
			 (agg_listener(t, idx) ? TLY_AUX_PULL : 0));
}

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

			tly_put32(p, e);
		}
		return;
	}
	size_t n = chunk_elems(t, idx, t->ck), off = (size_t)idx * t->ck;
	const struct tly_dtype_info *dt = tly_dtype(t->d.dtype);

	if (agg_listener(t, idx)) {		/* a PULL adds nothing */
		memset(pl, 0, 4u * k);
		return;
	}
	t->codec->pack(pl, (const uint8_t *)t->d.src + off * dt->size,
		       t->d.dtype, n, k, t->chunks[idx].shift,
		       w->cfg.n_workers);
}

static uint16_t agg_dest(const struct tly_worker *w, const struct wtensor *t,
			 uint32_t idx)
{
	uint8_t exp = idx >= t->n_chunks;
	uint16_t chunk = (uint16_t)(exp ? idx - t->n_chunks : idx);

	return w->aggs[agg_index(w, t->d.id, chunk, exp)];
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
	struct tly_out o;

	/* switch profile: a DATA asks for its ACK (one fresh DATA in
	 * ack_every, worker_ack.c), so a contribution held in a partial sum
	 * gives its credit back at once (no fallback store moves partials
	 * aside: a window of credits held until rto by partials that wait
	 * on refused chunks starved the re-offers) */
	if (w->cfg.profile == TLY_PROFILE_SWITCH)
		flags |= flags & TLY_F_RETX ? TLY_F_ACK_REQ :
					      ack_fresh_flags(w, t, idx);
	h.flags = flags | (exp ? TLY_F_EXP : t->codec->lanes) |
		  (tly_dtype(t->d.dtype)->exact ? TLY_F_INT : 0);
	h.slot = (uint16_t)tly_slot_of(t->d.id, chunk, exp, w->cfg.n_slots);
	h.shift = exp || tly_dtype(t->d.dtype)->exact ? 0 : ch->shift;
	h.aux = agg_aux(t, idx);
	if (tly_out_begin(&o, &w->cfg.ops, &w->cfg.net, &w->c, w->cfg.rank,
			  agg_dest(w, t, idx), prio_dscp(t->d.prio),
			  TLY_HDR_LEN + 4u * w->cfg.k))
		return;		/* the timer tries again */
	tly_hdr_write(o.pkt, &h);
	agg_fill_payload(w, t, idx, o.pkt + TLY_HDR_LEN);
	tly_out_send(&o, &w->cfg.ops, &w->cfg.net, &w->c);
}

/* the next chunk of @t to send for the first time, if any */
static int agg_next(struct tly_worker *w, struct wtensor *t, uint32_t *idx)
{
	(void)w;
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

/* put back @idx, which agg_next() just returned */
static void agg_unget(struct wtensor *t, uint32_t idx)
{
	if (idx >= t->n_chunks)
		t->gcursor--;
	else
		t->cursor--;
}

/*
 * Data chunks go in visit order, so only the positions from the oldest
 * unfinished one up to the cursor can hold a timer (the exponent groups
 * are scanned apart).
 */
static void agg_span(struct wtensor *t, uint32_t *p0, uint32_t *p1)
{
	while (t->lo < t->cursor &&
	       t->chunks[(t->start + t->lo) % t->n_chunks].state == C_DONE)
		t->lo++;
	*p0 = t->lo;
	*p1 = t->cursor;
}

static uint32_t agg_at(const struct wtensor *t, uint32_t pos)
{
	return (t->start + pos) % t->n_chunks;
}

/* an unfinished data chunk waits on its aggregator, or its group's */
static uint16_t agg_peer(const struct tly_worker *w, const struct wtensor *t,
			 uint32_t c)
{
	if (t->chunks[c].state == C_WAIT)
		return agg_dest(w, t, t->n_chunks + c / w->cfg.k);
	return agg_dest(w, t, c);
}

/* ---- receiving ---- */

/*
 * The agreed block exponents.  A max over all workers can be neither
 * below ours nor outside what tly_block_exp_*() produce; a packet that
 * claims so is not trusted (counted as a mismatch, state untouched).
 * block_topk's words are E * 256 + m(b): m counts the senders, at least
 * 1 when we sent, 0 exactly when E is NONE, at most n.
 */
static int agg_exp_word(const struct tly_worker *w, const struct wtensor *t,
			uint32_t c, uint32_t word, int32_t *e,
			unsigned int *m)
{
	*e = (int32_t)word;
	*m = 0;
	if (t->codec->topk_permille) {
		tly_sparse_exp_unword(word, e, m);
		if (*m > w->cfg.n_workers ||
		    (*m == 0) != (*e == TLY_EXP_NONE))
			return -1;
	}
	if (*e < t->exp[c] || (*e != TLY_EXP_NONE && (*e < -148 || *e > 129)))
		return -1;
	return 0;
}

/*
 * block_topk: chunk @c's place after the round.  Nobody sent it: zeros,
 * done without a packet.  Others did: LISTEN (C_ACKED, no credit), its
 * timer PULLs.
 */
static void agg_sparse_place(struct tly_worker *w, struct wtensor *t,
			     uint32_t c, uint64_t now)
{
	struct wchunk *ch = &t->chunks[c];
	size_t n = chunk_elems(t, c, t->ck), off = (size_t)c * t->ck;
	size_t sz = tly_dtype(t->d.dtype)->size;

	if (ch->senders) {
		ch->state = C_ACKED;
		worker_arm(t, ch, now + w->cfg.acked_ns);
		return;
	}
	if (t->d.sent)
		memset((uint8_t *)t->d.sent + off * sz, 0, n * sz);
	memset((uint8_t *)t->d.dst + off * sz, 0, n * sz);
	ch->state = C_DONE;
	t->done++;
}

static int agg_exp_result(struct tly_worker *w, struct wtensor *t,
			  uint32_t g, const uint8_t *pl, uint64_t now)
{
	uint32_t i, first = g * w->cfg.k;
	unsigned int m;
	int32_t e;

	for (i = 0; i < w->cfg.k && first + i < t->n_chunks; i++)
		if (agg_exp_word(w, t, first + i, tly_get32(pl + 4 * i), &e,
				 &m))
			return -1;
	for (i = 0; i < w->cfg.k && first + i < t->n_chunks; i++) {
		struct wchunk *ch = &t->chunks[first + i];

		agg_exp_word(w, t, first + i, tly_get32(pl + 4 * i), &e, &m);
		if (t->codec->topk_permille) {
			/* m senders share the headroom (quant.h) */
			ch->senders = (uint8_t)m;
			ch->shift = (int8_t)(m ? t->codec->shift(e, m) : 0);
		} else {
			ch->shift = (int8_t)t->codec->shift(e,
							    w->cfg.n_workers);
		}
		if (ch->state != C_WAIT)
			continue;
		ch->state = C_READY;
		if (agg_listener(t, first + i) || (t->codec->topk_permille &&
						   !m))
			agg_sparse_place(w, t, first + i, now);
	}
	return 0;
}

/* chunk @c's own contribution, decoded, for the error feedback: zeros
 * for a block this worker did not send */
static void agg_sent(struct wtensor *t, uint32_t c, size_t n, size_t off)
{
	size_t sz = tly_dtype(t->d.dtype)->size;
	uint8_t *out = (uint8_t *)t->d.sent + off * sz;

	if (agg_listener(t, c))
		memset(out, 0, n * sz);
	else
		t->codec->sent(out, (const uint8_t *)t->d.src + off * sz,
			       t->d.dtype, n, t->chunks[c].shift);
}

/*
 * Chunk @c's RESULT (@pl): its own contribution ("sent", error feedback)
 * is written from the source first, then the result (the source may be
 * the destination).
 */
static void agg_data_result(struct wtensor *t, uint32_t c, const uint8_t *pl)
{
	size_t n = chunk_elems(t, c, t->ck), off = (size_t)c * t->ck;
	uint8_t *dst = (uint8_t *)t->d.dst + off * tly_dtype(t->d.dtype)->size;

	if (t->d.sent && t->codec->sent)
		agg_sent(t, c, n, off);
	t->codec->decode(dst, t->d.dtype, pl, n, t->chunks[c].shift);
}

/*
 * The chunk a RESULT/ACK/BUSY names, or NULL (counted as stale).  The
 * chunk is (tensor, chunk, EXP); the INT flag must match the tensor's
 * mode, except for a chunk already placed: its RESULT is answered with a
 * receipt whatever its mode flags, as the RESULT of a finished tensor is
 * (docs/protocol.md, "When a worker sends no receipt").
 */
static struct wchunk *agg_chunk_of(struct tly_worker *w, struct wtensor *t,
				   const struct tly_hdr *h, uint32_t *idx)
{
	uint8_t exp = !!(h->flags & TLY_F_EXP);

	if (!t || t->algo != &worker_agg_algo ||
	    (exp ? h->chunk >= t->n_groups : h->chunk >= t->n_chunks))
		goto stale;
	*idx = exp ? t->n_chunks + h->chunk : h->chunk;
	if (!!(h->flags & TLY_F_INT) != (tly_dtype(t->d.dtype)->exact) &&
	    t->chunks[*idx].state != C_DONE)
		goto stale;
	return &t->chunks[*idx];
stale:
	w->c.drops[TLY_E_STALE]++;
	return NULL;
}

static struct wtensor *agg_rx_result(struct tly_worker *w,
				     const struct tly_hdr *h,
				     const uint8_t *pkt, uint64_t now)
{
	struct wtensor *t = worker_find(w, h->tensor);
	uint8_t exp = !!(h->flags & TLY_F_EXP);
	struct wchunk *ch;
	uint32_t idx;

	if (!t) {
		/* finished (or foreign): receipt again so the slot frees */
		w->c.dups++;
		agg_receipt(w, h->tensor, h->chunk, exp, 1, now);
		return NULL;
	}
	ch = agg_chunk_of(w, t, h, &idx);
	if (!ch)
		return NULL;
	if (ch->state == C_DONE) {
		w->c.dups++;
		agg_receipt(w, h->tensor, h->chunk, exp, 1, now);
		return NULL;
	}
	if (!exp && !tly_dtype(t->d.dtype)->exact &&
	    (ch->state == C_WAIT || h->shift != ch->shift ||
	     (h->flags & TLY_F_LANES) != t->codec->lanes)) {
		w->c.drops[TLY_E_MISMATCH]++;
		return NULL;
	}
	if (w->cfg.profile == TLY_PROFILE_SWITCH && !release_room(w)) {
		/* no room to track its release: not placed; the chunk's
		 * retransmitted DATA fetches the RESULT again later.  An
		 * ACKED chunk's probe goes a timeout from now, when ACKs
		 * will have made room, not acked_ns later (80 ms by
		 * default, which held up whole all-reduces) */
		uint64_t soon = now + credit_rto(w, t, idx, 0);

		w->c.tx_nobuf++;
		if (ch->state == C_ACKED && ch->deadline > soon)
			worker_arm(t, ch, soon);
		return NULL;
	}
	/* the round's combine must be the codec's (counted for block_topk) */
	if (exp && (h->aux != (t->codec->topk_permille ? TLY_AUX_COUNT : 0) ||
		    agg_exp_result(w, t, h->chunk, pkt + TLY_HDR_LEN, now))) {
		w->c.drops[TLY_E_MISMATCH]++;
		return NULL;
	}
	if (!exp)
		agg_data_result(t, h->chunk, pkt + TLY_HDR_LEN);
	credit_release(w, t, idx, 1, now);
	ch->state = C_DONE;
	if (!exp)
		t->done++;
	credit_done(w, t, idx, now);
	agg_receipt(w, h->tensor, h->chunk, exp, 0, now);
	return tensor_complete(t) ? t : NULL;
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
			ack_infer(w, t, idx, now);
			credit_release(w, t, idx, 1, now);
			ch->state = C_ACKED;
			ch->retries = 0;
		}
		if (ch->state == C_ACKED) {
			ch->inferred = 0;	/* placed by its own ACK */
			worker_arm(t, ch, now + w->cfg.acked_ns);
		}
		return;
	}
	w->c.busy++;
	if (ch->state != C_INFLIGHT && ch->state != C_ACKED)
		return;
	ack_infer(w, t, idx, now);
	credit_release(w, t, idx, 0, now);
	ch->state = C_DEFER;
	if (ch->retries < 16)
		ch->retries++;
	/* switch_busy_ns: busy_ns but in the switch profile (worker.c) */
	worker_arm(t, ch, now + (w->cfg.switch_busy_ns << (ch->retries < 6 ?
							     ch->retries : 6)));
}

static struct wtensor *agg_rx(struct tly_worker *w, const struct tly_hdr *h,
			      const uint8_t *pkt, uint64_t now)
{
	/* TLY_RANK_ALL: a RESULT to the result group (the parser lets it
	 * through only with cfg.result_group) */
	if ((h->rank != w->cfg.rank && h->rank != TLY_RANK_ALL) ||
	    !w->cfg.n_aggs) {
		w->c.drops[TLY_E_RANK]++;
		return NULL;
	}
	if (h->type == TLY_T_RESULT)
		return agg_rx_result(w, h, pkt, now);
	if (h->type == TLY_T_ACK && (h->flags & TLY_F_RELEASED)) {
		/* the parser lets it through in the switch profile only */
		release_acked(w, h, pkt);
		return NULL;
	}
	agg_rx_ack(w, h, now);
	return NULL;
}

const struct worker_algo worker_agg_algo = {
	.setup = agg_setup,
	.next = agg_next,
	.unget = agg_unget,
	.send = agg_send,
	.dest = agg_dest,
	.span = agg_span,
	.at = agg_at,
	.peer = agg_peer,
	.rx = agg_rx,
	.flush_late = agg_flush_late,
};
