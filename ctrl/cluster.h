/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.h - tallyd in a multi-host job: the membership, the transport
 * and the aggregation engine, glued to the local groups.
 *
 * A local group that is ready is reduced once into its first member's
 * receive buffer (the staging buffer) and handed to the scheduler; the
 * units it releases go to the engine's worker as tensors of at most 65536
 * chunks and are all-reduced with the other hosts in place
 * (cluster_ops.c); when all of a gradient is back, one pass copies the
 * result (scaled for AVG) into every member's receive buffer.
 *
 * Every roster change (a member lost, a local job aborted anywhere) starts
 * a new epoch: the engine is rebuilt, every operation in flight fails with
 * TALLY_EPEERLOST, and the local job is aborted until its clients leave.
 */
#ifndef TALLY_CTRL_CLUSTER_H
#define TALLY_CTRL_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrl/local_group.h"
#include "dataplane/engine/engine.h"
#include "dataplane/sched/sched.h"
#include "dataplane/transport/transport.h"

struct tallyd;
struct cluster;

/* Join the job described by d->cfg (blocks until the coordinator answers
 * our registration, at most connect_timeout_ms).  0 or -1. */
int cluster_start(struct tallyd *d);
void cluster_stop(struct tallyd *d);

/* Has the job's roster arrived (the job is formed and this daemon in it)? */
bool cluster_joined(struct tallyd *d);

/* A ready local group enters the network phase. */
void cluster_submit_group(struct tallyd *d, struct lg_group *g);

/* Receive, run timers, transmit.  Returns the work done (0 when idle). */
int cluster_poll(struct tallyd *d, uint64_t now_ns);

/* How long the event loop may sleep, in ns (0: keep polling). */
uint64_t cluster_idle_ns(struct tallyd *d);

/* Events on the cluster's sockets; membership timers. */
void cluster_event(struct tallyd *d, uint64_t tag);
void cluster_tick(struct tallyd *d, uint64_t now_ms);

/* Our local job broke: every host must fail its pending operations. */
void cluster_local_abort(struct tallyd *d);

/* What local group @idx waits for in the network phase, for the
 * watchdog: 0 and @buf filled, or -1 when it is not in that phase. */
int cluster_describe_op(struct tallyd *d, uint32_t idx, char *buf,
			size_t len);

/* What the metrics and tally-ctl show of the cluster (ctrl/collect.c). */
struct cluster_snapshot {
	bool joined;			/* the roster arrived */
	uint32_t epoch;
	uint16_t n_nodes, self_node, n_workers, n_aggs;
	bool have_worker, have_agg;
	struct tly_counters worker, agg;	/* since the daemon started */
	struct transport_stats tp;
	const char *transport;
	bool have_sched;
	struct sched_stats sched;
	uint32_t sched_pending, sched_units;	/* gradients, units */
	uint32_t net_units;		/* cluster units in the network */
	uint32_t agg_slots_busy, agg_slots;
	uint64_t auth_failures;		/* membership messages failing MACs */
	uint16_t n_present;		/* members registered (coordinator) */
	struct {			/* the roster, [n_nodes] */
		uint32_t ip;		/* host byte order */
		uint16_t port;
		bool agg;		/* an aggregator node */
		uint64_t tx_pkts, tx_bytes;	/* frames we sent it */
	} peers[256];
};
void cluster_snapshot(struct tallyd *d, struct cluster_snapshot *s);
/* Per-host wire counters (payload bytes sent and received by the worker). */
void cluster_log_counters(struct tallyd *d);

#endif /* TALLY_CTRL_CLUSTER_H */
