/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * local_fast.h - the daemon's side of the local fast path (shm/fast.h,
 * docs/local-fast-path.md): the table a one-host job's clients all-reduce
 * small buffers in among themselves.  The daemon creates it when the
 * job's first member arrives, hands it to every member in its WELCOME,
 * and drops it when the last one left; in between it only ever aborts it
 * and settles operations whose members took different paths.
 */
#ifndef TALLY_CTRL_LOCAL_FAST_H
#define TALLY_CTRL_LOCAL_FAST_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/fast.h"
#include "shm/segment.h"

struct local_fast {
	struct segment seg;		/* base NULL: no table */
	struct tally_fast_layout l;	/* ours; the header is the clients' */
	uint64_t next_check_ns;
};

/* Is there a table?  (A job without one sends every request here.) */
static inline bool local_fast_on(const struct local_fast *f)
{
	return f->seg.base != NULL;
}

/* Create the table for @ranks members: @slots slots (fewer when they
 * would pass LOCAL_FAST_MAX_TABLE) of @max_bytes rounded up to 64.
 * 0 or -TALLY_ENOMEM. */
#define LOCAL_FAST_MAX_TABLE (16u << 20)
int local_fast_create(struct local_fast *f, unsigned int ranks,
		      unsigned int slots, uint64_t max_bytes);
void local_fast_destroy(struct local_fast *f);

/* The members' requests that ended in the table, done and failed, as
 * they count them (a metric, trusted for nothing else); 0 without one. */
void local_fast_counts(const struct local_fast *f, uint64_t *done,
		       uint64_t *failed);

/* Fail everything waiting in the table with -@code (a member left). */
void local_fast_abort(struct local_fast *f, int code);

/*
 * Members @ranks submitted (key, iteration) to the daemon: if the others
 * opened it in the table, mark @ranks there as arrived with a mismatch,
 * completing it with TALLY_EMISMATCH when nobody else is missing.  True
 * when it was there (the caller fails its own group with EMISMATCH).
 */
bool local_fast_cross(struct local_fast *f, uint64_t key, uint64_t iteration,
		      uint64_t ranks);

#endif /* TALLY_CTRL_LOCAL_FAST_H */
