/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sched.h - which gradient goes to the network next: the study's
 * scheduling policies as pure logic (no clock, no I/O, no engine calls),
 * so they are unit-tested deterministically.
 *
 * The daemon tells the scheduler when a gradient is ready (sched_ready:
 * the local group of that tensor is complete and reduced), asks it what to
 * send (sched_next: a unit = one or more segments of ready gradients, sent
 * as one network tensor), and tells it when a unit's all-reduce completed
 * (sched_unit_done).  Policies:
 *
 *  BSP           nothing leaves until the iteration's last gradient is
 *                ready (the item flagged last); then every gradient goes,
 *                one unit each, in the order they became ready.
 *  WFBP          each gradient leaves as soon as it is ready, one unit
 *                each, in ready order (FIFO).
 *  MGWFBP        like WFBP, but gradients that become ready while the
 *                network is busy are merged with the ones already waiting,
 *                when the cost model says merging lowers the iteration time
 *                (Shi et al., INFOCOM'19: all-reduce time = a + b * bytes):
 *                a unit is released when the network goes idle, or when
 *                holding it longer would cost more than the startup a it
 *                saves.
 *  BYTESCHEDULER gradients are cut into partitions of partition_bytes;
 *                each partition has its gradient's priority (0 = most
 *                urgent: layers nearest the input, which the next forward
 *                pass needs first); a credit window limits the bytes in
 *                flight; a more urgent partition overtakes every less
 *                urgent one not yet sent (preemption at partition
 *                boundaries); with autotune the credit is adjusted online.
 *
 * Units never mix iterations.  Memory is bounded by max_items: that many
 * pending gradients and that many units in flight (sched_next() releases
 * nothing while max_items units are in flight).  The exact rules are in
 * docs/scheduling.md.
 */
#ifndef TALLY_DATAPLANE_SCHED_H
#define TALLY_DATAPLANE_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sched_policy {
	SCHED_BSP = 1,
	SCHED_WFBP = 2,
	SCHED_MGWFBP = 3,
	SCHED_BYTESCHEDULER = 4,
};

#define SCHED_MAX_SEGMENTS 64	/* segments one (merged) unit may hold */
/* bytes a merged unit may hold (one item alone may be larger): tallyd
 * gathers a merged unit into a buffer of its own on its control thread,
 * and a plan of one group (BERT-Large on this machine) would copy the
 * whole 1.3 GB model there twice an iteration */
#define SCHED_MAX_MERGED_BYTES (64ull << 20)

struct sched_cfg {
	enum sched_policy policy;
	uint32_t max_items;		/* gradients pending at once */
	/* MG-WFBP cost model: time(bytes) = a_ns + bytes * b_ns_per_byte */
	double a_ns;
	double b_ns_per_byte;
	/* MG-WFBP merges only the groups of a plan; gradients without a
	 * group leave one per unit, as in WFBP.  Timing-based merging forms
	 * different units on different hosts, which a multi-host all-reduce
	 * turns into wrong sums: the daemon always sets this. */
	bool mg_plan_only;
	/* ByteScheduler */
	uint64_t partition_bytes;	/* 0: whole tensors */
	uint64_t credit_bytes;		/* bytes in flight at most */
	bool autotune;			/* adjust credit_bytes online */
	uint64_t credit_min, credit_max;	/* autotune bounds */
	/* no unit completed for this long while the credit is full: one
	 * partition goes past it (0: never; see docs/scheduling.md) */
	uint64_t stall_ns;
	/* ... or for twice the usual time from a unit's release to its
	 * completion, when that is longer */
	bool stall_adapt;
	/* BSP: an iteration also goes once this many of its gradients are
	 * held (0: no bound).  A client has at most TALLY_MAX_INFLIGHT
	 * requests pending, so one whose iteration has more gradients
	 * could never submit the one flagged last (docs/scheduling.md) */
	uint32_t bsp_hold_max;
};

/* A gradient that became ready. */
struct sched_item {
	uint64_t key;
	uint64_t iteration;
	uint32_t priority;		/* 0 most urgent */
	uint64_t bytes;
	bool last;			/* the iteration's last gradient (BSP) */
	uint32_t group;			/* MGWFBP merge group, 0 = none */
	void *user;			/* the caller's handle */
};

/* One piece of a gradient inside a unit. */
struct sched_segment {
	void *user;			/* the item's handle */
	uint64_t offset;		/* bytes into the gradient */
	uint64_t bytes;
	bool item_last_piece;		/* this completes the item's sending */
};

/* What to send next, as one network tensor. */
struct sched_unit {
	uint64_t id;			/* for sched_unit_done() */
	uint32_t priority;
	uint64_t bytes;			/* sum of the segments */
	uint32_t n_segments;
	struct sched_segment seg[SCHED_MAX_SEGMENTS];
};

/* merged_items: gradients that went in a unit with at least one other;
 * preemptions: ready events that overtook a less urgent gradient not yet
 * completely released (ByteScheduler); stall_releases: partitions that
 * went past the credit after stall_ns without a completion. */
struct sched_stats {
	uint64_t units, merged_items, partitions, preemptions, stall_releases;
	uint64_t bytes_in_flight, credit_bytes;
};

struct sched;

/* The ByteScheduler stall bound tallyd runs with (docs/scheduling.md). */
#define SCHED_DAEMON_STALL_NS (50 * 1000000ull)
/* The BSP hold bound tallyd runs with: TALLY_MAX_INFLIGHT, the requests
 * one client may have pending (ctrl/cluster_ops.c checks they agree). */
#define SCHED_DAEMON_BSP_HOLD 256

/*
 * The configuration tallyd's multi-host job runs its scheduler with
 * (ctrl/cluster_ops.c), which tally-sim simulates, so both take it from
 * here: max_items slots, ByteScheduler's partition, credit and autotune
 * as configured, the adaptive stall bound for aggregation (aggregate =
 * true), merge plans only for MG-WFBP, BSP's hold bound.
 */
void sched_cfg_daemon(struct sched_cfg *sc, enum sched_policy policy,
		      uint32_t max_items, uint64_t partition_bytes,
		      uint64_t credit_bytes, bool autotune, bool aggregate);

struct sched *sched_create(const struct sched_cfg *cfg);
void sched_destroy(struct sched *s);

/* A gradient is ready.  0, or -ENOSPC when max_items are pending. */
int sched_ready(struct sched *s, const struct sched_item *it, uint64_t now_ns);

/* The next unit to send now, if the policy releases one: 1 and *u filled,
 * or 0.  Call until it returns 0. */
int sched_next(struct sched *s, uint64_t now_ns, struct sched_unit *u);

/* A unit's all-reduce completed (frees its credit, feeds autotune and the
 * MG-WFBP model's view of the network). */
void sched_unit_done(struct sched *s, uint64_t unit_id, uint64_t now_ns);

/* Earliest time sched_next() may release something without another event
 * (MG-WFBP holding a merge, ByteScheduler's stall rule; 0: due now);
 * UINT64_MAX if none. */
uint64_t sched_next_deadline(const struct sched *s);

/* Forget everything pending and in flight (the job was aborted); later
 * sched_unit_done() calls for old units are ignored.  The counters and an
 * autotuned credit are kept. */
void sched_reset(struct sched *s);

const struct sched_stats *sched_stats(const struct sched *s);
/* Gradients waiting to be released in full, and units in flight. */
void sched_depth(const struct sched *s, uint32_t *pending, uint32_t *units);
const char *sched_policy_name(enum sched_policy p);
int sched_policy_parse(const char *name);	/* -1 if unknown */

#endif /* TALLY_DATAPLANE_SCHED_H */
