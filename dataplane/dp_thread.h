/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_thread.h - a dataplane thread: a run-to-completion poll loop over one
 * transport and one shard of the aggregation engine (a worker and/or an
 * aggregator), in the style of a DPDK lcore loop.
 *
 * Each turn it takes the tensors the control thread submitted (a
 * dp_ring), receives a burst and hands it to the engine, runs the
 * engine's timers, flushes the transport, and pushes every finished
 * tensor (its user word and status) to the completion ring, whose
 * eventfd the control thread sleeps on.  After work it polls on for
 * spin_ns, yielding the core each turn; then it sleeps on the transport's
 * wait_fd, the submission ring's eventfd and its command eventfd, as long
 * as the engine's timers allow (never a busy spin: the machine may be
 * shared).
 *
 * Ownership: while the thread runs, the transport, the engine and every
 * tensor it was given are the thread's.  The control thread gets them
 * back with dp_thread_pause() (a command and an acknowledgement, bounded
 * by a timeout), may then rebuild the engine, change the transport's
 * nodes and empty the rings, and hands them back with dp_thread_resume().
 * Client memory named in a tensor passes through the rings (release /
 * acquire) and is never touched by both threads at once.
 *
 * Counters: the thread publishes what it counts (the engine's, the
 * transport's, per-peer frames) through a seqlock every few ms, on pause
 * and on exit; dp_thread_stats() reads a consistent copy from any thread.
 */
#ifndef TALLY_DATAPLANE_DP_THREAD_H
#define TALLY_DATAPLANE_DP_THREAD_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "dataplane/engine/agg.h"
#include "dataplane/engine/worker.h"
#include "dataplane/transport/transport.h"

/*
 * Tensors one thread holds at once, from submission to the completion's
 * pop: the control thread keeps its count below this, so neither ring
 * ever fills and the engine (created with max_tensors = this) never
 * refuses one for room.
 */
#define DP_MAX_TENSORS 1024

/* A finished tensor, for the control thread. */
struct dp_completion {
	uint64_t user;			/* the tensor's user word */
	uint32_t id;			/* its engine id */
	int32_t status;			/* 0, or tly_worker_submit's error */
};

/* What a thread counts; all uint64_t (published word by word). */
struct dp_stats {
	struct tly_counters worker, agg;	/* the current engine's */
	struct transport_stats tp;
	uint64_t worker_active;		/* tensors in the worker */
	uint64_t agg_slots_busy;
	uint64_t turns, sleeps;		/* loop turns, sleeps */
	uint64_t cq_overflow;		/* completions lost (a bug) */
	uint64_t peer_tx_pkts[TRANSPORT_MAX_NODES];
	uint64_t peer_tx_bytes[TRANSPORT_MAX_NODES];
};

struct dp_thread_cfg {
	struct transport *tp;		/* open; the thread's while it runs */
	unsigned int index;		/* the shard, for the thread's name */
	int cpu;			/* pin to this CPU; -1: not pinned */
	uint64_t spin_ns;		/* poll this long after work */
};

struct dp_thread;

/* Start a thread (running, with no engine: it drops what it receives).
 * NULL with @err filled when it cannot. */
struct dp_thread *dp_thread_start(const struct dp_thread_cfg *cfg,
				  char *err, size_t errlen);
/* Stop and join it.  A thread that never acknowledged a pause (stuck) is
 * left running and its memory is leaked rather than freed under it. */
void dp_thread_stop(struct dp_thread *t);

/* Take the transport, the engine and the rings back: 0 once the thread
 * acknowledged, -ETIMEDOUT when it did not within @timeout_ns (it is then
 * stuck: nothing it owns may be touched, and every later call fails). */
int dp_thread_pause(struct dp_thread *t, uint64_t timeout_ns);
void dp_thread_resume(struct dp_thread *t);

/* ---- while paused (or before the first tensor) ------------------------ */

/* The engine the thread drives (either may be NULL), and the net its
 * frames are parsed against (copied).  Republishes the counters. */
void dp_thread_set_engine(struct dp_thread *t, struct tly_worker *w,
			  struct tly_agg *a, const struct tly_net *net);
/* Drop queued submissions and completions. */
void dp_thread_reset_rings(struct dp_thread *t);

/* For the engine's configuration: the thread's counting tx ops (over its
 * transport) and its completion callback (done_ctx: the thread). */
struct tly_tx_ops dp_thread_tx_ops(struct dp_thread *t);
void dp_thread_tensor_done(void *ctx, const struct tly_tensor_desc *d);

/* ---- the control thread's side, any time ------------------------------ */

/* Queue a tensor: 0, or -1 when the ring is full.  dp_thread_kick() after
 * a batch wakes the thread if it sleeps. */
int dp_thread_submit(struct dp_thread *t, const struct tly_tensor_desc *d);
void dp_thread_kick(struct dp_thread *t);

/* The next completion: 1, or 0 when there is none. */
int dp_thread_complete(struct dp_thread *t, struct dp_completion *c);
/* The control thread's sleep on completions: the fd to poll, announce
 * (returns the completions ready: sleep only when 0) and wake up. */
int dp_thread_completion_fd(const struct dp_thread *t);
uint32_t dp_thread_completion_sleep(struct dp_thread *t);
void dp_thread_completion_awake(struct dp_thread *t);

/* A consistent copy of the last published counters. */
void dp_thread_stats(struct dp_thread *t, struct dp_stats *out);

#endif /* TALLY_DATAPLANE_DP_THREAD_H */
