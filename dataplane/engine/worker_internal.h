/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_internal.h - the worker's state, shared by worker.c (tensors, the
 * poll loop, dispatch), worker_credit.c (credits, congestion windows and
 * retransmission timers), and the two algorithms behind one ops table:
 * worker_agg.c (through aggregators) and ring.c (ring all-reduce).
 *
 * Layering: worker.c calls an algorithm only through its struct
 * worker_algo; an algorithm never calls worker.c.  What an algorithm may
 * use of the common machinery is the narrow interface at the end of this
 * file: the inline lookups and timer helpers, and worker_credit.c's
 * credit_*() calls.  A tensor an algorithm's rx() completes is handed
 * back to worker.c as the return value, never finished from below.
 */
#ifndef TALLY_DATAPLANE_ENGINE_WORKER_INTERNAL_H
#define TALLY_DATAPLANE_ENGINE_WORKER_INTERNAL_H

#include "dataplane/engine/cc.h"
#include "dataplane/engine/codec.h"
#include "dataplane/engine/dtype.h"
#include "dataplane/engine/frame.h"
#include "dataplane/engine/worker.h"

#define NEVER		UINT64_MAX
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

/* wchunk.held (worker_credit.c) */
#define HELD		1	/* launched within the bound */
#define HELD_PAST	2	/* launched past it (wdest.extra) */

/* ring receive flags */
#define R_RS_IN		0x01	/* reduce-scatter hop received */
#define R_AG_IN		0x02	/* all-gather hop received */

struct wchunk {
	uint64_t deadline;
	uint64_t sent;		/* first transmission of its credit */
	uint8_t state;
	uint8_t retries;
	uint8_t held;		/* switch profile: counted in its
				 * aggregator's wdest.held (HELD_*) */
	int8_t shift;		/* AGG float: the agreed block shift */
	uint8_t rflags;		/* ring */
	uint16_t hop;		/* ring: the hop this chunk sends next */
	uint8_t timed;		/* sent once since @sent: an RTT sample (Karn) */
	uint8_t senders;	/* AGG block_topk: m(b) from the round */
	uint8_t inferred;	/* C_ACKED by a later answer, not probed
				 * since (worker_ack.c) */
};

struct worker_algo;

/* a tensor slot's arrays, kept for its next tensor (worker_mem.c) */
enum wbuf_kind { WBUF_CHUNKS, WBUF_EXP, WBUF_ACC, WBUF_QUEUE, WBUF_KINDS };

struct wbuf {
	void *p;
	size_t cap;		/* bytes */
};

struct wtensor {
	struct tly_tensor_desc d;
	const struct worker_algo *algo;	/* chosen at submit */
	const struct tly_codec_ops *codec;	/* chosen at submit */
	uint32_t ck;		/* elements per data chunk (codec's) */
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
	uint32_t dnext;		/* switch profile: the position the next
				 * scan for refused chunks starts at */
	uint32_t ring_unacked;	/* ring: hops of ours not yet acknowledged */
	uint8_t ring_refused;	/* ring: the next rank refused a hop and
				 * has taken none since */
	uint32_t q_head, q_tail; /* ring: ready queue of chunk indexes */
	uint32_t *queue;
	struct wchunk *chunks;	/* n_chunks data chunks, then the groups */
	int32_t *exp;		/* AGG float: local block exponents */
	uint32_t *acc;		/* ring: running sums, n_chunks * k words */
	uint8_t active;
	/* the arrays above live here, kept across the slot's tensors:
	 * tensor_clear() leaves them, tensor_buf() hands them out */
	struct wbuf mem[WBUF_KINDS];
};

/*
 * One algorithm.  Chunk indexes run over the data chunks and then the
 * n_groups exponent groups; "positions" are the order the algorithm visits
 * data chunks in, which is what its live span is expressed in.
 */
struct worker_algo {
	/* allocate and initialise @t's chunks; 0 or -errno */
	int (*setup)(struct tly_worker *w, struct wtensor *t);
	/* the next chunk to send for the first time, taken off the
	 * algorithm's queue; 0 when none is ready */
	int (*next)(struct tly_worker *w, struct wtensor *t, uint32_t *idx);
	/* put back the chunk next() just returned: its destination has no
	 * room, it comes first again at the next poll */
	void (*unget)(struct wtensor *t, uint32_t idx);
	/* build and send chunk @idx's packet */
	void (*send)(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		     uint8_t flags);
	/* the node chunk @idx's packet goes to (whose window it uses) */
	uint16_t (*dest)(const struct tly_worker *w, const struct wtensor *t,
			 uint32_t idx);
	/* positions [p0, p1) of data chunks that can hold a timer */
	void (*span)(struct wtensor *t, uint32_t *p0, uint32_t *p1);
	/* the data chunk at visit position @pos */
	uint32_t (*at)(const struct wtensor *t, uint32_t pos);
	/* the node an unfinished data chunk waits on (worker_status.c) */
	uint16_t (*peer)(const struct tly_worker *w, const struct wtensor *t,
			 uint32_t c);
	/* a frame of this algorithm's types; returns a tensor it completed */
	struct wtensor *(*rx)(struct tly_worker *w, const struct tly_hdr *h,
			      const uint8_t *pkt, uint64_t now);
	/* once per poll, before anything is sent: flush batched replies */
	void (*flush)(struct tly_worker *w, uint64_t now);
	/* once per poll, after sending: the due receipts */
	void (*flush_late)(struct tly_worker *w, uint64_t now);
	/* @t completed: forget it the algorithm's way (may be NULL) */
	void (*retire)(struct tly_worker *w, const struct wtensor *t);
};

extern const struct worker_algo worker_agg_algo;	/* worker_agg.c */
extern const struct worker_algo worker_ring_algo;	/* ring.c */

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

/* switch profile: a chunk whose CONFIRM awaits its ACK (RELEASING) */
struct wrelease {
	uint64_t key;		/* tly_chunk_key() */
	uint64_t deadline;
	uint16_t dst;		/* its aggregator's node */
	uint8_t retries;
	uint8_t used;
};

/* switch profile: receipts queued for one aggregator's next CONFIRM */
struct release_batch {
	uint32_t tensor[TLY_SWITCH_RECEIPTS];
	uint16_t chunk[TLY_SWITCH_RECEIPTS];
	uint8_t n;
	uint8_t exp;
	uint8_t flags;		/* ACK_REQ, RETX */
};

/* ring: acknowledgements not sent yet (consecutive chunks, one hop) */
struct ring_ack_range {
	uint32_t tensor;
	uint16_t dst;
	uint16_t hop;
	uint16_t first;
	uint16_t count;
};

/* what the worker keeps per destination node (worker_credit.c) */
struct wdest {
	struct tly_cc cc;
	uint32_t inflight;	/* credits held by packets to this node */
	uint64_t answered;	/* latest first-send time that got an answer */
	uint8_t any_answer;
	/* switch profile: chunks launched and not completed (ACKED and
	 * DEFER included), bounded by cfg.held_max */
	uint32_t held;
	uint32_t held_peak;
	uint32_t extra;		/* chunks allowed past the bound now */
	uint32_t escapes;	/* extras granted after a stall */
	uint64_t held_changed;	/* when held last went up or down */
	/* switch profile: ACKed chunks probed in the round begun at
	 * probe_round (cfg.acked_probes a round) */
	uint64_t probe_round;
	uint32_t probes_in_round;
	uint64_t probes;
	/* switch profile, cfg.ack_every > 1 (worker_ack.c): fresh DATA to
	 * this node in send order, a ring of cfg.window records */
	struct sent_rec *sent;
	uint32_t sent_head;
	uint32_t sent_n;
	uint32_t unreq;		/* fresh DATA since the last with ACK_REQ */
	uint64_t inferred;	/* chunks taken as placed by a later ACK */
	uint64_t inferred_probed;	/* of those, probed: their RESULT
					 * had not come by their rto */
};

/* one fresh DATA (worker_ack.c) */
struct sent_rec {
	uint32_t tensor;
	uint32_t idx;
	uint64_t sent;		/* the chunk's wchunk.sent at the send */
};

struct tly_worker {
	struct tly_worker_cfg cfg;
	struct tly_wire_limits lim;
	struct tly_cc_params ccp;
	struct tly_counters c;
	uint32_t inflight;
	uint32_t n_active;
	uint64_t seq;
	/* the frame tly_worker_rx_at() is handling arrived then; 0 outside
	 * it, or not known (credit_release's RTT sample) */
	uint64_t rx_arrival;
	struct wtensor *tensors;	/* max_tensors entries */
	struct wtensor **order;		/* active ones, by (prio, seq) */
	struct confirm_batch *cb;	/* one per aggregator */
	uint16_t *aggs;
	struct wdest *dests;		/* n_dests entries, by node id */
	uint16_t n_dests;
	uint32_t retired[RETIRED];	/* ring: ids of finished tensors */
	uint32_t retired_pos;		/* next entry to overwrite */
	uint32_t retired_n;		/* entries filled, up to RETIRED */
	struct ring_ack_range ack;
	struct wrelease *rel;		/* switch profile (worker_release.c) */
	uint32_t rel_mask;		/* table size - 1 */
	uint32_t rel_n;			/* entries used */
	uint64_t rel_deadline;		/* earliest timer (may be early) */
	struct release_batch *rb;	/* one per node (n_dests) */
	uint8_t rb_pending;		/* some batch is not empty */
	uint32_t defer_turn;		/* switch profile: the tensor whose
					 * refused chunks go first */
	struct tly_worker_mem mem;	/* the slots' arrays (worker_mem.c) */
};

/* ---- the narrow interface the algorithms use ---- */

static inline size_t chunk_elems(const struct wtensor *t, uint32_t c,
				 uint32_t k)
{
	size_t first = (size_t)c * k;

	return t->d.count - first < k ? t->d.count - first : k;
}

static inline size_t dtype_size(enum tly_dtype dt)
{
	return tly_dtype(dt)->size;
}

static inline uint8_t prio_dscp(uint8_t prio)
{
	/* class selectors CS5 (most urgent) .. CS0; CS6/CS7 stay free */
	return (uint8_t)((prio < 5 ? 5 - prio : 0) << 3);
}

/* the tensor in progress with id @id, or NULL */
static inline struct wtensor *worker_find(struct tly_worker *w, uint32_t id)
{
	uint32_t i;

	for (i = 0; i < w->n_active; i++)
		if (w->order[i]->d.id == id)
			return w->order[i];
	return NULL;
}

/* set @ch's timer and keep the tensor's earliest deadlines */
static inline void worker_arm(struct wtensor *t, struct wchunk *ch,
			      uint64_t deadline)
{
	ch->deadline = deadline;
	if (ch->state == C_DEFER) {
		if (deadline < t->defer_deadline)
			t->defer_deadline = deadline;
	} else if (deadline < t->next_deadline) {
		t->next_deadline = deadline;
	}
}

/* whether every chunk of @t is placed and every ring hop acknowledged */
static inline int tensor_complete(const struct wtensor *t)
{
	return t->done == t->n_chunks && !t->ring_unacked;
}

/* worker_credit.c: the window, per destination and in total */

/* create the per-destination state; 0 or -ENOMEM */
int credit_init(struct tly_worker *w);
void credit_fini(struct tly_worker *w);
/* whether a fresh packet to @dst may take a credit now */
int credit_room(const struct tly_worker *w, uint16_t dst);
/* chunk @idx is sent for the first time in this credit: take one */
void credit_take(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		 uint64_t now);
/*
 * Chunk @idx's credit returns, if it holds one (C_INFLIGHT; otherwise
 * nothing happens).  @answered: the peer answered the packet (RESULT,
 * ACK): an RTT sample (if it was sent only once) and a window increase.
 * 0: a refusal (BUSY, REFUSE), which says nothing about the path.  The
 * caller sets the chunk's new state.
 */
void credit_release(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		    int answered, uint64_t now);
/*
 * Switch profile: whether a fresh chunk to @dst may launch, given what
 * this worker holds there (cfg.held_max; past it after a retransmission
 * timeout without a launch or completion there).
 */
int credit_hold_room(const struct tly_worker *w, uint16_t dst,
		     uint64_t now);
/* chunk @idx is placed (C_DONE): it no longer counts as held */
void credit_done(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		 uint64_t now);
/*
 * Switch profile: ACKED chunk @idx is due for a probe.  1: send it (the
 * round's budget allows); 0: not in this round, *@retry is when the
 * next begins.  Other profiles: always 1.
 */
int credit_probe(struct tly_worker *w, const struct wtensor *t,
		 uint32_t idx, uint64_t now, uint64_t *retry);
/* INFLIGHT chunk @idx timed out and is being sent again */
void credit_timeout(struct tly_worker *w, struct wtensor *t, uint32_t idx,
		    uint64_t now);
/* the retransmission timeout after @retries tries */
uint64_t credit_rto(struct tly_worker *w, const struct wtensor *t,
		    uint32_t idx, uint8_t retries);
/* the same for a packet to node @dst */
uint64_t credit_rto_node(const struct tly_worker *w, uint16_t dst,
			 uint8_t retries);

/* worker_release.c: the switch profile's releases (chunk keys of
 * tly_chunk_key(); @dst the chunk's aggregator node) */
int ack_init(struct tly_worker *w);
void ack_fini(struct tly_worker *w);
uint8_t ack_fresh_flags(struct tly_worker *w, struct wtensor *t, uint32_t idx);
void ack_infer(struct tly_worker *w, struct wtensor *t, uint32_t idx,
	       uint64_t now);

int release_init(struct tly_worker *w);
void release_fini(struct tly_worker *w);
/* whether one more chunk may start releasing */
int release_room(const struct tly_worker *w);
/* @chunk's RESULT is placed: CONFIRM it, until ACKed */
void release_start(struct tly_worker *w, uint32_t tensor, uint16_t chunk,
		   uint8_t exp, uint16_t dst, uint64_t now);
/* a RESULT of a chunk released or releasing: CONFIRM it again */
void release_again(struct tly_worker *w, uint32_t tensor, uint16_t chunk,
		   uint8_t exp, uint16_t dst, uint64_t now);
/* an ACK with TLY_F_RELEASED (the chunks it names after the header) */
void release_acked(struct tly_worker *w, const struct tly_hdr *h,
		   const uint8_t *pkt);
/* re-send the CONFIRMs whose timer is due */
void release_poll(struct tly_worker *w, uint64_t now);
/* queue a receipt for the next CONFIRM to @dst */
void release_confirm(struct tly_worker *w, uint32_t tensor, uint16_t chunk,
		     uint8_t exp, uint16_t dst, uint8_t flags);
/* send the CONFIRMs queued (end of a poll) */
void release_flush_all(struct tly_worker *w);

/* worker_mem.c: the slots' arrays */

/* @bytes of @t's array @kind, the slot's own when it is large enough,
 * zeroed when @zero; NULL when it cannot be allocated */
void *tensor_buf(struct tly_worker *w, struct wtensor *t,
		 enum wbuf_kind kind, size_t bytes, bool zero);
/* @t finished: free its arrays if the worker keeps more than
 * cfg.keep_bytes */
void tensor_bufs_trim(struct tly_worker *w, struct wtensor *t);
void tensor_bufs_free(struct tly_worker *w, struct wtensor *t);

#endif /* TALLY_DATAPLANE_ENGINE_WORKER_INTERNAL_H */
