// SPDX-License-Identifier: BSD-3-Clause
/*
 * ring.c - ring all-reduce (reduce-scatter, then all-gather) over the same
 * packets, window and timers as aggregation.
 *
 * Chunk c belongs to segment j = c * n / C.  It travels 2(n-1) hops: hop p
 * goes from rank (j + p) % n to (j + p + 1) % n.  Hops 0 .. n-2 carry the
 * running sum (each receiver adds its own data: reduce-scatter); the
 * receiver of hop n-2 holds the final value and starts the all-gather,
 * hops n-1 .. 2n-3, which carry it to every other rank.  Every hop is
 * acknowledged (RING_ACK) and retransmitted until it is; a receiver adds a
 * hop at most once (per-chunk flags), so duplicates change nothing.
 * Sums are float32 in a fixed order (so every rank ends with the same
 * bits), or wrapping int32.
 *
 * Reached through worker_ring_algo only; it uses the worker's common
 * machinery through worker_internal.h's narrow interface (credits,
 * timers, lookups) and hands a tensor it completed back from rx().
 */
#include "dataplane/engine/worker_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/engine/quant.h"
#include "dataplane/half.h"

static uint32_t seg_of(const struct tly_worker *w, const struct wtensor *t,
		       uint32_t c)
{
	return (uint32_t)((uint64_t)c * w->cfg.n_workers / t->n_chunks);
}

/* own element i of the tensor, as the bits of the ring's sum type */
static uint32_t own_word(const struct wtensor *t, size_t i)
{
	return tly_dtype(t->d.dtype)->word(t->d.src, i);
}

static void write_dst(struct tly_worker *w, struct wtensor *t, uint32_t c)
{
	size_t n = chunk_elems(t, c, w->cfg.k), off = (size_t)c * w->cfg.k;
	const struct tly_dtype_info *dt = tly_dtype(t->d.dtype);

	dt->from_words((uint8_t *)t->d.dst + off * dt->size, t->acc + off, n);
	t->done++;
}

/* the ready queue: one entry per chunk at most, plus one so full != empty */
#define QUEUE_LEN(t)	((t)->n_chunks + 1)

static void enqueue(struct wtensor *t, uint32_t c)
{
	t->queue[t->q_tail] = c;
	t->q_tail = (t->q_tail + 1) % QUEUE_LEN(t);
}

static int ring_setup(struct tly_worker *w, struct wtensor *t)
{
	uint32_t n = w->cfg.n_workers, c;
	size_t i;

	t->acc = tensor_buf(w, t, WBUF_ACC, (size_t)t->n_chunks * w->cfg.k * 4,
			    false);
	t->chunks = tensor_buf(w, t, WBUF_CHUNKS,
			       t->n_chunks * sizeof(*t->chunks), true);
	t->queue = tensor_buf(w, t, WBUF_QUEUE,
			      QUEUE_LEN(t) * sizeof(*t->queue), false);
	if (!t->acc || !t->chunks || !t->queue)
		return -ENOMEM;
	if (n == 1) {
		for (i = 0; i < t->d.count; i++)
			t->acc[i] = own_word(t, i);
		for (c = 0; c < t->n_chunks; c++) {
			write_dst(w, t, c);
			t->chunks[c].state = C_DONE;
		}
		return 0;
	}
	for (c = 0; c < t->n_chunks; c++) {
		struct wchunk *ch = &t->chunks[c];
		uint32_t p1 = (w->cfg.rank + n - seg_of(w, t, c)) % n;

		ch->hop = (uint16_t)p1;
		t->ring_unacked += 1 + (p1 + 3 <= n);
		if (p1 == 0) {
			ch->state = C_READY;
			enqueue(t, c);
		} else {
			ch->state = C_IDLE;
		}
	}
	return 0;
}

static int ring_next(struct tly_worker *w, struct wtensor *t, uint32_t *c)
{
	(void)w;
	while (t->q_head != t->q_tail) {
		uint32_t x = t->queue[t->q_head];

		t->q_head = (t->q_head + 1) % QUEUE_LEN(t);
		if (t->chunks[x].state == C_READY) {
			*c = x;
			return 1;
		}
	}
	return 0;
}

/* put back @c, which ring_next() just returned: its entry is still there */
static void ring_unget(struct wtensor *t, uint32_t c)
{
	t->q_head = (t->q_head + QUEUE_LEN(t) - 1) % QUEUE_LEN(t);
	t->queue[t->q_head] = c;
}

/* every hop of ours goes to the next rank */
static uint16_t ring_dest(const struct tly_worker *w, const struct wtensor *t,
			  uint32_t c)
{
	(void)t;
	(void)c;
	return (uint16_t)((w->cfg.rank + 1) % w->cfg.n_workers);
}

/* hops arrive in any order: every chunk can hold a timer */
static void ring_span(struct wtensor *t, uint32_t *p0, uint32_t *p1)
{
	*p0 = 0;
	*p1 = t->n_chunks;
}

static uint32_t ring_at(const struct wtensor *t, uint32_t pos)
{
	(void)t;
	return pos;
}

/* an idle chunk waits for a hop in, any other for our hop's ACK */
static uint16_t ring_peer(const struct tly_worker *w, const struct wtensor *t,
			  uint32_t c)
{
	uint16_t n = w->cfg.n_workers, me = w->cfg.rank;

	return t->chunks[c].state == C_IDLE ? (uint16_t)((me + n - 1) % n) :
					      (uint16_t)((me + 1) % n);
}

static void ring_send(struct tly_worker *w, struct wtensor *t, uint32_t c,
	       uint8_t flags)
{
	struct wchunk *ch = &t->chunks[c];
	size_t n = chunk_elems(t, c, w->cfg.k), off = (size_t)c * w->cfg.k;
	struct tly_hdr h = {
		.type = TLY_T_RING, .job = w->cfg.job,
		.cookie = w->cfg.cookie, .rank = w->cfg.rank,
		.slot = ch->hop, .tensor = t->d.id, .chunk = (uint16_t)c,
	};
	struct tly_out o;

	h.flags = flags & TLY_F_RETX;
	if (tly_dtype(t->d.dtype)->exact)
		h.flags |= TLY_F_INT;
	if (tly_out_begin(&o, &w->cfg.ops, &w->cfg.net, &w->c, w->cfg.rank,
			  ring_dest(w, t, c), prio_dscp(t->d.prio),
			  TLY_HDR_LEN + 4u * w->cfg.k))
		return;
	tly_hdr_write(o.pkt, &h);
	if (ch->hop == 0) {
		for (size_t i = 0; i < n; i++)
			t->acc[off + i] = own_word(t, off + i);
	}
	tly_pack_u32(o.pkt + TLY_HDR_LEN, t->acc + off, n, w->cfg.k);
	tly_out_send(&o, &w->cfg.ops, &w->cfg.net, &w->c);
}

static void ring_ack_send(struct tly_worker *w, uint16_t dst,
			  uint32_t tensor, uint16_t hop, uint16_t chunk,
			  uint8_t more, int refuse)
{
	struct tly_hdr h = {
		.type = TLY_T_RING_ACK, .job = w->cfg.job,
		.cookie = w->cfg.cookie,
		.rank = w->cfg.rank, .slot = hop, .tensor = tensor,
		.chunk = chunk, .aux = more,
		.flags = refuse ? TLY_F_REFUSE : 0,
	};
	struct tly_out o;

	if (tly_out_begin(&o, &w->cfg.ops, &w->cfg.net, &w->c, w->cfg.rank,
			  dst, 0, TLY_HDR_LEN))
		return;
	tly_hdr_write(o.pkt, &h);
	tly_out_send(&o, &w->cfg.ops, &w->cfg.net, &w->c);
	if (refuse)
		w->c.busy++;
	else
		w->c.acks++;
}

static void ring_ack_flush(struct tly_worker *w)
{
	struct ring_ack_range *p = &w->ack;

	if (!p->count)
		return;
	ring_ack_send(w, p->dst, p->tensor, p->hop, p->first,
		      (uint8_t)(p->count - 1), 0);
	p->count = 0;
}

/*
 * Acknowledge a hop.  Consecutive chunks of one segment share a hop, so
 * ACKs of hops that arrive together (one rx burst, up to the next poll)
 * travel as one RING_ACK naming chunk .. chunk + aux.  A refusal goes at
 * once and alone.
 */
static void ring_ack(struct tly_worker *w, const struct tly_hdr *in,
		     int refuse)
{
	struct ring_ack_range *p = &w->ack;

	if (refuse) {
		ring_ack_send(w, in->rank, in->tensor, in->slot, in->chunk, 0,
			      1);
		return;
	}
	if (p->count && p->dst == in->rank && p->tensor == in->tensor &&
	    p->hop == in->slot && (uint32_t)p->first + p->count == in->chunk &&
	    p->count < 256) {
		p->count++;
		return;
	}
	ring_ack_flush(w);
	p->dst = in->rank;
	p->tensor = in->tensor;
	p->hop = in->slot;
	p->first = in->chunk;
	p->count = 1;
}

/*
 * Whether @id is among the ring tensors this worker finished.  Only the
 * entries written so far count: the table starts as zeros, and 0 is a
 * valid id (tly_tensor_id(0, 0, 0)), so scanning all of it would take a
 * hop for an unsubmitted tensor 0 as a stale one and acknowledge it: the
 * sender would drop the hop and the ring would never complete.
 */
static int retired(const struct tly_worker *w, uint32_t id)
{
	uint32_t i;

	for (i = 0; i < w->retired_n; i++)
		if (w->retired[i] == id)
			return 1;
	return 0;
}

static void ring_flush(struct tly_worker *w, uint64_t now)
{
	(void)now;
	ring_ack_flush(w);
}

/* remember a finished tensor's id: its late hops are ACKed, not refused */
static void ring_retire(struct tly_worker *w, const struct wtensor *t)
{
	w->retired[w->retired_pos] = t->d.id;
	w->retired_pos = (w->retired_pos + 1) % RETIRED;
	if (w->retired_n < RETIRED)
		w->retired_n++;
}

/* our hop on chunk @c is known received: free its credit.  @answered:
 * by its RING_ACK (an RTT sample), not proven by a later hop */
static void hop_acked(struct tly_worker *w, struct wtensor *t, uint32_t c,
		      int answered, uint64_t now)
{
	struct wchunk *ch = &t->chunks[c];

	credit_release(w, t, c, answered, now);
	ch->state = ch->hop + 3 <= w->cfg.n_workers ? C_IDLE : C_DONE;
	ch->retries = 0;
	t->ring_unacked--;
}

static struct wtensor *ring_rx_hop(struct tly_worker *w,
				   const struct tly_hdr *h,
				   const uint8_t *pkt, uint64_t now)
{
	struct wtensor *t = worker_find(w, h->tensor);
	uint32_t n = w->cfg.n_workers, p = h->slot, j, c = h->chunk, i;
	const uint8_t *pl = pkt + TLY_HDR_LEN;
	struct wchunk *ch;
	uint8_t flag;
	size_t m, off;

	if (!t) {
		/* finished: the hop was taken before; not yet submitted:
		 * refuse so the sender's credit is not held meanwhile */
		ring_ack(w, h, !retired(w, h->tensor));
		return NULL;
	}
	if (t->algo != &worker_ring_algo || c >= t->n_chunks ||
	    !!(h->flags & TLY_F_INT) != (tly_dtype(t->d.dtype)->exact)) {
		w->c.drops[TLY_E_STALE]++;
		return NULL;
	}
	j = seg_of(w, t, c);
	if ((j + p) % n != h->rank || (j + p + 1) % n != w->cfg.rank) {
		w->c.drops[TLY_E_MISMATCH]++;
		return NULL;
	}
	ch = &t->chunks[c];
	flag = p < n - 1 ? R_RS_IN : R_AG_IN;
	if (ch->rflags & flag) {
		w->c.dups++;
		ring_ack(w, h, 0);
		return NULL;
	}
	/* an all-gather hop proves our reduce-scatter hop went through */
	if (flag == R_AG_IN && ch->hop + n - 1 == p &&
	    (ch->state == C_INFLIGHT || ch->state == C_ACKED ||
	     ch->state == C_DEFER))
		hop_acked(w, t, c, 0, now);
	ch->rflags |= flag;
	m = chunk_elems(t, c, w->cfg.k);
	off = (size_t)c * w->cfg.k;
	for (i = 0; i < m; i++) {
		uint32_t v = tly_get32(pl + 4 * i);

		if (flag == R_AG_IN)
			t->acc[off + i] = v;
		else if (tly_dtype(t->d.dtype)->exact)
			t->acc[off + i] = v + own_word(t, off + i);
		else
			t->acc[off + i] = f32_bits(f32_from_bits(v) +
				f32_from_bits(own_word(t, off + i)));
	}
	if (p >= n - 2)
		write_dst(w, t, c);
	ring_ack(w, h, 0);
	if (p + 1 <= 2 * n - 3) {
		ch->hop = (uint16_t)(p + 1);
		ch->state = C_READY;
		ch->retries = 0;
		enqueue(t, c);
	}
	return tensor_complete(t) ? t : NULL;
}

static void ring_ack_one(struct tly_worker *w, struct wtensor *t,
			 const struct tly_hdr *h, uint32_t c, uint64_t now)
{
	struct wchunk *ch = &t->chunks[c];

	if (ch->hop != h->slot ||
	    (ch->state != C_INFLIGHT && ch->state != C_ACKED)) {
		w->c.dups++;
		return;
	}
	if (h->flags & TLY_F_REFUSE) {
		w->c.busy++;
		credit_release(w, t, c, 0, now);
		ch->state = C_DEFER;
		if (ch->retries < 6)
			ch->retries++;
		worker_arm(t, ch, now + (w->cfg.busy_ns << ch->retries));
		t->ring_refused = 1;
		return;
	}
	w->c.acks++;
	hop_acked(w, t, c, 1, now);
}

/*
 * The next rank took a hop of @t after refusing others: it has submitted
 * the tensor now, so the refused hops go again at once instead of at the
 * end of their back-off (busy_ns << retries: 20 ms .. 640 ms with
 * tallyd's rto_us, where the refusal only meant the next rank was still
 * finishing the operation before, as ranks of a ring do at every
 * operation's start).  Once per refusal: the scan is O(chunks).
 */
static void refused_go_now(struct wtensor *t, uint64_t now)
{
	t->ring_refused = 0;
	for (uint32_t c = 0; c < t->n_chunks; c++)
		if (t->chunks[c].state == C_DEFER)
			worker_arm(t, &t->chunks[c], now);
}

static struct wtensor *ring_rx_ack(struct tly_worker *w,
				   const struct tly_hdr *h, uint64_t now)
{
	struct wtensor *t = worker_find(w, h->tensor);
	uint32_t c, last = (uint32_t)h->chunk + h->aux;

	if (!t || t->algo != &worker_ring_algo || last >= t->n_chunks ||
	    h->rank != (w->cfg.rank + 1) % w->cfg.n_workers ||
	    ((h->flags & TLY_F_REFUSE) && h->aux)) {
		w->c.drops[TLY_E_STALE]++;
		return NULL;
	}
	for (c = h->chunk; c <= last; c++)
		ring_ack_one(w, t, h, c, now);
	if (t->ring_refused && !(h->flags & TLY_F_REFUSE))
		refused_go_now(t, now);
	return tensor_complete(t) ? t : NULL;
}

static struct wtensor *ring_rx(struct tly_worker *w, const struct tly_hdr *h,
			       const uint8_t *pkt, uint64_t now)
{
	if (h->type == TLY_T_RING)
		return ring_rx_hop(w, h, pkt, now);
	return ring_rx_ack(w, h, now);
}

const struct worker_algo worker_ring_algo = {
	.setup = ring_setup,
	.next = ring_next,
	.unget = ring_unget,
	.send = ring_send,
	.dest = ring_dest,
	.span = ring_span,
	.at = ring_at,
	.peer = ring_peer,
	.rx = ring_rx,
	.flush = ring_flush,
	.retire = ring_retire,
};
