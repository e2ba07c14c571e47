/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_internal.h - state shared by cluster.c (membership, engine,
 * transport) and cluster_ops.c (operations through the scheduler).
 */
#ifndef TALLY_CTRL_CLUSTER_INTERNAL_H
#define TALLY_CTRL_CLUSTER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ctrl/cluster.h"
#include "ctrl/membership.h"
#include "dataplane/dp_thread.h"
#include "dataplane/engine/agg.h"
#include "dataplane/engine/worker.h"
#include "dataplane/sched/sched.h"
#include "dataplane/transport/transport.h"

#define CLUSTER_MAX_UNITS 4096
/* A dataplane thread's answer to a pause may take this long (a turn of
 * its loop, under load); past it the thread is declared stuck. */
#define CLUSTER_PAUSE_TIMEOUT_NS (2000 * 1000000ull)

/* dataplane threads per cluster ([dataplane] threads) */
#define CLUSTER_MAX_SHARDS 16

/* A local group in the network phase; ops[i] belongs to groups.pool[i]. */
struct net_op {
	bool used;
	/* sign_ef: every part of it went through the engine in its codec,
	 * which wrote what the host sent into member 0's sendbuf */
	bool sent;
	uint64_t bytes, bytes_done;
};

/* A scheduler unit in the network: one or more engine tensors. */
struct net_unit {
	bool used;
	struct sched_unit u;
	uint8_t dtype;
	uint8_t codec;			/* enum tly_codec of its first op */
	void *merged;			/* staging of a multi-segment unit */
	void *merged_sent;		/* its "sent" (a codec with error
					 * feedback), scattered likewise */
	uint64_t iteration, key;	/* of its first segment: tensor ids */
	uint32_t parts, parts_submitted, parts_done;
	uint32_t next;			/* submission queue link */
};

/*
 * A shard of the dataplane: its thread, with its transport and its part
 * of the engine.  The control thread touches tp, worker and agg only
 * while the thread is paused (or before it starts, after it stops).
 */
struct cluster_shard {
	/* the roster's addresses with this shard's ports (udp, dpdk:
	 * port + s) or MACs (rdma: thread s's queue pair) */
	struct tly_addr addrs[BOOT_MAX_MEMBERS];
	struct transport tp;
	bool tp_open;
	struct dp_thread *dp;
	struct tly_worker *worker;
	struct tly_agg *agg;
	uint32_t tensors_out;		/* submitted, completion not popped */
};

struct cluster {
	struct cluster_env env;
	const struct tally_config *cfg;	/* env.cfg */
	struct membership mb;
	bool mb_started;
	bool have_roster;
	bool engine_up;			/* the shards hold an engine */
	bool dp_stuck;			/* a thread missed a pause: hands off */
	uint32_t epoch;
	struct tly_addr addrs[BOOT_MAX_MEMBERS];
	/* node i's thread s MAC at [i][s - 1] (rdma: a queue pair per
	 * thread), all zero when the roster has none */
	uint8_t thread_macs[BOOT_MAX_MEMBERS][BOOT_THREAD_MACS][6];
	uint16_t n_nodes, self_node, n_workers, n_aggs;
	uint16_t agg_nodes[BOOT_MAX_MEMBERS];
	int total_procs;		/* AVG divides by this */
	struct cluster_shard shards[CLUSTER_MAX_SHARDS];
	unsigned int n_shards;		/* dataplane threads */
	struct sched *sched;
	struct net_op *ops;
	struct net_unit *units;		/* [CLUSTER_MAX_UNITS] */
	uint32_t queue_head, queue_tail;	/* units with parts to submit */
	uint64_t next_tick_ms;
	/* the engines' counters over past epochs (an epoch rebuilds them) */
	struct tly_counters past_worker, past_agg;
	uint32_t agg_slots;		/* primary + fallback of the agg */
	/* dataplane.transport = xdp: the XDP aggregator's control plane
	 * (cluster_xdp.c) instead of shards; NULL otherwise */
	struct cluster_xdp *xdp;
};

/* cluster_ops.c */
int cluster_ops_init(struct cluster *c);
void cluster_ops_fini(struct cluster *c);
/* Give the engine what the scheduler releases; returns tensors submitted. */
int cluster_ops_pump(struct cluster *c, uint64_t now_ns);
/* Fail everything in the network phase (the engine is gone). */
void cluster_ops_fail_all(struct cluster *c, int res);
/* A part of unit @ui came back from the engine. */
void cluster_ops_tensor_done(struct cluster *c, uint32_t ui);
/* How long the control thread may sleep, as far as the ops go, from
 * @now_ns: UINT64_MAX when only an event can move them on. */
uint64_t cluster_ops_sleep_ns(const struct cluster *c, uint64_t now_ns);

/* cluster.c: the engine failed (refused a tensor, no memory): the local
 * job is aborted as by cluster_local_abort(), failing with @res. */
void cluster_engine_failed(struct cluster *c, int res, const char *why);
/* Pause the dataplane thread: true when the caller owns the engine. */
bool cluster_dp_pause(struct cluster *c);
void cluster_dp_resume(struct cluster *c);

/* cluster_xdp.c: dataplane.transport = xdp (an aggregator).  open loads
 * and attaches the program, epoch writes the roster's job (0 or -1);
 * poll runs the sweep when due, idle_ns says when it is; close detaches.
 * cluster_xdp_counters() fills up to @max counters and their names. */
int cluster_xdp_open(struct cluster *c);
int cluster_xdp_epoch(struct cluster *c);
void cluster_xdp_poll(struct cluster *c, uint64_t now_ns);
uint64_t cluster_xdp_idle_ns(const struct cluster *c, uint64_t now_ns);
void cluster_xdp_close(struct cluster *c);

#endif /* TALLY_CTRL_CLUSTER_INTERNAL_H */
