/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker.h - the worker side of an all-reduce: tensors are submitted with a
 * priority, cut into chunks of K elements, quantized and sent under a
 * window of packets in flight; results are placed into the tensor's output
 * and a callback fires when every chunk of a tensor is back.
 *
 * Two algorithms share the packet layer, the window and the timers:
 *   TLY_ALGO_AGG:  through aggregators (dedicated, or co-located shards:
 *                  chunk -> aggregator by hash).  Float tensors first run an
 *                  exponent round (one packet per K chunks, combined by max)
 *                  so every worker quantizes a block with the same scale.
 *   TLY_ALGO_RING: reduce-scatter then all-gather, hop by hop to the next
 *                  rank, every hop acknowledged; float32 sums (no scale).
 *
 * A daemon calls tly_worker_rx() for every frame of type RESULT, ACK, BUSY,
 * RING and RING_ACK, and tly_worker_poll() regularly: it fires timers
 * (retransmission with back-off) and fills the window, highest priority
 * (lowest prio value) first.
 *
 * The window is cfg.window packets in total and, per destination node, a
 * congestion window within [cc_min_window, window] that adapts to RTT and
 * loss (cc.h; docs/protocol.md, "Congestion control"), unless cc_off.
 */
#ifndef TALLY_DATAPLANE_ENGINE_WORKER_H
#define TALLY_DATAPLANE_ENGINE_WORKER_H

#include "dataplane/engine/engine.h"

enum tly_dtype { TLY_DT_F32, TLY_DT_F16, TLY_DT_BF16, TLY_DT_I32 };
enum tly_algo { TLY_ALGO_AGG, TLY_ALGO_RING };
/* how a float tensor travels (codec.h, docs/compression.md): int32 lanes,
 * 16/8-bit lanes, or 1-bit signs with a scale; never for int32 tensors
 * or the ring */
enum tly_codec {
	TLY_CODEC_NONE, TLY_CODEC_INT16, TLY_CODEC_INT8, TLY_CODEC_SIGN_EF,
	/* block sparsification with error feedback: the top 10 % or 1 %
	 * of a tensor's chunks by L2 norm (docs/compression.md section 4) */
	TLY_CODEC_TOPK10_EF, TLY_CODEC_TOPK1_EF,
};

struct tly_tensor_desc {
	uint32_t id;		/* tly_tensor_id(key, iteration, partition) */
	enum tly_dtype dtype;
	enum tly_algo algo;
	const void *src;
	void *dst;		/* may be src: each chunk is read before its
				 * result is written */
	size_t count;		/* elements; at most TLY_MAX_CHUNKS chunks
				 * (K elements; 2K int16, 4K int8,
				 * 32 (K - 1) sign_ef) */
	uint8_t prio;		/* 0 most urgent .. 7 least; also the DSCP */
	uint8_t codec;		/* enum tly_codec (AGG float tensors only) */
	/* a codec with error feedback (sign_ef, block_topk): where each
	 * completed chunk's own contribution, decoded, goes ("sent", count
	 * elements of dtype; NaN for a non-finite chunk; zeros for a block
	 * this worker did not send), written before the chunk's result;
	 * NULL: not wanted */
	void *sent;
	void *user;
};

/* finished tensors' arrays a worker keeps for the next (cfg.keep_bytes):
 * a 64 MiB float32 ring all-reduce's, with room for its chunk states */
#define TLY_WORKER_KEEP_BYTES (96ull << 20)

typedef void tly_tensor_done_fn(void *ctx, const struct tly_tensor_desc *d);

struct tly_worker_cfg {
	uint16_t job;
	uint32_t cookie;		/* the epoch's (ctrl/auth.h) */
	uint16_t k;
	uint16_t n_workers;
	uint16_t rank;			/* also this worker's node id */
	uint32_t n_slots;		/* the aggregators' pool size */
	uint16_t n_aggs;		/* aggregator nodes (AGG algorithm) */
	const uint16_t *agg_nodes;
	uint32_t window;		/* packets in flight, unacknowledged */
	uint32_t max_tensors;		/* tensors in progress at once */
	uint64_t rto_ns;		/* first retransmission timeout */
	uint64_t rto_max_ns;		/* back-off ceiling */
	uint64_t acked_ns;		/* probe an ACKed chunk this often */
	uint64_t busy_ns;		/* wait after BUSY/REFUSE */
	/* switch profile: the wait after a BUSY, x 2^retries as busy_ns
	 * (0: busy_ns).  There a BUSY is a hashed slot that another
	 * chunk in progress holds, which frees about a round trip after
	 * that chunk's RESULT; docs/switch-profile.md, "Refused chunks" */
	uint64_t switch_busy_ns;
	uint64_t confirm_ns;		/* send receipts at most this late */
	uint32_t confirm_batch;		/* ... or when this many are due */
	uint32_t chunk_rotate;		/* first chunk sent: rank * rotate */
	/* enum tly_profile.  TLY_PROFILE_SWITCH (docs/switch-profile.md):
	 * n_workers <= 32, k tly_switch_k_ok(), AGG tensors only; each placed
	 * RESULT is released by a CONFIRM of its own, re-sent until ACKed,
	 * instead of the batched receipts (confirm_ns, confirm_batch) */
	uint8_t profile;
	/* 1 when the aggregator sends each RESULT once to a multicast
	 * group this worker's transport joined (rank TLY_RANK_ALL is then
	 * accepted), either profile; 0: RESULTs of our rank only */
	uint8_t result_group;
	/* chunks releasing at once (0: 2 x (held_max + window), at
	 * least 256: two bursts of RESULTs, docs/switch-profile.md) */
	uint32_t release_max;
	uint32_t release_batch;		/* chunks a CONFIRM names, 1 ..
					 * TLY_SWITCH_RECEIPTS (0: the most) */
	/* switch profile: chunks launched and not completed (in flight,
	 * held in a partial sum, refused) per aggregator, beyond which no
	 * fresh chunk goes there (0: n_slots / n_workers, at most 4 x
	 * window, at least window); and ACKed chunks probed per
	 * aggregator per round trip, oldest first (0: 4)
	 * (docs/protocol.md, "What a worker holds") */
	uint32_t held_max;
	uint32_t acked_probes;
	/* switch profile: one fresh DATA in ack_every to an aggregator
	 * asks for its ACK, which stands for those sent before it
	 * (worker_ack.c; 0 or 1: every DATA asks) */
	uint32_t ack_every;
	/* congestion control; fields left at zero take the defaults of
	 * dataplane/engine/cc.h */
	uint8_t cc_off;			/* 1: a fixed window, as before */
	uint32_t cc_min_window;		/* packets (8) */
	uint32_t cc_init_window;	/* packets at start (16) */
	uint64_t cc_target_ns;		/* queueing delay above base (50 us) */
	uint64_t cc_base_ns;		/* base RTT: min over this (100 ms) */
	/* bytes of finished tensors' arrays kept for the next ones
	 * (worker_mem.c; 0: TLY_WORKER_KEEP_BYTES) */
	size_t keep_bytes;
	struct tly_net net;
	struct tly_tx_ops ops;
	tly_tensor_done_fn *done;
	void *done_ctx;
};

struct tly_worker;

struct tly_worker *tly_worker_create(const struct tly_worker_cfg *cfg);
void tly_worker_destroy(struct tly_worker *w);
/* 0, -EINVAL (bad descriptor; a codec other than TLY_CODEC_NONE for an
 * int32 tensor or the ring, sign_ef in the switch profile), -EBUSY
 * (max_tensors in progress) */
int tly_worker_submit(struct tly_worker *w, const struct tly_tensor_desc *d,
		      uint64_t now_ns);
void tly_worker_rx(struct tly_worker *w, const uint8_t *frame, size_t len,
		   uint64_t now_ns);
/* tly_worker_rx() of a frame that reached the host at @arrival_ns (the
 * kernel's receive stamp, on the @now_ns clock; 0: not known) and is
 * read at @now_ns: an answer's RTT sample ends at its arrival, so the
 * time it waited for this thread to run is not taken for queueing on the
 * path (docs/protocol.md, "Congestion control") */
void tly_worker_rx_at(struct tly_worker *w, const uint8_t *frame,
		      size_t len, uint64_t now_ns, uint64_t arrival_ns);
void tly_worker_poll(struct tly_worker *w, uint64_t now_ns);
uint32_t tly_worker_inflight(const struct tly_worker *w);
uint32_t tly_worker_active(const struct tly_worker *w);
/* switch profile: chunks whose CONFIRM awaits its ACK (timers pending) */
uint32_t tly_worker_releasing(const struct tly_worker *w);
const struct tly_counters *tly_worker_counters(const struct tly_worker *w);
/* the congestion window towards @node, in packets (cfg.window when
 * cc_off or @node is no destination of this worker) */
uint32_t tly_worker_cwnd(const struct tly_worker *w, uint16_t node);

/* the path to @node as congestion control sees it: window, smoothed
 * and base RTT (0: no sample yet), decreases on delay and on loss */
struct tly_worker_path {
	uint32_t cwnd;
	uint64_t srtt_ns, base_rtt_ns;
	uint64_t delay_decreases, loss_decreases;
};

/* 0, or -ENOENT when @node is no destination of this worker */
int tly_worker_path(const struct tly_worker *w, uint16_t node,
		    struct tly_worker_path *out);

/* the tensors' arrays (chunk states, exponents, the ring's sums and
 * queue): bytes held now, by tensors in progress and kept by finished
 * ones for the next (cfg.keep_bytes); arrays allocated, and handed out
 * again instead */
struct tly_worker_mem {
	size_t kept_bytes;
	uint64_t allocs, reuses;
};

void tly_worker_mem(const struct tly_worker *w, struct tly_worker_mem *out);

/* switch profile: what this worker holds at aggregator @node: chunks
 * launched and not completed now, the most at once, the bound
 * (cfg.held_max), the chunks let past it because nothing moved there
 * for a retransmission timeout (the escape that keeps the protocol
 * live), and the ACKed chunks probed */
struct tly_worker_held {
	uint32_t held, peak, max, escapes;
	uint64_t probes;
	uint64_t inferred;	/* taken as placed from a later answer
				 * (cfg.ack_every) */
	uint64_t inferred_probed;	/* of those, probed at their rto
					 * (their RESULT had not come):
					 * what the inference costs */
};

/* 0, or -ENOENT when @node is no destination of this worker */
int tly_worker_held(const struct tly_worker *w, uint16_t node,
		    struct tly_worker_held *out);

/* What an unfinished tensor waits for (the daemon's stuck-tensor reports).
 * by_state counts its data chunks and exponent groups per chunk state
 * (names from tly_chunk_state_name); first is the first data chunk not
 * done (UINT32_MAX: none), in first_state, waiting on node peer: its
 * aggregator, or for ring the rank whose hop (idle) or whose
 * acknowledgement (otherwise) it needs. */
#define TLY_CHUNK_STATES 7
struct tly_tensor_wait {
	uint32_t n_chunks, done;
	uint32_t by_state[TLY_CHUNK_STATES];
	uint32_t first;
	uint8_t first_state;
	uint16_t peer;
};

/* 0, or -ENOENT when no tensor with that id is in progress. */
int tly_worker_tensor_wait(const struct tly_worker *w, uint32_t id,
			   struct tly_tensor_wait *out);
const char *tly_chunk_state_name(unsigned int state);

#endif /* TALLY_DATAPLANE_ENGINE_WORKER_H */
