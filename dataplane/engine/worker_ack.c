// SPDX-License-Identifier: BSD-3-Clause
/*
 * worker_ack.c - fewer ACKs of DATA in the switch profile: one fresh
 * DATA in cfg.ack_every to an aggregator asks for its ACK (ACK_REQ), and
 * that ACK stands for the fresh DATA sent there before it.
 *
 * Why it is safe: what an ACK of a DATA tells the worker is "placed in a
 * partial sum, give the credit back and wait for the RESULT" (C_ACKED).
 * A chunk taken as placed that was in fact lost is an ACKED chunk whose
 * partial is missing, which the protocol already recovers: ACKED chunks
 * are probed (RETX + ACK_REQ) until their RESULT comes, as after an
 * eviction.  So an inference that is wrong costs time, never a sum.  The
 * time is kept short: a chunk placed by inference keeps the timer of its
 * DATA, so its first probe goes when the DATA would have been re-sent had
 * it asked (its rto), not acked_ns later; the probe's ACK then arms the
 * usual acked_ns.  A probe of a chunk that was placed and whose RESULT
 * waits for slower workers costs a DATA and an ACK, once.  It
 * is right whenever the path keeps order, which a switch's or a host's
 * does but for loss: the inference is drawn only from the answer to a
 * fresh DATA (a retransmission's says nothing of what was sent before
 * the original).
 *
 * Which DATA asks: every ack_every-th fresh one to a node, and at least
 * two a window (the node's congestion window, which may be far below
 * cfg.window): so at most half the window waits for RESULTs rather than
 * ACKs (a tail: the last chunks of a burst, when no later DATA asks).
 * With a fixed ack_every a congestion window cut to 8 left whole
 * windows waiting, and a 64 MiB job ran at a quarter of its speed.  A
 * tail's chunk whose RESULT does not come within its timeout is sent
 * again with ACK_REQ.
 */
#include "dataplane/engine/worker_internal.h"

#include <errno.h>
#include <stdlib.h>

int ack_init(struct tly_worker *w)
{
	uint16_t i;

	if (w->cfg.profile != TLY_PROFILE_SWITCH || w->cfg.ack_every <= 1)
		return 0;
	for (i = 0; i < w->n_dests; i++) {
		w->dests[i].sent = calloc(w->cfg.window,
					  sizeof(*w->dests[i].sent));
		if (!w->dests[i].sent)
			return -ENOMEM;
	}
	return 0;
}

void ack_fini(struct tly_worker *w)
{
	uint16_t i;

	for (i = 0; w->dests && i < w->n_dests; i++) {
		free(w->dests[i].sent);
		w->dests[i].sent = NULL;
	}
}

static struct wdest *ack_dest(struct tly_worker *w, const struct wtensor *t,
			      uint32_t idx)
{
	uint16_t dst;

	if (w->cfg.profile != TLY_PROFILE_SWITCH || w->cfg.ack_every <= 1)
		return NULL;
	dst = t->algo->dest(w, t, idx);
	return dst < w->n_dests && w->dests[dst].sent ? &w->dests[dst] : NULL;
}

/* is the record at the ring's front still a chunk in flight? */
static struct wchunk *rec_live(struct tly_worker *w, const struct sent_rec *r,
			       struct wtensor **tp)
{
	struct wtensor *t = worker_find(w, r->tensor);
	struct wchunk *ch;

	if (!t || r->idx >= t->n_chunks + t->n_groups)
		return NULL;
	ch = &t->chunks[r->idx];
	if (ch->state != C_INFLIGHT || ch->sent != r->sent)
		return NULL;
	*tp = t;
	return ch;
}

/* drop records at the front whose chunk was answered since */
static void ring_trim(struct tly_worker *w, struct wdest *d)
{
	struct wtensor *t;

	while (d->sent_n && !rec_live(w, &d->sent[d->sent_head], &t)) {
		d->sent_head = (d->sent_head + 1) % w->cfg.window;
		d->sent_n--;
	}
}

/*
 * A fresh DATA of @idx is about to go (its credit taken): ACK_REQ or 0.
 * Recorded in send order; with the ring full (stale records the front
 * trim cannot pass), it asks and is not recorded.
 */
uint8_t ack_fresh_flags(struct tly_worker *w, struct wtensor *t, uint32_t idx)
{
	struct wdest *d = ack_dest(w, t, idx);
	struct sent_rec *r;
	uint32_t every;
	uint8_t ask;

	if (!d)
		return TLY_F_ACK_REQ;
	ring_trim(w, d);
	if (d->sent_n == w->cfg.window) {
		d->unreq = 0;
		return TLY_F_ACK_REQ;
	}
	every = w->cfg.ack_every;
	if (!w->cfg.cc_off) {
		uint32_t half = tly_cc_window(&d->cc, &w->ccp) / 2;

		if (half < every)
			every = half ? half : 1;
	}
	ask = d->unreq + 1 >= every;
	r = &d->sent[(d->sent_head + d->sent_n) % w->cfg.window];
	*r = (struct sent_rec){
		.tensor = t->d.id, .idx = idx, .sent = t->chunks[idx].sent,
	};
	d->sent_n++;
	d->unreq = ask ? 0 : d->unreq + 1;
	return ask ? TLY_F_ACK_REQ : 0;
}

/*
 * The answer (ACK or BUSY) to @idx's fresh DATA came, not re-sent since
 * (timed: the first transmission of its credit, or the first after a
 * refusal): the fresh DATA recorded before it to the same node are taken
 * as placed (C_ACKED), as if their own ACKs had come, without an RTT
 * sample.  A BUSY says as much as an ACK: the aggregator refuses a DATA
 * with BUSY whether it asked or not, so one that came before the refused
 * one and is still in flight was not refused.
 */
void ack_infer(struct tly_worker *w, struct wtensor *t, uint32_t idx,
	       uint64_t now)
{
	struct wdest *d = ack_dest(w, t, idx);
	uint32_t i, n, pos;

	if (!d || t->chunks[idx].state != C_INFLIGHT || !t->chunks[idx].timed)
		return;
	/* find the answered one; nothing is inferred if it is not recorded */
	for (n = 0; n < d->sent_n; n++) {
		const struct sent_rec *r;

		r = &d->sent[(d->sent_head + n) % w->cfg.window];
		if (r->tensor == t->d.id && r->idx == idx &&
		    r->sent == t->chunks[idx].sent)
			break;
	}
	if (n == d->sent_n)
		return;
	for (i = 0; i < n; i++) {
		struct wtensor *et;
		struct wchunk *ch;

		pos = (d->sent_head + i) % w->cfg.window;
		ch = rec_live(w, &d->sent[pos], &et);
		if (!ch)
			continue;
		/* its timer stays at its DATA's rto: see the head comment */
		ch->timed = 0;
		credit_release(w, et, d->sent[pos].idx, 1, now);
		ch->state = C_ACKED;
		ch->retries = 0;
		ch->inferred = 1;
		d->inferred++;
	}
	/* the answered one goes too */
	d->sent_head = (d->sent_head + n + 1) % w->cfg.window;
	d->sent_n -= n + 1;
}
