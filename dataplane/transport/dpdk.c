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
 * Queues: with cfg->queues = N > 1 (N dataplane threads) every port is
 * configured with N rx/tx queue pairs and N transports share it, one per
 * thread: the one with cfg->queue = 0 starts the EAL, the pool and the
 * ports; the others (queue 1 .. N-1, opened after it in the same process)
 * attach to them.  Each polls and transmits on its own queue only.  The
 * virtual ports' spreading (af_packet's fanout hash, af_xdp's and memif's
 * queues) knows nothing of tally's shards, so the transports split in
 * software: shard s of every node uses UDP port base + s (ctrl/cluster.c),
 * so a frame's destination port names the thread that owns it, and one
 * received on queue q for another shard is passed to that shard's
 * transport through a lock-free SPSC ring (dp_ring, one per pair of
 * queues) instead of being processed.  The ports themselves are shared:
 * only queue 0 supervises memif clients (stops and starts ports); a port
 * being stopped is first marked down, then each other queue is waited for
 * to leave its burst (see port_enter()).
 *
 * A port may have fewer queue pairs than there are threads (net_af_xdp
 * on a veth has one): thread q polls and sends on queue q while q is
 * below the port's count; a thread above it receives only what the
 * software split passes it, and sends on queue q mod count, which the
 * threads sharing it take in turn (tx_lock).
 *
 * The EAL can be initialised once per process: one DPDK port set per
 * process lifetime.  No wait fd: idle loops sleep (transport_idle_wait).
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
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
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>
#include <rte_spinlock.h>

#include "dataplane/dp_log.h"
#include "dataplane/dp_ring.h"
#include "dataplane/transport/transport.h"

#define DPDK_TXQ	512	/* mbufs queued between flushes */
#define DPDK_RING	1024	/* descriptors per queue */
#define DPDK_TX_TRIES	4	/* tx_burst calls per flush without progress */
#define DPDK_MAX_ARGS	64
#define DPDK_MAX_PORTS	16
#define DPDK_ROUTE_NONE	0xff	/* route[] of a node not learned yet */
#define DPDK_MAC_BUCKETS 512	/* > 2 * TRANSPORT_MAX_NODES, power of 2 */
#define DPDK_MEMIF_CHECK_NS 100000000ull	/* memif client supervision */
/* a memif client just started gets this long to connect before it is
 * restarted: a restart mid-handshake has crashed the server's PMD
 * ("Error adding fd ... epoll_ctl" in its interrupt thread) */
#define DPDK_MEMIF_CONNECT_NS 2000000000ull
#define DPDK_MAX_QUEUES	16	/* queue pairs per port: dataplane threads */
#define DPDK_HANDOFF	1024	/* frames in flight between two queues */
#define DPDK_POOL_CACHE	256	/* mbufs in the pool's cache of each lcore */

enum eal_state { EAL_NONE, EAL_UP, EAL_GONE };
static enum eal_state eal_state = EAL_NONE;
/* the EAL may keep pointers into argv: it lives as long as the process */
static char *eal_argbuf;
static char *eal_argv[DPDK_MAX_ARGS + 1];

/* A port, shared by every queue's transport. */
struct dpdk_port {
	uint16_t id;
	_Atomic bool started;	/* written by queue 0 only */
	/* a net_memif port: left open at exit (see shared_stop()) */
	bool memif;
	/* a memif client: supervised by queue 0 (see memif_supervise()) */
	bool memif_client;
	/* its socket file (socket-abstract=no; "": none), next check, and
	 * whether the last check saw its link down */
	char memif_socket[108];
	uint64_t check_ns;
	bool seen_down;
	/* queue q is in a burst on this port (see port_enter()) */
	_Atomic uint32_t busy[DPDK_MAX_QUEUES];
	/* queue pairs configured: the threads', or fewer if the port has
	 * fewer; then each is sent on under its lock */
	uint16_t n_hwq;
	rte_spinlock_t tx_lock[DPDK_MAX_QUEUES];
};

/* What the queues of a process share: the EAL's ports and pool, and the
 * rings of the software split ([from][to], SPSC, struct rte_mbuf *). */
struct dpdk_shared {
	struct dpdk_port ports[DPDK_MAX_PORTS];
	uint16_t n_ports;
	uint16_t n_queues;
	bool has_memif_clients;
	struct rte_mempool *pool;
	uint32_t max_frame;	/* what the ports and our mbufs can take */
	struct dp_ring handoff[DPDK_MAX_QUEUES][DPDK_MAX_QUEUES];
	bool attached[DPDK_MAX_QUEUES];
	unsigned int refs;
};

static struct dpdk_shared *shared;	/* while the EAL is up */

/* source MAC -> node id, for learning routes (open addressing) */
struct dpdk_mac_ent {
	uint64_t mac;		/* 0: empty */
	uint16_t node;
};

/* A transport: one queue pair of every port. */
struct dpdk_priv {
	struct dpdk_shared *sh;
	uint16_t queue;		/* ours, on every port */
	struct rte_mbuf *txq[DPDK_MAX_PORTS][DPDK_TXQ];
	uint32_t txq_n[DPDK_MAX_PORTS];
	uint64_t last_src[DPDK_MAX_PORTS];	/* source MAC learned there */
	uint16_t rx_next;	/* port the next rx burst starts at */
	uint8_t route[TRANSPORT_MAX_NODES];	/* node -> ports[] index */
	uint8_t port_index[RTE_MAX_ETHPORTS];	/* port id -> ports[] */
	struct dpdk_mac_ent macs[DPDK_MAC_BUCKETS];
	/* Frames to ourselves (a co-located worker's shard): a port does not
	 * hand its own transmissions back, so they are looped here. */
	struct rte_mbuf *loopq[DPDK_TXQ];
	uint32_t loop_head, loop_n;
	uint8_t mac[6];
	uint32_t ip;		/* ours, network byte order */
	uint16_t udp_port;	/* ours (base + queue), host byte order */
	uint16_t base_port;	/* queue 0's, host byte order */
	/* the switch profile's result group (group_ip 0: none): frames to
	 * its MAC, address (network byte order) and port are ours too */
	uint8_t group_mac[6];
	uint32_t group_ip;
	uint16_t group_port;
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
static int port_start(struct dpdk_shared *sh, struct dpdk_port *pt)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	uint16_t nrx = DPDK_RING, ntx = DPDK_RING, nq = sh->n_queues;
	uint16_t port = pt->id;
	int sock = rte_eth_dev_socket_id(port);
	uint32_t mtu;
	int ret;

	ret = rte_eth_dev_info_get(port, &info);
	if (ret)
		return ret;
	if (!info.max_rx_queues || !info.max_tx_queues)
		return -EINVAL;
	if (info.max_rx_queues < nq || info.max_tx_queues < nq) {
		nq = info.max_rx_queues < info.max_tx_queues ?
		     info.max_rx_queues : info.max_tx_queues;
		dp_info("transport dpdk: port %u (%s) has %u queue pair(s) for %u dataplane threads: threads %u.. receive through the software split and share its transmit queues (net_af_packet: qpairs=N gives N)",
			port, info.driver_name ? info.driver_name : "?", nq,
			sh->n_queues, nq);
	}
	pt->n_hwq = nq;
	for (uint16_t q = 0; q < nq; q++)
		rte_spinlock_init(&pt->tx_lock[q]);
	if (info.max_rx_pktlen && sh->max_frame > info.max_rx_pktlen) {
		dp_warn("transport dpdk: port %u takes frames up to %u bytes, not %u: larger ones are refused",
			port, info.max_rx_pktlen, sh->max_frame);
		sh->max_frame = info.max_rx_pktlen;
	}
	mtu = sh->max_frame;
	memset(&conf, 0, sizeof(conf));
	ret = rte_eth_dev_configure(port, nq, nq, &conf);
	if (!ret)
		ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);
	for (uint16_t q = 0; !ret && q < nq; q++) {
		ret = rte_eth_rx_queue_setup(port, q, nrx, sock, NULL,
					     sh->pool);
		if (!ret)
			ret = rte_eth_tx_queue_setup(port, q, ntx, sock, NULL);
	}
	if (!ret && mtu > RTE_ETHER_MTU + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN)
		ret = rte_eth_dev_set_mtu(port, (uint16_t)(mtu -
				RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN));
	return ret;
}

/* queue 0 only (or the last close): the port is not shared with a burst */
static int port_up(struct dpdk_port *pt)
{
	int ret = rte_eth_dev_start(pt->id);

	/* a point-to-point port (memif) has no MAC filter to turn off */
	if (!ret) {
		ret = rte_eth_promiscuous_enable(pt->id);
		if (ret == -ENOTSUP)
			ret = 0;
	}
	atomic_store_explicit(&pt->started, !ret, memory_order_seq_cst);
	return ret;
}

/*
 * A queue's bursts on a port are bracketed by port_enter() and
 * port_leave(); port_down() marks the port stopped and waits until no
 * queue is inside a burst before stopping it.  Dekker, as in dp_ring.h:
 * both sides store (busy, started) then load the other's word, seq_cst,
 * so either the queue sees the port stopped or the stopper sees it busy.
 */
static bool port_enter(struct dpdk_port *pt, uint16_t q)
{
	atomic_store_explicit(&pt->busy[q], 1, memory_order_seq_cst);
	if (atomic_load_explicit(&pt->started, memory_order_seq_cst))
		return true;
	atomic_store_explicit(&pt->busy[q], 0, memory_order_release);
	return false;
}

static void port_leave(struct dpdk_port *pt, uint16_t q)
{
	atomic_store_explicit(&pt->busy[q], 0, memory_order_release);
}

static void port_down(struct dpdk_shared *sh, struct dpdk_port *pt)
{
	if (!atomic_load_explicit(&pt->started, memory_order_relaxed))
		return;
	atomic_store_explicit(&pt->started, false, memory_order_seq_cst);
	for (uint16_t q = 0; q < sh->n_queues; q++)
		while (atomic_load_explicit(&pt->busy[q],
					    memory_order_seq_cst))
			sched_yield();	/* one burst: short */
	rte_eth_dev_stop(pt->id);
}

/*
 * memif clients.  A client cannot start before its server's socket exists,
 * and the daemons of a job open their transports at the same moment; a
 * client whose server goes away (the aggregator's process exited) is
 * disconnected and never connects again by itself.  So a client port is
 * supervised from the poll loop (of queue 0), every DPDK_MEMIF_CHECK_NS:
 * not started while the socket file is missing, and stopped and started
 * again (a new connection) when its link has been down at two checks in
 * a row, or, just after a start, for DPDK_MEMIF_CONNECT_NS (the
 * handshake runs in both processes' EAL interrupt threads, slow on a busy
 * machine).  Two checks, not one: the PMD marks the link down first when
 * its interrupt thread disconnects (a peer's DISCONNECT or hang-up) and
 * frees the connection's regions after, and a stop meanwhile would run
 * the same disconnect at once and free them twice.  Its link is down
 * meanwhile, like a switch port whose peer is unplugged: frames to it
 * are dropped and counted.  An abstract socket (socket-abstract=yes,
 * memif's default) cannot be looked for: use socket-abstract=no.
 */

/* Is @port a net_memif port?  Its role, and its socket file if it has one
 * (socket-abstract=no) in @path ("" if not). */
static bool memif_port(uint16_t port, bool *client, char *path, size_t cap)
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
	*client = args && strstr(args, "role=client");
	path[0] = '\0';
	if (!args || !strstr(args, "socket-abstract=no"))
		return true;
	sock = strstr(args, "socket=");
	if (!sock)
		return true;
	sock += strlen("socket=");
	n = strcspn(sock, ",");
	if (n < cap) {
		memcpy(path, sock, n);
		path[n] = '\0';
	}
	return true;
}

static bool link_down(uint16_t port)
{
	struct rte_eth_link link;

	return !rte_eth_link_get_nowait(port, &link) &&
	       link.link_status == RTE_ETH_LINK_DOWN;
}

static void memif_supervise(struct dpdk_shared *sh, struct dpdk_port *pt,
			    uint64_t now)
{
	if (now < pt->check_ns)
		return;
	pt->check_ns = now + DPDK_MEMIF_CHECK_NS;
	if (atomic_load_explicit(&pt->started, memory_order_relaxed)) {
		bool down = link_down(pt->id);

		/* the first sight of it down: the PMD may still be
		 * disconnecting in its interrupt thread */
		if (!down || !pt->seen_down) {
			pt->seen_down = down;
			return;
		}
		pt->seen_down = false;
		dp_info("transport dpdk: port %u: memif link down, connecting again",
			pt->id);
		port_down(sh, pt);
	}
	if (access(pt->memif_socket, F_OK))
		return;
	if (port_up(pt))
		dp_err("transport dpdk: port %u: memif client does not start",
			pt->id);
	else
		pt->check_ns = now + DPDK_MEMIF_CONNECT_NS;
}

static void ports_supervise(struct dpdk_shared *sh)
{
	uint64_t now = transport_now_ns();

	for (uint16_t p = 0; p < sh->n_ports; p++)
		if (sh->ports[p].memif_client)
			memif_supervise(sh, &sh->ports[p], now);
}

/* promiscuous mode makes a mismatch work, but say so: it is a config slip */
static void port_mac_note(const struct dpdk_shared *sh, uint16_t port,
			  const uint8_t *mac)
{
	struct rte_ether_addr ea;

	if (sh->n_ports == 1 && !rte_eth_macaddr_get(port, &ea) &&
	    memcmp(ea.addr_bytes, mac, 6))
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
	memset(d->last_src, 0, sizeof(d->last_src));
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

	if (d->last_src[p] == mac)
		return;
	d->last_src[p] = mac;
	for (; d->macs[b].mac; b = (b + 1) & (DPDK_MAC_BUCKETS - 1)) {
		if (d->macs[b].mac == mac) {
			d->route[d->macs[b].node] = (uint8_t)p;
			return;
		}
	}
}

static void txq_drop(struct transport *tp, struct dpdk_priv *d, uint16_t p)
{
	tp->stats.tx_drops += d->txq_n[p];
	rte_pktmbuf_free_bulk(d->txq[p], d->txq_n[p]);
	d->txq_n[p] = 0;
}

/* ---- the shared ports (queue 0 opens them, the last close ends them) ---- */

static void ring_drain(struct dp_ring *r)
{
	struct rte_mbuf *m;

	while (dp_ring_pop(r, &m))
		rte_pktmbuf_free(m);
}

/*
 * A memif port is not stopped or closed at exit: DPDK 22.11's PMD runs
 * its disconnect (which frees the connection's regions) from
 * rte_eth_dev_stop() and _close() and, unlocked, from the EAL's interrupt
 * thread when the peer says DISCONNECT or hangs up, which at the end of a
 * job it does at the same moment; and closing its last server port frees
 * the listener's interrupt handle while that thread still polls it.  Both
 * have crashed daemons at exit here (docs/transports.md).  The process's
 * exit closes the control channel instead, which the peer sees as a
 * hang-up, as when the daemon is killed.  A server's socket file goes
 * with it, as the PMD's close would have removed it: a server started
 * again on the same path could not bind it.
 */
static void memif_leave(struct dpdk_port *pt)
{
	atomic_store_explicit(&pt->started, false, memory_order_seq_cst);
	if (!pt->memif_client && pt->memif_socket[0] &&
	    unlink(pt->memif_socket) && errno != ENOENT)
		dp_warn("transport dpdk: port %u: remove %s: %s", pt->id,
			pt->memif_socket, strerror(errno));
}

static void shared_stop(void)
{
	struct dpdk_shared *sh = shared;
	bool memif_left = false;

	if (sh) {
		for (uint16_t p = 0; p < sh->n_ports; p++) {
			struct dpdk_port *pt = &sh->ports[p];

			if (pt->memif) {
				memif_leave(pt);
				memif_left = true;
				continue;
			}
			port_down(sh, pt);
			rte_eth_dev_close(pt->id);
		}
		for (uint16_t a = 0; a < sh->n_queues; a++)
			for (uint16_t b = 0; b < sh->n_queues; b++)
				if (a != b && sh->handoff[a][b].entries) {
					ring_drain(&sh->handoff[a][b]);
					dp_ring_fini(&sh->handoff[a][b]);
				}
		/* a memif port left open may still reach its mbufs */
		if (!memif_left)
			rte_mempool_free(sh->pool);
		free(sh);
		shared = NULL;
	}
	/* the EAL's interrupt thread outlives the cleanup (22.11), which
	 * unmaps the memory memif's handlers walk */
	if (!memif_left)
		rte_eal_cleanup();
	eal_state = EAL_GONE;
}

/* cfg->port_id, and every port after it the EAL created */
static int ports_find(struct dpdk_shared *sh, uint16_t first)
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
		if (sh->n_ports == DPDK_MAX_PORTS) {
			dp_err("transport dpdk: more than %d ports",
				DPDK_MAX_PORTS);
			return -E2BIG;
		}
		sh->ports[sh->n_ports++].id = id;
	}
	return 0;
}

static int handoff_init(struct dpdk_shared *sh)
{
	for (uint16_t a = 0; a < sh->n_queues; a++)
		for (uint16_t b = 0; b < sh->n_queues; b++) {
			int ret;

			if (a == b)
				continue;
			ret = dp_ring_init(&sh->handoff[a][b], DPDK_HANDOFF,
					   sizeof(struct rte_mbuf *));
			if (ret) {
				dp_err("transport dpdk: handoff ring: %s",
				       strerror(-ret));
				return ret;
			}
		}
	return 0;
}

static bool ports_af_xdp(const struct dpdk_shared *sh)
{
	struct rte_eth_dev_info info;

	for (uint16_t p = 0; p < sh->n_ports; p++)
		if (!rte_eth_dev_info_get(sh->ports[p].id, &info) &&
		    info.driver_name && strstr(info.driver_name, "af_xdp"))
			return true;
	return false;
}

/*
 * The mbuf pool, @packed for net_af_xdp: its zero-copy path registers
 * the pool with the kernel as one umem of populated_size objects at the
 * object size's stride from the first (DPDK 22.11, xdp_umem_configure()).
 * The mempool lays its objects out at that stride only when they may
 * cross pages (RTE_MEMPOOL_F_NO_IOVA_CONTIG); otherwise one that would
 * cross starts on the next page, the last objects lie past the umem's
 * end, and the kernel refuses every descriptor in them: each such mbuf
 * put in the fill ring or sent is lost for good.  Without hugepages
 * (objects of about 2.4 KB, one a 4 KiB page) that is about 2 in 5, and
 * frames stalled once the mempool's per-lcore cache stopped handing back
 * the same low objects: a second dataplane thread freeing what the first
 * received, or a cache of 0, found it.  On a veth the kernel copies, so
 * an object across pages costs nothing; a NIC in zero-copy mode would
 * refuse one across two pages that are not contiguous (with 2 MB
 * hugepages about 1 in 900; not tried here).  Other PMDs keep DPDK's
 * default layout.
 */
static struct rte_mempool *mbuf_pool_create(uint32_t n, uint16_t room,
					    int socket, bool packed)
{
	struct rte_pktmbuf_pool_private priv = {
		.mbuf_data_room_size = room,
	};
	struct rte_mempool *mp;

	if (!packed)
		return rte_pktmbuf_pool_create("tally_mbufs", n,
					       DPDK_POOL_CACHE, 0, room, socket);
	mp = rte_mempool_create_empty("tally_mbufs", n,
				      (unsigned int)sizeof(struct rte_mbuf) +
				      room, DPDK_POOL_CACHE, sizeof(priv),
				      socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
	if (!mp)
		return NULL;
	if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(),
				       NULL)) {
		rte_mempool_free(mp);
		return NULL;
	}
	rte_pktmbuf_pool_init(mp, &priv);
	if (rte_mempool_populate_default(mp) < 0) {
		rte_mempool_free(mp);
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

static int shared_start(const struct transport_config *cfg, uint16_t nq)
{
	uint32_t n_mbufs = cfg->mbufs ? cfg->mbufs : 8191, need;
	struct dpdk_shared *sh;
	int ret;

	ret = eal_start(cfg->eal_args);
	if (ret)
		return ret;
	sh = calloc(1, sizeof(*sh));
	if (!sh) {
		shared_stop();
		return -ENOMEM;
	}
	shared = sh;
	sh->n_queues = nq;
	sh->max_frame = cfg->mtu;
	ret = ports_find(sh, cfg->port_id);
	if (!ret)
		ret = handoff_init(sh);
	if (ret)
		goto fail;
	/* every queue's rx ring full, room to build and queue frames, and
	 * a full ring's worth passed to each queue (not every ring full:
	 * that is N^2, and a queue that far behind loses frames anyway) */
	need = (uint32_t)sh->n_ports * nq * (DPDK_RING + DPDK_TXQ) +
	       nq * DPDK_TXQ + (nq > 1 ? nq * DPDK_HANDOFF : 0u) + 1023;
	if (n_mbufs < need)
		n_mbufs = need;
	sh->pool = mbuf_pool_create(n_mbufs, (uint16_t)(RTE_PKTMBUF_HEADROOM +
				    (cfg->mtu > 2048 ? cfg->mtu : 2048)),
				    rte_eth_dev_socket_id(sh->ports[0].id),
				    ports_af_xdp(sh));
	if (!sh->pool) {
		dp_err("transport dpdk: mbuf pool of %u: %s",
			n_mbufs, rte_strerror(rte_errno));
		ret = -ENOMEM;
		goto fail;
	}
	for (uint16_t p = 0; p < sh->n_ports; p++) {
		struct dpdk_port *pt = &sh->ports[p];

		ret = port_start(sh, pt);
		pt->memif = memif_port(pt->id, &pt->memif_client,
				       pt->memif_socket,
				       sizeof(pt->memif_socket));
		/* a memif client without a socket file cannot be supervised:
		 * started once, as memif starts it */
		if (pt->memif_client && !pt->memif_socket[0])
			pt->memif_client = false;
		if (!ret && pt->memif_client) {
			/* started (and restarted) by ports_supervise */
			sh->has_memif_clients = true;
		} else if (!ret) {
			ret = port_up(pt);
		}
		if (ret) {
			dp_err("transport dpdk: port %u setup: %s",
				pt->id, rte_strerror(-ret));
			/* close only what was configured */
			sh->n_ports = (uint16_t)(p + 1);
			goto fail;
		}
		port_mac_note(sh, pt->id, cfg->addrs[cfg->self].mac);
	}
	if (sh->n_ports > 1)
		dp_info("transport dpdk: %u ports, forwarding by learned source MACs",
			sh->n_ports);
	if (nq > 1)
		dp_info("transport dpdk: %u queue pairs per port, split by destination UDP port",
			nq);
	return 0;
fail:
	shared_stop();
	return ret < 0 ? ret : -EIO;
}

/* ---- one queue's transport --------------------------------------------- */

static void dpdk_close(struct transport *tp)
{
	struct dpdk_priv *d = tp->priv;
	struct dpdk_shared *sh;

	if (!d)
		return;
	sh = d->sh;
	for (; d->loop_n; d->loop_n--) {
		rte_pktmbuf_free(d->loopq[d->loop_head]);
		d->loop_head = (d->loop_head + 1) % DPDK_TXQ;
	}
	for (uint16_t p = 0; p < sh->n_ports; p++)
		rte_pktmbuf_free_bulk(d->txq[p], d->txq_n[p]);
	/* frames passed to us: nobody else takes them (the threads have
	 * stopped: a transport is closed after its thread) */
	for (uint16_t s = 0; s < sh->n_queues; s++)
		if (s != d->queue)
			ring_drain(&sh->handoff[s][d->queue]);
	sh->attached[d->queue] = false;
	free(d);
	tp->priv = NULL;
	if (!--sh->refs)
		shared_stop();
}

/* the filter's and the split's view of our address table entry */
static int set_self(struct dpdk_priv *d, const struct transport_config *cfg)
{
	const struct tly_addr *me = &cfg->addrs[cfg->self];

	if (me->port < d->queue) {
		dp_err("transport dpdk: queue %u cannot have port %u (queue q uses base + q)",
		       d->queue, me->port);
		return -EINVAL;
	}
	memcpy(d->mac, me->mac, 6);
	d->ip = rte_cpu_to_be_32(me->ip);
	d->udp_port = me->port;
	d->base_port = (uint16_t)(me->port - d->queue);
	routes_reset(d, cfg);
	return 0;
}

/*
 * The switch profile's RESULT to every worker (docs/xdp-aggregator.md):
 * take frames to the group's MAC (01:00:5e and the address's low 23
 * bits), address and port.  With one queue pair only: the software split
 * goes by destination port, which a group frame does not name (every
 * daemon of such a job runs one dataplane thread, the XDP aggregator
 * having none).  The ports are asked to pass multicast; a PMD that has
 * no such switch (af_packet, af_xdp) passes it already.
 */
static void group_join(struct dpdk_priv *d,
		       const struct transport_config *cfg)
{
	/* transport_open() checked it is a multicast address and port */
	tly_group_mac(cfg->group_ip, d->group_mac);
	d->group_ip = rte_cpu_to_be_32(cfg->group_ip);
	d->group_port = cfg->group_port;
	for (uint16_t p = 0; p < d->sh->n_ports; p++) {
		int ret = rte_eth_allmulticast_enable(d->sh->ports[p].id);

		if (ret && ret != -ENOTSUP)
			dp_warn("transport dpdk: port %u: allmulticast: %s",
				d->sh->ports[p].id, rte_strerror(-ret));
	}
}

static int dpdk_open(struct transport *tp, const struct transport_config *cfg)
{
	uint16_t nq = cfg->queues ? cfg->queues : 1, q = cfg->queue;
	struct dpdk_priv *d;
	int ret;

	if (nq > DPDK_MAX_QUEUES || q >= nq) {
		dp_err("transport dpdk: queue %u of %u (at most %d queues)",
		       q, nq, DPDK_MAX_QUEUES);
		return -EINVAL;
	}
	if (cfg->group_ip && nq > 1) {
		/* see group_join(); before the EAL, which starts once */
		dp_err("transport dpdk: the result group needs one queue pair (dataplane.threads = 1), not %u",
		       nq);
		return -EINVAL;
	}
	if (q == 0) {
		ret = shared_start(cfg, nq);
		if (ret)
			return ret;
	} else if (eal_state != EAL_UP || !shared) {
		dp_err("transport dpdk: queue %u opened before queue 0 (which starts the EAL and the ports)",
		       q);
		return -ENODEV;
	} else if (shared->n_queues != nq || shared->attached[q]) {
		dp_err("transport dpdk: queue %u of %u is not free (the ports have %u queue pairs)",
		       q, nq, shared->n_queues);
		return -EBUSY;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		if (q == 0)
			shared_stop();
		return -ENOMEM;
	}
	d->sh = shared;
	d->queue = q;
	memset(d->port_index, DPDK_ROUTE_NONE, sizeof(d->port_index));
	for (uint16_t p = 0; p < d->sh->n_ports; p++)
		d->port_index[d->sh->ports[p].id] = (uint8_t)p;
	ret = set_self(d, cfg);
	if (ret) {
		free(d);
		if (q == 0)
			shared_stop();
		return ret;
	}
	d->sh->attached[q] = true;
	d->sh->refs++;
	tp->priv = d;
	tp->full_frames = true;
	if (cfg->group_ip)
		group_join(d, cfg);
	return 0;
}

static struct rte_mbuf **mbuf_slot(uint8_t *data)
{
	return (struct rte_mbuf **)(void *)(data - sizeof(struct rte_mbuf *));
}

static uint8_t *dpdk_tx_alloc(struct transport *tp, size_t len)
{
	struct dpdk_priv *d = tp->priv;
	struct rte_mbuf *m = rte_pktmbuf_alloc(d->sh->pool);
	uint8_t *data;

	if (!m)
		return NULL;
	if (len > d->sh->max_frame || len > rte_pktmbuf_tailroom(m)) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	data = rte_pktmbuf_mtod(m, uint8_t *);
	*mbuf_slot(data) = m;	/* headroom: the PMD never reads it */
	return data;
}

static uint32_t port_flush(struct transport *tp, struct dpdk_priv *d,
			   uint16_t p)
{
	struct dpdk_port *pt = &d->sh->ports[p];
	struct rte_mbuf **txq = d->txq[p];
	uint32_t done = 0, tries = 0, *txq_n = &d->txq_n[p];
	uint16_t n, hwq = d->queue % pt->n_hwq;
	bool shared_q = pt->n_hwq < d->sh->n_queues;

	if (!port_enter(pt, d->queue)) {
		txq_drop(tp, d, p);
		return 0;
	}
	if (shared_q)
		rte_spinlock_lock(&pt->tx_lock[hwq]);
	while (done < *txq_n && tries < DPDK_TX_TRIES) {
		n = rte_eth_tx_burst(pt->id, hwq, txq + done,
				     (uint16_t)(*txq_n - done));
		if (!n)
			tries++;
		done += n;
	}
	if (shared_q)
		rte_spinlock_unlock(&pt->tx_lock[hwq]);
	port_leave(pt, d->queue);
	for (n = 0; n < done; n++) {
		tp->stats.tx_pkts++;
		tp->stats.tx_bytes += rte_pktmbuf_pkt_len(txq[n]);
	}
	/* the port's ring is full: keep the rest for the next flush */
	memmove(txq, txq + done, (*txq_n - done) * sizeof(txq[0]));
	*txq_n -= done;
	/* its peer is gone (a memif peer exited): nothing will drain it */
	if (*txq_n && !done && link_down(pt->id))
		txq_drop(tp, d, p);
	return done;
}

static int dpdk_tx_flush(struct transport *tp)
{
	struct dpdk_priv *d = tp->priv;
	uint32_t done = 0;

	for (uint16_t p = 0; p < d->sh->n_ports; p++)
		if (d->txq_n[p])
			done += port_flush(tp, d, p);
	return (int)done;
}

static void port_enqueue(struct transport *tp, struct dpdk_priv *d,
			 uint16_t p, struct rte_mbuf *m)
{
	if (d->txq_n[p] == DPDK_TXQ)
		port_flush(tp, d, p);
	if (d->txq_n[p] == DPDK_TXQ) {
		tp->stats.tx_drops++;
		rte_pktmbuf_free(m);
		return;
	}
	d->txq[p][d->txq_n[p]++] = m;
}

static void dpdk_tx_send(struct transport *tp, uint16_t dst, uint8_t *frame,
			 size_t len)
{
	struct dpdk_priv *d = tp->priv;
	uint16_t n_ports = d->sh->n_ports;
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
		tp->stats.loop_pkts++;
		tp->stats.loop_bytes += len;
		return;
	}
	r = n_ports == 1 ? 0 : d->route[dst];
	if (r != DPDK_ROUTE_NONE) {
		port_enqueue(tp, d, r, m);
		return;
	}
	/* not learned yet: every port (each holds a reference) */
	rte_mbuf_refcnt_update(m, (int16_t)(n_ports - 1));
	for (uint16_t p = 0; p < n_ports; p++)
		port_enqueue(tp, d, p, m);
}

/*
 * The queue whose transport takes a frame: to our MAC, IPv4/UDP without
 * options to our address, and a destination port base + q of one of our
 * queues; or to the result group's MAC, address and port (one queue
 * only, see dpdk_open()).  -1: not ours.
 */
static int frame_queue(const struct dpdk_priv *d, const uint8_t *p,
		       uint32_t len)
{
	const uint8_t *ip = p + TLY_ETH_LEN;
	uint32_t dip, q;

	if (len < TLY_L2L4_LEN || p[12] != 0x08 || p[13] != 0x00 ||
	    ip[9] != 17 || (ip[0] & 0x0f) != 5)
		return -1;
	memcpy(&dip, ip + 16, 4);
	if (d->group_ip && !memcmp(p, d->group_mac, 6))
		return dip == d->group_ip && tly_get16(ip + TLY_IP_LEN + 2) ==
			     d->group_port ? (int)d->queue : -1;
	if (memcmp(p, d->mac, 6) || dip != d->ip)
		return -1;
	q = (uint32_t)tly_get16(ip + TLY_IP_LEN + 2) - d->base_port;
	return q < d->sh->n_queues ? (int)q : -1;
}

/* up to @n frames: those other queues passed us, the loop queue (@m
 * from *@loop_from up to *@loop_to), then our queue of every port,
 * round-robin */
static uint16_t rx_gather(struct transport *tp, struct dpdk_priv *d,
			  struct rte_mbuf **m, uint16_t n, uint16_t *loop_from,
			  uint16_t *loop_to)
{
	struct dpdk_shared *sh = d->sh;
	uint16_t got = 0, p = d->rx_next, k;

	for (uint16_t s = 0; s < sh->n_queues && got < n; s++) {
		if (s == d->queue)
			continue;
		while (got < n && dp_ring_pop(&sh->handoff[s][d->queue],
					      &m[got])) {
			got++;
			tp->stats.rx_handoff_in++;
		}
	}
	*loop_from = got;
	for (; got < n && d->loop_n; got++) {
		m[got] = d->loopq[d->loop_head];
		d->loop_head = (d->loop_head + 1) % DPDK_TXQ;
		d->loop_n--;
	}
	*loop_to = got;
	for (uint16_t i = 0; i < sh->n_ports && got < n; i++) {
		struct dpdk_port *pt = &sh->ports[p];

		p = (uint16_t)((p + 1) % sh->n_ports);
		/* no rx queue of ours: the split passes us our frames */
		if (d->queue >= pt->n_hwq || !port_enter(pt, d->queue))
			continue;
		k = rte_eth_rx_burst(pt->id, d->queue, m + got,
				     (uint16_t)(n - got));
		port_leave(pt, d->queue);
		got += k;
	}
	/* a busy port must not starve the others */
	d->rx_next = (uint16_t)((d->rx_next + 1) % sh->n_ports);
	return got;
}

static int dpdk_rx_burst(struct transport *tp, struct transport_rx *rx, int n)
{
	struct dpdk_priv *d = tp->priv;
	struct dpdk_shared *sh = d->sh;
	struct rte_mbuf *m[TRANSPORT_RX_BURST];
	uint16_t got, i, loop_from, loop_to;
	int k = 0;

	if (n > TRANSPORT_RX_BURST)
		n = TRANSPORT_RX_BURST;
	if (sh->has_memif_clients && d->queue == 0)
		ports_supervise(sh);
	got = rx_gather(tp, d, m, (uint16_t)n, &loop_from, &loop_to);
	for (i = 0; i < got; i++) {
		const uint8_t *p = rte_pktmbuf_mtod(m[i], const uint8_t *);
		int q;

		if (m[i]->nb_segs != 1) {
			tp->stats.rx_drops++;	/* larger than our MTU */
			rte_pktmbuf_free(m[i]);
			continue;
		}
		q = frame_queue(d, p, m[i]->data_len);
		if (q < 0) {
			tp->stats.rx_filtered++;
			rte_pktmbuf_free(m[i]);
			continue;
		}
		if (q != d->queue) {
			/* another thread's shard: its transport takes it */
			if (dp_ring_push(&sh->handoff[d->queue][q], &m[i])) {
				tp->stats.rx_drops++;
				rte_pktmbuf_free(m[i]);
			} else {
				tp->stats.rx_handoff_out++;
			}
			continue;
		}
		/* m->port: the port it came in by (invalid when looped) */
		if (sh->n_ports > 1 && m[i]->port < RTE_MAX_ETHPORTS &&
		    d->port_index[m[i]->port] != DPDK_ROUTE_NONE)
			route_learn(d, d->port_index[m[i]->port], p + 6);
		rx[k].data = p;
		rx[k].len = m[i]->data_len;
		rx[k].cookie = m[i];
		/* looped frames are counted in loop_pkts as they are sent */
		if (i < loop_from || i >= loop_to) {
			tp->stats.rx_pkts++;
			tp->stats.rx_bytes += m[i]->data_len;
		}
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

	for (uint16_t p = 0; p < d->sh->n_ports; p++)
		n += d->txq_n[p];
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
	return set_self(tp->priv, &tp->cfg);
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
