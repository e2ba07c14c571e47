// SPDX-License-Identifier: BSD-3-Clause
/*
 * link_emu.c - rate, delay, jitter, loss, duplication and reordering over
 * a bounded pool of buffers and two time-ordered queues (binary heaps).
 *
 * The egress side is one serializer at rate_bps shared by all
 * destinations: a frame finishes serializing at
 *	busy = max(now, busy) + (len + overhead) * 8 / rate
 * and is released delay + jitter later.  Jitter alone never reorders (a
 * FIFO link does not): an in-order frame is never released before the one
 * before it.  Frames picked for reordering get reorder_ns more and may be
 * overtaken.  A lost frame still used the serializer (it was lost on the
 * wire); a duplicate does not (the network made it) and follows its
 * original.  Ingress is a second serializer without delay or faults.
 */
#include <stdlib.h>
#include <string.h>

#include "dataplane/transport/link_emu.h"

#define NS_PER_S 1000000000ull

struct emu_heap {
	struct link_emu_frame *f;
	uint32_t n;
};

struct emu_serializer {
	uint64_t busy_ns;	/* when the last frame finished */
	uint64_t rem;		/* sub-ns remainder, so rounding never adds up */
};

struct link_emu {
	struct link_emu_config cfg;
	uint32_t overhead;
	uint32_t buf_size, n_bufs;
	uint8_t *slab;
	uint32_t *free_idx;	/* stack of free buffer indices */
	uint32_t n_free;
	struct emu_heap q[2];
	struct emu_serializer ser[2];
	uint64_t last_inorder_due;
	uint64_t last_ingress_due;
	uint64_t seq;
	uint64_t rng;
	struct link_emu_stats st;
};

bool link_emu_wanted(const struct link_emu_config *c)
{
	return c->rate_bps || c->delay_ns || c->jitter_ns || c->loss_ppm ||
	       c->dup_ppm || c->reorder_ppm || c->reorder_ns;
}

/* splitmix64: small, seedable, good enough for fault injection */
static uint64_t emu_rand(struct link_emu *e)
{
	uint64_t z = (e->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static bool emu_chance(struct link_emu *e, uint32_t ppm)
{
	uint64_t r = emu_rand(e) >> 32;

	return ((r * 1000000ull) >> 32) < ppm;
}

struct link_emu *link_emu_create(const struct link_emu_config *cfg,
				 uint32_t n_bufs, uint32_t buf_size,
				 uint32_t wire_overhead)
{
	struct link_emu *e;
	uint32_t i;

	if (!n_bufs || !buf_size)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->cfg = *cfg;
	e->overhead = wire_overhead;
	e->n_bufs = n_bufs;
	e->buf_size = buf_size;
	e->rng = cfg->seed;
	/* calloc of a large slab maps lazily: untouched buffers cost nothing */
	e->slab = calloc(n_bufs, buf_size);
	e->free_idx = calloc(n_bufs, sizeof(*e->free_idx));
	e->q[0].f = calloc(n_bufs, sizeof(*e->q[0].f));
	e->q[1].f = calloc(n_bufs, sizeof(*e->q[1].f));
	if (!e->slab || !e->free_idx || !e->q[0].f || !e->q[1].f) {
		link_emu_destroy(e);
		return NULL;
	}
	for (i = 0; i < n_bufs; i++)
		e->free_idx[i] = n_bufs - 1 - i;
	e->n_free = n_bufs;
	return e;
}

void link_emu_destroy(struct link_emu *e)
{
	if (!e)
		return;
	free(e->slab);
	free(e->free_idx);
	free(e->q[0].f);
	free(e->q[1].f);
	free(e);
}

static bool frame_before(const struct link_emu_frame *a,
			 const struct link_emu_frame *b)
{
	return a->due_ns < b->due_ns ||
	       (a->due_ns == b->due_ns && a->seq < b->seq);
}

static void heap_push(struct emu_heap *h, const struct link_emu_frame *f)
{
	uint32_t i = h->n++;

	while (i) {
		uint32_t p = (i - 1) / 2;

		if (!frame_before(f, &h->f[p]))
			break;
		h->f[i] = h->f[p];
		i = p;
	}
	h->f[i] = *f;
}

static struct link_emu_frame heap_pop(struct emu_heap *h)
{
	struct link_emu_frame top = h->f[0], last = h->f[--h->n];
	uint32_t i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && frame_before(&h->f[c + 1], &h->f[c]))
			c++;
		if (!frame_before(&h->f[c], &last))
			break;
		h->f[i] = h->f[c];
		i = c;
	}
	if (h->n)
		h->f[i] = last;
	return top;
}

/* when a frame of @len bytes offered at @now has left serializer @s */
static uint64_t serialize(struct link_emu *e, struct emu_serializer *s,
			  uint64_t now, size_t len)
{
	uint64_t start = s->busy_ns > now ? s->busy_ns : now, num;

	if (!e->cfg.rate_bps)
		return now;
	if (s->busy_ns < now)
		s->rem = 0;	/* the link went idle: no debt carried */
	num = ((uint64_t)len + e->overhead) * 8 * NS_PER_S + s->rem;
	s->busy_ns = start + num / e->cfg.rate_bps;
	s->rem = num % e->cfg.rate_bps;
	return s->busy_ns;
}

uint8_t *link_emu_alloc(struct link_emu *e, size_t len)
{
	if (len > e->buf_size) {
		e->st.too_long++;
		return NULL;
	}
	if (!e->n_free) {
		e->st.pool_drops++;
		return NULL;
	}
	return e->slab + (size_t)e->free_idx[--e->n_free] * e->buf_size;
}

void link_emu_free(struct link_emu *e, uint8_t *buf)
{
	e->free_idx[e->n_free++] = (uint32_t)((size_t)(buf - e->slab) /
					      e->buf_size);
}

static void hold(struct link_emu *e, enum link_emu_dir dir, uint64_t due,
		 uint16_t dst, uint8_t *buf, size_t len)
{
	struct link_emu_frame f = {
		.due_ns = due, .seq = e->seq++, .data = buf,
		.len = (uint32_t)len, .dst = dst,
	};

	heap_push(&e->q[dir], &f);
}

int link_emu_egress_buf(struct link_emu *e, uint64_t now_ns, uint16_t dst,
			uint8_t *buf, size_t len)
{
	const struct link_emu_config *c = &e->cfg;
	uint64_t due, jitter;
	bool lost, dup, reorder;
	uint8_t *copy;
	int n = 1;

	e->st.egress++;
	/* four draws per frame whatever the knobs: runs replay exactly */
	lost = emu_chance(e, c->loss_ppm);
	dup = emu_chance(e, c->dup_ppm);
	reorder = emu_chance(e, c->reorder_ppm);
	jitter = emu_rand(e);
	jitter = c->jitter_ns ? jitter % (c->jitter_ns + 1) : 0;

	due = serialize(e, &e->ser[LINK_EMU_EGRESS], now_ns, len) +
	      (c->delay_on_ingress ? 0 : c->delay_ns) + jitter;
	if (lost) {
		e->st.lost++;
		link_emu_free(e, buf);
		return 0;
	}
	if (reorder) {
		e->st.reordered++;
		due += c->reorder_ns;
	} else {
		if (due < e->last_inorder_due)
			due = e->last_inorder_due;
		e->last_inorder_due = due;
	}
	hold(e, LINK_EMU_EGRESS, due, dst, buf, len);
	if (dup) {
		copy = link_emu_alloc(e, len);
		if (copy) {
			memcpy(copy, buf, len);
			hold(e, LINK_EMU_EGRESS, due, dst, copy, len);
			e->st.dup++;
			n++;
		}
	}
	return n;
}

int link_emu_egress(struct link_emu *e, uint64_t now_ns, uint16_t dst,
		    const uint8_t *frame, size_t len)
{
	uint8_t *buf = link_emu_alloc(e, len);

	if (!buf) {
		e->st.egress++;
		return 0;
	}
	memcpy(buf, frame, len);
	return link_emu_egress_buf(e, now_ns, dst, buf, len);
}

int link_emu_ingress(struct link_emu *e, uint64_t now_ns,
		     uint64_t arrival_ns, const uint8_t *frame, size_t len)
{
	uint64_t at = now_ns;
	uint8_t *buf;

	e->st.ingress++;
	buf = link_emu_alloc(e, len);
	if (!buf)
		return 0;
	memcpy(buf, frame, len);
	if (e->cfg.delay_on_ingress) {
		/* the link's delay from when the frame reached this node:
		 * how late its reader came does not add */
		at = (arrival_ns && arrival_ns < now_ns ? arrival_ns : now_ns) +
		     e->cfg.delay_ns;
		/* and frames keep their order */
		if (at < e->last_ingress_due)
			at = e->last_ingress_due;
		e->last_ingress_due = at;
	}
	hold(e, LINK_EMU_INGRESS,
	     serialize(e, &e->ser[LINK_EMU_INGRESS], at, len), 0, buf, len);
	return 1;
}

const struct link_emu_frame *link_emu_peek(struct link_emu *e,
					   enum link_emu_dir dir,
					   uint64_t now_ns)
{
	const struct emu_heap *h = &e->q[dir];

	return h->n && h->f[0].due_ns <= now_ns ? &h->f[0] : NULL;
}

struct link_emu_frame link_emu_take(struct link_emu *e, enum link_emu_dir dir)
{
	return heap_pop(&e->q[dir]);
}

uint64_t link_emu_next_due(const struct link_emu *e)
{
	uint64_t t = UINT64_MAX;
	int d;

	for (d = 0; d < 2; d++)
		if (e->q[d].n && e->q[d].f[0].due_ns < t)
			t = e->q[d].f[0].due_ns;
	return t;
}

uint32_t link_emu_held(const struct link_emu *e, enum link_emu_dir dir)
{
	return e->q[dir].n;
}

const struct link_emu_stats *link_emu_stats(const struct link_emu *e)
{
	return &e->st;
}
