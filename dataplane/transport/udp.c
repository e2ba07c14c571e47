// SPDX-License-Identifier: BSD-3-Clause
/*
 * udp.c - the kernel UDP transport: one non-blocking socket, bare tally
 * packets (one per datagram), sendmmsg/recvmmsg batches, and where the
 * kernel has them the UDP_SEGMENT (GSO) and UDP_GRO offloads, so runs of
 * datagrams cross the kernel boundary up to 64 KB at a time (udp.h).
 * Works anywhere, no privileges.  docs/transport-udp.md has the details.
 *
 * This file: the socket, the offloads' set-up and the address table;
 * udp_tx.c queues and sends, udp_rx.c receives and splits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane/dp_log.h"
#include "dataplane/transport/transport.h"
#include "dataplane/transport/udp.h"

static void sockbuf_grow(int fd, int opt_force, int opt)
{
	int sz = UDP_SOCKBUF;

	/* FORCE ignores rmem_max/wmem_max but needs CAP_NET_ADMIN */
	if (setsockopt(fd, SOL_SOCKET, opt_force, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, opt, &sz, sizeof(sz));
}

static void peers_fill(struct udp_priv *u, const struct transport_config *cfg)
{
	struct sockaddr_in *g = &u->peers[TRANSPORT_GROUP_NODE];
	uint32_t i;

	for (i = 0; i < cfg->n_nodes; i++) {
		u->peers[i].sin_family = AF_INET;
		u->peers[i].sin_addr.s_addr = htonl(cfg->addrs[i].ip);
		u->peers[i].sin_port = htons(cfg->addrs[i].port);
	}
	g->sin_family = AF_INET;
	g->sin_addr.s_addr = htonl(cfg->group_ip);
	g->sin_port = htons(cfg->group_port);
}

/* which offloads TALLY_UDP_OFFLOAD leaves on: off | tx | rx | on (unset) */
static int offload_wanted(void)
{
	const char *v = getenv(UDP_OFFLOAD_ENV);

	if (!v || !*v || !strcmp(v, "on") || !strcmp(v, "1"))
		return UDP_OFFLOAD_TX | UDP_OFFLOAD_RX;
	if (!strcmp(v, "off") || !strcmp(v, "0"))
		return 0;
	if (!strcmp(v, "tx"))
		return UDP_OFFLOAD_TX;
	if (!strcmp(v, "rx"))
		return UDP_OFFLOAD_RX;
	dp_warn("transport udp: %s=%s: expected off, tx, rx or on; using on",
		UDP_OFFLOAD_ENV, v);
	return UDP_OFFLOAD_TX | UDP_OFFLOAD_RX;
}

/*
 * Ask the socket for the offloads.  UDP_SEGMENT 0 sets no default
 * segment size (each send gives its own in a cmsg); it only tells
 * whether the kernel knows the option (4.18+).  UDP_GRO is 5.0+.
 */
static void offload_setup(struct udp_priv *u)
{
	int want = offload_wanted(), zero = 0, one = 1;

	if ((want & UDP_OFFLOAD_TX) &&
	    !setsockopt(u->fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)))
		u->gso = true;
	else if (want & UDP_OFFLOAD_TX)
		dp_warn("transport udp: no UDP_SEGMENT (%s): one datagram per send",
			strerror(errno));
	if ((want & UDP_OFFLOAD_RX) &&
	    !setsockopt(u->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)))
		u->gro = true;
	else if (want & UDP_OFFLOAD_RX)
		dp_warn("transport udp: no UDP_GRO (%s): one datagram per receive",
			strerror(errno));
	/* the group's runs too: without it the kernel cuts every GSO run
	 * the aggregator sent into datagrams before our socket (rx takes
	 * either: a buffer without the GRO cmsg is one datagram) */
	if (u->gro && u->gfd >= 0 &&
	    setsockopt(u->gfd, SOL_UDP, UDP_GRO, &one, sizeof(one)))
		dp_warn("transport udp: no UDP_GRO on the result group's socket (%s)",
			strerror(errno));
}

/* frames to ourselves skip the kernel unless TALLY_UDP_SELF_LOOP=off */
static bool self_loop_wanted(void)
{
	const char *v = getenv(UDP_SELF_LOOP_ENV);

	if (!v || !*v || !strcmp(v, "on") || !strcmp(v, "1"))
		return true;
	if (!strcmp(v, "off") || !strcmp(v, "0"))
		return false;
	dp_warn("transport udp: %s=%s: expected off or on; using on",
		UDP_SELF_LOOP_ENV, v);
	return true;
}

static void udp_close(struct transport *tp)
{
	struct udp_priv *u = tp->priv;

	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	if (u->gfd >= 0)
		close(u->gfd);
	if (u->efd >= 0)
		close(u->efd);
	free(u->peers);
	free(u->tx_slab);
	free(u->tx_free);
	free(u->tx_iov);
	free(u->rx_slab);
	free(u->rxb);
	free(u);
	tp->priv = NULL;
}

/*
 * The kernel stamps each datagram when it arrives (SO_TIMESTAMPNS), and
 * the stamp stands for when it reached this host: an answer's RTT sample
 * ends there (tly_worker_rx_at), and an emulated delay runs from there
 * (transport.c), not from when this thread got round to reading it.
 * Without the stamps (a kernel that refuses them) both use the read, and
 * an emulated delay stays on the sender's side.
 */
static void rx_stamps_setup(struct transport *tp, int fd)
{
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one))) {
		dp_warn("transport udp: no SO_TIMESTAMPNS (%s): RTTs end when "
			"a frame is read%s", strerror(errno),
			tp->cfg.emu.delay_ns ? ", and the emulated delay is "
			"added by the sender" : "");
		tp->rx_stamps = false;
		return;
	}
	tp->rx_stamps = true;
}

static int bind_socket(struct transport *tp, const struct transport_config *cfg)
{
	const struct tly_addr *me = &cfg->addrs[cfg->self];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct udp_priv *u = tp->priv;
	int err;

	sa.sin_port = htons(me->port);
	sa.sin_addr.s_addr = htonl(me->ip);
	if (cfg->bind_ip && inet_pton(AF_INET, cfg->bind_ip,
				      &sa.sin_addr) != 1) {
		dp_err("transport udp: bad bind_ip '%s'",
			cfg->bind_ip);
		return -EINVAL;
	}
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0 || bind(u->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = errno;
		dp_err("transport udp: bind %s:%u: %s",
			inet_ntoa(sa.sin_addr), me->port, strerror(err));
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
	rx_stamps_setup(tp, u->fd);
	return 0;
}

/*
 * The result group (switch profile): a second socket bound to the group's
 * address and port that joined it on the interface of our address, so
 * several workers on one host each get every RESULT; an epoll of both
 * sockets is the wait fd.
 */
static int group_join(struct transport *tp, const struct transport_config *cfg)
{
	struct udp_priv *u = tp->priv;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct ip_mreq mr = { .imr_interface = u->bound.sin_addr };
	struct epoll_event ev = { .events = EPOLLIN };
	int one = 1, err;

	sa.sin_addr.s_addr = htonl(cfg->group_ip);
	sa.sin_port = htons(cfg->group_port);
	mr.imr_multiaddr = sa.sin_addr;
	u->gfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->gfd < 0 ||
	    setsockopt(u->gfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(u->gfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(u->gfd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
		       sizeof(mr))) {
		err = errno;
		dp_err("transport udp: join the result group %s:%u: %s",
		       inet_ntoa(sa.sin_addr), cfg->group_port, strerror(err));
		return -err;
	}
	sockbuf_grow(u->gfd, SO_RCVBUFFORCE, SO_RCVBUF);
	if (tp->rx_stamps)
		rx_stamps_setup(tp, u->gfd);
	u->efd = epoll_create1(EPOLL_CLOEXEC);
	if (u->efd < 0)
		return -errno;
	ev.data.fd = u->fd;
	if (epoll_ctl(u->efd, EPOLL_CTL_ADD, u->fd, &ev))
		return -errno;
	ev.data.fd = u->gfd;
	if (epoll_ctl(u->efd, EPOLL_CTL_ADD, u->gfd, &ev))
		return -errno;
	return 0;
}

/*
 * Sending to the result group: out of the interface of our address, one
 * hop, and not looped back to this host's members.  A co-located
 * worker's copy goes as a frame to ourselves (transport.c); the loop
 * would bring it twice.  So a daemon of the job in the same network
 * namespace as the sender does not get the group's RESULTs (it gets
 * them again, one by one, when it asks: docs/transport-udp.md).
 */
static int group_send_setup(struct udp_priv *u,
			    const struct transport_config *cfg)
{
	unsigned char ttl = 1, loop = 0;
	int err;

	if (setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_IF,
		       &u->bound.sin_addr, sizeof(u->bound.sin_addr)) ||
	    setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl,
		       sizeof(ttl)) ||
	    setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop,
		       sizeof(loop))) {
		err = errno;
		dp_err("transport udp: send to the result group %u.%u.%u.%u:%u: %s",
		       cfg->group_ip >> 24, (cfg->group_ip >> 16) & 0xff,
		       (cfg->group_ip >> 8) & 0xff, cfg->group_ip & 0xff,
		       cfg->group_port, strerror(err));
		return -err;
	}
	return 0;
}

static int udp_open(struct transport *tp, const struct transport_config *cfg)
{
	struct udp_priv *u;
	uint32_t i;
	int err;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	tp->priv = u;
	tp->full_frames = false;
	u->fd = -1;
	u->gfd = -1;
	u->efd = -1;
	err = bind_socket(tp, cfg);
	if (!err && cfg->group_ip && !cfg->group_send_only)
		err = group_join(tp, cfg);
	if (!err && cfg->group_send)
		err = group_send_setup(u, cfg);
	if (err) {
		udp_close(tp);
		return err;
	}
	offload_setup(u);
	u->self_loop = self_loop_wanted();
	u->buf_size = cfg->mtu;
	u->rx_nbufs = u->gro ? UDP_RX_GRO_BUFS : UDP_RX_BUFS;
	u->rx_buf_size = u->gro ? UDP_RX_GRO_BUF_SIZE : u->buf_size;
	u->peers = calloc(TRANSPORT_MAX_NODES + 1, sizeof(*u->peers));
	u->tx_slab = calloc(UDP_TX_BUFS, u->buf_size);
	u->tx_free = calloc(UDP_TX_BUFS, sizeof(*u->tx_free));
	u->tx_iov = calloc(UDP_TX_BUFS, sizeof(*u->tx_iov));
	u->rx_slab = calloc(u->rx_nbufs, u->rx_buf_size);
	u->rxb = calloc(u->rx_nbufs, sizeof(*u->rxb));
	if (!u->peers || !u->tx_slab || !u->tx_free || !u->tx_iov ||
	    !u->rx_slab || !u->rxb) {
		udp_close(tp);
		return -ENOMEM;
	}
	for (i = 0; i < UDP_TX_BUFS; i++)
		u->tx_free[i] = UDP_TX_BUFS - 1 - i;
	u->n_tx_free = UDP_TX_BUFS;
	peers_fill(u, cfg);
	err = udp_whole_frames(tp);
	if (err)
		udp_close(tp);
	return err;
}

static int udp_wait_fd(struct transport *tp)
{
	struct udp_priv *u = tp->priv;

	return u->efd >= 0 ? u->efd : u->fd;
}

static int udp_set_nodes(struct transport *tp)
{
	const struct transport_config *cfg = &tp->cfg;
	const struct tly_addr *me = &cfg->addrs[cfg->self];
	struct udp_priv *u = tp->priv;
	int ret;

	/* with bind_ip the table's address of ours is not what we bound */
	if ((!cfg->bind_ip && ntohl(u->bound.sin_addr.s_addr) != me->ip) ||
	    ntohs(u->bound.sin_port) != me->port) {
		dp_err("transport udp: our address changed to %u.%u.%u.%u:%u: reopen the transport",
			me->ip >> 24, (me->ip >> 16) & 0xff,
			(me->ip >> 8) & 0xff, me->ip & 0xff, me->port);
		return -EADDRNOTAVAIL;
	}
	ret = udp_routes_check(tp);
	if (ret)
		return ret;
	peers_fill(u, cfg);
	/* port 0 for nodes gone: a frame still queued to one is dropped
	 * (the group's entry, after the nodes, stays) */
	memset(u->peers + cfg->n_nodes, 0, (TRANSPORT_MAX_NODES -
	       cfg->n_nodes) * sizeof(*u->peers));
	return 0;
}

const struct transport_ops transport_udp_ops = {
	.name = "udp",
	.group_tx = true,
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
