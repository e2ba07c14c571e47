// SPDX-License-Identifier: BSD-3-Clause
/*
 * udp_rx.c - the UDP transport's rx: a ring of buffers that recvmmsg
 * fills in order.
 *
 * Without UDP_GRO a buffer holds one datagram (cfg->mtu bytes; longer
 * ones arrive truncated and are dropped).  With it a buffer is 64 KB and
 * may hold a run of datagrams of one flow that the kernel coalesced; the
 * UDP_GRO cmsg gives their size (the last may be shorter).  Either way a
 * buffer is handed out as one transport_rx per datagram, pointing into
 * it, possibly over several rx_burst calls; it is free again once every
 * datagram in it was handed out and released.  Buffers are reused in
 * ring order, so one held frame holds the buffers after it: the callers
 * release each burst before the next.  Frames we sent ourselves come
 * first, from their tx buffers (udp.h, UDP_SELF_LOOP_ENV).
 */
#include <errno.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "dataplane/clock.h"
#include "dataplane/transport/udp.h"

/* room for the UDP_GRO segment size and the SO_TIMESTAMPNS stamp */
union udp_rx_cmsg {
	char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct timespec))];
	struct cmsghdr align;
};

static uint8_t *rx_buf_data(struct udp_priv *u, uint32_t b)
{
	return u->rx_slab + (size_t)b * u->rx_buf_size;
}

/* free the oldest buffers whose datagrams were all handed and released */
static void rx_tail_advance(struct udp_priv *u)
{
	while (u->rx_tail != u->rx_next &&
	       !u->rxb[u->rx_tail & (u->rx_nbufs - 1)].refs)
		u->rx_tail++;
}

/* the segment size in a UDP_GRO cmsg, or 0 when there is none */
static uint32_t gro_size(struct msghdr *h)
{
	struct cmsghdr *c;
	int seg;

	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			memcpy(&seg, CMSG_DATA(c), sizeof(seg));
			return seg > 0 ? (uint32_t)seg : 0;
		}
	}
	return 0;
}

/* the SO_TIMESTAMPNS stamp (CLOCK_REALTIME) on the tly_now_ns() clock,
 * @mono_minus_real apart; 0 when there is none */
static uint64_t arrival_stamp(struct msghdr *h, int64_t mono_minus_real)
{
	struct cmsghdr *c;
	struct timespec ts;
	int64_t t;

	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level != SOL_SOCKET ||
		    c->cmsg_type != SCM_TIMESTAMPNS)
			continue;
		memcpy(&ts, CMSG_DATA(c), sizeof(ts));
		t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec +
		    mono_minus_real;
		return t > 0 ? (uint64_t)t : 0;
	}
	return 0;
}

/* Record what recvmmsg put in buffer @b: how many datagrams to hand out,
 * or none (and count them as dropped) when they are too long. */
static void rx_buf_fill(struct transport *tp, struct udp_rx_buf *rb,
			struct mmsghdr *m, int64_t mono_minus_real)
{
	struct udp_priv *u = tp->priv;
	uint32_t len = m->msg_len, seg = gro_size(&m->msg_hdr);

	if (!seg || seg > len)
		seg = len;
	rb->len = len;
	rb->seg = seg;
	rb->off = 0;
	rb->refs = 0;
	rb->arrival_ns = tp->rx_stamps ?
			 arrival_stamp(&m->msg_hdr, mono_minus_real) : 0;
	/* an empty datagram is one (empty) frame */
	rb->left = seg ? (len + seg - 1) / seg : 1;
	if ((m->msg_hdr.msg_flags & MSG_TRUNC) || seg > u->buf_size) {
		/* longer than any frame we accept */
		tp->stats.rx_drops += rb->left;
		rb->left = 0;
	}
}

/* receive from @fd into up to @n free buffers; returns how many were
 * filled */
static int rx_fill(struct transport *tp, int fd, int n)
{
	struct udp_priv *u = tp->priv;
	uint32_t room = u->rx_nbufs - (u->rx_head - u->rx_tail);
	struct mmsghdr msg[TRANSPORT_RX_BURST];
	struct iovec iov[TRANSPORT_RX_BURST];
	union udp_rx_cmsg ctl[TRANSPORT_RX_BURST];
	int64_t mono_minus_real = 0;
	int r, i;

	if ((uint32_t)n > room)
		n = (int)room;
	if (n <= 0)
		return 0;
	for (i = 0; i < n; i++) {
		uint32_t b = (u->rx_head + (uint32_t)i) & (u->rx_nbufs - 1);

		iov[i].iov_base = rx_buf_data(u, b);
		iov[i].iov_len = u->rx_buf_size;
		memset(&msg[i], 0, sizeof(msg[i]));
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
		if (u->gro || tp->rx_stamps) {
			msg[i].msg_hdr.msg_control = ctl[i].buf;
			msg[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
		}
	}
	r = recvmmsg(fd, msg, (unsigned int)n, MSG_DONTWAIT, NULL);
	if (r <= 0)
		return 0;
	if (tp->rx_stamps)
		mono_minus_real = tly_mono_minus_real_ns();
	tp->stats.rx_msgs += (uint64_t)r;
	for (i = 0; i < r; i++)
		rx_buf_fill(tp, &u->rxb[u->rx_head++ & (u->rx_nbufs - 1)],
			    &msg[i], mono_minus_real);
	return r;
}

/* hand out up to @n datagrams from the buffers received, oldest first */
static int rx_hand_out(struct transport *tp, struct transport_rx *rx, int n)
{
	struct udp_priv *u = tp->priv;
	int k = 0;

	while (k < n && u->rx_next != u->rx_head) {
		uint32_t b = u->rx_next & (u->rx_nbufs - 1);
		struct udp_rx_buf *rb = &u->rxb[b];
		uint32_t len;

		if (!rb->left) {
			u->rx_next++;
			continue;
		}
		len = rb->len - rb->off < rb->seg ? rb->len - rb->off : rb->seg;
		rx[k].data = rx_buf_data(u, b) + rb->off;
		rx[k].len = len;
		rx[k].cookie = (void *)(uintptr_t)b;
		rx[k].arrival_ns = rb->arrival_ns;
		rb->off += len;
		rb->left--;
		rb->refs++;
		tp->stats.rx_pkts++;
		tp->stats.rx_bytes += len;
		k++;
	}
	/* a buffer whose last datagram was just handed out is done too */
	while (u->rx_next != u->rx_head &&
	       !u->rxb[u->rx_next & (u->rx_nbufs - 1)].left)
		u->rx_next++;
	rx_tail_advance(u);
	return k;
}

/* hand out up to @n frames we sent ourselves, in their tx buffers */
static int loop_hand_out(struct transport *tp, struct transport_rx *rx, int n)
{
	struct udp_priv *u = tp->priv;
	int k;

	for (k = 0; k < n && u->loopq_n; k++) {
		uint32_t b = u->loopq[u->loopq_head];

		u->loopq_head = (u->loopq_head + 1) % UDP_TX_BUFS;
		u->loopq_n--;
		rx[k].data = u->tx_slab + (size_t)b * u->buf_size;
		rx[k].len = u->loop_len[b];
		rx[k].cookie = (void *)(uintptr_t)(b | UDP_LOOP_COOKIE);
		rx[k].arrival_ns = 0;
	}
	return k;
}

int udp_rx_burst(struct transport *tp, struct transport_rx *rx, int n)
{
	struct udp_priv *u = tp->priv;
	int k;

	if (n > TRANSPORT_RX_BURST)
		n = TRANSPORT_RX_BURST;
	if (n <= 0)
		return 0;
	k = loop_hand_out(tp, rx, n);
	k += rx_hand_out(tp, rx + k, n - k);
	/* one buffer per missing frame: a GRO buffer may bring more, kept
	 * for the next call */
	if (k < n && rx_fill(tp, u->fd, n - k) > 0)
		k += rx_hand_out(tp, rx + k, n - k);
	/* then the result group's RESULTs */
	if (k < n && u->gfd >= 0 && rx_fill(tp, u->gfd, n - k) > 0)
		k += rx_hand_out(tp, rx + k, n - k);
	return k;
}

void udp_rx_release(struct transport *tp, struct transport_rx *rx, int n)
{
	struct udp_priv *u = tp->priv;
	int i;

	for (i = 0; i < n; i++) {
		uintptr_t c = (uintptr_t)rx[i].cookie;

		if (c & UDP_LOOP_COOKIE)
			u->tx_free[u->n_tx_free++] = (uint32_t)c &
						     ~UDP_LOOP_COOKIE;
		else
			u->rxb[c].refs--;
	}
	rx_tail_advance(u);
}
