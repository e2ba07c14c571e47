// SPDX-License-Identifier: BSD-3-Clause
/*
 * fabric.c - the in-memory network: a binary heap of frames keyed by
 * (delivery time, sequence), so runs are deterministic for a seed.
 */
#include "fabric.h"

#include <stdlib.h>
#include <string.h>

struct fab_frame {
	uint64_t at, seq;
	uint16_t src, dst;
	size_t len;
	uint8_t *data;
};

struct fab_port {
	struct fab *f;
	uint16_t node;
	const struct tly_addr *addrs;
};

struct fab {
	struct fab_cfg cfg;
	uint64_t rng, now, seq;
	uint64_t sent, dropped, duplicated, queue_drops;
	uint64_t *nic_busy;		/* sender NIC serializing until */
	uint64_t *port_busy;		/* switch port to the node, until */
	uint64_t *port_max;		/* deepest that port's queue was */
	uint16_t n_nodes;
	struct fab_port *ports;
	uint64_t *tx_bytes, *rx_bytes;	/* between different nodes */
	fab_rx_fn **rx;
	void **rx_ctx;
	struct fab_frame *heap;
	size_t n, cap;
};

uint64_t fab_rand(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static double uniform(struct fab *f)
{
	return (double)(fab_rand(&f->rng) >> 11) * 0x1.0p-53;
}

struct fab *fab_create(uint16_t n_nodes, const struct fab_cfg *cfg)
{
	struct fab *f = calloc(1, sizeof(*f));
	uint16_t i;

	if (!f)
		return NULL;
	f->cfg = *cfg;
	f->rng = cfg->seed;
	f->n_nodes = n_nodes;
	f->ports = calloc(n_nodes, sizeof(*f->ports));
	f->rx = calloc(n_nodes, sizeof(*f->rx));
	f->rx_ctx = calloc(n_nodes, sizeof(*f->rx_ctx));
	f->tx_bytes = calloc(n_nodes, sizeof(*f->tx_bytes));
	f->rx_bytes = calloc(n_nodes, sizeof(*f->rx_bytes));
	f->nic_busy = calloc(n_nodes, sizeof(*f->nic_busy));
	f->port_busy = calloc(n_nodes, sizeof(*f->port_busy));
	f->port_max = calloc(n_nodes, sizeof(*f->port_max));
	if (!f->ports || !f->rx || !f->rx_ctx || !f->tx_bytes ||
	    !f->rx_bytes || !f->nic_busy || !f->port_busy || !f->port_max) {
		fab_destroy(f);
		return NULL;
	}
	for (i = 0; i < n_nodes; i++) {
		f->ports[i].f = f;
		f->ports[i].node = i;
	}
	return f;
}

void fab_destroy(struct fab *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->n; i++)
		free(f->heap[i].data);
	free(f->heap);
	free(f->ports);
	free(f->rx);
	free(f->rx_ctx);
	free(f->tx_bytes);
	free(f->rx_bytes);
	free(f->nic_busy);
	free(f->port_busy);
	free(f->port_max);
	free(f);
}

void fab_attach(struct fab *f, uint16_t node, fab_rx_fn *rx, void *ctx)
{
	f->rx[node] = rx;
	f->rx_ctx[node] = ctx;
}

static int before(const struct fab_frame *a, const struct fab_frame *b)
{
	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(struct fab *f, struct fab_frame fr)
{
	size_t i;

	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 1024;
		f->heap = realloc(f->heap, f->cap * sizeof(*f->heap));
		if (!f->heap)
			abort();
	}
	i = f->n++;
	while (i && before(&fr, &f->heap[(i - 1) / 2])) {
		f->heap[i] = f->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	f->heap[i] = fr;
}

static struct fab_frame heap_pop(struct fab *f)
{
	struct fab_frame top = f->heap[0], last = f->heap[--f->n];
	size_t i = 0;

	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < f->n && before(&f->heap[l], &last))
			m = l;
		if (l + 1 < f->n && before(&f->heap[l + 1],
					   m == i ? &last : &f->heap[m]))
			m = l + 1;
		if (m == i)
			break;
		f->heap[i] = f->heap[m];
		i = m;
	}
	if (f->n)
		f->heap[i] = last;
	return top;
}

static uint64_t wire_ns(const struct fab *f, size_t len)
{
	return ((uint64_t)len * 8 * 1000000000ull + f->cfg.rate_bps - 1) /
	       f->cfg.rate_bps;
}

/*
 * When a frame sent now reaches @dst through the links and the switch,
 * or 0 when the switch's queue to @dst is full.  Frames enter the switch
 * queue in the order they are sent, which is its arrival order but for
 * frames whose senders' NICs were backed up: those queue a little late.
 */
static uint64_t link_arrival(struct fab *f, uint16_t src, uint16_t dst,
			     size_t len)
{
	uint64_t t = f->now > f->nic_busy[src] ? f->now : f->nic_busy[src];
	uint64_t at_switch, backlog;

	f->nic_busy[src] = t + wire_ns(f, len);
	at_switch = f->nic_busy[src] + f->cfg.delay_ns;
	backlog = f->port_busy[dst] > at_switch ?
		  (f->port_busy[dst] - at_switch) * f->cfg.rate_bps /
		  8000000000ull : 0;
	if (f->cfg.queue_bytes && backlog + len > f->cfg.queue_bytes) {
		f->queue_drops++;
		return 0;
	}
	if (backlog + len > f->port_max[dst])
		f->port_max[dst] = backlog + len;
	t = f->port_busy[dst] > at_switch ? f->port_busy[dst] : at_switch;
	f->port_busy[dst] = t + wire_ns(f, len);
	return f->port_busy[dst];
}

static void enqueue(struct fab *f, uint16_t src, uint16_t dst,
		    const uint8_t *data, size_t len)
{
	struct fab_frame fr = { .src = src, .dst = dst, .len = len,
				.seq = f->seq++ };

	if (f->cfg.rate_bps && src != dst) {
		fr.at = link_arrival(f, src, dst, len);
		if (!fr.at)
			return;
	} else {
		fr.at = f->now + f->cfg.delay_ns;
	}
	if (f->cfg.reorder_ns)
		fr.at += fab_rand(&f->rng) % (f->cfg.reorder_ns + 1);
	fr.data = malloc(len);
	if (!fr.data)
		abort();
	memcpy(fr.data, data, len);
	heap_push(f, fr);
}

static uint8_t *fab_alloc(void *ctx, size_t len)
{
	(void)ctx;
	return malloc(len);
}

static void fab_send(void *ctx, uint16_t dst, uint8_t *frame, size_t len)
{
	struct fab_port *p = ctx;
	struct fab *f = p->f;

	f->sent++;
	if (dst != p->node)
		f->tx_bytes[p->node] += len;
	if (f->cfg.mutate && dst < f->n_nodes)
		f->cfg.mutate(f->cfg.mutate_ctx, p->node, dst, frame, len);
	if (dst >= f->n_nodes ||
	    (f->cfg.drop &&
	     f->cfg.drop(f->cfg.drop_ctx, p->node, dst, frame, len)) ||
	    uniform(f) < f->cfg.loss) {
		f->dropped++;
	} else {
		enqueue(f, p->node, dst, frame, len);
		if (uniform(f) < f->cfg.dup) {
			f->duplicated++;
			enqueue(f, p->node, dst, frame, len);
		}
	}
	free(frame);
}

/* switch-style replication: one frame in, a re-addressed copy per worker */
static void fab_multicast(void *ctx, uint64_t mask, uint8_t *frame,
			  size_t len)
{
	struct fab_port *p = ctx;
	uint16_t r;

	for (r = 0; r < 64 && r < p->f->n_nodes; r++) {
		uint8_t *copy;

		if (!(mask & (1ull << r)))
			continue;
		copy = malloc(len);
		if (!copy)
			abort();
		memcpy(copy, frame, len);
		if (p->addrs)
			tly_frame_readdress(copy, &p->addrs[r], r);
		else
			tly_frame_readdress_bare(copy, r);
		fab_send(ctx, r, copy, len);
	}
	free(frame);
}

struct tly_tx_ops fab_ops(struct fab *f, uint16_t node, int multicast,
			  const struct tly_addr *addrs)
{
	f->ports[node].addrs = addrs;
	return (struct tly_tx_ops){
		.alloc = fab_alloc, .send = fab_send,
		.multicast = multicast ? fab_multicast : NULL,
		.ctx = &f->ports[node],
	};
}

uint64_t fab_now(const struct fab *f)
{
	return f->now;
}

void fab_advance(struct fab *f, uint64_t dt)
{
	uint64_t until = f->now + dt;

	while (f->n && f->heap[0].at <= until) {
		struct fab_frame fr = heap_pop(f);

		if (fr.at > f->now)
			f->now = fr.at;
		if (fr.src != fr.dst)
			f->rx_bytes[fr.dst] += fr.len;
		if (f->rx[fr.dst])
			f->rx[fr.dst](f->rx_ctx[fr.dst], fr.data, fr.len,
				      f->now);
		free(fr.data);
	}
	f->now = until;
}

size_t fab_pending(const struct fab *f)
{
	return f->n;
}

uint64_t fab_sent(const struct fab *f)
{
	return f->sent;
}

void fab_node_bytes(const struct fab *f, uint16_t node, uint64_t *tx,
		    uint64_t *rx)
{
	*tx = f->tx_bytes[node];
	*rx = f->rx_bytes[node];
}

uint64_t fab_dropped(const struct fab *f)
{
	return f->dropped;
}

uint64_t fab_duplicated(const struct fab *f)
{
	return f->duplicated;
}

uint64_t fab_queue_drops(const struct fab *f)
{
	return f->queue_drops;
}

uint64_t fab_queue_max(const struct fab *f, uint16_t node)
{
	return f->port_max[node];
}
