/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.h - n workers plus aggregators wired over the fabric, in one of
 * the three roles, and a runner that polls them on the virtual clock.
 */
#ifndef TALLY_TESTS_DATAPLANE_CLUSTER_H
#define TALLY_TESTS_DATAPLANE_CLUSTER_H

#include "dataplane/engine/agg.h"
#include "dataplane/engine/worker.h"
#include "fabric.h"

enum cl_role { CL_DEDICATED, CL_COLOCATED, CL_RING };

struct cl_cfg {
	uint16_t n_workers;
	uint16_t k;
	enum cl_role role;
	uint16_t n_dedicated;	/* dedicated aggregator nodes (default 1) */
	uint32_t n_slots;
	uint32_t n_fallback;
	uint32_t window;
	int l2l4;		/* full Ethernet/IPv4/UDP frames */
	int multicast;		/* results replicated by the "switch" */
	uint32_t chunk_rotate;
	uint32_t confirm_batch;	/* 0: 64 */
	uint32_t max_tensors;	/* per worker; 0: 8 */
	/* the workers' first rto; the other timers scale with it (acked 5x,
	 * busy 1/2, rto_max 10x; the aggregators' probe 2.5x, evict 250x).
	 * 0: 20 us */
	uint64_t rto_ns;
	uint8_t cc_off;		/* the workers' fixed window */
	/* enum tly_profile of workers and aggregators; in the switch
	 * profile the runner sweeps each aggregator every evict_ns */
	uint8_t profile;
	uint32_t release_max;	/* workers' (0: their default) */
	uint32_t held_max;	/* workers' (0: their default) */
	uint32_t acked_probes;	/* workers' (0: their default) */
	uint32_t ack_every;	/* workers' (0: every DATA asks) */
	uint8_t no_sweep;	/* tests: the switch profile without it */
	size_t keep_bytes;	/* workers' (0: their default) */
	/* called on every completed tensor, after it is counted */
	void (*on_done)(void *ctx, uint16_t rank,
			const struct tly_tensor_desc *d);
	void *on_done_ctx;
	struct fab_cfg fab;
};

struct cluster {
	struct cl_cfg cfg;
	struct fab *fab;
	uint16_t n_nodes;
	struct tly_addr *addrs;
	struct tly_worker *w[TLY_MAX_WORKERS];
	struct tly_agg **a;	/* per node, NULL where none */
	uint32_t done[TLY_MAX_WORKERS];
	uint64_t evict_ns;	/* the aggregators' */
	uint64_t next_sweep;	/* switch profile: the next tly_agg_sweep() */
	uint64_t swept;		/* slots the sweeps freed */
	struct cl_node {
		struct cluster *cl;
		uint16_t node;
	} *nodes;
};

/* a seeded random configuration for the sweeps: workers 2..8, K 16 or
 * 64, one of the first @n_roles roles, pools of 2..201 slots, 0..5
 * fallback entries, windows 1..16, loss up to 20 %, duplication up to
 * 10 %, reordering up to 10 us; fabric seed @seed */
void cl_cfg_random(struct cl_cfg *c, uint64_t *rng, unsigned int n_roles,
		   uint32_t seed);
struct cluster *cl_create(const struct cl_cfg *cfg);
void cl_destroy(struct cluster *cl);
/* run until every worker finished @tensors tensors; 0, or -1 on timeout */
int cl_run(struct cluster *cl, uint32_t tensors, uint64_t max_ns);
/* keep polling for @ns (lets receipts and probes settle) */
void cl_settle(struct cluster *cl, uint64_t ns);
uint32_t cl_slots_busy(const struct cluster *cl);

/*
 * What a finished run of @cl (made from @cfg) must show: no worker with
 * chunks in flight or tensors active, frames dropped when the loss
 * should have dropped some, and once receipts settled (3 ms) no slot
 * still busy on a clean fabric.  NULL, or what failed.
 */
const char *cl_run_end_fault(struct cluster *cl, const struct cl_cfg *cfg);

/*
 * One float32 tensor (@count elements a worker, x[w] in, y[w] out) in
 * @codec through a fresh cluster of @n_workers and a dedicated
 * aggregator (K = 64, 512 slots, window 16, no faults): the bytes worker
 * 0 sent and received (the compressed tests' byte counts).  0, or -1
 * when the cluster could not be made or the run did not finish.
 */
int cl_codec_bytes(uint16_t n_workers, uint8_t codec, size_t count,
		   float *const *x, float *const *y, uint64_t *tx,
		   uint64_t *rx);

#endif /* TALLY_TESTS_DATAPLANE_CLUSTER_H */
