/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client_internal.h - the client library's private state, shared by its
 * source files and by the tests (which inject raw descriptors to check the
 * daemon's validation).  Not installed.
 */
#ifndef TALLY_SHM_CLIENT_INTERNAL_H
#define TALLY_SHM_CLIENT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <tally/tally.h>

#include "shm/fast.h"
#include "shm/proto.h"
#include "shm/ring.h"
#include "shm/segment.h"

#define CLIENT_SQ_ENTRIES TALLY_MAX_INFLIGHT
#define CLIENT_CQ_ENTRIES TALLY_MAX_INFLIGHT

/* tally_wait() spins at most this long before sleeping; less when recent
 * waits were short, not at all when they were long (spinning on a shared
 * core only steals time from the daemon that has to do the work).  At
 * 50 us the clients of a 256 KiB all-reduce (waits of 60-130 us) all
 * slept, and the daemon paid a doorbell write and a wake-up per client on
 * every operation: 200 us keeps them polling up to about 1 MiB. */
#define CLIENT_SPIN_MAX_NS 200000ull

/* How long one sleep lasts while a client waits for one kind of
 * completion (a fast-path slot, the daemon's doorbell) and is owed the
 * other kind too: one sleep cannot watch both. */
#define CLIENT_FAST_SLICE_NS 200000ull

enum req_state { REQ_FREE = 0, REQ_PENDING, REQ_DONE };

/* a sign_ef request's error feedback (client_ef.c) */
struct client_req_ef {
	bool used;
	bool caller;		/* TALLY_F_EF_CALLER: the caller's residual */
	uint8_t dtype;
	uint64_t key, count;
	void *sent;		/* caller: its sendbuf, "sent" on completion */
};

/* a request of the local fast path (client_fast.c) */
struct client_req_fast {
	bool on;
	uint8_t dtype, redop;
	uint32_t slot;		/* the directory's route */
	uint64_t seq;		/* the slot's use it joined */
	const void *send;
	void *recv;
	uint64_t key, iteration, count;
};

struct client_req {
	uint32_t gen;		/* bumped on reuse: stale handles are ENOENT */
	uint8_t state;
	int32_t res;
	uint32_t cqe_flags;	/* TALLY_CQE_F_* of its completion */
	/* an all-reduce's (key, iteration), by either path: the fast path
	 * finds a duplicate in flight by it (client_fast.c) */
	bool allreduce;
	uint64_t key, iteration;
	struct client_req_ef ef;
	struct client_req_fast fast;
};

/* The job's fast-path table, when tallyd gave one (WELCOME). */
struct client_fast {
	struct tally_fast_hdr *hdr;	/* NULL: every request to the daemon */
	size_t bytes;
	struct tally_fast_layout l;	/* checked once, at the mapping */
	atomic_uint pending;		/* fast requests not yet REQ_DONE */
	/* hdr->wake when progress last looked (tally_wait_ready) */
	_Atomic uint32_t seen_wake;
};

struct client_ef;

struct client_seg {
	uint32_t id;		/* 0: slot unused (id 0 is the ring segment) */
	struct segment seg;
};

struct tally_client {
	int sock;
	int sq_kick_fd;		/* pipe write end: we ring the daemon */
	int cq_kick_fd;		/* pipe read end: the daemon rings us */
	struct segment ctrl;	/* holds both rings */
	struct ring sq, cq;
	int rank, size;
	/* atomic: tally_wait_ready() may set it from another thread */
	atomic_bool daemon_lost;
	/* completions taken off the ring (REQ_DONE) and not yet handed out:
	 * another thread's reap (tally_allreduce() on a full ring) may take
	 * the completion tally_wait_ready() sleeps for, so it counts these */
	atomic_uint done_unclaimed;
	int last_error;		/* of the last tally_alloc()/tally_free() */
	uint32_t next_seg_id;
	unsigned int inflight;
	/* of them, the daemon's (not the fast path's): read by
	 * tally_wait_ready() from another thread */
	atomic_uint daemon_inflight;
	uint64_t spin_ewma_ns;	/* recent wait durations, for the spin */
	int job_method;		/* enum tally_compression (WELCOME) */
	struct client_ef *ef;	/* sign_ef residuals; NULL until used */
	struct client_fast fast;
	struct client_seg segs[TALLY_MAX_SEGMENTS];
	struct client_req reqs[TALLY_MAX_INFLIGHT];
};

/* Byte offset of the completion ring inside the control segment. */
static inline size_t client_cq_offset(void)
{
	size_t sq = ring_bytes(CLIENT_SQ_ENTRIES, sizeof(struct tally_sqe));

	return (sq + RING_CACHELINE - 1) & ~(size_t)(RING_CACHELINE - 1);
}

static inline size_t client_ctrl_bytes(void)
{
	return client_cq_offset() +
	       ring_bytes(CLIENT_CQ_ENTRIES, sizeof(struct tally_cqe));
}

/* A free request slot with its generation bumped (its last use's handles
 * become ENOENT) and its new handle in *@handle; NULL when all are in
 * use.  The caller marks it pending once the request is really out.
 * Inline: the fast path's fuzz target links client_fast.c alone. */
static inline struct client_req *client_req_take(struct tally_client *c,
						 uint64_t *handle)
{
	for (uint32_t slot = 0; slot < TALLY_MAX_INFLIGHT; slot++) {
		struct client_req *r = &c->reqs[slot];

		if (r->state != REQ_FREE)
			continue;
		r->gen = (r->gen + 1) & 0xffffffu;
		if (r->gen == 0)
			r->gen = 1;
		*handle = ((uint64_t)r->gen << 16) | slot;
		return r;
	}
	return NULL;
}

/* Queue a raw descriptor (user_data is set here) and ring the doorbell. */
int client_submit_sqe(struct tally_client *c, struct tally_sqe *sqe,
		      uint64_t *req);

/* sign_ef (client_ef.c): substitute *@send with p = g + e in the key's
 * scratch when @a travels as sign_ef (else nothing); on completion,
 * e := p - sent / L.  With TALLY_F_EF_CALLER nothing is substituted and
 * the completion leaves sent (or NaN) in the caller's sendbuf.
 * client_ef_free() at disconnect. */
int client_ef_prepare(struct tally_client *c,
		      const struct tally_allreduce_args *a,
		      const void **send, struct client_req_ef *re);
void client_ef_finish(struct tally_client *c, struct client_req_ef *re,
		      int res, uint32_t cqe_flags);
void client_ef_free(struct tally_client *c);
/* a prepared request that was never submitted: a caller's sendbuf is
 * left as it was, the library's residual is reset */
void client_ef_cancel(struct tally_client *c, struct client_req_ef *re);
/* tests: @key's residual of @n elements and its scratch (after a
 * completion flagged TALLY_CQE_F_SENT: what the host sent); -1 if none */
int client_ef_peek(struct tally_client *c, uint64_t key, uint64_t n,
		   const float **e, const void **scratch);

/* The local fast path (client_fast.c, docs/local-fast-path.md). */
int client_fast_map(struct tally_client *c, int fd, uint64_t bytes);
void client_fast_unmap(struct tally_client *c);
/* Could this all-reduce take the fast path?  (The same on every rank.) */
bool client_fast_takes(const struct tally_client *c,
		       const struct tally_allreduce_args *a, uint64_t bytes);
/*
 * Route an all-reduce of a job with a table through its directory:
 * CLIENT_FAST_TAKEN when it is submitted in the table (*@req its handle;
 * its errors come at completion), CLIENT_FAST_TO_DAEMON when the caller
 * submits it to the daemon, and must call client_fast_unroute() if that
 * fails, CLIENT_FAST_TO_DAEMON_UNLISTED the same without that duty, or a
 * negative TALLY_E* error.
 */
enum {
	CLIENT_FAST_TAKEN = 0,
	CLIENT_FAST_TO_DAEMON = 1,
	CLIENT_FAST_TO_DAEMON_UNLISTED = 2,
};
int client_fast_route(struct tally_client *c,
		      const struct tally_allreduce_args *a, uint64_t bytes,
		      uint64_t *req);
void client_fast_unroute(struct tally_client *c, uint64_t key,
			 uint64_t iteration);
/* Collect the requests whose slots are done. */
void client_fast_progress(struct tally_client *c);
bool client_fast_ready(const struct tally_client *c);
void client_fast_sleep(struct tally_client *c, uint64_t now,
		       uint64_t deadline, short gone);
/* The daemon owes this client a completion now, where it owed none: a
 * thread asleep on the table (tally_wait_ready()) must wake and cut its
 * sleep into slices that look at the doorbell too. */
void client_fast_daemon_owes(struct tally_client *c);

/* Map a user pointer to (segment id, offset) with [ptr, ptr+len) inside. */
int client_translate(const struct tally_client *c, const void *ptr,
		     uint64_t len, uint32_t *seg_id, uint64_t *off);

#endif /* TALLY_SHM_CLIENT_INTERNAL_H */
