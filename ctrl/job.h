/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * job.h - one job on this host: its members (clients), local groups,
 * cluster (when the job spans hosts), watchdog and counters.
 *
 * A job is isolated from every other job on the daemon: its clients'
 * submissions match only in its own local groups, its cluster has its
 * own membership, transport port, wire job id, engine and scheduler, and
 * an abort (a member gone, a mismatch, a peer host lost) fails only its
 * own operations.  The job never sees the daemon (struct tallyd): what it
 * needs comes in struct job_env, and it reaches its clients through
 * client.h only.
 */
#ifndef TALLY_CTRL_JOB_H
#define TALLY_CTRL_JOB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctrl/client.h"
#include "ctrl/config.h"
#include "ctrl/local_fast.h"
#include "ctrl/local_group.h"
#include "ctrl/metrics.h"
#include "shm/proto.h"

struct cluster;
struct reduce_pool;
struct watchdog;

/* all-reduce size classes of the latency histograms */
#define JOB_SIZE_CLASSES 5
const char *job_size_class_name(int cls);

struct job_stats {
	uint64_t ops_done, ops_failed, bytes_reduced;
	/* what the fast-path tables of ended runs counted */
	uint64_t fast_done_past, fast_failed_past;
	uint64_t limit_refusals;	/* requests over a limit */
	uint64_t stuck_reports;		/* of retired jobs (job_table.c) */
	/* local groups' submission-to-completion time by size class */
	struct metrics_hist op_latency[JOB_SIZE_CLASSES];
};

/* What the daemon lends a job. */
struct job_env {
	struct reduce_pool *reducer;
	int epoll_fd;
};

struct job {
	bool used;
	uint16_t slot;			/* in the job table: epoll tags */
	bool static_job;		/* the command line's: never ends */
	char id[TALLY_JOB_ID_MAX];
	uint32_t serial;		/* jobs started before it, + 1 */
	/* the daemon's configuration with this job's membership in it
	 * (rank, world, coordinator, job key, local size, data port) */
	struct tally_config cfg;
	uint8_t secret[TALLY_JOB_SECRET_MAX];
	uint32_t secret_len;
	uid_t uid;			/* its clients' user */
	struct job_env env;
	struct local_group groups;
	/* one host alone: the members' own table for small all-reduces,
	 * from the first member's arrival to the last one's leaving */
	struct local_fast fast;
	struct daemon_client *members[CONFIG_MAX_LOCAL_SIZE];
	int n_members;
	int ever_members;		/* clients it admitted in all */
	/* Set when a member left while others remain: every pending and new
	 * operation fails with TALLY_EPEERLOST until all members are gone. */
	bool broken;
	bool cluster_aborted;		/* told the other hosts we broke */
	struct cluster *cluster;	/* NULL: this host alone */
	struct watchdog *watchdog;	/* NULL: daemon.stuck_ms = 0 */
	uint64_t start_ns;
	uint64_t empty_since_ns;	/* 0 while it has members */
	struct job_stats st;
};

/* Set up @j (zeroed by the caller, cfg/id/secret/slot filled) and start
 * its cluster when cfg.world > 1.  0 or -1 (logged). */
int job_start(struct job *j, const struct job_env *env);
/* Fail what is pending, stop the cluster, free everything. */
void job_stop(struct job *j);

/* Take @cl as local rank @rank.  0, or -TALLY_EDENIED with @why set. */
int job_member_add(struct job *j, struct daemon_client *cl, int rank,
		   const char **why);
/* Undo job_member_add() of a client that never learnt it was admitted
 * (its WELCOME could not be sent): nothing of it can be pending. */
void job_member_undo(struct job *j, struct daemon_client *cl);
/* @cl leaves (disconnected, dropped): its pending operations fail, and
 * the job is aborted when it had operations pending. */
void job_member_left(struct job *j, struct daemon_client *cl);

/* One submission of member @cl. */
void job_submit(struct job *j, struct daemon_client *cl,
		const struct tally_sqe *s);

/* Fail every pending local group with TALLY_EPEERLOST; the job stays
 * broken (new operations fail too) until all its members are gone. */
void job_abort(struct job *j, const char *why);

/* The network side: receive, timers, transmit.  Work done. */
int job_poll(struct job *j, uint64_t now_ns);
/* Members' operations ended, the daemon's and the fast path's (what its
 * table counts, docs/local-fast-path.md); fast: of them, the latter. */
struct job_ops {
	uint64_t done, failed, fast_done;
};
struct job_ops job_ops(const struct job *j);
/* How long the loop may sleep for this job (-1: no limit). */
int64_t job_sleep_ns(struct job *j, uint64_t now_ns);
/* An epoll event on one of the job's sockets. */
void job_event(struct job *j, uint64_t tag);

/* Is the job ready for work (a multi-host job: its roster arrived)? */
bool job_joined(const struct job *j);
/* Has its cluster been lost for good (or never started)? */
bool job_dead(const struct job *j);

/* A new daemon.stuck_ms (SIGHUP). */
void job_set_stuck_ms(struct job *j, int stuck_ms);

#endif /* TALLY_CTRL_JOB_H */
