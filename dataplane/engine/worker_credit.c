// SPDX-License-Identifier: BSD-3-Clause
/*
 * worker_credit.c - the worker's window: one credit per packet in flight,
 * at most cfg.window in total and, per destination node, at most that
 * node's congestion window (cc.c), fed with RTT samples and loss signals.
 *
 * Why per destination: congestion is a property of the path to a node,
 * and every tensor's packets to that node share it; a window per tensor
 * stream would multiply the load on a path by the tensors in progress and
 * leave priority, which is the scheduler's business, to the network.
 */
#include "dataplane/engine/worker_internal.h"

#include <errno.h>
#include <stdlib.h>

int credit_init(struct tly_worker *w)
{
	uint16_t n = w->cfg.n_workers, i;

	for (i = 0; i < w->cfg.n_aggs; i++)
		if (w->aggs[i] >= n)
			n = (uint16_t)(w->aggs[i] + 1);
	w->ccp = (struct tly_cc_params){
		.min_window = w->cfg.cc_min_window,
		.max_window = w->cfg.window,
		.init_window = w->cfg.cc_init_window,
		.target_ns = w->cfg.cc_target_ns,
		.base_win_ns = w->cfg.cc_base_ns,
	};
	tly_cc_params_fill(&w->ccp);
	w->dests = calloc(n, sizeof(*w->dests));
	if (!w->dests)
		return -ENOMEM;
	w->n_dests = n;
	for (i = 0; i < n; i++)
		tly_cc_init(&w->dests[i].cc, &w->ccp, 0);
	return 0;
}

void credit_fini(struct tly_worker *w)
{
	free(w->dests);
	w->dests = NULL;
}

int credit_room(const struct tly_worker *w, uint16_t dst)
{
	if (w->inflight >= w->cfg.window)
		return 0;
	if (w->cfg.cc_off || dst >= w->n_dests)
		return 1;
	return w->dests[dst].inflight < tly_cc_window(&w->dests[dst].cc,
						      &w->ccp);
}

static struct wdest *dest_of(struct tly_worker *w, const struct wtensor *t,
			     uint32_t idx)
{
	uint16_t dst = t->algo->dest(w, t, idx);

	return dst < w->n_dests ? &w->dests[dst] : NULL;
}

/*
 * The configured timeout, or the path's srtt + 4 rttvar when that is
 * longer: a queue a competing TCP flow keeps full (tens of ms behind a
 * shaper) must not fire timeouts, which would resend what is only late
 * and read as losses.  Backed off per retry up to rto_max_ns (or the
 * path's timeout, if longer).
 */
static uint64_t rto_of(const struct tly_worker *w, const struct wdest *d,
		       uint8_t retries)
{
	uint64_t base = w->cfg.rto_ns, max = w->cfg.rto_max_ns, rto;

	if (d && tly_cc_rto(&d->cc) > base)
		base = tly_cc_rto(&d->cc);
	if (base > max)
		max = base;
	rto = base << (retries < 16 ? retries : 16);
	return rto < max ? rto : max;
}

uint64_t credit_rto(struct tly_worker *w, const struct wtensor *t,
		    uint32_t idx, uint8_t retries)
{
	return rto_of(w, w->cfg.cc_off ? NULL : dest_of(w, t, idx), retries);
}

uint64_t credit_rto_node(const struct tly_worker *w, uint16_t dst,
			 uint8_t retries)
{
	return rto_of(w, w->cfg.cc_off || dst >= w->n_dests ? NULL :
			 &w->dests[dst], retries);
}

void credit_take(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		 uint64_t now)
{
	struct wchunk *ch = &t->chunks[idx];
	struct wdest *d = dest_of(w, t, idx);

	ch->state = C_INFLIGHT;
	ch->sent = now;
	/* a fresh transmission (the first, or after a refusal, which
	 * answered the one before): its answer is a clean sample */
	ch->timed = 1;
	ch->inferred = 0;
	w->inflight++;
	if (!d)
		return;
	d->inflight++;
	if (w->cfg.profile != TLY_PROFILE_SWITCH || ch->held)
		return;		/* a refused chunk again: already held */
	ch->held = d->held < w->cfg.held_max ? HELD : HELD_PAST;
	if (d->held >= w->cfg.held_max + d->extra) {
		d->extra++;		/* the escape (credit_hold_room) */
		d->escapes++;
	}
	d->held++;
	if (d->held > d->held_peak)
		d->held_peak = d->held;
	d->held_changed = now;
}

void credit_release(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		    int answered, uint64_t now)
{
	struct wchunk *ch = &t->chunks[idx];
	struct wdest *d;

	if (ch->state != C_INFLIGHT)
		return;
	w->inflight--;
	d = dest_of(w, t, idx);
	if (!d)
		return;
	d->inflight--;
	if (!answered)
		return;
	if (!d->any_answer || ch->sent > d->answered)
		d->answered = ch->sent;
	d->any_answer = 1;
	if (!w->cfg.cc_off) {
		/* the sample ends when the answer reached the host, not when
		 * this thread got round to it (tly_worker_rx_at) */
		uint64_t at = w->rx_arrival && w->rx_arrival < now ?
			      w->rx_arrival : now;

		tly_cc_on_ack(&d->cc, &w->ccp,
			      ch->timed && at > ch->sent ? at - ch->sent : 0,
			      now);
	}
}

/*
 * What a worker holds at an aggregator, in the switch profile: chunks
 * launched and not yet placed, whether in flight (a credit), held in a
 * partial sum (ACKED: the ACK gave the credit back) or refused (DEFER).
 * The window bounds only the first; without a bound on all three a
 * worker ahead of the others fills the pool with partials that wait for
 * them, and every one of them is probed (docs/xdp-aggregator.md, "Under
 * load").  A fresh chunk launches only below cfg.held_max: by default
 * its share of the pool, so the workers together claim at most the
 * pool, and at most 4 windows, so that they claim little of a large one
 * (hash collisions answer BUSY, which backs off from rto; with 16
 * windows a 65535-slot pool and 65536-chunk tensors stalled for seconds
 * in net4-bench's xdp scenario, with 4 it did not).
 *
 * The bound must not stall the protocol: workers that hold disjoint
 * sets (each ahead on a tensor the others have not reached, as another
 * priority order makes them) would wait on each other for good.  So
 * after a retransmission timeout in which nothing there was launched or
 * placed, one more chunk may be held (extra).  A chunk launched past the
 * bound that is placed lets two more go (its own room and one extra, up
 * to the window): when the others were waiting for this worker, that
 * doubles into a full window within a few round trips.  A chunk that was
 * within the bound gives one extra back as it is placed.  So a worker
 * holds at most held_max + window, plus one a timeout while it waits
 * for a slow worker, and the extra drains as the others catch up.
 */
int credit_hold_room(const struct tly_worker *w, uint16_t dst, uint64_t now)
{
	const struct wdest *d;

	if (w->cfg.profile != TLY_PROFILE_SWITCH || dst >= w->n_dests)
		return 1;
	d = &w->dests[dst];
	if (d->held < w->cfg.held_max + d->extra)
		return 1;
	return now - d->held_changed >= credit_rto_node(w, dst, 0);
}

void credit_done(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		 uint64_t now)
{
	struct wchunk *ch = &t->chunks[idx];
	struct wdest *d;
	uint8_t held = ch->held;

	if (!held)
		return;
	ch->held = 0;
	d = dest_of(w, t, idx);
	if (!d)
		return;
	d->held--;
	d->held_changed = now;
	if (held == HELD_PAST && d->extra < w->cfg.window)
		d->extra++;
	else if (held == HELD && d->extra)
		d->extra--;
}

/*
 * ACKED chunks are probed (DATA again, RETX) to recover a RESULT or a
 * partial that was lost.  Each one every acked_ns made the probes grow
 * with the chunks held; in the switch profile each aggregator gets
 * cfg.acked_probes a round trip (srtt, or rto_ns before a sample or
 * with cc_off), taken by the due chunks in the order the timers are
 * scanned: tensors in send order, each from its oldest chunk.  A due
 * chunk that finds the round spent waits for the next, keeping its
 * place, so the oldest go first.
 */
int credit_probe(struct tly_worker *w, const struct wtensor *t,
		 uint32_t idx, uint64_t now, uint64_t *retry)
{
	struct wdest *d = dest_of(w, t, idx);
	uint64_t round;

	if (w->cfg.profile != TLY_PROFILE_SWITCH || !d)
		return 1;
	round = !w->cfg.cc_off && d->cc.srtt ? d->cc.srtt : w->cfg.rto_ns;
	if (!round)
		round = 1;
	if (now - d->probe_round >= round) {
		d->probe_round = now;
		d->probes_in_round = 0;
	}
	if (d->probes_in_round >= w->cfg.acked_probes) {
		*retry = d->probe_round + round;
		return 0;
	}
	d->probes_in_round++;
	d->probes++;
	if (t->chunks[idx].inferred) {
		d->inferred_probed++;	/* its first probe, at its rto */
		t->chunks[idx].inferred = 0;
	}
	return 1;
}

int tly_worker_held(const struct tly_worker *w, uint16_t node,
		    struct tly_worker_held *out)
{
	const struct wdest *d;

	if (node >= w->n_dests)
		return -ENOENT;
	d = &w->dests[node];
	*out = (struct tly_worker_held){
		.held = d->held, .peak = d->held_peak,
		.max = w->cfg.held_max, .escapes = d->escapes,
		.probes = d->probes, .inferred = d->inferred,
		.inferred_probed = d->inferred_probed,
	};
	return 0;
}

/*
 * A timeout is a loss signal only when the destination has answered a
 * packet sent after this one: then the path works and this packet (or
 * its answer) is missing, a gap.  A destination that answered nothing
 * since is waiting, not losing: an aggregator holds our contribution
 * until the other workers' arrive, a ring peer refuses until it has the
 * tensor, so the first timeouts of a worker ahead of the others must not
 * shrink its window.
 */
void credit_timeout(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		    uint64_t now)
{
	struct wchunk *ch = &t->chunks[idx];
	struct wdest *d = dest_of(w, t, idx);

	ch->timed = 0;				/* Karn */
	if (!d || w->cfg.cc_off)
		return;
	if (d->any_answer && d->answered > ch->sent)
		tly_cc_on_loss(&d->cc, &w->ccp, now);
}
