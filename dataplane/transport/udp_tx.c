// SPDX-License-Identifier: BSD-3-Clause
/*
 * udp_tx.c - the UDP transport's tx: buffers from a free list, a FIFO of
 * (buffer, dst) that tx_flush hands to sendmmsg, and a FIFO of frames to
 * ourselves that rx hands out (udp.h, UDP_SELF_LOOP_ENV).
 *
 * With UDP_SEGMENT each message of a sendmmsg is a run of consecutive
 * queued frames to one peer, all of one length but the last (which may
 * be shorter), one iovec per frame and the length as the segment size in
 * a cmsg: the kernel cuts it into the same datagrams the frames would
 * have been one by one.  A message goes whole or not at all.
 *
 * When the kernel refuses (EAGAIN, ENOBUFS) the frames stay queued and
 * the caller retries later: back-pressure, never a spin and never a
 * silent drop.  Any other error drops the frame it is about; a refused
 * super-datagram is first retried one frame at a time, so a frame is
 * never dropped for the offload's sake.  Before any super-datagram went
 * out, a refusal with EIO (no checksum offload on the route's device),
 * or with EINVAL or EMSGSIZE (a segment longer than the route's MTU:
 * older kernels say EINVAL, newer ones EMSGSIZE) when its frames then go
 * out one by one, turns GSO off for the socket, logged once.
 */
#include <errno.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "dataplane/dp_log.h"
#include "dataplane/transport/udp.h"

/* the cmsg of one super-datagram: its segment size */
union udp_gso_cmsg {
	char buf[CMSG_SPACE(sizeof(uint16_t))];
	struct cmsghdr align;
};

uint8_t *udp_tx_alloc(struct transport *tp, size_t len)
{
	struct udp_priv *u = tp->priv;

	if (len > u->buf_size || !u->n_tx_free)
		return NULL;
	return u->tx_slab + (size_t)u->tx_free[--u->n_tx_free] * u->buf_size;
}

void udp_tx_send(struct transport *tp, uint16_t dst, uint8_t *frame,
		 size_t len)
{
	struct udp_priv *u = tp->priv;
	uint32_t buf = (uint32_t)((size_t)(frame - u->tx_slab) / u->buf_size);
	struct udp_txq_ent *e;

	if (dst >= tp->cfg.n_nodes &&
	    !(dst == TRANSPORT_GROUP_NODE && tp->cfg.group_send)) {
		tp->stats.tx_drops++;
		u->tx_free[u->n_tx_free++] = buf;
		return;
	}
	if (dst == tp->cfg.self && u->self_loop && !tp->emu) {
		/* never full either: a slot for every buffer */
		u->loopq[(u->loopq_head + u->loopq_n++) % UDP_TX_BUFS] = buf;
		u->loop_len[buf] = (uint32_t)len;
		u->loop_unflushed++;
		tp->stats.loop_pkts++;
		tp->stats.loop_bytes += len;
		return;
	}
	/* never full: the queue has a slot for every buffer */
	e = &u->txq[(u->txq_head + u->txq_n++) % UDP_TX_BUFS];
	e->buf = buf;
	e->len = (uint32_t)len;
	e->dst = dst;
}

int udp_tx_pending(struct transport *tp)
{
	return (int)((struct udp_priv *)tp->priv)->txq_n;
}

static struct udp_txq_ent *txq_at(struct udp_priv *u, uint32_t i)
{
	return &u->txq[(u->txq_head + i) % UDP_TX_BUFS];
}

static void txq_pop(struct udp_priv *u, uint32_t n)
{
	u->tx_plain_n = u->tx_plain_n > n ? u->tx_plain_n - n : 0;
	u->txq_grouped = u->txq_grouped > n ? u->txq_grouped - n : 0;
	while (n--) {
		u->tx_free[u->n_tx_free++] = u->txq[u->txq_head].buf;
		u->txq_head = (u->txq_head + 1) % UDP_TX_BUFS;
		u->txq_n--;
	}
}

/*
 * How many queued frames from @i on go in one message: a run to one
 * peer, each as long as the first but the last, which may be shorter
 * (and ends the run).  Empty frames travel alone: a segment size of 0
 * means no GSO, and an empty last segment would vanish.
 */
static uint32_t gso_run(struct udp_priv *u, uint32_t i)
{
	const struct udp_txq_ent *first = txq_at(u, i), *e;
	uint32_t n = 1, total = first->len;

	/* while a refusal is under suspicion, no new try in the batch */
	if (!u->gso || u->gso_suspect || i < u->tx_plain_n || !first->len)
		return 1;
	while (n < UDP_GSO_MAX_SEGS && i + n < u->txq_n) {
		e = txq_at(u, i + n);
		if (e->dst != first->dst || !e->len || e->len > first->len ||
		    total + e->len > UDP_GSO_MAX_BYTES)
			break;
		total += e->len;
		n++;
		if (e->len < first->len)
			break;
	}
	return n;
}

/*
 * Group the queued frames by destination (stable: each destination's
 * frames keep their order) so that GSO gets long runs.  An aggregator
 * queues a chunk's RESULT to every worker in turn, which would otherwise
 * be runs of one.  Frames already grouped (left by back-pressure) and
 * those to be retried one by one stay at the head, where they are.
 */
static void txq_group(struct udp_priv *u)
{
	/* the nodes and the group (TRANSPORT_GROUP_NODE) */
	uint16_t count[TRANSPORT_MAX_NODES + 1] = { 0 };
	uint32_t start[TRANSPORT_MAX_NODES + 1];
	uint32_t from = u->txq_grouped > u->tx_plain_n ? u->txq_grouped :
			u->tx_plain_n, i, n = u->txq_n;
	bool mixed = false;

	if (!u->gso || from >= n || n - from < 2)
		goto done;
	for (i = from; i < n; i++) {
		uint16_t d = txq_at(u, i)->dst;

		count[d]++;
		mixed |= d != txq_at(u, from)->dst;
	}
	if (!mixed)
		goto done;
	for (i = 0, start[0] = 0; i < TRANSPORT_MAX_NODES; i++)
		start[i + 1] = start[i] + count[i];
	for (i = from; i < n; i++) {
		const struct udp_txq_ent *e = txq_at(u, i);

		u->txq_tmp[start[e->dst]++] = *e;
	}
	for (i = from; i < n; i++)
		*txq_at(u, i) = u->txq_tmp[i - from];
done:
	u->txq_grouped = n;
}

static void gso_off(struct udp_priv *u, int err)
{
	u->gso = false;
	u->gso_suspect = 0;
	dp_warn("transport udp: UDP_SEGMENT refused (%s): one datagram per send from now on",
		strerror(err));
}

/* the first message, a run of @n frames, was refused with @err */
static void gso_refused(struct udp_priv *u, uint32_t n, int err)
{
	u->tx_plain_n = n;	/* retry them one by one */
	if (u->gso_proven)
		return;		/* it worked before: the frames' fault */
	if (err == EIO)
		gso_off(u, err);
	else if (err == EINVAL || err == EMSGSIZE)
		u->gso_suspect = err;
}

/* the first message, a lone frame, was sent (@ok) or refused */
static void gso_suspect_check(struct udp_priv *u, bool ok)
{
	if (!u->gso_suspect || !u->tx_plain_n)
		return;
	if (ok)
		gso_off(u, u->gso_suspect);	/* alone it goes: GSO's fault */
	else
		u->gso_suspect = 0;	/* alone it fails too: the frame's */
}

int udp_tx_flush(struct transport *tp)
{
	struct udp_priv *u = tp->priv;
	struct mmsghdr msg[UDP_MMSG_BATCH];
	union udp_gso_cmsg ctl[UDP_MMSG_BATCH];
	uint32_t segs[UDP_MMSG_BATCH];
	bool group[UDP_MMSG_BATCH];
	/* looped frames count as sent: the caller's turn did work, and the
	 * next rx_burst has them (no fd wakes a sleeper for them) */
	int sent = (int)u->loop_unflushed, r, i, m;
	uint32_t f, j;

	u->loop_unflushed = 0;

	txq_group(u);
	while (u->txq_n) {
		for (m = 0, f = 0; m < UDP_MMSG_BATCH && f < u->txq_n; m++) {
			struct msghdr *h = &msg[m].msg_hdr;
			const struct udp_txq_ent *e = txq_at(u, f);
			uint32_t n = gso_run(u, f);

			for (j = 0; j < n; j++) {
				const struct udp_txq_ent *s = txq_at(u, f + j);

				u->tx_iov[f + j].iov_base = u->tx_slab +
					(size_t)s->buf * u->buf_size;
				u->tx_iov[f + j].iov_len = s->len;
			}
			memset(&msg[m], 0, sizeof(msg[m]));
			h->msg_name = &u->peers[e->dst];
			h->msg_namelen = sizeof(u->peers[0]);
			h->msg_iov = &u->tx_iov[f];
			h->msg_iovlen = n;
			if (n > 1) {
				struct cmsghdr *c;
				uint16_t seg = (uint16_t)e->len;

				h->msg_control = ctl[m].buf;
				h->msg_controllen = sizeof(ctl[m].buf);
				c = CMSG_FIRSTHDR(h);
				c->cmsg_level = SOL_UDP;
				c->cmsg_type = UDP_SEGMENT;
				c->cmsg_len = CMSG_LEN(sizeof(seg));
				memcpy(CMSG_DATA(c), &seg, sizeof(seg));
			}
			segs[m] = n;
			group[m] = e->dst == TRANSPORT_GROUP_NODE;
			f += n;
		}
		r = sendmmsg(u->fd, msg, (unsigned int)m, 0);
		if (r < 0) {
			int err = errno;

			if (err == EAGAIN || err == ENOBUFS || err == EINTR)
				break;	/* keep them: back-pressure */
			if (segs[0] > 1) {
				gso_refused(u, segs[0], err);
				continue;
			}
			gso_suspect_check(u, false);
			/* this frame cannot go (unreachable...): drop it */
			tp->stats.tx_drops++;
			txq_pop(u, 1);
			continue;
		}
		if (r > 0 && segs[0] == 1)
			gso_suspect_check(u, true);
		for (i = 0; i < r; i++) {
			if (segs[i] > 1)
				u->gso_proven = true;
			tp->stats.tx_pkts += segs[i];
			tp->stats.tx_bytes += msg[i].msg_len;
			if (group[i]) {
				tp->stats.group_pkts += segs[i];
				tp->stats.group_bytes += msg[i].msg_len;
			}
			txq_pop(u, segs[i]);
			sent += (int)segs[i];
		}
		/* r < m: the next call reports why (and breaks on EAGAIN) */
	}
	return sent;
}
