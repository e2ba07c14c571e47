/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_internal.h - the worker's state, shared by worker.c (tensors,
 * window, timers, aggregation) and ring.c (ring all-reduce).
 */
#ifndef TALLY_DATAPLANE_ENGINE_WORKER_INTERNAL_H
#define TALLY_DATAPLANE_ENGINE_WORKER_INTERNAL_H

#include "dataplane/engine/worker.h"
#include "dataplane/engine/frame.h"

#define CONFIRM_RANGES	64	/* ranges per CONFIRM packet we send */
#define RETIRED		1024	/* ring: completed tensor ids remembered */

/* a chunk's outgoing packet (docs/protocol.md: worker chunk machine) */
enum chunk_state {
	C_WAIT = 0,	/* float AGG: its block exponent is not agreed yet */
	C_READY,	/* queued to send */
	C_INFLIGHT,	/* sent, holds one credit of the window */
	C_ACKED,	/* held by the aggregator/peer: no credit, slow probe */
	C_DEFER,	/* refused (BUSY): resend after a back-off */
	C_DONE,		/* result placed (AGG) / hop acknowledged (ring) */
	C_IDLE,		/* ring: nothing to send until a hop arrives */
};

/* ring receive flags */
#define R_RS_IN		0x01	/* reduce-scatter hop received */
#define R_AG_IN		0x02	/* all-gather hop received */

struct wchunk {
	uint64_t deadline;
	uint8_t state;
	uint8_t retries;
	int8_t shift;		/* AGG float: the agreed block shift */
	uint8_t rflags;		/* ring */
	uint16_t hop;		/* ring: the hop this chunk sends next */
};

struct wtensor {
	struct tly_tensor_desc d;
	uint64_t seq;
	uint64_t next_deadline;	/* earliest INFLIGHT/ACKED timer */
	uint64_t defer_deadline;	/* earliest DEFER timer */
	uint32_t n_chunks;
	uint32_t n_groups;	/* exponent-round packets (float AGG) */
	uint32_t done;		/* chunks whose result is placed */
	uint32_t cursor;	/* AGG: visit position of the next data chunk */
	uint32_t lo;		/* AGG: positions below are all DONE */
	uint32_t gcursor;	/* AGG: next exponent group to send */
	uint32_t start;		/* AGG: first chunk visited */
	uint32_t ring_unacked;	/* ring: hops of ours not yet acknowledged */
	uint32_t q_head, q_tail; /* ring: ready queue of chunk indexes */
	uint32_t *queue;
	struct wchunk *chunks;	/* n_chunks data chunks, then the groups */
	int32_t *exp;		/* AGG float: local block exponents */
	uint32_t *acc;		/* ring: running sums, n_chunks * k words */
	uint8_t active;
};

struct confirm_batch {
	uint64_t oldest;
	uint32_t n_ranges;
	uint32_t n_chunks;
	struct {
		uint32_t tensor;
		uint16_t first;
		uint16_t count;
		uint8_t exp;
	} r[CONFIRM_RANGES];
};

/* ring: acknowledgements not sent yet (consecutive chunks, one hop) */
struct ring_ack_range {
	uint32_t tensor;
	uint16_t dst;
	uint16_t hop;
	uint16_t first;
	uint16_t count;
};

struct tly_worker {
	struct tly_worker_cfg cfg;
	struct tly_wire_limits lim;
	struct tly_counters c;
	uint32_t inflight;
	uint32_t n_active;
	uint64_t seq;
	struct wtensor *tensors;	/* max_tensors entries */
	struct wtensor **order;		/* active ones, by (prio, seq) */
	struct confirm_batch *cb;	/* one per aggregator */
	uint16_t *aggs;
	uint32_t retired[RETIRED];	/* ring: ids of finished tensors */
	uint32_t retired_pos;		/* next entry to overwrite */
	uint32_t retired_n;		/* entries filled, up to RETIRED */
	struct ring_ack_range ack;
};

static inline size_t chunk_elems(const struct wtensor *t, uint32_t c,
				 uint16_t k)
{
	size_t first = (size_t)c * k;

	return t->d.count - first < k ? t->d.count - first : k;
}

static inline size_t dtype_size(enum tly_dtype dt)
{
	return dt == TLY_DT_F16 || dt == TLY_DT_BF16 ? 2 : 4;
}

static inline uint8_t prio_dscp(uint8_t prio)
{
	/* class selectors CS5 (most urgent) .. CS0; CS6/CS7 stay free */
	return (uint8_t)((prio < 5 ? 5 - prio : 0) << 3);
}

void worker_arm(struct wtensor *t, struct wchunk *ch, uint64_t deadline);
void worker_finish(struct tly_worker *w, struct wtensor *t);
struct wtensor *worker_find(struct tly_worker *w, uint32_t id);

/* ring.c */
int ring_setup(struct tly_worker *w, struct wtensor *t);
int ring_next(struct wtensor *t, uint32_t *c);
void ring_send(struct tly_worker *w, struct wtensor *t, uint32_t c,
	       uint8_t flags);
void ring_rx(struct tly_worker *w, const struct tly_hdr *h,
	     const uint8_t *pkt);
void ring_rx_ack(struct tly_worker *w, const struct tly_hdr *h,
		 uint64_t now);
void ring_ack_flush(struct tly_worker *w);

#endif /* TALLY_DATAPLANE_ENGINE_WORKER_INTERNAL_H */
