// SPDX-License-Identifier: BSD-3-Clause
/*
 * udp.c - the kernel UDP transport: one non-blocking socket, bare tally
 * packets, sendmmsg/recvmmsg batches.  Works anywhere, no privileges.
 *
 * tx: buffers come from a free list; tx_send appends (buffer, dst) to a
 * FIFO that tx_flush hands to sendmmsg.  When the kernel refuses
 * (EAGAIN, ENOBUFS) the frames stay queued and the caller retries later:
 * back-pressure, never a spin and never a silent drop.
 * rx: a ring of buffers; recvmmsg fills the free ones in order, and they
 * come back in order when the consumer releases them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane/transport/transport.h"

#define UDP_TX_BUFS	1024
#define UDP_RX_BUFS	256	/* power of two */
#define UDP_MMSG_BATCH	64
#define UDP_SOCKBUF	(8 << 20)

struct udp_txq_ent {
	uint32_t buf;
	uint32_t len;
	uint16_t dst;
};

struct udp_priv {
	int fd;
	struct sockaddr_in bound;	/* our address */
	uint32_t buf_size;
	struct sockaddr_in *peers;	/* [n_nodes] */
	/* tx */
	uint8_t *tx_slab;
	uint32_t *tx_free;
	uint32_t n_tx_free;
	struct udp_txq_ent txq[UDP_TX_BUFS];
	uint32_t txq_head, txq_n;
	/* rx */
	uint8_t *rx_slab;
	uint32_t rx_head;		/* next buffer recvmmsg fills */
	uint32_t rx_tail;		/* oldest buffer not yet released */
	bool rx_done[UDP_RX_BUFS];	/* released, waiting for the tail */
};

static void sockbuf_grow(int fd, int opt_force, int opt)
{
	int sz = UDP_SOCKBUF;

	/* FORCE ignores rmem_max/wmem_max but needs CAP_NET_ADMIN */
	if (setsockopt(fd, SOL_SOCKET, opt_force, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, opt, &sz, sizeof(sz));
}

static void peers_fill(struct udp_priv *u, const struct transport_config *cfg)
{
	uint32_t i;

	for (i = 0; i < cfg->n_nodes; i++) {
		u->peers[i].sin_family = AF_INET;
		u->peers[i].sin_addr.s_addr = htonl(cfg->addrs[i].ip);
		u->peers[i].sin_port = htons(cfg->addrs[i].port);
	}
}

static void udp_close(struct transport *tp)
{
	struct udp_priv *u = tp->priv;

	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	free(u->peers);
	free(u->tx_slab);
	free(u->tx_free);
	free(u->rx_slab);
	free(u);
	tp->priv = NULL;
}

static int udp_open(struct transport *tp, const struct transport_config *cfg)
{
	const struct tly_addr *me = &cfg->addrs[cfg->self];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct udp_priv *u;
	uint32_t i;
	int err;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	tp->priv = u;
	tp->full_frames = false;
	u->fd = -1;
	u->buf_size = cfg->mtu;
	u->peers = calloc(TRANSPORT_MAX_NODES, sizeof(*u->peers));
	u->tx_slab = calloc(UDP_TX_BUFS, u->buf_size);
	u->tx_free = calloc(UDP_TX_BUFS, sizeof(*u->tx_free));
	u->rx_slab = calloc(UDP_RX_BUFS, u->buf_size);
	if (!u->peers || !u->tx_slab || !u->tx_free || !u->rx_slab) {
		udp_close(tp);
		return -ENOMEM;
	}
	for (i = 0; i < UDP_TX_BUFS; i++)
		u->tx_free[i] = UDP_TX_BUFS - 1 - i;
	u->n_tx_free = UDP_TX_BUFS;
	peers_fill(u, cfg);

	sa.sin_port = htons(me->port);
	sa.sin_addr.s_addr = htonl(me->ip);
	if (cfg->bind_ip && inet_pton(AF_INET, cfg->bind_ip,
				      &sa.sin_addr) != 1) {
		fprintf(stderr, "transport udp: bad bind_ip '%s'\n",
			cfg->bind_ip);
		udp_close(tp);
		return -EINVAL;
	}
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0 || bind(u->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = errno;
		fprintf(stderr, "transport udp: bind %s:%u: %s\n",
			inet_ntoa(sa.sin_addr), me->port, strerror(err));
		udp_close(tp);
		return -err;
	}
	u->bound = sa;
	if (!me->port) {
		socklen_t len = sizeof(u->bound);

		getsockname(u->fd, (struct sockaddr *)&u->bound, &len);
		tp->local_port = ntohs(u->bound.sin_port);
	}
	sockbuf_grow(u->fd, SO_RCVBUFFORCE, SO_RCVBUF);
	sockbuf_grow(u->fd, SO_SNDBUFFORCE, SO_SNDBUF);
	return 0;
}

static uint8_t *udp_tx_alloc(struct transport *tp, size_t len)
{
	struct udp_priv *u = tp->priv;

	if (len > u->buf_size || !u->n_tx_free)
		return NULL;
	return u->tx_slab + (size_t)u->tx_free[--u->n_tx_free] * u->buf_size;
}

static void udp_tx_send(struct transport *tp, uint16_t dst, uint8_t *frame,
			size_t len)
{
	struct udp_priv *u = tp->priv;
	uint32_t buf = (uint32_t)((size_t)(frame - u->tx_slab) / u->buf_size);
	struct udp_txq_ent *e;

	if (dst >= tp->cfg.n_nodes) {
		tp->stats.tx_drops++;
		u->tx_free[u->n_tx_free++] = buf;
		return;
	}
	/* never full: the queue has a slot for every buffer */
	e = &u->txq[(u->txq_head + u->txq_n++) % UDP_TX_BUFS];
	e->buf = buf;
	e->len = (uint32_t)len;
	e->dst = dst;
}

static void txq_pop(struct udp_priv *u, uint32_t n)
{
	while (n--) {
		u->tx_free[u->n_tx_free++] = u->txq[u->txq_head].buf;
		u->txq_head = (u->txq_head + 1) % UDP_TX_BUFS;
		u->txq_n--;
	}
}

static int udp_tx_flush(struct transport *tp)
{
	struct udp_priv *u = tp->priv;
	struct mmsghdr msg[UDP_MMSG_BATCH];
	struct iovec iov[UDP_MMSG_BATCH];
	int sent = 0, r, i, n;

	while (u->txq_n) {
		n = u->txq_n < UDP_MMSG_BATCH ? (int)u->txq_n : UDP_MMSG_BATCH;
		for (i = 0; i < n; i++) {
			struct udp_txq_ent *e =
				&u->txq[(u->txq_head + i) % UDP_TX_BUFS];

			iov[i].iov_base = u->tx_slab + (size_t)e->buf * u->buf_size;
			iov[i].iov_len = e->len;
			memset(&msg[i], 0, sizeof(msg[i]));
			msg[i].msg_hdr.msg_name = &u->peers[e->dst];
			msg[i].msg_hdr.msg_namelen = sizeof(u->peers[0]);
			msg[i].msg_hdr.msg_iov = &iov[i];
			msg[i].msg_hdr.msg_iovlen = 1;
		}
		r = sendmmsg(u->fd, msg, (unsigned int)n, 0);
		if (r < 0) {
			if (errno == EAGAIN || errno == ENOBUFS ||
			    errno == EINTR)
				break;	/* keep them: back-pressure */
			/* this frame cannot go (unreachable...): drop it */
			tp->stats.tx_drops++;
			txq_pop(u, 1);
			continue;
		}
		for (i = 0; i < r; i++) {
			tp->stats.tx_pkts++;
			tp->stats.tx_bytes += msg[i].msg_len;
		}
		txq_pop(u, (uint32_t)r);
		sent += r;
		/* r < n: the next call reports why (and breaks on EAGAIN) */
	}
	return sent;
}

static int udp_rx_burst(struct transport *tp, struct transport_rx *rx, int n)
{
	struct udp_priv *u = tp->priv;
	uint32_t room = UDP_RX_BUFS - (u->rx_head - u->rx_tail);
	struct mmsghdr msg[TRANSPORT_RX_BURST];
	struct iovec iov[TRANSPORT_RX_BURST];
	int r, i, k = 0;

	if (n > TRANSPORT_RX_BURST)
		n = TRANSPORT_RX_BURST;
	if ((uint32_t)n > room)
		n = (int)room;
	if (n <= 0)
		return 0;
	for (i = 0; i < n; i++) {
		uint32_t b = (u->rx_head + i) % UDP_RX_BUFS;

		iov[i].iov_base = u->rx_slab + (size_t)b * u->buf_size;
		iov[i].iov_len = u->buf_size;
		memset(&msg[i], 0, sizeof(msg[i]));
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
	}
	r = recvmmsg(u->fd, msg, (unsigned int)n, MSG_DONTWAIT, NULL);
	if (r <= 0)
		return 0;
	for (i = 0; i < r; i++) {
		uint32_t b = u->rx_head++ % UDP_RX_BUFS;

		if (msg[i].msg_hdr.msg_flags & MSG_TRUNC) {
			/* longer than any frame we accept */
			tp->stats.rx_drops++;
			u->rx_done[b] = true;
			continue;
		}
		u->rx_done[b] = false;
		rx[k].data = iov[i].iov_base;
		rx[k].len = msg[i].msg_len;
		rx[k].cookie = (void *)(uintptr_t)b;
		tp->stats.rx_pkts++;
		tp->stats.rx_bytes += msg[i].msg_len;
		k++;
	}
	/* truncated frames at the tail are free already */
	while (u->rx_tail != u->rx_head && u->rx_done[u->rx_tail % UDP_RX_BUFS])
		u->rx_tail++;
	return k;
}

static void udp_rx_release(struct transport *tp, struct transport_rx *rx,
			   int n)
{
	struct udp_priv *u = tp->priv;
	int i;

	for (i = 0; i < n; i++)
		u->rx_done[(uintptr_t)rx[i].cookie] = true;
	while (u->rx_tail != u->rx_head && u->rx_done[u->rx_tail % UDP_RX_BUFS])
		u->rx_tail++;
}

static int udp_wait_fd(struct transport *tp)
{
	return ((struct udp_priv *)tp->priv)->fd;
}

static int udp_tx_pending(struct transport *tp)
{
	return (int)((struct udp_priv *)tp->priv)->txq_n;
}

static int udp_set_nodes(struct transport *tp)
{
	const struct transport_config *cfg = &tp->cfg;
	const struct tly_addr *me = &cfg->addrs[cfg->self];
	struct udp_priv *u = tp->priv;

	/* with bind_ip the table's address of ours is not what we bound */
	if ((!cfg->bind_ip && ntohl(u->bound.sin_addr.s_addr) != me->ip) ||
	    ntohs(u->bound.sin_port) != me->port) {
		fprintf(stderr, "transport udp: our address changed to %u.%u.%u.%u:%u: reopen the transport\n",
			me->ip >> 24, (me->ip >> 16) & 0xff,
			(me->ip >> 8) & 0xff, me->ip & 0xff, me->port);
		return -EADDRNOTAVAIL;
	}
	peers_fill(u, cfg);
	/* port 0 for nodes gone: a frame still queued to one is dropped */
	memset(u->peers + cfg->n_nodes, 0, (TRANSPORT_MAX_NODES -
	       cfg->n_nodes) * sizeof(*u->peers));
	return 0;
}

const struct transport_ops transport_udp_ops = {
	.name = "udp",
	.open = udp_open,
	.close = udp_close,
	.tx_alloc = udp_tx_alloc,
	.tx_send = udp_tx_send,
	.tx_flush = udp_tx_flush,
	.rx_burst = udp_rx_burst,
	.rx_release = udp_rx_release,
	.wait_fd = udp_wait_fd,
	.tx_pending = udp_tx_pending,
	.set_nodes = udp_set_nodes,
};
