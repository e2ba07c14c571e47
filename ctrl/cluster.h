/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.h - tallyd in a multi-host job: the membership, the transport
 * and the aggregation engine, glued to the local groups.
 *
 * A local group that is ready is reduced once into its first member's
 * receive buffer (the staging buffer) and handed to the scheduler; the
 * units it releases go to the engine's worker as tensors of at most TLY_MAX_CHUNKS
 * chunks and are all-reduced with the other hosts in place
 * (cluster_ops.c); when all of a gradient is back, one pass copies the
 * result (scaled for AVG) into every member's receive buffer.
 *
 * Every roster change (a member lost, a local job aborted anywhere) starts
 * a new epoch: the engine is rebuilt, every operation in flight fails with
 * TALLY_EPEERLOST, and the local job is aborted until its clients leave.
 *
 * One cluster per multi-host job; a daemon serving several jobs runs
 * several, each with its own membership, transport port, engine and
 * scheduler.
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

struct cluster;
struct reduce_pool;
struct tally_config;

/*
 * What a cluster works on and how it reports back: it never sees the job
 * or the daemon that own it (docs/architecture.md, "The daemon's layers").
 */
struct cluster_env {
	const struct tally_config *cfg;	/* the job's; outlives the cluster */
	struct local_group *groups;	/* the job's local groups */
	struct reduce_pool *reducer;
	int epoll_fd;			/* the daemon's event loop */
	uint16_t tag_job;		/* epoll tags: TAG_JOB_SOCK(.., job, ..) */
	/* the job's secret; secret_len 0: cfg->secret_file or
	 * $TALLY_JOB_SECRET (auth_load) */
	const void *secret;
	size_t secret_len;
	/* a host service's job: see membership_cfg.retry_other_job */
	bool retry_other_job;
	/* a group left the network phase: complete its members with @res
	 * (0: done, the result is in every receive buffer) and release it */
	void (*group_done)(void *ctx, struct lg_group *g, int res);
	/* the job's membership changed or was lost: every pending local
	 * operation must fail */
	void (*job_abort)(void *ctx, const char *why);
	void *ctx;
};

/* Join the job: open the transport and start the membership (neither
 * blocks).  The cluster or NULL with the reason logged. */
struct cluster *cluster_start(const struct cluster_env *env);
void cluster_stop(struct cluster *c);

/* Has the job's roster arrived (the job is formed and this daemon in it)? */
bool cluster_joined(const struct cluster *c);
/* Has the job been lost for good (coordinator gone, refused)? */
bool cluster_dead(const struct cluster *c);

/* A ready local group enters the network phase. */
void cluster_submit_group(struct cluster *c, struct lg_group *g);

/* Receive, run timers, transmit.  Returns the work done (0 when idle). */
int cluster_poll(struct cluster *c, uint64_t now_ns);

/* How long the event loop may sleep, in ns (0: keep polling). */
uint64_t cluster_idle_ns(struct cluster *c);

/* Events on the cluster's sockets; membership timers. */
void cluster_event(struct cluster *c, uint64_t tag);
void cluster_tick(struct cluster *c, uint64_t now_ms);

/* Our local job broke: every host must fail its pending operations. */
void cluster_local_abort(struct cluster *c);

/* What local group @idx waits for in the network phase, for the
 * watchdog: 0 and @buf filled, or -1 when it is not in that phase. */
int cluster_describe_op(struct cluster *c, uint32_t idx, char *buf,
			size_t len);

/* the XDP aggregator's counters a snapshot holds, at most */
#define CLUSTER_XDP_COUNTERS 48

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
	/* dataplane.transport = xdp: the program's counters */
	unsigned int n_xdp;
	uint64_t xdp[CLUSTER_XDP_COUNTERS];
	const char *xdp_names[CLUSTER_XDP_COUNTERS];
	struct {			/* the roster, [n_nodes] */
		uint32_t ip;		/* host byte order */
		uint16_t port;
		bool agg;		/* an aggregator node */
		uint64_t tx_pkts, tx_bytes;	/* frames we sent it */
	} peers[256];
};
void cluster_snapshot(const struct cluster *c, struct cluster_snapshot *s);
/* cluster_xdp.c: up to @max of the XDP aggregator's counters and their
 * names; how many (0: not an XDP aggregator) */
unsigned int cluster_xdp_counters(const struct cluster *c, uint64_t *v,
				  const char **names, unsigned int max);
/* Per-host wire counters (payload bytes sent and received by the worker). */
void cluster_log_counters(const struct cluster *c);

#endif /* TALLY_CTRL_CLUSTER_H */
