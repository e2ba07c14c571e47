/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * local_group.h - matching the submissions of a host's clients.
 *
 * Every client of the host submits each tensor once per iteration; the
 * submissions with the same (key, iteration) form a group, which is ready
 * when all members arrived and agree on count, dtype and op.  A group whose
 * members disagree fails: the members already there get the error at once,
 * and the group stays as a tombstone so that later members fail too rather
 * than wait forever; it is freed when the last member arrived.
 *
 * Bounded: a fixed pool of groups (members x in-flight limit), chained hash
 * buckets over it, no allocation after init.
 */
#ifndef TALLY_CTRL_LOCAL_GROUP_H
#define TALLY_CTRL_LOCAL_GROUP_H

#include <stdbool.h>
#include <stdint.h>

struct lg_op {
	uint64_t key;
	uint64_t iteration;
	uint64_t count;
	uint8_t dtype;
	uint8_t redop;
	uint32_t priority;
	uint16_t group;		/* mgwfbp merge group */
	bool last;		/* the iteration's last gradient */
	uint64_t submit_ns;	/* first member's submission (metrics) */
	uint8_t codec;		/* enum tly_codec the tensor travels in */
};

struct lg_member {
	uint64_t user_data;
	const void *send;
	void *recv;
	void *send_ref;		/* opaque to us: the caller's segment refs */
	void *recv_ref;
};

struct lg_group {
	struct lg_op op;
	uint64_t arrived;	/* bitmap of member ranks */
	bool failed;
	bool sent;		/* sign_ef: what the host sent is in every
				 * member's sendbuf (TALLY_CQE_F_SENT) */
	bool used;
	uint32_t next;		/* hash chain / free list */
	struct lg_member *m;	/* [size], valid where arrived and !failed */
};

struct local_group {
	unsigned int size;	/* members, <= 64 */
	uint32_t n_pool, n_buckets, free_head, n_used;
	struct lg_group *pool;
	struct lg_member *members;
	uint32_t *buckets;
};

enum lg_result {
	LG_WAITING,	/* stored; more members to come */
	LG_READY,	/* all arrived and agree: reduce, then release */
	LG_MISMATCH,	/* disagreement: fail every arrived member */
	LG_MISMATCH_ONE, /* group failed before: fail just this member */
	LG_DUPLICATE,	/* this rank already submitted (key, iteration) */
	LG_FULL,	/* no free group: back-pressure */
	LG_BAD_RANK,	/* rank >= size: a caller bug, refused */
};

int local_group_init(struct local_group *lg, unsigned int size,
		     uint32_t max_groups);
void local_group_destroy(struct local_group *lg);

/*
 * local_group_add - record rank's submission.  On LG_READY and LG_MISMATCH
 * (and the _ONE variant) *@g is the group.  READY: the caller reduces
 * and completes all members, then releases the group.  MISMATCH: it fails
 * every member in g->arrived; MISMATCH_ONE: only @rank.  After either it
 * calls local_group_settle(), which frees the tombstone once all arrived.
 */
enum lg_result local_group_add(struct local_group *lg, unsigned int rank,
			       const struct lg_op *op,
			       const struct lg_member *m, struct lg_group **g);

/* After completing a failed group's members: free it if everyone arrived. */
void local_group_settle(struct local_group *lg, struct lg_group *g);

/* Free a group (a finished READY one, or any one on abort). */
void local_group_release(struct local_group *lg, struct lg_group *g);

/* Bitmap with the low @size bits set. */
static inline uint64_t lg_all(const struct local_group *lg)
{
	return lg->size == 64 ? ~0ull : (1ull << lg->size) - 1;
}

#endif /* TALLY_CTRL_LOCAL_GROUP_H */
