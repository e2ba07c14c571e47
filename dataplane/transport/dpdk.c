// SPDX-License-Identifier: BSD-3-Clause
/*
 * dpdk.c - DPDK ethdev ports as a transport: full Ethernet/IPv4/UDP
 * frames, which the engine writes from the address table (static MACs and
 * IPs from bootstrap, no ARP).
 *
 * One rx and one tx queue per port, run to completion on the calling
 * thread: tx_alloc hands out an mbuf's data area (the mbuf pointer is kept
 * in the headroom just before it), tx_send queues the mbuf, tx_flush
 * bursts the queues to the ports and keeps what a port refused for the
 * next flush.  rx_burst returns mbufs as cookies; frames not addressed to
 * us (MAC, IPv4 destination, UDP port) are dropped here and counted in
 * rx_filtered, so the engine only parses tally traffic (the port is
 * promiscuous, and a veth also carries the kernel's own chatter).
 *
 * Several ports: when the EAL arguments create more than one port (a
 * dedicated aggregator with one net_memif port per worker, as a switch
 * has one port per host), the transport drives them all and forwards like
 * a learning switch: a node's port is learned from the source MAC of the
 * frames it sends us, and a frame to a node not yet learned goes out of
 * every port.  A port whose link goes down (its peer process exited) has
 * its queue dropped and counted, never held.
 *
 * The EAL can be initialised once per process: one DPDK transport per
 * process lifetime.  No wait fd: idle loops sleep (transport_idle_wait).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dataplane/dp_log.h"
#include "dataplane/transport/transport.h"

#define DPDK_TXQ	512	/* mbufs queued between flushes */
#define DPDK_RING	1024	/* descriptors per queue */
#define DPDK_TX_TRIES	4	/* tx_burst calls per flush without progress */
#define DPDK_MAX_ARGS	64
#define DPDK_MAX_PORTS	16
#define DPDK_ROUTE_NONE	0xff	/* route[] of a node not learned yet */
#define DPDK_MAC_BUCKETS 512	/* > 2 * TRANSPORT_MAX_NODES, power of 2 */
#define DPDK_MEMIF_CHECK_NS 100000000ull	/* memif client supervision */

enum eal_state { EAL_NONE, EAL_UP, EAL_GONE };
static enum eal_state eal_state = EAL_NONE;
/* the EAL may keep pointers into argv: it lives as long as the process */
static char *eal_argbuf;
static char *eal_argv[DPDK_MAX_ARGS + 1];

struct dpdk_port {
	uint16_t id;
	bool started;
	/* a memif client's server socket ("": not one), next check */
	char memif_socket[108];
	uint64_t check_ns;
	struct rte_mbuf *txq[DPDK_TXQ];
	uint32_t txq_n;
	uint64_t last_src;	/* source MAC last learned here */
};

/* source MAC -> node id, for learning routes (open addressing) */
struct dpdk_mac_ent {
	uint64_t mac;		/* 0: empty */
	uint16_t node;
};

struct dpdk_priv {
	struct dpdk_port ports[DPDK_MAX_PORTS];
	uint16_t n_ports;
	uint16_t n_started;
	bool has_memif_clients;
	uint16_t rx_next;	/* port the next rx burst starts at */
	uint8_t route[TRANSPORT_MAX_NODES];	/* node -> ports[] index */
	struct dpdk_mac_ent macs[DPDK_MAC_BUCKETS];
	struct rte_mempool *pool;
	/* Frames to ourselves (a co-located worker's shard): a port does not
	 * hand its own transmissions back, so they are looped here. */
	struct rte_mbuf *loopq[DPDK_TXQ];
	uint32_t loop_head, loop_n;
	uint8_t mac[6];
	uint32_t max_frame;	/* what the port and our mbufs can take */
	uint32_t ip;		/* ours, network byte order */
	uint16_t udp_port;	/* ours, network byte order */
};

static int eal_start(const char *args)
{
	char *save = NULL, *tok;
	int argc = 0, ret;

	if (eal_state == EAL_UP) {
		dp_err("transport dpdk: a DPDK transport is already open in this process (one per process)");
		return -EBUSY;
	}
	if (eal_state == EAL_GONE) {
		dp_err("transport dpdk: the EAL was shut down and cannot be initialised twice in one process");
		return -EALREADY;
	}
	eal_argbuf = strdup(args ? args : "");
	if (!eal_argbuf)
		return -ENOMEM;
	eal_argv[argc++] = "tallyd";
	for (tok = strtok_r(eal_argbuf, " \t", &save); tok;
	     tok = strtok_r(NULL, " \t", &save)) {
		if (argc == DPDK_MAX_ARGS) {
			dp_err("transport dpdk: more than %d EAL arguments",
				DPDK_MAX_ARGS - 1);
			return -E2BIG;
		}
		eal_argv[argc++] = tok;
	}
	eal_argv[argc] = NULL;
	ret = rte_eal_init(argc, eal_argv);
	if (ret < 0) {
		dp_err("transport dpdk: rte_eal_init(\"%s\"): %s",
			args ? args : "", rte_strerror(rte_errno));
		/* a failed init cannot be retried either */
		eal_state = EAL_GONE;
		return rte_errno ? -rte_errno : -EINVAL;
	}
	eal_state = EAL_UP;
	return 0;
}

/* max_frame is the smallest any port takes: frames past it are refused
 * by tx_alloc, not sent */
static int port_start(struct dpdk_priv *d, uint16_t port, uint32_t mtu)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	uint16_t nrx = DPDK_RING, ntx = DPDK_RING;
	int sock = rte_eth_dev_socket_id(port);
	int ret;

	ret = rte_eth_dev_info_get(port, &info);
	if (ret)
		return ret;
	if (info.max_rx_pktlen && d->max_frame > info.max_rx_pktlen) {
		dp_warn("transport dpdk: port %u takes frames up to %u bytes, not %u: larger ones are refused",
			port, info.max_rx_pktlen, d->max_frame);
		d->max_frame = info.max_rx_pktlen;
	}
	mtu = d->max_frame;
	memset(&conf, 0, sizeof(conf));
	ret = rte_eth_dev_configure(port, 1, 1, &conf);
	if (!ret)
		ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);
	if (!ret)
		ret = rte_eth_rx_queue_setup(port, 0, nrx, sock, NULL, d->pool);
	if (!ret)
		ret = rte_eth_tx_queue_setup(port, 0, ntx, sock, NULL);
	if (!ret && mtu > RTE_ETHER_MTU + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN)
		ret = rte_eth_dev_set_mtu(port, (uint16_t)(mtu -
				RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN));
	return ret;
}

static int port_up(struct dpdk_priv *d, struct dpdk_port *pt)
{
	int ret = rte_eth_dev_start(pt->id);

	/* a point-to-point port (memif) has no MAC filter to turn off */
	if (!ret) {
		ret = rte_eth_promiscuous_enable(pt->id);
		if (ret == -ENOTSUP)
			ret = 0;
	}
	pt->started = !ret;
	d->n_started += pt->started;
	return ret;
}

/*
 * memif clients.  A client cannot start before its server's socket exists,
 * and the daemons of a job open their transports at the same moment; a
 * client whose server goes away (the aggregator's process exited) is
 * disconnected and never connects again by itself.  So a client port is
 * supervised from the poll loop, every DPDK_MEMIF_CHECK_NS: not started
 * while the socket file is missing, and stopped and started again (a new
 * connection) when its link has been down for a check interval.  Its link
 * is down meanwhile, like a switch port whose peer is unplugged: frames to
 * it are dropped and counted.  An abstract socket (socket-abstract=yes,
 * memif's default) cannot be looked for: use socket-abstract=no.
 */
static bool memif_client_socket(uint16_t port, char *path, size_t cap)
{
	struct rte_eth_dev_info info;
	const struct rte_devargs *da;
	const char *args, *sock;
	size_t n;

	if (rte_eth_dev_info_get(port, &info) || !info.driver_name ||
	    !strstr(info.driver_name, "memif") || !info.device)
		return false;
	da = rte_dev_devargs(info.device);
	args = da ? da->args : NULL;
	if (!args || !strstr(args, "role=client") ||
	    !strstr(args, "socket-abstract=no"))
		return false;
	sock = strstr(args, "socket=");
	if (!sock)
		return false;
	sock += strlen("socket=");
	n = strcspn(sock, ",");
	if (n >= cap)
		return false;
	memcpy(path, sock, n);
	path[n] = '\0';
	return true;
}

static void port_down(struct dpdk_priv *d, struct dpdk_port *pt)
{
	if (!pt->started)
		return;
	rte_eth_dev_stop(pt->id);
	pt->started = false;
	d->n_started--;
}

static bool link_down(uint16_t port)
{
	struct rte_eth_link link;

	return !rte_eth_link_get_nowait(port, &link) &&
	       link.link_status == RTE_ETH_LINK_DOWN;
}

static void memif_supervise(struct dpdk_priv *d, struct dpdk_port *pt,
			    uint64_t now)
{
	if (now < pt->check_ns)
		return;
	pt->check_ns = now + DPDK_MEMIF_CHECK_NS;
	if (pt->started) {
		if (!link_down(pt->id))
			return;
		dp_info("transport dpdk: port %u: memif link down, connecting again",
			pt->id);
		port_down(d, pt);
	}
	if (access(pt->memif_socket, F_OK))
		return;
	if (port_up(d, pt))
		dp_err("transport dpdk: port %u: memif client does not start",
			pt->id);
}

static void ports_supervise(struct dpdk_priv *d)
{
	uint64_t now = transport_now_ns();

	for (uint16_t p = 0; p < d->n_ports; p++)
		if (d->ports[p].memif_socket[0])
			memif_supervise(d, &d->ports[p], now);
}

/* promiscuous mode makes a mismatch work, but say so: it is a config slip */
static void port_mac_note(const struct dpdk_priv *d, uint16_t port)
{
	struct rte_ether_addr ea;

	if (d->n_ports == 1 && !rte_eth_macaddr_get(port, &ea) &&
	    memcmp(ea.addr_bytes, d->mac, 6))
		dp_warn("transport dpdk: port %u has MAC %02x:%02x:%02x:%02x:%02x:%02x, the address table another",
			port, ea.addr_bytes[0], ea.addr_bytes[1],
			ea.addr_bytes[2], ea.addr_bytes[3], ea.addr_bytes[4],
			ea.addr_bytes[5]);
}

static uint64_t mac48(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 6; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t mac_bucket(uint64_t mac)
{
	return (uint32_t)((mac * 0x9e3779b97f4a7c15ull) >> 32) &
	       (DPDK_MAC_BUCKETS - 1);
}

/* A new address table: learn routes again (node ids may have moved). */
static void routes_reset(struct dpdk_priv *d, const struct transport_config *cfg)
{
	memset(d->route, DPDK_ROUTE_NONE, sizeof(d->route));
	memset(d->macs, 0, sizeof(d->macs));
	for (uint16_t p = 0; p < d->n_ports; p++)
		d->ports[p].last_src = 0;
	for (uint16_t i = 0; i < cfg->n_nodes; i++) {
		uint64_t mac = mac48(cfg->addrs[i].mac);
		uint32_t b = mac_bucket(mac);

		if (!mac || i == cfg->self)
			continue;
		while (d->macs[b].mac && d->macs[b].mac != mac)
			b = (b + 1) & (DPDK_MAC_BUCKETS - 1);
		d->macs[b].mac = mac;
		d->macs[b].node = i;
	}
}

/* A frame from @src arrived on ports[@p]: that node is reached there. */
static void route_learn(struct dpdk_priv *d, uint16_t p, const uint8_t *src)
{
	uint64_t mac = mac48(src);
	uint32_t b = mac_bucket(mac);

	if (d->ports[p].last_src == mac)
		return;
	d->ports[p].last_src = mac;
	for (; d->macs[b].mac; b = (b + 1) & (DPDK_MAC_BUCKETS - 1)) {
		if (d->macs[b].mac == mac) {
			d->route[d->macs[b].node] = (uint8_t)p;
			return;
		}
	}
}

static void txq_drop(struct transport *tp, struct dpdk_port *pt)
{
	tp->stats.tx_drops += pt->txq_n;
	rte_pktmbuf_free_bulk(pt->txq, pt->txq_n);
	pt->txq_n = 0;
}

static void dpdk_close(struct transport *tp)
{
	struct dpdk_priv *d = tp->priv;

	if (!d)
		return;
	for (; d->loop_n; d->loop_n--) {
		rte_pktmbuf_free(d->loopq[d->loop_head]);
		d->loop_head = (d->loop_head + 1) % DPDK_TXQ;
	}
	for (uint16_t p = 0; p < d->n_ports; p++) {
		rte_pktmbuf_free_bulk(d->ports[p].txq, d->ports[p].txq_n);
		port_down(d, &d->ports[p]);
		rte_eth_dev_close(d->ports[p].id);
	}
	rte_mempool_free(d->pool);
	free(d);
	tp->priv = NULL;
	rte_eal_cleanup();
	eal_state = EAL_GONE;
}

/* cfg->port_id, and every port after it the EAL created */
static int ports_find(struct dpdk_priv *d, uint16_t first)
{
	uint16_t id;

	if (!rte_eth_dev_is_valid_port(first)) {
		dp_err("transport dpdk: no port %u (%u ports; missing --vdev?)",
			first, rte_eth_dev_count_avail());
		return -ENODEV;
	}
	RTE_ETH_FOREACH_DEV(id) {
		if (id < first)
			continue;
		if (d->n_ports == DPDK_MAX_PORTS) {
			dp_err("transport dpdk: more than %d ports",
				DPDK_MAX_PORTS);
			return -E2BIG;
		}
		d->ports[d->n_ports++].id = id;
	}
	return 0;
}

static int dpdk_open(struct transport *tp, const struct transport_config *cfg)
{
	const struct tly_addr *me = &cfg->addrs[cfg->self];
	uint32_t n_mbufs = cfg->mbufs ? cfg->mbufs : 8191;
	struct dpdk_priv *d;
	int ret;

	ret = eal_start(cfg->eal_args);
	if (ret)
		return ret;
	d = calloc(1, sizeof(*d));
	if (!d) {
		rte_eal_cleanup();
		eal_state = EAL_GONE;
		return -ENOMEM;
	}
	tp->priv = d;
	tp->full_frames = true;
	memcpy(d->mac, me->mac, 6);
	d->ip = rte_cpu_to_be_32(me->ip);
	d->udp_port = rte_cpu_to_be_16(me->port);
	d->max_frame = cfg->mtu;
	ret = ports_find(d, cfg->port_id);
	if (ret)
		goto fail;
	routes_reset(d, cfg);
	/* every port's rx ring full, and room to build and queue frames */
	if (n_mbufs < (uint32_t)d->n_ports * (DPDK_RING + DPDK_TXQ) + 1023)
		n_mbufs = (uint32_t)d->n_ports * (DPDK_RING + DPDK_TXQ) + 1023;
	d->pool = rte_pktmbuf_pool_create("tally_mbufs", n_mbufs, 256, 0,
					  (uint16_t)(RTE_PKTMBUF_HEADROOM +
					  (cfg->mtu > 2048 ? cfg->mtu : 2048)),
					  rte_eth_dev_socket_id(d->ports[0].id));
	if (!d->pool) {
		dp_err("transport dpdk: mbuf pool of %u: %s",
			n_mbufs, rte_strerror(rte_errno));
		ret = -ENOMEM;
		goto fail;
	}
	for (uint16_t p = 0; p < d->n_ports; p++) {
		ret = port_start(d, d->ports[p].id, cfg->mtu);
		if (!ret && memif_client_socket(d->ports[p].id,
						d->ports[p].memif_socket,
						sizeof(d->ports[p].memif_socket))) {
			/* started (and restarted) by ports_supervise */
			d->has_memif_clients = true;
		} else if (!ret) {
			ret = port_up(d, &d->ports[p]);
		}
		if (ret) {
			dp_err("transport dpdk: port %u setup: %s",
				d->ports[p].id, rte_strerror(-ret));
			d->n_ports = p;	/* close only what started */
			goto fail;
		}
		port_mac_note(d, d->ports[p].id);
	}
	if (d->n_ports > 1)
		dp_info("transport dpdk: %u ports, forwarding by learned source MACs",
			d->n_ports);
	return 0;
fail:
	dpdk_close(tp);
	return ret < 0 ? ret : -EIO;
}

static struct rte_mbuf **mbuf_slot(uint8_t *data)
{
	return (struct rte_mbuf **)(void *)(data - sizeof(struct rte_mbuf *));
}

static uint8_t *dpdk_tx_alloc(struct transport *tp, size_t len)
{
	struct dpdk_priv *d = tp->priv;
	struct rte_mbuf *m = rte_pktmbuf_alloc(d->pool);
	uint8_t *data;

	if (!m)
		return NULL;
	if (len > d->max_frame || len > rte_pktmbuf_tailroom(m)) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	data = rte_pktmbuf_mtod(m, uint8_t *);
	*mbuf_slot(data) = m;	/* headroom: the PMD never reads it */
	return data;
}

static uint32_t port_flush(struct transport *tp, struct dpdk_port *pt)
{
	uint32_t done = 0, tries = 0;
	uint16_t n;

	if (!pt->started) {
		txq_drop(tp, pt);
		return 0;
	}
	while (done < pt->txq_n && tries < DPDK_TX_TRIES) {
		n = rte_eth_tx_burst(pt->id, 0, pt->txq + done,
				     (uint16_t)(pt->txq_n - done));
		if (!n)
			tries++;
		done += n;
	}
	for (n = 0; n < done; n++) {
		tp->stats.tx_pkts++;
		tp->stats.tx_bytes += rte_pktmbuf_pkt_len(pt->txq[n]);
	}
	/* the port's ring is full: keep the rest for the next flush */
	memmove(pt->txq, pt->txq + done,
		(pt->txq_n - done) * sizeof(pt->txq[0]));
	pt->txq_n -= done;
	/* its peer is gone (a memif peer exited): nothing will drain it */
	if (pt->txq_n && !done && link_down(pt->id))
		txq_drop(tp, pt);
	return done;
}

static int dpdk_tx_flush(struct transport *tp)
{
	struct dpdk_priv *d = tp->priv;
	uint32_t done = 0;

	for (uint16_t p = 0; p < d->n_ports; p++)
		if (d->ports[p].txq_n)
			done += port_flush(tp, &d->ports[p]);
	return (int)done;
}

static void port_enqueue(struct transport *tp, struct dpdk_port *pt,
			 struct rte_mbuf *m)
{
	if (pt->txq_n == DPDK_TXQ)
		port_flush(tp, pt);
	if (pt->txq_n == DPDK_TXQ) {
		tp->stats.tx_drops++;
		rte_pktmbuf_free(m);
		return;
	}
	pt->txq[pt->txq_n++] = m;
}

static void dpdk_tx_send(struct transport *tp, uint16_t dst, uint8_t *frame,
			 size_t len)
{
	struct dpdk_priv *d = tp->priv;
	struct rte_mbuf *m = *mbuf_slot(frame);
	uint8_t r;

	/* the engine wrote the addresses into the frame */
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	if (dst == tp->cfg.self) {
		if (d->loop_n == DPDK_TXQ) {
			tp->stats.tx_drops++;
			rte_pktmbuf_free(m);
			return;
		}
		d->loopq[(d->loop_head + d->loop_n++) % DPDK_TXQ] = m;
		return;
	}
	r = d->n_ports == 1 ? 0 : d->route[dst];
	if (r != DPDK_ROUTE_NONE) {
		port_enqueue(tp, &d->ports[r], m);
		return;
	}
	/* not learned yet: every port (each holds a reference) */
	rte_mbuf_refcnt_update(m, (int16_t)(d->n_ports - 1));
	for (uint16_t p = 0; p < d->n_ports; p++)
		port_enqueue(tp, &d->ports[p], m);
}

/* ours: to our MAC, IPv4/UDP to our address and port */
static bool frame_is_ours(const struct dpdk_priv *d, const uint8_t *p,
			  uint32_t len)
{
	const uint8_t *ip = p + TLY_ETH_LEN;
	uint32_t dip;
	uint16_t dport;

	if (len < TLY_L2L4_LEN || memcmp(p, d->mac, 6) ||
	    p[12] != 0x08 || p[13] != 0x00 || ip[9] != 17 ||
	    (ip[0] & 0x0f) != 5)
		return false;
	memcpy(&dip, ip + 16, 4);
	memcpy(&dport, ip + TLY_IP_LEN + 2, 2);
	return dip == d->ip && dport == d->udp_port;
}

/* up to @n frames from the loop queue, then the ports round-robin */
static uint16_t rx_gather(struct dpdk_priv *d, struct rte_mbuf **m,
			  uint16_t *port_of, uint16_t n)
{
	uint16_t got = 0, p = d->rx_next, k;

	for (; got < n && d->loop_n; got++) {
		m[got] = d->loopq[d->loop_head];
		port_of[got] = DPDK_MAX_PORTS;
		d->loop_head = (d->loop_head + 1) % DPDK_TXQ;
		d->loop_n--;
	}
	for (uint16_t i = 0; i < d->n_ports && got < n; i++) {
		if (!d->ports[p].started) {
			p = (uint16_t)((p + 1) % d->n_ports);
			continue;
		}
		k = rte_eth_rx_burst(d->ports[p].id, 0, m + got,
				     (uint16_t)(n - got));
		for (uint16_t j = 0; j < k; j++)
			port_of[got + j] = p;
		got += k;
		p = (uint16_t)((p + 1) % d->n_ports);
	}
	/* a busy port must not starve the others */
	d->rx_next = (uint16_t)((d->rx_next + 1) % d->n_ports);
	return got;
}

static int dpdk_rx_burst(struct transport *tp, struct transport_rx *rx, int n)
{
	struct dpdk_priv *d = tp->priv;
	struct rte_mbuf *m[TRANSPORT_RX_BURST];
	uint16_t port_of[TRANSPORT_RX_BURST];
	uint16_t got, i;
	int k = 0;

	if (n > TRANSPORT_RX_BURST)
		n = TRANSPORT_RX_BURST;
	if (d->has_memif_clients)
		ports_supervise(d);
	got = rx_gather(d, m, port_of, (uint16_t)n);
	for (i = 0; i < got; i++) {
		const uint8_t *p = rte_pktmbuf_mtod(m[i], const uint8_t *);

		if (m[i]->nb_segs != 1) {
			tp->stats.rx_drops++;	/* larger than our MTU */
			rte_pktmbuf_free(m[i]);
			continue;
		}
		if (!frame_is_ours(d, p, m[i]->data_len)) {
			tp->stats.rx_filtered++;
			rte_pktmbuf_free(m[i]);
			continue;
		}
		if (d->n_ports > 1 && port_of[i] < DPDK_MAX_PORTS)
			route_learn(d, port_of[i], p + 6);
		rx[k].data = p;
		rx[k].len = m[i]->data_len;
		rx[k].cookie = m[i];
		tp->stats.rx_pkts++;
		tp->stats.rx_bytes += m[i]->data_len;
		k++;
	}
	return k;
}

static void dpdk_rx_release(struct transport *tp, struct transport_rx *rx,
			    int n)
{
	int i;

	(void)tp;
	for (i = 0; i < n; i++)
		rte_pktmbuf_free(rx[i].cookie);
}

static int dpdk_wait_fd(struct transport *tp)
{
	(void)tp;
	return -1;
}

static int dpdk_tx_pending(struct transport *tp)
{
	struct dpdk_priv *d = tp->priv;
	uint32_t n = 0;

	for (uint16_t p = 0; p < d->n_ports; p++)
		n += d->ports[p].txq_n;
	return (int)n;
}

/*
 * A thread that is not an EAL lcore gets no mempool cache and no lcore
 * id; under net_af_xdp, driven from such a thread, the port stops
 * receiving after a while.  Registered, it is an lcore like the main one.
 */
static int dpdk_thread_bind(struct transport *tp, bool bind)
{
	(void)tp;
	if (!bind) {
		if (rte_lcore_id() != rte_get_main_lcore())
			rte_thread_unregister();
		return 0;
	}
	if (rte_lcore_id() != LCORE_ID_ANY)
		return 0;	/* already an lcore (the EAL's main thread) */
	if (rte_thread_register()) {
		dp_err("transport dpdk: rte_thread_register: %s",
		       rte_strerror(rte_errno));
		return -rte_errno;
	}
	return 0;
}

/* the ports stay; the filter follows our (new) entry, routes are learned
 * again */
static int dpdk_set_nodes(struct transport *tp)
{
	const struct tly_addr *me = &tp->cfg.addrs[tp->cfg.self];
	struct dpdk_priv *d = tp->priv;

	memcpy(d->mac, me->mac, 6);
	d->ip = rte_cpu_to_be_32(me->ip);
	d->udp_port = rte_cpu_to_be_16(me->port);
	routes_reset(d, &tp->cfg);
	return 0;
}

const struct transport_ops transport_dpdk_ops = {
	.name = "dpdk",
	.open = dpdk_open,
	.close = dpdk_close,
	.tx_alloc = dpdk_tx_alloc,
	.tx_send = dpdk_tx_send,
	.tx_flush = dpdk_tx_flush,
	.rx_burst = dpdk_rx_burst,
	.rx_release = dpdk_rx_release,
	.wait_fd = dpdk_wait_fd,
	.tx_pending = dpdk_tx_pending,
	.set_nodes = dpdk_set_nodes,
	.thread_bind = dpdk_thread_bind,
};
