/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * transport.h - one ops table for every way tally moves packets between
 * daemons: kernel UDP, DPDK ports and (later) RDMA verbs.
 *
 * A transport moves opaque frames between nodes of a job, addressed by
 * node id (an index into the job's address table, struct tly_addr from
 * dataplane/engine/wire.h).  Frame format per transport:
 *   - full frames (Ethernet/IPv4/UDP/tally) when tp->full_frames: DPDK;
 *     the engine builds them from the address table (tly_net.addrs).
 *   - bare tally packets (the UDP payload) otherwise: kernel UDP, which
 *     addresses them from the table itself.
 * The engine's struct tly_tx_ops maps 1:1 onto tx_alloc/tx_send (see
 * transport_tx_ops()).
 *
 * Threading: a transport is used by one dataplane thread.  Nothing here
 * blocks; when idle the caller sleeps on wait_fd (or, without one, backs
 * off with short sleeps: see transport_idle_wait()).
 */
#ifndef TALLY_DATAPLANE_TRANSPORT_H
#define TALLY_DATAPLANE_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/engine.h"
#include "dataplane/engine/wire.h"

#define TRANSPORT_MAX_NODES 256
/*
 * tx_send's node for the result group (cfg.group_send): one datagram to
 * group_ip:group_port, which every worker joined, instead of one frame a
 * worker (docs/transport-udp.md, "One RESULT for every worker")
 */
#define TRANSPORT_GROUP_NODE TRANSPORT_MAX_NODES
#define TRANSPORT_RX_BURST 32

struct transport;

/* One received frame; valid until rx_release() of it (or of its burst). */
struct transport_rx {
	const uint8_t *data;
	size_t len;
	void *cookie;		/* the transport's handle (mbuf, slot...) */
	/* when the frame arrived (tly_now_ns() clock), for a backend with
	 * rx_stamps; 0: not known */
	uint64_t arrival_ns;
};

struct transport_config {
	const char *kind;		/* "udp" | "dpdk" | "rdma" */
	uint16_t self;			/* our node id */
	uint16_t n_nodes;
	const struct tly_addr *addrs;	/* [n_nodes]: mac, ip, udp port */
	uint32_t mtu;			/* largest frame we send */
	/* udp */
	const char *bind_ip;		/* default: addrs[self].ip */
	/* dpdk: EAL arguments, split on spaces ("--in-memory --no-pci
	 * --vdev=net_af_xdp0,iface=veth0 --file-prefix=h0 ..."), and pool */
	const char *eal_args;
	uint16_t port_id;
	uint32_t mbufs;			/* mbuf pool size */
	/* dpdk, one transport per dataplane thread: @queues rx/tx queue
	 * pairs per port (0: 1), this transport drives pair @queue.  Queue 0
	 * opens first and starts the ports; queue q uses UDP port base + q
	 * (addrs[self].port = base + q) and receives what any queue got for
	 * that port (the software split, see dpdk.c).  udp ignores them. */
	uint16_t queues;
	uint16_t queue;
	/* rdma: device name (NULL or "": the first), port (0: 1) and the
	 * GID index of the port's RoCEv2 IPv4 GID (unused on InfiniBand) */
	const char *rdma_device;
	uint8_t rdma_port;
	int rdma_gid_index;
	/* udp and dpdk: the result group, the multicast group the
	 * aggregator sends each RESULT to once (host order; 0: none).  udp
	 * joins it on the interface of its address, dpdk (one queue pair)
	 * takes frames to its MAC; both receive from it too
	 * (docs/xdp-aggregator.md, docs/transport-udp.md).  rdma: ignored. */
	uint32_t group_ip;
	uint16_t group_port;
	/* udp (ops->group_tx): we send to the group too, an aggregator's
	 * RESULT to every worker (TRANSPORT_GROUP_NODE; transport_tx_ops()
	 * gets a multicast); with group_send_only without joining it (an
	 * aggregator that is no worker) */
	bool group_send, group_send_only;
	/* udp: frames are never fragmented (DF); open and set_nodes refuse
	 * a node whose route's MTU cannot carry an IP packet of mtu - 14
	 * bytes (-EMSGSIZE).  The switch profile: its aggregator takes
	 * whole frames only (udp_mtu.c).  dpdk sets its port's MTU, rdma
	 * checks the port's active MTU, each with or without it. */
	bool no_fragments;
	/*
	 * Link emulator, applied under any transport (all 0: off).  It models
	 * this node's NIC port on a switch: rate_bps limits egress (one
	 * serializer shared by every destination) and ingress (frames are
	 * handed up no faster); jitter is added on egress; loss,
	 * duplication and reordering are decided per frame on egress from a
	 * seeded PRNG, so a run can be replayed.  The delay is added on
	 * egress, or on ingress from the frame's arrival time when the
	 * backend stamps received frames (delay_on_ingress, set by
	 * transport_open(), docs/transports.md "Holding and releasing
	 * frames").
	 */
	struct link_emu_config {
		uint64_t rate_bps;	/* 0 = unlimited */
		uint64_t delay_ns;
		uint64_t jitter_ns;	/* uniform in [0, jitter] added */
		uint32_t loss_ppm;	/* parts per million */
		uint32_t dup_ppm;
		uint32_t reorder_ppm;	/* such frames get extra delay */
		uint64_t reorder_ns;
		uint64_t seed;
		bool delay_on_ingress;	/* not a knob: transport_open() */
	} emu;
};

struct transport_stats {
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t tx_drops;		/* no buffer, ring full, send error */
	uint64_t rx_drops;		/* malformed at the transport level */
	uint64_t emu_lost, emu_dup, emu_reordered;
	/* added after the first draft: */
	uint64_t rx_filtered;		/* well formed, but not for us */
	uint64_t emu_pool_drops;	/* emulator buffer pool empty */
	/* dpdk with several queues: frames received on our queue for
	 * another queue's shard and passed on, and those taken from others
	 * (counted in rx_pkts once taken) */
	uint64_t rx_handoff_out, rx_handoff_in;
	/* frames to ourselves handed from tx to rx without the wire (udp:
	 * without the kernel; not in tx_pkts and rx_pkts, which count the
	 * wire's) */
	uint64_t loop_pkts, loop_bytes;
	/* datagrams sent to the result group (TRANSPORT_GROUP_NODE), in
	 * tx_pkts and tx_bytes too: each reaches every worker */
	uint64_t group_pkts, group_bytes;
	/* frames the emulator released after holding them (egress, and
	 * ingress when it adds the delay there), and how late the flush or
	 * receive that released them came after their due time (sum, max;
	 * and how many within TRANSPORT_EMU_ON_TIME_NS) */
	uint64_t emu_released, emu_late_ns, emu_late_max_ns;
	uint64_t emu_on_time;
	/* udp: receives from the kernel (a datagram, or a UDP_GRO buffer of
	 * several): rx_pkts / rx_msgs is how much GRO merged */
	uint64_t rx_msgs;
};

#define TRANSPORT_EMU_ON_TIME_NS 10000

struct transport_ops {
	const char *name;
	/* tx_send takes TRANSPORT_GROUP_NODE (cfg.group_send) */
	bool group_tx;
	int (*open)(struct transport *tp, const struct transport_config *cfg);
	void (*close)(struct transport *tp);
	/* a buffer for one outgoing frame of up to @len bytes, or NULL */
	uint8_t *(*tx_alloc)(struct transport *tp, size_t len);
	/* queue @frame (from tx_alloc) for node @dst; ownership passes */
	void (*tx_send)(struct transport *tp, uint16_t dst, uint8_t *frame,
			size_t len);
	/* push queued frames to the wire; returns frames sent */
	int (*tx_flush)(struct transport *tp);
	/* up to @n received frames; 0 when none */
	int (*rx_burst)(struct transport *tp, struct transport_rx *rx, int n);
	void (*rx_release)(struct transport *tp, struct transport_rx *rx,
			   int n);
	/* fd that becomes readable when frames arrive, or -1 */
	int (*wait_fd)(struct transport *tp);
	/* optional: frames queued but not yet on the wire (back-pressure) */
	int (*tx_pending)(struct transport *tp);
	/* optional: tp->cfg's self, n_nodes and addrs changed; 0 or -errno */
	int (*set_nodes)(struct transport *tp);
	/* optional: the calling thread drives the transport from now on
	 * (@bind) or stops (!@bind); dpdk registers it with the EAL */
	int (*thread_bind)(struct transport *tp, bool bind);
};

struct transport {
	const struct transport_ops *ops;
	bool full_frames;		/* see the top of this file */
	/* set by open: rx_burst fills transport_rx.arrival_ns (udp: the
	 * kernel's receive stamps; frames out of the emulator: their due
	 * time) */
	bool rx_stamps;
	struct transport_config cfg;
	struct transport_stats stats;
	struct link_emu *emu;		/* NULL when the emulator is off */
	uint64_t emu_woke_late_ns;	/* mean lateness of timed wake-ups */
	void *priv;
	/*
	 * Set by open when peers must put local_mac in their address table's
	 * mac for us (rdma: 02:LID:QPN, see rdma.c); the daemon registers it
	 * in the roster instead of its configured MAC.
	 */
	bool has_local_mac;
	uint8_t local_mac[6];
	/* Set by open when our port was 0 and the transport chose one (udp:
	 * the kernel's ephemeral port); the daemon registers it. */
	uint16_t local_port;
};

/* buffers in the emulator's pool, and the frame size when cfg->mtu is 0.
 * A receiver that adds the delay holds what every sender has in flight
 * to it (an aggregator: n windows of up to 2048 packets, the latency
 * sweep's largest); untouched buffers cost no memory (calloc). */
#define TRANSPORT_EMU_BUFS 16384
#define TRANSPORT_DEFAULT_MTU 2048
/* idle_wait's cap while frames wait for room on the wire */
#define TRANSPORT_TX_RETRY_NS 50000

/* the clock every now_ns here is read from: CLOCK_MONOTONIC in ns */
uint64_t transport_now_ns(void);

/* Open a transport of cfg->kind (with the emulator if cfg->emu asks for
 * it).  0, or a negative errno with a message logged to stderr. */
int transport_open(struct transport *tp, const struct transport_config *cfg);
void transport_close(struct transport *tp);

/* The engine's tx interface bound to this transport. */
struct tly_tx_ops transport_tx_ops(struct transport *tp);

/* Send what is due (queued, and what the emulator releases at @now_ns). */
int transport_tx_flush(struct transport *tp, uint64_t now_ns);
int transport_rx_burst(struct transport *tp, struct transport_rx *rx, int n);
void transport_rx_release(struct transport *tp, struct transport_rx *rx,
			  int n);

/*
 * Idle back-off for poll loops: sleep on wait_fd (if the transport has one)
 * or nanosleep, at most @max_ns, and less when the emulator holds frames
 * due sooner (transport_emu_sleep_ns()).  It busy-waits only in the spin
 * margin before an emulated frame is due: returns at once, so the
 * caller's next turn releases it on time.
 */
void transport_idle_wait(struct transport *tp, uint64_t now_ns,
			 uint64_t max_ns);

/*
 * A sleeping thread wakes late: by its timer slack (50 us by default,
 * which ppoll and epoll add to every timeout) and by the wake-up itself
 * (20-30 us in a VM, 100 us and more after a long sleep on a loaded
 * machine).  A poll loop over a transport with the emulator sleeps until
 * a spin margin before the next release and polls the rest of the way,
 * so held frames leave on time.  The margin starts at
 * TRANSPORT_EMU_SPIN_NS and follows how late the loop's timed sleeps
 * end (transport_emu_woke()): twice their running mean plus 10 us,
 * within [TRANSPORT_EMU_SPIN_MIN_NS, TRANSPORT_EMU_SPIN_MAX_NS].  On
 * this VM an idle vCPU wakes from a 200 us ppoll 200-1200 us late, so the
 * cap is 250 us.  (With the delay on the sender's side, 250 us made the
 * all-reduce slower: the spinning senders starved the receivers.  Now a
 * receiver that holds frames delays them itself (delay_on_ingress) and
 * spins for its own input; emu_delay_fidelity_100us went from 1.21-1.48
 * with a 50 us cap to 1.13-1.26, interleaved runs.)  A machine whose
 * wake-ups are prompt spins less.
 */
#define TRANSPORT_EMU_SPIN_NS 50000
/* a release also takes the frames due within this much after it */
#define TRANSPORT_EMU_GATHER_NS 2000
#define TRANSPORT_EMU_SPIN_MIN_NS 20000
#define TRANSPORT_EMU_SPIN_MAX_NS 250000

/* the emulator's earliest release (either direction), UINT64_MAX when it
 * holds nothing or is off */
uint64_t transport_emu_next_due(const struct transport *tp);

/*
 * How long a poll loop may sleep at @now_ns, at most @max_ns, so that it
 * is up again the spin margin (transport_emu_spin_ns()) before the
 * emulator's next release; 0 when that release is due within the margin
 * (poll, don't sleep).  @max_ns when the emulator holds nothing or is off.
 */
uint64_t transport_emu_sleep_ns(const struct transport *tp, uint64_t now_ns,
				uint64_t max_ns);
/* the spin margin now */
uint64_t transport_emu_spin_ns(const struct transport *tp);
/* A timed sleep meant to end at @end_ns ended (by its timeout) at @now_ns:
 * the spin margin follows how late such wake-ups come. */
void transport_emu_woke(struct transport *tp, uint64_t end_ns,
			uint64_t now_ns);

/*
 * Set the calling thread's timer slack to the least (1 ns; once per
 * thread), so its sleeps end when asked, not up to 50 us later.  A thread
 * that drives a transport with the emulator calls it before its loop.
 */
void transport_precise_timers(void);

/*
 * A new address table (a new roster): node ids may move, peers come and
 * go.  The transport copies what it needs; our own address must stay the
 * same (the socket or port is bound to it: reopen instead).  Frames still
 * queued leave with the new table.  0, or a negative errno (logged) with
 * the old table still in force.
 */
int transport_set_nodes(struct transport *tp, uint16_t self, uint16_t n_nodes,
			const struct tly_addr *addrs);

/*
 * A thread other than the one that opened the transport is to drive it
 * (a dataplane thread, dataplane/dp_thread.h): it calls this first with
 * @bind true, and with false before it ends.  0 or a negative errno.
 */
int transport_thread_bind(struct transport *tp, bool bind);

/* frames queued in the transport or held by the emulator, not yet sent */
int transport_tx_pending(struct transport *tp);

/* the backends (transport_open() picks one by cfg->kind) */
extern const struct transport_ops transport_udp_ops;
extern const struct transport_ops transport_dpdk_ops;
extern const struct transport_ops transport_rdma_ops;

#endif /* TALLY_DATAPLANE_TRANSPORT_H */
