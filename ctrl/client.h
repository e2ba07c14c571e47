/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.h - the bottom of tallyd's ctrl/ layers: one admitted client
 * process, its rings, doorbells and shared segments, and completing its
 * requests.  Knows nothing of jobs, groups or the cluster; the job a
 * client belongs to is a pointer it carries for the layers above.
 *
 *   client.c  <-  local_group.c  <-  cluster*.c  <-  job.c  <-  job_table.c
 *             <-  admission.c, submit.c, loop.c, collect.c (struct tallyd)
 *
 * (docs/architecture.md, "The daemon's layers").
 */
#ifndef TALLY_CTRL_CLIENT_H
#define TALLY_CTRL_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/fdpass.h"
#include "shm/proto.h"
#include "shm/ring.h"
#include "shm/segment.h"

struct job;

struct daemon_seg {
	uint32_t id;		/* 0: unused */
	uint32_t refs;		/* pending operations pointing into it */
	bool deleted;		/* client freed it; unmap at refs == 0 */
	struct segment seg;
};

struct daemon_client {
	bool active;
	int slot;		/* in the daemon's client table: epoll tags */
	int rank;		/* local rank within its job */
	int sock;		/* non-blocking; only the daemon holds it */
	int sq_kick_fd;		/* pipe read end: the client rings us */
	int cq_kick_fd;		/* pipe write end: we ring the client */
	pid_t pid;
	uid_t uid;
	struct job *job;	/* the job it is a member of */
	struct segment ctrl;
	struct ring sq, cq;
	uint32_t cq_entries;
	uint32_t outstanding;	/* consumed sqes not yet completed */
	bool doomed;		/* broke the protocol: drop it soon */
	struct msg_rx rx;	/* the control message being received */
	uint64_t bad_requests;	/* refused descriptors (logs are capped) */
	uint64_t seg_bytes;	/* bytes of its segments now mapped */
	uint32_t n_segs;	/* segments now registered */
	struct daemon_seg segs[TALLY_MAX_SEGMENTS];
};

/* Complete one request: push the cqe, ring the client when it sleeps.
 * A ring that cannot take it (corrupt) dooms the client. */
void client_complete(struct daemon_client *cl, uint64_t user_data, int res);
/* with TALLY_CQE_F_* @flags */
void client_complete_flags(struct daemon_client *cl, uint64_t user_data,
			   int res, uint32_t flags);

/* The live segment @id of @cl, or NULL. */
struct daemon_seg *client_seg_find(struct daemon_client *cl, uint32_t id);
/* Drop one reference; the last one of a freed segment unmaps it. */
void client_seg_put(struct daemon_seg *s);

/* Count one refused request of @cl; true if it should be logged (the
 * first few, then one in many: a flood must not flood the log). */
bool client_log_bad(struct daemon_client *cl);

/* Unmap every segment and the rings, close the socket and doorbells.
 * The caller has taken the fds out of its epoll set. */
void client_release(struct daemon_client *cl);

#endif /* TALLY_CTRL_CLIENT_H */
