// SPDX-License-Identifier: BSD-3-Clause
/*
 * agg.c - the aggregator's slot pool, fallback store and packet handling.
 */
#include "dataplane/engine/agg.h"

#include <stdlib.h>
#include <string.h>

#include "dataplane/engine/frame.h"
#include "dataplane/engine/simd.h"

#define FB_PROBES	4

enum slot_state { SLOT_FREE = 0, SLOT_AGG, SLOT_DONE };

struct agg_slot {
	uint64_t contrib;	/* workers whose contribution is in the sum */
	uint64_t confirmed;	/* DONE: workers that confirmed the result */
	uint64_t t_last;	/* AGG: last contribution; DONE: next probe */
	uint32_t tensor;
	uint16_t chunk;
	uint16_t count;
	uint16_t slot;		/* the chunk's primary slot index */
	uint8_t state;
	uint8_t mode;		/* TLY_F_EXP / TLY_F_INT */
	uint8_t dscp;
	uint8_t probes;
	int8_t shift;
	uint8_t fallback;
	/* the chunk this entry last completed and freed (a tombstone),
	 * believed for tombstone_ns after done_ns */
	uint64_t done_ns;
	uint32_t done_tensor;
	uint16_t done_chunk;
	uint8_t done_exp;
	uint8_t has_done;
};

struct tly_agg {
	struct tly_agg_cfg cfg;
	struct tly_wire_limits lim;
	struct tly_counters c;
	uint64_t all;		/* bitmap of every worker */
	uint32_t n_total;	/* primary + fallback */
	uint32_t fb_used;
	uint32_t busy;
	uint32_t cursor;	/* poll position */
	struct agg_slot *slots;
	uint32_t *sums;		/* n_total * k words, host order */
};

struct tly_agg *tly_agg_create(const struct tly_agg_cfg *cfg)
{
	struct tly_agg *a;
	size_t words;

	if (!cfg->n_workers || cfg->n_workers > TLY_MAX_WORKERS ||
	    cfg->k < TLY_K_MIN || cfg->k > TLY_K_MAX || !cfg->n_slots ||
	    cfg->n_slots > 0x10000 || !cfg->ops.alloc || !cfg->ops.send ||
	    (cfg->net.addrs && cfg->self >= cfg->net.n_nodes))
		return NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->cfg = *cfg;
	if (!a->cfg.poll_budget)
		a->cfg.poll_budget = 64;
	if (!a->cfg.tombstone_ns)
		a->cfg.tombstone_ns = 4 * a->cfg.evict_ns;
	a->lim = (struct tly_wire_limits){
		.job = cfg->job, .cookie = cfg->cookie, .k = cfg->k,
		.n_ranks = cfg->n_workers,
		.n_slots = cfg->n_slots, .n_hops = 0,
	};
	a->all = cfg->n_workers == 64 ? ~0ull : (1ull << cfg->n_workers) - 1;
	a->n_total = cfg->n_slots + cfg->n_fallback;
	a->slots = calloc(a->n_total, sizeof(*a->slots));
	words = (size_t)a->n_total * cfg->k;
	a->sums = aligned_alloc(64, (words * 4 + 63) & ~(size_t)63);
	if (!a->slots || !a->sums) {
		tly_agg_destroy(a);
		return NULL;
	}
	memset(a->sums, 0, words * 4);
	return a;
}

void tly_agg_destroy(struct tly_agg *a)
{
	if (!a)
		return;
	free(a->slots);
	free(a->sums);
	free(a);
}

const struct tly_counters *tly_agg_counters(const struct tly_agg *a)
{
	return &a->c;
}

uint32_t tly_agg_slots_busy(const struct tly_agg *a)
{
	return a->busy;
}

static inline uint32_t *slot_sum(struct tly_agg *a, uint32_t idx)
{
	return a->sums + (size_t)idx * a->cfg.k;
}

static inline int slot_is(const struct agg_slot *s, const struct tly_hdr *h)
{
	return s->state != SLOT_FREE && s->tensor == h->tensor &&
	       s->chunk == h->chunk &&
	       (s->mode & TLY_F_EXP) == (h->flags & TLY_F_EXP);
}

static inline int slot_evictable(const struct tly_agg *a,
				 const struct agg_slot *s, uint64_t now)
{
	return s->state == SLOT_FREE ||
	       (s->state == SLOT_AGG && now - s->t_last >= a->cfg.evict_ns);
}

static uint32_t fb_base(const struct tly_agg *a, const struct tly_hdr *h)
{
	uint64_t x = tly_chunk_hash(h->tensor, h->chunk,
				    !!(h->flags & TLY_F_EXP));

	return (uint32_t)((x >> 40) % a->cfg.n_fallback);
}

/* the fallback entry holding this chunk, or -1 */
static int64_t fb_find(const struct tly_agg *a, const struct tly_hdr *h)
{
	uint32_t base, i;

	if (!a->fb_used)
		return -1;
	base = fb_base(a, h);
	for (i = 0; i < FB_PROBES && i < a->cfg.n_fallback; i++) {
		uint32_t idx = a->cfg.n_slots + (base + i) % a->cfg.n_fallback;

		if (slot_is(&a->slots[idx], h))
			return idx;
	}
	return -1;
}

static void slot_release(struct tly_agg *a, struct agg_slot *s,
			 uint64_t now)
{
	if (s->state == SLOT_DONE) {
		s->done_ns = now;
		s->done_tensor = s->tensor;
		s->done_chunk = s->chunk;
		s->done_exp = !!(s->mode & TLY_F_EXP);
		s->has_done = 1;
	}
	if (s->state != SLOT_FREE) {
		a->busy--;
		if (s->fallback)
			a->fb_used--;
	}
	s->state = SLOT_FREE;
}

static void slot_claim(struct tly_agg *a, uint32_t idx,
		       const struct tly_hdr *h, uint64_t now)
{
	struct agg_slot *s = &a->slots[idx];

	if (s->state == SLOT_AGG)
		a->c.evictions++;
	slot_release(a, s, now);
	s->state = SLOT_AGG;
	s->tensor = h->tensor;
	s->chunk = h->chunk;
	s->slot = h->slot;
	s->mode = h->flags & (TLY_F_EXP | TLY_F_INT);
	s->shift = h->shift;
	s->contrib = 0;
	s->confirmed = 0;
	s->count = 0;
	s->probes = 0;
	s->t_last = now;
	s->fallback = idx >= a->cfg.n_slots;
	a->busy++;
	if (s->fallback)
		a->fb_used++;
}

/*
 * A tombstone is believed for tombstone_ns only: strays arrive within a
 * network delay of the last receipt, while a later job of the same wire
 * id may use the chunk's id again (its tensor keys and iterations restart
 * on daemons that outlive it) and must get in; until the tombstone ends
 * its contributions are dropped and retransmitted.
 */
static inline int slot_finished(const struct tly_agg *a,
				 const struct agg_slot *s,
				 const struct tly_hdr *h, uint64_t now)
{
	return s->has_done && now - s->done_ns < a->cfg.tombstone_ns &&
	       s->done_tensor == h->tensor &&
	       s->done_chunk == h->chunk &&
	       s->done_exp == !!(h->flags & TLY_F_EXP);
}

/*
 * A chunk that completed here and was confirmed by every worker: whatever
 * still arrives for it is a stray (a duplicate the network delayed), and
 * nobody waits for it.  Looks at the entries the chunk may have used.
 */
static int chunk_finished(const struct tly_agg *a, const struct tly_hdr *h,
			  uint64_t now)
{
	uint32_t base, i;

	if (slot_finished(a, &a->slots[h->slot], h, now))
		return 1;
	if (!a->cfg.n_fallback)
		return 0;
	base = fb_base(a, h);
	for (i = 0; i < FB_PROBES && i < a->cfg.n_fallback; i++)
		if (slot_finished(a, &a->slots[a->cfg.n_slots +
				  (base + i) % a->cfg.n_fallback], h, now))
			return 1;
	return 0;
}

/*
 * Where a contribution goes: its primary slot if that holds the chunk, the
 * fallback entry holding it, a free (or evictable) primary slot, a free
 * fallback entry; -1 if none (BUSY), -2 for a stray of a finished chunk.
 * At most 3 * FB_PROBES + 1 entries seen.
 */
static int64_t slot_for_data(struct tly_agg *a, const struct tly_hdr *h,
			     uint64_t now)
{
	struct agg_slot *s = &a->slots[h->slot];
	int64_t idx;
	uint32_t base, i;

	if (slot_is(s, h))
		return h->slot;
	idx = fb_find(a, h);
	if (idx >= 0)
		return idx;
	if (chunk_finished(a, h, now))
		return -2;
	if (slot_evictable(a, s, now)) {
		slot_claim(a, h->slot, h, now);
		return h->slot;
	}
	if (!a->cfg.n_fallback)
		return -1;
	base = fb_base(a, h);
	for (i = 0; i < FB_PROBES && i < a->cfg.n_fallback; i++) {
		uint32_t j = a->cfg.n_slots + (base + i) % a->cfg.n_fallback;

		if (slot_evictable(a, &a->slots[j], now)) {
			slot_claim(a, j, h, now);
			return j;
		}
	}
	return -1;
}

static TLY_HOT void sum_copy(uint32_t *restrict sum, const uint8_t *pl,
			     size_t k)
{
	const tly_u32_una *w = (const tly_u32_una *)pl;
	size_t i;

	for (i = 0; i < k; i++)
		sum[i] = tly_be32(w[i]);
}

static TLY_HOT void sum_add(uint32_t *restrict sum, const uint8_t *pl,
			    size_t k)
{
	const tly_u32_una *w = (const tly_u32_una *)pl;
	size_t i;

	for (i = 0; i < k; i++)
		sum[i] += tly_be32(w[i]);	/* wraps: exact int32 mode */
}

static TLY_HOT void sum_max(uint32_t *restrict sum, const uint8_t *pl,
			    size_t k)
{
	const tly_u32_una *w = (const tly_u32_una *)pl;
	size_t i;

	for (i = 0; i < k; i++) {
		int32_t v = (int32_t)tly_be32(w[i]), m = (int32_t)sum[i];

		sum[i] = (uint32_t)(v > m ? v : m);
	}
}

static TLY_HOT void sum_emit(uint8_t *restrict pl, const uint32_t *sum,
			     size_t k)
{
	tly_u32_una *w = (tly_u32_una *)pl;
	size_t i;

	for (i = 0; i < k; i++)
		w[i] = tly_be32(sum[i]);
}

static void hdr_for_slot(struct tly_hdr *h, const struct agg_slot *s,
			 uint8_t type, uint16_t rank)
{
	*h = (struct tly_hdr){
		.type = type, .flags = s->mode, .rank = rank,
		.slot = s->slot, .tensor = s->tensor, .chunk = s->chunk,
	};
	if (s->fallback)
		h->flags |= TLY_F_FALLBACK;
}

/* header-only reply (ACK or BUSY) echoing the packet's key */
static void agg_reply(struct tly_agg *a, const struct tly_hdr *in,
		      uint8_t type, uint8_t dscp, int fallback)
{
	struct tly_out o;
	struct tly_hdr h = *in;

	if (tly_out_begin(&o, &a->cfg.ops, &a->cfg.net, &a->c, a->cfg.self,
			  in->rank, dscp, TLY_HDR_LEN))
		return;
	h.type = type;
	h.flags = (in->flags & (TLY_F_EXP | TLY_F_INT)) |
		  (fallback ? TLY_F_FALLBACK : 0);
	h.shift = 0;
	h.job = a->cfg.job;
	h.cookie = a->cfg.cookie;
	tly_hdr_write(o.pkt, &h);
	tly_out_send(&o, &a->cfg.ops, &a->cfg.net, &a->c);
	if (type == TLY_T_ACK)
		a->c.acks++;
	else
		a->c.busy++;
}

static int result_build(struct tly_agg *a, uint32_t idx, uint16_t rank,
			uint8_t extra_flags, struct tly_out *o)
{
	struct agg_slot *s = &a->slots[idx];
	struct tly_hdr h;

	if (tly_out_begin(o, &a->cfg.ops, &a->cfg.net, &a->c, a->cfg.self,
			  rank, s->dscp, TLY_HDR_LEN + 4u * a->cfg.k))
		return -1;
	hdr_for_slot(&h, s, TLY_T_RESULT, rank);
	h.flags |= extra_flags;
	h.job = a->cfg.job;
	h.cookie = a->cfg.cookie;
	h.shift = s->shift;
	tly_hdr_write(o->pkt, &h);
	sum_emit(o->pkt + TLY_HDR_LEN, slot_sum(a, idx), a->cfg.k);
	return 0;
}

static void result_unicast(struct tly_agg *a, uint32_t idx, uint16_t rank)
{
	struct tly_out o;

	if (result_build(a, idx, rank, TLY_F_RETX, &o))
		return;
	tly_out_send(&o, &a->cfg.ops, &a->cfg.net, &a->c);
}

/* the RESULT to every worker: one frame replicated, or one per worker */
static void result_to_all(struct tly_agg *a, uint32_t idx)
{
	const struct tly_net *net = &a->cfg.net;
	struct tly_out o, o2;
	uint16_t r;

	if (result_build(a, idx, 0, 0, &o))
		return;
	if (a->cfg.ops.multicast) {
		size_t tl = o.len - tly_l2l4_off(net);

		a->c.tx_pkts += a->cfg.n_workers;
		a->c.tx_bytes += (uint64_t)tl * a->cfg.n_workers;
		a->c.tx_frame_bytes += (uint64_t)(TLY_L2L4_LEN + tl +
				       TLY_WIRE_EXTRA) * a->cfg.n_workers;
		a->cfg.ops.multicast(a->cfg.ops.ctx, a->all, o.frame, o.len);
		return;
	}
	for (r = 1; r < a->cfg.n_workers; r++) {
		o2.len = o.len;
		o2.dst = r;
		o2.frame = a->cfg.ops.alloc(a->cfg.ops.ctx, o.len);
		if (!o2.frame) {
			a->c.tx_nobuf++;
			continue;
		}
		memcpy(o2.frame, o.frame, o.len);
		if (net->addrs)
			tly_frame_readdress(o2.frame, &net->addrs[r], r);
		else
			tly_frame_readdress_bare(o2.frame, r);
		tly_out_send(&o2, &a->cfg.ops, net, &a->c);
	}
	tly_out_send(&o, &a->cfg.ops, net, &a->c);
}

static void agg_data(struct tly_agg *a, const struct tly_hdr *h,
		     const uint8_t *pkt, uint8_t dscp, uint64_t now)
{
	uint64_t bit = 1ull << h->rank;
	const uint8_t *pl = pkt + TLY_HDR_LEN;
	struct agg_slot *s;
	int64_t idx;

	idx = slot_for_data(a, h, now);
	if (idx == -2) {
		a->c.drops[TLY_E_STALE]++;
		return;
	}
	if (idx < 0) {
		agg_reply(a, h, TLY_T_BUSY, dscp, 0);
		return;
	}
	s = &a->slots[idx];
	if (s->state == SLOT_DONE) {
		/* late or duplicate: the sender has not seen the result */
		a->c.dups++;
		a->c.retx++;
		result_unicast(a, (uint32_t)idx, h->rank);
		return;
	}
	if (s->mode != (h->flags & (TLY_F_EXP | TLY_F_INT)) ||
	    s->shift != h->shift) {
		a->c.drops[TLY_E_MISMATCH]++;
		return;
	}
	if (s->contrib & bit) {
		a->c.dups++;
		if (h->flags & (TLY_F_ACK_REQ | TLY_F_RETX))
			agg_reply(a, h, TLY_T_ACK, dscp, s->fallback);
		return;
	}
	if (!s->count)
		sum_copy(slot_sum(a, idx), pl, a->cfg.k);
	else if (s->mode & TLY_F_EXP)
		sum_max(slot_sum(a, idx), pl, a->cfg.k);
	else
		sum_add(slot_sum(a, idx), pl, a->cfg.k);
	s->contrib |= bit;
	s->count++;
	s->t_last = now;
	s->dscp = dscp;
	if (s->fallback)
		a->c.fallback++;
	if (s->count == a->cfg.n_workers) {
		s->state = SLOT_DONE;
		s->t_last = now + a->cfg.probe_ns;
		a->c.completions++;
		result_to_all(a, (uint32_t)idx);
	} else if (h->flags & TLY_F_ACK_REQ) {
		agg_reply(a, h, TLY_T_ACK, dscp, s->fallback);
	}
}

static void agg_confirm_one(struct tly_agg *a, uint32_t tensor,
			    uint16_t chunk, uint8_t exp, uint64_t bit,
			    uint64_t now)
{
	struct tly_hdr h = {
		.tensor = tensor, .chunk = chunk, .flags = exp ? TLY_F_EXP : 0,
	};
	struct agg_slot *s;
	int64_t idx;

	h.slot = (uint16_t)tly_slot_of(tensor, chunk, exp, a->cfg.n_slots);
	idx = slot_is(&a->slots[h.slot], &h) ? h.slot : fb_find(a, &h);
	if (idx < 0)
		return;
	s = &a->slots[idx];
	if (s->state != SLOT_DONE)
		return;
	s->confirmed |= bit;
	a->c.confirms++;
	if ((s->confirmed & a->all) == a->all)
		slot_release(a, s, now);
}

/* each range costs at most TLY_CONFIRM_RANGE_MAX lookups */
static void agg_confirm(struct tly_agg *a, const struct tly_hdr *h,
			const uint8_t *pkt, uint64_t now)
{
	const uint8_t *p = pkt + TLY_HDR_LEN;
	uint64_t bit = 1ull << h->rank;
	unsigned int i, j;

	for (i = 0; i < h->aux; i++, p += 8) {
		uint32_t tensor = ((uint32_t)p[0] << 24) | (p[1] << 16) |
				  (p[2] << 8) | p[3];
		uint16_t first = (uint16_t)((p[4] << 8) | p[5]);
		uint8_t exp = p[6] >> 7;
		unsigned int count = p[7] + 1u;

		for (j = 0; j < count; j++)
			agg_confirm_one(a, tensor, (uint16_t)(first + j), exp,
					bit, now);
	}
}

void tly_agg_rx(struct tly_agg *a, const uint8_t *frame, size_t len,
		uint64_t now)
{
	const uint8_t *pkt;
	struct tly_hdr h;
	uint8_t dscp;

	if (tly_frame_rx(&a->cfg.net, &a->lim, frame, len, &h, &pkt, &dscp,
			 &a->c) != TLY_OK)
		return;
	switch (h.type) {
	case TLY_T_DATA:
		agg_data(a, &h, pkt, dscp, now);
		break;
	case TLY_T_CONFIRM:
		agg_confirm(a, &h, pkt, now);
		break;
	default:
		a->c.drops[TLY_E_ROLE]++;
	}
}

void tly_agg_rx_burst(struct tly_agg *a, const uint8_t *const *frames,
		      const uint16_t *lens, unsigned int n, uint64_t now)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (i + 2 < n) {
			/* headers two ahead, so their misses overlap */
			__builtin_prefetch(frames[i + 2]);
			__builtin_prefetch(frames[i + 2] + 64);
		}
		tly_agg_rx(a, frames[i], lens[i], now);
	}
}

void tly_agg_poll(struct tly_agg *a, uint64_t now)
{
	uint32_t n;

	for (n = 0; n < a->cfg.poll_budget && n < a->n_total; n++) {
		uint32_t idx = a->cursor;
		struct agg_slot *s = &a->slots[idx];

		a->cursor = idx + 1 == a->n_total ? 0 : idx + 1;
		if (s->state != SLOT_DONE || (int64_t)(now - s->t_last) < 0)
			continue;
		for (uint16_t r = 0; r < a->cfg.n_workers; r++) {
			if (s->confirmed & (1ull << r))
				continue;
			a->c.retx++;
			result_unicast(a, idx, r);
		}
		if (s->probes < 6)
			s->probes++;
		s->t_last = now + (a->cfg.probe_ns << s->probes);
	}
}
