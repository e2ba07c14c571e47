// SPDX-License-Identifier: BSD-3-Clause
/*
 * job_table.c - the daemon's jobs (see job_table.h).
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/job_table.h"
#include "ctrl/log.h"
#include "ctrl/watchdog.h"

int job_table_init(struct job_table *t, int cap)
{
	memset(t, 0, sizeof(*t));
	t->jobs = calloc((size_t)cap, sizeof(*t->jobs));
	if (!t->jobs)
		return -1;
	t->cap = cap;
	return 0;
}

void job_table_fini(struct job_table *t)
{
	struct job *j;

	if (!t->jobs)
		return;
	job_table_for_each(t, j)
		job_table_retire(t, j);
	free(t->jobs);
	t->jobs = NULL;
}

struct job *job_table_find(struct job_table *t, const char *id)
{
	struct job *j;

	job_table_for_each(t, j)
		if (!strcmp(j->id, id))
			return j;
	return NULL;
}

struct job *job_table_alloc(struct job_table *t, int limit)
{
	if (t->n_used >= limit)
		return NULL;
	for (int i = 0; i < t->cap; i++) {
		struct job *j = &t->jobs[i];

		if (j->used)
			continue;
		memset(j, 0, sizeof(*j));
		j->slot = (uint16_t)i;
		j->serial = ++t->started;
		return j;
	}
	return NULL;
}

int job_table_start(struct job_table *t, struct job *j,
		    const struct job_env *env)
{
	if (job_start(j, env))
		return -1;
	t->n_used++;
	return 0;
}

void job_table_retire(struct job_table *t, struct job *j)
{
	struct job_ops ops;

	if (!j->used)
		return;
	ops = job_ops(j);
	log_info("job %s ended: %d client(s) in all, %llu operations done, "
		 "%llu failed", j->id, j->ever_members,
		 (unsigned long long)ops.done, (unsigned long long)ops.failed);
	t->past.ops_done += ops.done;
	t->past.ops_failed += ops.failed;
	t->past.bytes_reduced += j->st.bytes_reduced;
	t->past.limit_refusals += j->st.limit_refusals;
	t->past.stuck_reports += watchdog_stats(j)->reports;
	for (int i = 0; i < JOB_SIZE_CLASSES; i++)
		metrics_hist_add(&t->past.op_latency[i],
				 &j->st.op_latency[i]);
	t->past_members += (uint64_t)j->ever_members;
	job_stop(j);
	/* a job's large buffers (transport rings, engine tables) went back
	 * to the heap, between blocks that live on: give their pages back
	 * to the system, or the resident size climbs with every job (about
	 * 150 KB a job, test_hundred_jobs_no_leak) */
	malloc_trim(0);
	t->n_used--;
	t->retired++;
}

int job_table_reap(struct job_table *t, uint64_t now_ns, uint64_t linger_ns,
		   bool force)
{
	struct job *j;
	int n = 0;

	job_table_for_each(t, j) {
		if (j->static_job || j->n_members || !j->empty_since_ns)
			continue;
		if (!force && now_ns - j->empty_since_ns < linger_ns)
			continue;
		job_table_retire(t, j);
		n++;
	}
	return n;
}
