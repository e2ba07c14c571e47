// SPDX-License-Identifier: BSD-3-Clause
/*
 * dpdk.c - a DPDK ethdev port as a transport: full Ethernet/IPv4/UDP
 * frames, which the engine writes from the address table (static MACs and
 * IPs from bootstrap, no ARP).
 *
 * One rx and one tx queue, run to completion on the calling thread:
 * tx_alloc hands out an mbuf's data area (the mbuf pointer is kept in the
 * headroom just before it), tx_send queues the mbuf, tx_flush bursts the
 * queue to the port and keeps what the port refused for the next flush.
 * rx_burst returns mbufs as cookies; frames not addressed to us (MAC, IPv4
 * destination, UDP port) are dropped here and counted in rx_filtered, so
 * the engine only parses tally traffic (the port is promiscuous, and a
 * veth also carries the kernel's own chatter).
 *
 * The EAL can be initialised once per process: one DPDK transport per
 * process lifetime.  No wait fd: idle loops sleep (transport_idle_wait).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dataplane/transport/transport.h"

#define DPDK_TXQ	512	/* mbufs queued between flushes */
#define DPDK_RING	1024	/* descriptors per queue */
#define DPDK_TX_TRIES	4	/* tx_burst calls per flush without progress */
#define DPDK_MAX_ARGS	64

enum eal_state { EAL_NONE, EAL_UP, EAL_GONE };
static enum eal_state eal_state = EAL_NONE;
/* the EAL may keep pointers into argv: it lives as long as the process */
static char *eal_argbuf;
static char *eal_argv[DPDK_MAX_ARGS + 1];

struct dpdk_priv {
	uint16_t port;
	struct rte_mempool *pool;
	struct rte_mbuf *txq[DPDK_TXQ];
	uint32_t txq_n;
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
		fprintf(stderr, "transport dpdk: a DPDK transport is already open in this process (one per process)\n");
		return -EBUSY;
	}
	if (eal_state == EAL_GONE) {
		fprintf(stderr, "transport dpdk: the EAL was shut down and cannot be initialised twice in one process\n");
		return -EALREADY;
	}
	eal_argbuf = strdup(args ? args : "");
	if (!eal_argbuf)
		return -ENOMEM;
	eal_argv[argc++] = "tallyd";
	for (tok = strtok_r(eal_argbuf, " \t", &save); tok;
	     tok = strtok_r(NULL, " \t", &save)) {
		if (argc == DPDK_MAX_ARGS) {
			fprintf(stderr, "transport dpdk: more than %d EAL arguments\n",
				DPDK_MAX_ARGS - 1);
			return -E2BIG;
		}
		eal_argv[argc++] = tok;
	}
	eal_argv[argc] = NULL;
	ret = rte_eal_init(argc, eal_argv);
	if (ret < 0) {
		fprintf(stderr, "transport dpdk: rte_eal_init(\"%s\"): %s\n",
			args ? args : "", rte_strerror(rte_errno));
		/* a failed init cannot be retried either */
		eal_state = EAL_GONE;
		return rte_errno ? -rte_errno : -EINVAL;
	}
	eal_state = EAL_UP;
	return 0;
}

static int port_start(struct dpdk_priv *d, uint32_t mtu)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	uint16_t nrx = DPDK_RING, ntx = DPDK_RING;
	int sock = rte_eth_dev_socket_id(d->port);
	int ret;

	ret = rte_eth_dev_info_get(d->port, &info);
	if (ret)
		return ret;
	/* frames past the port's limit are refused by tx_alloc, not sent */
	d->max_frame = mtu;
	if (info.max_rx_pktlen && d->max_frame > info.max_rx_pktlen) {
		fprintf(stderr, "transport dpdk: port %u takes frames up to %u bytes, not %u: larger ones are refused\n",
			d->port, info.max_rx_pktlen, mtu);
		d->max_frame = info.max_rx_pktlen;
	}
	mtu = d->max_frame;
	memset(&conf, 0, sizeof(conf));
	ret = rte_eth_dev_configure(d->port, 1, 1, &conf);
	if (!ret)
		ret = rte_eth_dev_adjust_nb_rx_tx_desc(d->port, &nrx, &ntx);
	if (!ret)
		ret = rte_eth_rx_queue_setup(d->port, 0, nrx, sock, NULL,
					     d->pool);
	if (!ret)
		ret = rte_eth_tx_queue_setup(d->port, 0, ntx, sock, NULL);
	if (!ret && mtu > RTE_ETHER_MTU + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN)
		ret = rte_eth_dev_set_mtu(d->port, (uint16_t)(mtu -
				RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN));
	if (!ret)
		ret = rte_eth_dev_start(d->port);
	if (!ret)
		ret = rte_eth_promiscuous_enable(d->port);
	return ret;
}

/* promiscuous mode makes a mismatch work, but say so: it is a config slip */
static void port_mac_note(const struct dpdk_priv *d)
{
	struct rte_ether_addr ea;

	if (!rte_eth_macaddr_get(d->port, &ea) &&
	    memcmp(ea.addr_bytes, d->mac, 6))
		fprintf(stderr, "transport dpdk: port %u has MAC %02x:%02x:%02x:%02x:%02x:%02x, the address table another\n",
			d->port, ea.addr_bytes[0], ea.addr_bytes[1],
			ea.addr_bytes[2], ea.addr_bytes[3], ea.addr_bytes[4],
			ea.addr_bytes[5]);
}

static void dpdk_close(struct transport *tp)
{
	struct dpdk_priv *d = tp->priv;

	if (!d)
		return;
	rte_pktmbuf_free_bulk(d->txq, d->txq_n);
	for (; d->loop_n; d->loop_n--) {
		rte_pktmbuf_free(d->loopq[d->loop_head]);
		d->loop_head = (d->loop_head + 1) % DPDK_TXQ;
	}
	rte_eth_dev_stop(d->port);
	rte_eth_dev_close(d->port);
	rte_mempool_free(d->pool);
	free(d);
	tp->priv = NULL;
	rte_eal_cleanup();
	eal_state = EAL_GONE;
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
	d->port = cfg->port_id;
	memcpy(d->mac, me->mac, 6);
	d->ip = rte_cpu_to_be_32(me->ip);
	d->udp_port = rte_cpu_to_be_16(me->port);
	if (!rte_eth_dev_is_valid_port(d->port)) {
		fprintf(stderr, "transport dpdk: no port %u (%u ports; missing --vdev?)\n",
			d->port, rte_eth_dev_count_avail());
		ret = -ENODEV;
		goto fail;
	}
	d->pool = rte_pktmbuf_pool_create("tally_mbufs", n_mbufs, 256, 0,
					  (uint16_t)(RTE_PKTMBUF_HEADROOM +
					  (cfg->mtu > 2048 ? cfg->mtu : 2048)),
					  rte_eth_dev_socket_id(d->port));
	if (!d->pool) {
		fprintf(stderr, "transport dpdk: mbuf pool of %u: %s\n",
			n_mbufs, rte_strerror(rte_errno));
		ret = -ENOMEM;
		goto fail;
	}
	ret = port_start(d, cfg->mtu);
	if (ret) {
		fprintf(stderr, "transport dpdk: port %u setup: %s\n",
			d->port, rte_strerror(-ret));
		goto fail;
	}
	port_mac_note(d);
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

static int dpdk_tx_flush(struct transport *tp)
{
	struct dpdk_priv *d = tp->priv;
	uint32_t done = 0, tries = 0;
	uint16_t n;

	while (done < d->txq_n && tries < DPDK_TX_TRIES) {
		n = rte_eth_tx_burst(d->port, 0, d->txq + done,
				     (uint16_t)(d->txq_n - done));
		if (!n)
			tries++;
		done += n;
	}
	for (n = 0; n < done; n++) {
		tp->stats.tx_pkts++;
		tp->stats.tx_bytes += rte_pktmbuf_pkt_len(d->txq[n]);
	}
	/* the port's ring is full: keep the rest for the next flush */
	memmove(d->txq, d->txq + done, (d->txq_n - done) * sizeof(d->txq[0]));
	d->txq_n -= done;
	return (int)done;
}

static void dpdk_tx_send(struct transport *tp, uint16_t dst, uint8_t *frame,
			 size_t len)
{
	struct dpdk_priv *d = tp->priv;
	struct rte_mbuf *m = *mbuf_slot(frame);

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
	if (d->txq_n == DPDK_TXQ)
		dpdk_tx_flush(tp);
	if (d->txq_n == DPDK_TXQ) {
		tp->stats.tx_drops++;
		rte_pktmbuf_free(m);
		return;
	}
	d->txq[d->txq_n++] = m;
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

static int dpdk_rx_burst(struct transport *tp, struct transport_rx *rx, int n)
{
	struct dpdk_priv *d = tp->priv;
	struct rte_mbuf *m[TRANSPORT_RX_BURST];
	uint16_t got, i;
	int k = 0;

	if (n > TRANSPORT_RX_BURST)
		n = TRANSPORT_RX_BURST;
	for (got = 0; got < n && d->loop_n; got++) {
		m[got] = d->loopq[d->loop_head];
		d->loop_head = (d->loop_head + 1) % DPDK_TXQ;
		d->loop_n--;
	}
	got += rte_eth_rx_burst(d->port, 0, m + got, (uint16_t)(n - got));
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
	return (int)((struct dpdk_priv *)tp->priv)->txq_n;
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
		fprintf(stderr, "transport dpdk: rte_thread_register: %s\n",
			rte_strerror(rte_errno));
		return -rte_errno;
	}
	return 0;
}

/* the port stays; only the filter follows our (new) entry */
static int dpdk_set_nodes(struct transport *tp)
{
	const struct tly_addr *me = &tp->cfg.addrs[tp->cfg.self];
	struct dpdk_priv *d = tp->priv;

	memcpy(d->mac, me->mac, 6);
	d->ip = rte_cpu_to_be_32(me->ip);
	d->udp_port = rte_cpu_to_be_16(me->port);
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
