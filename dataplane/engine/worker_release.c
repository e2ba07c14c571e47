// SPDX-License-Identifier: BSD-3-Clause
/*
 * worker_release.c - the switch profile's releases (docs/switch-profile.md,
 * "The worker's side"): once a chunk's RESULT is placed, its receipt is
 * CONFIRMed (ACK_REQ; up to cfg.release_batch chunks in one CONFIRM to an
 * aggregator) and re-sent on rto x 2^retries until the aggregator's ACK
 * (TLY_F_RELEASED) naming it comes back.  The aggregator keeps no timers,
 * so these retransmissions are what frees its DONE slots.
 *
 * The chunks releasing are kept apart from their tensors (a tensor
 * completes without waiting for them) in one open-addressed table of
 * 2 x release_max entries, keyed by tly_chunk_key(): linear probing,
 * deletion by backward shift (no tombstones).  At most release_max are
 * kept; a RESULT that would need one more is not placed (the caller
 * drops it, the chunk's retransmitted DATA fetches it again).
 */
#include "dataplane/engine/worker_internal.h"

#include <errno.h>
#include <stdlib.h>

int release_init(struct tly_worker *w)
{
	uint32_t cap = 16;

	if (w->cfg.profile != TLY_PROFILE_SWITCH)
		return 0;
	while (cap < 2 * w->cfg.release_max)
		cap *= 2;
	w->rel = calloc(cap, sizeof(*w->rel));
	w->rb = calloc(w->n_dests ? w->n_dests : 1, sizeof(*w->rb));
	if (!w->rel || !w->rb)
		return -ENOMEM;
	w->rel_mask = cap - 1;
	w->rel_n = 0;
	w->rel_deadline = NEVER;
	return 0;
}

void release_fini(struct tly_worker *w)
{
	free(w->rel);
	free(w->rb);
	w->rel = NULL;
	w->rb = NULL;
}

static uint32_t rel_home(const struct tly_worker *w, uint64_t key)
{
	return (uint32_t)tly_key_hash(key) & w->rel_mask;
}

static struct wrelease *rel_find(struct tly_worker *w, uint64_t key)
{
	uint32_t i = rel_home(w, key);

	if (!w->rel)
		return NULL;
	for (; w->rel[i].used; i = (i + 1) & w->rel_mask)
		if (w->rel[i].key == key)
			return &w->rel[i];
	return NULL;
}

/* remove entry @i, shifting back the entries of its probe run */
static void rel_remove(struct tly_worker *w, uint32_t i)
{
	uint32_t j = i;

	w->rel[i].used = 0;
	w->rel_n--;
	for (;;) {
		uint32_t home;

		j = (j + 1) & w->rel_mask;
		if (!w->rel[j].used)
			return;
		home = rel_home(w, w->rel[j].key);
		/* j may move to the hole i unless home lies in (i, j] */
		if (((j - home) & w->rel_mask) < ((j - i) & w->rel_mask))
			continue;
		w->rel[i] = w->rel[j];
		w->rel[j].used = 0;
		i = j;
	}
}

/* the CONFIRM of the chunks queued for node @dst: the first in the
 * header, the rest as receipts after it (aux) */
static void release_flush(struct tly_worker *w, uint16_t dst)
{
	struct release_batch *b = &w->rb[dst];
	struct tly_hdr h = {
		.type = TLY_T_CONFIRM, .job = w->cfg.job,
		.cookie = w->cfg.cookie, .rank = w->cfg.rank,
		.flags = (uint8_t)(b->flags | (b->exp ? TLY_F_EXP : 0)),
		.tensor = b->tensor[0], .chunk = b->chunk[0],
		.aux = (uint8_t)(b->n - 1),
	};
	struct tly_out o;
	unsigned int i;

	if (!b->n)
		return;
	h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, b->exp,
				       w->cfg.n_slots);
	/* not sent: the timers (or the next RESULT) send them again */
	if (!tly_out_begin(&o, &w->cfg.ops, &w->cfg.net, &w->c, w->cfg.rank,
			   dst, 0, TLY_HDR_LEN + h.aux * TLY_RECEIPT_LEN)) {
		tly_hdr_write(o.pkt, &h);
		for (i = 1; i < b->n; i++)
			tly_receipt_put(o.pkt + TLY_HDR_LEN +
						(i - 1) * TLY_RECEIPT_LEN,
					b->tensor[i], b->chunk[i],
					(uint16_t)tly_slot_of(b->tensor[i],
							      b->chunk[i],
							      b->exp,
							      w->cfg.n_slots));
		tly_out_send(&o, &w->cfg.ops, &w->cfg.net, &w->c);
		w->c.confirms += b->n;
	}
	b->n = 0;
	b->flags = 0;
}

void release_flush_all(struct tly_worker *w)
{
	uint16_t d;

	for (d = 0; w->rb_pending && d < w->n_dests; d++)
		if (w->rb[d].n)
			release_flush(w, d);
	w->rb_pending = 0;
}

/*
 * Queue @chunk's receipt for aggregator node @dst; a CONFIRM leaves when
 * cfg.release_batch are queued there, or at the end of the poll
 * (release_flush_all()).  Chunks of one CONFIRM share EXP and ACK_REQ.
 */
void release_confirm(struct tly_worker *w, uint32_t tensor, uint16_t chunk,
		     uint8_t exp, uint16_t dst, uint8_t flags)
{
	struct release_batch *b;

	if (dst >= w->n_dests)
		return;
	b = &w->rb[dst];
	if (b->n && (b->exp != exp ||
		     ((b->flags ^ flags) & TLY_F_ACK_REQ)))
		release_flush(w, dst);
	b->tensor[b->n] = tensor;
	b->chunk[b->n] = chunk;
	b->exp = exp;
	b->flags |= flags;
	b->n++;
	w->rb_pending = 1;
	if (b->n >= w->cfg.release_batch)
		release_flush(w, dst);
}

int release_room(const struct tly_worker *w)
{
	return w->rel_n < w->cfg.release_max;
}

void release_start(struct tly_worker *w, uint32_t tensor, uint16_t chunk,
		   uint8_t exp, uint16_t dst, uint64_t now)
{
	uint64_t key = tly_chunk_key(tensor, chunk, exp);
	struct wrelease *r = rel_find(w, key);
	uint32_t i;

	if (!r) {
		for (i = rel_home(w, key); w->rel[i].used;
		     i = (i + 1) & w->rel_mask)
			;
		r = &w->rel[i];
		w->rel_n++;
	}
	*r = (struct wrelease){ .key = key, .dst = dst, .used = 1 };
	r->deadline = now + credit_rto_node(w, dst, 0);
	if (r->deadline < w->rel_deadline)
		w->rel_deadline = r->deadline;
	release_confirm(w, tensor, chunk, exp, dst, TLY_F_ACK_REQ);
}

/*
 * A RESULT of a chunk already placed: CONFIRM it again.  Releasing: the
 * ACK is still wanted.  Released: this RESULT comes from a slot that
 * completed again after it was freed (every worker's DATA duplicated or
 * retransmitted late), and that slot waits for every receipt with no
 * timer of its own, so the chunk is released again, until ACKed, while
 * the table has room (else one CONFIRM).
 */
void release_again(struct tly_worker *w, uint32_t tensor, uint16_t chunk,
		   uint8_t exp, uint16_t dst, uint64_t now)
{
	struct wrelease *r = rel_find(w, tly_chunk_key(tensor, chunk, exp));

	if (r)
		release_confirm(w, tensor, chunk, exp, dst,
				TLY_F_RETX | TLY_F_ACK_REQ);
	else if (release_room(w))
		release_start(w, tensor, chunk, exp, dst, now);
	else
		release_confirm(w, tensor, chunk, exp, dst, 0);
}

static void release_acked_one(struct tly_worker *w, uint32_t tensor,
			      uint16_t chunk, uint8_t exp)
{
	struct wrelease *r = rel_find(w, tly_chunk_key(tensor, chunk, exp));

	if (!r) {
		w->c.drops[TLY_E_STALE]++;	/* a duplicate ACK */
		return;
	}
	w->c.acks++;
	rel_remove(w, (uint32_t)(r - w->rel));
}

void release_acked(struct tly_worker *w, const struct tly_hdr *h,
		   const uint8_t *pkt)
{
	uint8_t exp = !!(h->flags & TLY_F_EXP);
	const uint8_t *r = pkt + TLY_HDR_LEN;
	unsigned int i;

	release_acked_one(w, h->tensor, h->chunk, exp);
	for (i = 0; i < h->aux; i++, r += TLY_RECEIPT_LEN)
		release_acked_one(w, tly_get32(r), tly_get16(r + 4), exp);
}

void release_poll(struct tly_worker *w, uint64_t now)
{
	uint64_t next = NEVER;
	uint32_t i;

	if (!w->rel || w->rel_deadline > now)
		return;
	for (i = 0; i <= w->rel_mask; i++) {
		struct wrelease *r = &w->rel[i];

		if (!r->used)
			continue;
		if (r->deadline <= now) {
			if (r->retries < 16)
				r->retries++;
			w->c.retx++;
			release_confirm(w, (uint32_t)(r->key >> 32),
					(uint16_t)(r->key >> 1),
					(uint8_t)(r->key & 1), r->dst,
					TLY_F_RETX | TLY_F_ACK_REQ);
			r->deadline = now + credit_rto_node(w, r->dst,
							     r->retries);
		}
		if (r->deadline < next)
			next = r->deadline;
	}
	w->rel_deadline = next;
}

uint32_t tly_worker_releasing(const struct tly_worker *w)
{
	return w->rel_n;
}
