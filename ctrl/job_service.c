// SPDX-License-Identifier: BSD-3-Clause
/*
 * job_service.c - a host service's job of a client: the running job of
 * the id its description names, or a new one started within the limits
 * (docs/jobs.md, "Daemon side").
 */
#include <stdio.h>
#include <string.h>

#include <tally/tally.h>
#include "ctrl/daemon.h"
#include "ctrl/log.h"

/* A refusal over a limit: counted apart, so operators see limits hit. */
int daemon_limit_hit(struct tallyd *d, const char **why, const char *what)
{
	d->stat_limit_refusals++;
	*why = what;
	return -TALLY_ELIMIT;
}

/* The job secret: the client's, else one derived from the job id (which
 * separates jobs but authenticates nothing: service.require_secret). */
static void job_secret(struct job *j, const struct tally_job_wire *w)
{
	if (w->secret_len) {
		memcpy(j->secret, w->secret, w->secret_len);
		j->secret_len = w->secret_len;
		return;
	}
	/* at least TALLY_JOB_SECRET_MIN bytes, whatever the id */
	j->secret_len = (uint32_t)snprintf((char *)j->secret,
					   sizeof(j->secret),
					   "tally job without a secret: %s",
					   w->id);
	if (j->secret_len >= sizeof(j->secret))
		j->secret_len = sizeof(j->secret) - 1;
	if (config_is_cluster(&j->cfg))
		log_warn("job %s has no secret: its hosts authenticate "
			 "nothing (set TALLY_JOB_SECRET)", j->id);
}

/* Does a running job match what a new client says of it? */
static bool job_matches(const struct job *j, const struct tally_job_wire *w,
			const struct tally_config *want)
{
	return j->cfg.world == want->world && j->cfg.rank == want->rank &&
	       j->cfg.local_size == want->local_size &&
	       j->cfg.coordinator.ip == want->coordinator.ip &&
	       j->cfg.coordinator.port == want->coordinator.port &&
	       (!w->secret_len || (w->secret_len == j->secret_len &&
				   !memcmp(w->secret, j->secret,
					   w->secret_len)));
}

/* An ended job lingering here (service.job_linger_ms) may hold the
 * coordinator port a new job needs: a rerun with the same rendezvous
 * (torchrun's MASTER_ADDR:MASTER_PORT).  The new job wins. */
static void end_lingering_coordinator(struct tallyd *d,
				      const struct tally_config *want)
{
	struct job *o;

	if (want->world <= 1 || want->rank != 0)
		return;
	job_table_for_each(&d->jobs, o)
		if (!o->static_job && !o->n_members && o->cfg.rank == 0 &&
		    o->cfg.world > 1 &&
		    o->cfg.coordinator.ip == want->coordinator.ip &&
		    o->cfg.coordinator.port == want->coordinator.port)
			job_table_retire(&d->jobs, o);
}

/* The service's job for the description @w of a client of @uid: the
 * running one of its id, or a new one.  NULL with @status and @why set. */
struct job *daemon_service_job(struct tallyd *d,
			       const struct tally_job_wire *w, uid_t uid,
			       int *status, const char **why)
{
	struct job_env env = { .reducer = d->reducer,
			       .epoll_fd = d->epoll_fd };
	struct tally_config want;
	struct job *j;

	*status = daemon_job_desc_check(&d->cfg, w, why);
	if (*status)
		return NULL;
	daemon_job_config(&d->cfg, w, &want);
	j = job_table_find(&d->jobs, w->id);
	if (j && !j->n_members) {
		/* an ended run of the same id lingers: a new run starts */
		job_table_retire(&d->jobs, j);
		j = NULL;
	}
	if (j) {
		*status = -TALLY_EDENIED;
		if (j->uid != uid)
			*why = "the job belongs to another user";
		else if (!job_matches(j, w, &want))
			*why = "the job's other clients on this host describe "
			       "it otherwise (hosts, ranks, local size, "
			       "coordinator or secret)";
		else if (j->broken || job_dead(j))
			*why = "job aborted, waiting for its members to leave";
		else if (j->n_members >= d->cfg.max_clients_per_job)
			*status = daemon_limit_hit(d, why, "too many clients in the "
					    "job (service.max_clients_per_job)");
		else
			*status = 0;
		return *status ? NULL : j;
	}
	if (w->local_size > d->cfg.max_clients_per_job) {
		*status = daemon_limit_hit(d, why, "too many clients in the job "
				    "(service.max_clients_per_job)");
		return NULL;
	}
	j = job_table_alloc(&d->jobs, d->cfg.max_jobs);
	if (!j && job_table_reap(&d->jobs, 0, 0, true))
		j = job_table_alloc(&d->jobs, d->cfg.max_jobs);
	if (!j) {
		*status = daemon_limit_hit(d, why, "too many jobs on this daemon "
				    "(service.max_jobs)");
		return NULL;
	}
	j->cfg = want;
	snprintf(j->id, sizeof(j->id), "%s", w->id);
	j->uid = uid;
	job_secret(j, w);
	log_info("job %s: host %u of %u, %u local process(es), coordinator "
		 "%u.%u.%u.%u:%u, job key %08x", j->id, w->host_rank, w->hosts,
		 w->local_size, want.coordinator.ip >> 24,
		 (want.coordinator.ip >> 16) & 0xff,
		 (want.coordinator.ip >> 8) & 0xff, want.coordinator.ip & 0xff,
		 want.coordinator.port, want.job_key);
	end_lingering_coordinator(d, &want);
	if (job_table_start(&d->jobs, j, &env)) {
		*status = -TALLY_ENETWORK;
		*why = "the job cannot start (see the daemon's log)";
		return NULL;
	}
	return j;
}
