/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * membership.h - who is in the job: registration with the coordinator
 * (rank 0), the roster, heartbeats and failure detection, over one TCP
 * connection per member (see bootstrap.h for the messages).
 *
 * Runs inside tallyd's event loop, one membership per job: its sockets are
 * in the daemon's epoll set (tags TAG_JOB_SOCK(TAG_BOOT, tag_job, slot),
 * the listener's TAG_JOB_SOCK(TAG_BOOT_LISTEN, tag_job, 0)) and
 * membership_tick() runs at least every heartbeat interval.  Nothing
 * blocks: a member's connection to the coordinator is a non-blocking
 * connect, retried after MB_RETRY_MS, doubling to MB_RETRY_MAX_MS (from
 * membership_tick(), so no faster than it ticks), until
 * connect_timeout_ms after membership_start();
 * the coordinator's CHALLENGE is then read from the event loop and the
 * REGISTER sent.  Past the deadline on_lost says which step failed.
 *
 * Failure rules: a member whose connection closes, or that is silent for
 * peer_timeout_ms, is dropped by the coordinator, which announces it
 * (PEER_DOWN) and sends the survivors a new roster (next epoch).  A member
 * that loses the coordinator the same way reports it through on_lost and
 * has no job any more (the coordinator is the job's single point of
 * failure, like a PMIx server or a Gloo store).  A rank may register again
 * later (a restarted daemon): it joins the next epoch.
 *
 * Authentication (auth.h): every message but the coordinator's opening
 * CHALLENGE carries a MAC under per-connection keys from the job secret
 * and both sides' nonces.  A registration whose MAC fails is REFUSEd
 * (REFUSE_AUTH) and its connection closed; any later message whose MAC
 * fails ends the connection (a member's) or the job (the coordinator's).
 * Each failure is counted in auth_failures and logged, at most once a
 * second.
 */
#ifndef TALLY_CTRL_MEMBERSHIP_H
#define TALLY_CTRL_MEMBERSHIP_H

#include <stdbool.h>
#include <stdint.h>

#include "ctrl/bootstrap.h"

#define MB_MAX_CONNS (BOOT_MAX_MEMBERS + 8)
/* A refused connect is tried again after MB_RETRY_MS, doubling with each
 * try up to MB_RETRY_MAX_MS: a job's hosts usually find their coordinator
 * within milliseconds of each other, a coordinator that is late is not
 * hammered. */
#define MB_RETRY_MS 5
#define MB_RETRY_MAX_MS 100
#define MB_CHALLENGE_MS 1000	/* at least this long for the CHALLENGE */

struct membership_cfg {
	struct boot_member self;	/* rank, role, local size, data addr */
	uint16_t world;			/* members in the job */
	uint8_t algorithm;
	uint8_t dp_threads;		/* shards per daemon: all alike (0: 1) */
	uint8_t dp_profile;		/* enum tly_profile: all alike */
	uint8_t compression;		/* enum tly_codec: all alike */
	uint32_t job_key;
	uint16_t k;
	uint32_t pool_slots;
	uint32_t coord_ip;		/* host byte order */
	uint16_t coord_port;
	uint32_t heartbeat_ms;
	uint32_t peer_timeout_ms;
	uint32_t connect_timeout_ms;
	struct auth_keys keys;		/* from the job secret */
	/* Before the first roster, a refusal by job key or secret means
	 * another job's coordinator may still hold the port (a host
	 * service's ended job): retry until connect_timeout_ms instead of
	 * losing the job at once. */
	bool retry_other_job;
	uint16_t tag_job;		/* the job's slot in epoll tags (0: a
					 * daemon of one job) */
};

/* Where a member stands with the coordinator. */
enum mb_join {
	MB_JOIN_RETRY,		/* no socket: connect again at retry_ms */
	MB_JOIN_CONNECTING,	/* non-blocking connect, EPOLLOUT */
	MB_JOIN_CHALLENGE,	/* connected, waiting for the CHALLENGE */
	MB_JOIN_REGISTERED,	/* REGISTER sent: heartbeats, rosters */
};

struct mb_conn {
	int fd;				/* -1: unused */
	int rank;			/* -1 until it registered */
	bool keyed;			/* tx/rx set up (after REGISTER) */
	uint8_t nonce_c[AUTH_NONCE_LEN];	/* the coordinator's */
	struct auth_stream tx, rx;
	uint64_t last_rx_ms, last_tx_ms;
	size_t rlen;
	/* BOOT_MAX_MSG bytes while fd >= 0 (conn_attach()), else NULL:
	 * a ROSTER with thread MAC tables may take 27 KB, and a coordinator
	 * has MB_MAX_CONNS connections, so a buffer each inside the struct
	 * made every job's membership_start() fault in 7 MB */
	uint8_t *rbuf;
};

struct membership_ops {
	/* a (new) roster: every member, workers first; epoch increases */
	void (*roster)(void *ctx, const struct boot_msg *roster);
	/* the member of @rank left or broke its job (why: for the log) */
	void (*peer_down)(void *ctx, int rank, const char *why);
	/* we lost the coordinator or were refused: no job any more */
	void (*lost)(void *ctx, const char *why);
	void *ctx;
};

struct membership {
	struct membership_cfg cfg;
	struct membership_ops ops;
	int epoll_fd;
	bool coordinator;
	int listen_fd;
	uint32_t epoch;
	bool formed;			/* a roster was sent at least once */
	bool dead;			/* lost the job */
	uint64_t last_tick_ms;		/* our own last membership_tick */
	uint64_t auth_failures;		/* messages whose MAC failed */
	uint64_t auth_log_ms;		/* last such log line */
	struct boot_member reg[BOOT_MAX_MEMBERS];
	bool present[BOOT_MAX_MEMBERS];
	struct mb_conn conn[MB_MAX_CONNS];	/* coordinator: members;
						 * member: conn[0] = up */
	/* member: joining the coordinator */
	enum mb_join join;
	uint64_t start_ms;		/* membership_start */
	uint64_t retry_ms;		/* MB_JOIN_RETRY: next connect */
	uint64_t connected_ms;		/* TCP connection established */
	int connect_err;		/* the last connect's errno */
	uint32_t connect_tries;
};

/*
 * Start: the coordinator listens; a member starts connecting and returns
 * at once (it registers from membership_event()/membership_tick(), or
 * reports on_lost past connect_timeout_ms).  0, or -1 with a message
 * logged on a local error (no socket, no listening, epoll).
 */
int membership_start(struct membership *m, const struct membership_cfg *cfg,
		     const struct membership_ops *ops, int epoll_fd);
void membership_stop(struct membership *m);

/* An epoll event on one of our sockets (tag from the event's data; a
 * tag of another job is ignored). */
void membership_event(struct membership *m, uint64_t tag, uint64_t now_ms);
/* Heartbeats and timeouts; a joining member's connect retries. */
void membership_tick(struct membership *m, uint64_t now_ms);
/* A member still reaching its coordinator (retrying, connecting, waiting
 * for the challenge): it wants membership_tick() every few ms. */
bool membership_joining(const struct membership *m);
/* Tell the coordinator our local job broke (every host must fail it). */
void membership_abort(struct membership *m);

#endif /* TALLY_CTRL_MEMBERSHIP_H */
