/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * job_table.h - the jobs of one daemon: finding a job by its id,
 * starting one for a new id within the limit, and retiring the ones
 * whose members have all left (after a linger, during which the job's
 * aggregator shard still answers its peers' retransmissions).  Counters
 * of retired jobs are kept so the daemon's totals never go back.
 */
#ifndef TALLY_CTRL_JOB_TABLE_H
#define TALLY_CTRL_JOB_TABLE_H

#include <stdint.h>

#include "ctrl/job.h"

struct job_table {
	struct job *jobs;		/* [cap] */
	int cap;
	int n_used;
	uint32_t started;		/* jobs started so far */
	uint64_t retired;		/* jobs ended so far */
	struct job_stats past;		/* the retired jobs' counters */
	uint64_t past_members;		/* clients the retired jobs had */
};

int job_table_init(struct job_table *t, int cap);
/* Stop every job (their members are gone) and free the table. */
void job_table_fini(struct job_table *t);

/* The live job of @id, or NULL. */
struct job *job_table_find(struct job_table *t, const char *id);
/* A free, zeroed slot (slot and serial set) for a new job, or NULL when
 * @limit jobs run already. */
struct job *job_table_alloc(struct job_table *t, int limit);
/* Start @j (from job_table_alloc, its configuration filled). 0 or -1. */
int job_table_start(struct job_table *t, struct job *j,
		    const struct job_env *env);
/* End @j: stop it, keep its counters in t->past. */
void job_table_retire(struct job_table *t, struct job *j);
/* Retire the jobs (not the static one) empty for @linger_ns or more, or
 * any empty one when @force.  Returns how many were retired. */
int job_table_reap(struct job_table *t, uint64_t now_ns, uint64_t linger_ns,
		   bool force);

#define job_table_for_each(t, j) \
	for ((j) = (t)->jobs; (j) < (t)->jobs + (t)->cap; (j)++) \
		if ((j)->used)

#endif /* TALLY_CTRL_JOB_TABLE_H */
