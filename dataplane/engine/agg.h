/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agg.h - the aggregator: a fixed pool of slots per job, summing integer
 * payloads the way a programmable switch would (bounded work per packet,
 * bounded state), plus a small fallback store for contributions whose slot
 * is taken (ATP's fallback to a parameter server).
 *
 * Slot life (docs/protocol.md has the full table):
 *   FREE -> AGG on the first contribution of a chunk (key = tensor, chunk,
 *   exponent-round bit); AGG -> DONE when all n workers contributed: the
 *   RESULT goes to every worker; DONE -> FREE once every worker confirmed
 *   receipt (CONFIRM).  A DONE slot answers any late DATA of its chunk with
 *   the RESULT again; tly_agg_poll() re-sends it to workers that have not
 *   confirmed.  An idle AGG slot may be evicted when another chunk needs
 *   it: workers retransmit until they see the RESULT, so the partial sum is
 *   rebuilt, never lost.  Each entry remembers the chunk it last freed, and
 *   drops late duplicates of it instead of starting a partial that could
 *   never complete.
 *
 * The switch profile (cfg.profile = TLY_PROFILE_SWITCH,
 * docs/switch-profile.md) keeps each packet's work to one slot look-up:
 * no fallback store, BUSY on any collision, no tombstones, no probes (a
 * DONE slot answers DATA with the RESULT until every worker's CONFIRM of
 * that one chunk is in), and each CONFIRM with ACK_REQ is answered with
 * an ACK (TLY_F_RELEASED).  Its only timer is the control plane's:
 * tly_agg_sweep() every evict_ns frees partials claimed longer ago.
 *
 * Sizing: n_slots * K * 4 bytes of sums (1024 slots of K = 256: 1 MiB,
 * L2-resident); evict_ns well above the workers' retry intervals.
 */
#ifndef TALLY_DATAPLANE_ENGINE_AGG_H
#define TALLY_DATAPLANE_ENGINE_AGG_H

#include "dataplane/engine/engine.h"

struct tly_agg_cfg {
	uint16_t job;
	uint32_t cookie;		/* the epoch's (ctrl/auth.h) */
	uint16_t k;			/* payload words per packet */
	uint16_t n_workers;		/* 1 .. TLY_MAX_WORKERS */
	uint16_t self;			/* this node's id */
	uint32_t n_slots;		/* primary pool, same for the job */
	uint32_t n_fallback;		/* fallback store entries */
	uint64_t evict_ns;		/* idle partial may be evicted */
	uint64_t probe_ns;		/* unconfirmed result re-sent after */
	uint64_t tombstone_ns;		/* a freed chunk's strays dropped
					 * this long (0: 4 * evict_ns) */
	uint32_t poll_budget;		/* slots visited per poll (0: 64) */
	uint8_t profile;		/* enum tly_profile; switch: n_workers
					 * <= 32, k tly_switch_k_ok(),
					 * n_fallback ignored (0) */
	uint8_t portable_loops;		/* tests: the plain C payload loops
					 * even where AVX2 is present */
	struct tly_net net;		/* its address table must not change
					 * while the aggregator lives (the
					 * RESULT's envelope is cached) */
	struct tly_tx_ops ops;
};

struct tly_agg;

struct tly_agg *tly_agg_create(const struct tly_agg_cfg *cfg);
void tly_agg_destroy(struct tly_agg *a);
/* one received frame; never keeps a pointer to it */
void tly_agg_rx(struct tly_agg *a, const uint8_t *frame, size_t len,
		uint64_t now_ns);
/* a burst of frames (a transport's rx burst), prefetching ahead */
void tly_agg_rx_burst(struct tly_agg *a, const uint8_t *const *frames,
		      const uint16_t *lens, unsigned int n, uint64_t now_ns);
/* re-send unconfirmed results; visits at most poll_budget slots */
void tly_agg_poll(struct tly_agg *a, uint64_t now_ns);
/*
 * The switch profile's control plane: free the AGG slots claimed
 * evict_ns or longer before @now (partials whose chunk is gone, e.g.
 * started by a duplicate DATA after the slot was freed; a live one is
 * rebuilt by the workers' probes).  Visits the whole pool: call it every
 * evict_ns, not per packet.  Returns the slots freed; 0 in the software
 * profile (which evicts on collision).
 */
uint32_t tly_agg_sweep(struct tly_agg *a, uint64_t now_ns);
/* how often tly_agg_sweep() is due: evict_ns in the switch profile, 0
 * (never) in the software profile */
uint64_t tly_agg_sweep_interval(const struct tly_agg *a);
/*
 * Fault in the next @max_bytes (rounded to pages) of the sums, which
 * tly_agg_create() leaves untouched: for the thread that owns the
 * aggregator to call on its idle turns, so that the first chunks of a job
 * do not each wait for a page fault (35 us a page on the test VM).
 * Contents do not change; slots may be in use.  Returns 1 when it
 * faulted pages in, 0 when none were left to do.
 */
int tly_agg_prefault(struct tly_agg *a, size_t max_bytes);
const struct tly_counters *tly_agg_counters(const struct tly_agg *a);
/* slots (primary + fallback) not FREE */
uint32_t tly_agg_slots_busy(const struct tly_agg *a);

#endif /* TALLY_DATAPLANE_ENGINE_AGG_H */
