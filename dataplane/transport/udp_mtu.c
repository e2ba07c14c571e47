// SPDX-License-Identifier: BSD-3-Clause
/*
 * udp_mtu.c - whole frames only (transport_config.no_fragments): the
 * switch profile's aggregator, a switch or the XDP program, takes a DATA
 * as one frame and cannot put IP fragments together.  A frame longer
 * than a route's MTU would leave as fragments the aggregator passes by,
 * and the job would wait for answers that never come.  So the socket
 * sets DF and never fragments (IP_PMTUDISC_DO: a send that does not fit
 * fails with EMSGSIZE), and open and set_nodes refuse a table in which
 * the route to some node cannot carry the largest frame, naming the
 * node, the route's MTU and what the frames need (docs/switch-profile.md,
 * "Jumbo frames").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane/dp_log.h"
#include "dataplane/engine/wire.h"
#include "dataplane/transport/udp.h"

/* the MTU of the route from our address to @to (connect() looks it up;
 * nothing is sent), or -errno.  In the calling thread's network
 * namespace: the daemon's, where the transport was opened. */
static int route_mtu(const struct sockaddr_in *from,
		     const struct sockaddr_in *to)
{
	struct sockaddr_in src = *from;
	socklen_t len = sizeof(int);
	int fd, mtu = 0, err = 0;

	src.sin_port = 0;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (const struct sockaddr *)&src, sizeof(src)) ||
	    connect(fd, (const struct sockaddr *)to, sizeof(*to)) ||
	    getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len))
		err = -errno;
	close(fd);
	return err ? err : mtu;
}

/* on the table in tp->cfg (set_nodes: before the peers take it) */
int udp_routes_check(struct transport *tp)
{
	const struct transport_config *cfg = &tp->cfg;
	struct udp_priv *u = tp->priv;
	/* the frame's IP packet: a udp frame's mtu counts Ethernet too */
	uint32_t need = cfg->mtu - TLY_ETH_LEN;
	uint32_t i;
	int mtu;

	if (!cfg->no_fragments)
		return 0;
	for (i = 0; i < cfg->n_nodes; i++) {
		struct sockaddr_in to = { .sin_family = AF_INET };

		to.sin_addr.s_addr = htonl(cfg->addrs[i].ip);
		to.sin_port = htons(cfg->addrs[i].port);
		if (i == cfg->self || !to.sin_addr.s_addr || !to.sin_port)
			continue;	/* ourselves, or a node not known yet */
		mtu = route_mtu(&u->bound, &to);
		if (mtu < 0) {
			dp_err("transport udp: no route to node %u (%s): %s",
			       i, inet_ntoa(to.sin_addr), strerror(-mtu));
			return mtu;
		}
		if ((uint32_t)mtu < need) {
			dp_err("transport udp: frames of %u bytes need an IP MTU of %u toward node %u (%s), the route's is %d: this job's frames may not be fragmented; raise the links' MTU or lower dataplane.k",
			       cfg->mtu, need, i, inet_ntoa(to.sin_addr), mtu);
			return -EMSGSIZE;
		}
	}
	return 0;
}

int udp_whole_frames(struct transport *tp)
{
	struct udp_priv *u = tp->priv;
	int dont = IP_PMTUDISC_DO;

	if (!tp->cfg.no_fragments)
		return 0;
	if (setsockopt(u->fd, IPPROTO_IP, IP_MTU_DISCOVER, &dont,
		       sizeof(dont))) {
		int err = errno;

		dp_err("transport udp: cannot set DF (IP_MTU_DISCOVER): %s",
		       strerror(err));
		return -err;
	}
	return udp_routes_check(tp);
}
