/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * daemon.h - tallyd's state on one host: admitted clients, their shared
 * segments and rings, and the local group that all-reduces among them.
 */
#ifndef TALLY_CTRL_DAEMON_H
#define TALLY_CTRL_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctrl/cluster.h"
#include "ctrl/config.h"
#include "ctrl/local_group.h"
#include "ctrl/metrics.h"
#include "dataplane/reduce_pool.h"
#include "shm/fdpass.h"
#include "shm/proto.h"
#include "shm/ring.h"
#include "shm/segment.h"

struct daemon_seg {
	uint32_t id;		/* 0: unused */
	uint32_t refs;		/* pending operations pointing into it */
	bool deleted;		/* client freed it; unmap at refs == 0 */
	struct segment seg;
};

/* A connection that has not completed its HELLO yet. */
struct daemon_conn {
	bool used;
	int sock;
	pid_t pid;
	uid_t uid;
	uint64_t deadline_ns;	/* dropped if still silent by then */
	struct msg_rx rx;
};

/* Connections waiting for their HELLO at once; more are refused. */
#define DAEMON_MAX_PENDING TALLY_MAX_PENDING
/* A connection has this long to send its whole HELLO. */
#define DAEMON_HELLO_TIMEOUT_NS 2000000000ull

struct daemon_client {
	bool active;
	int rank;
	int sock;		/* non-blocking; only the daemon holds it */
	int sq_kick_fd;		/* pipe read end: the client rings us */
	int cq_kick_fd;		/* pipe write end: we ring the client */
	pid_t pid;
	uid_t uid;
	struct segment ctrl;
	struct ring sq, cq;
	uint32_t cq_entries;
	uint32_t outstanding;	/* consumed sqes not yet completed */
	bool doomed;		/* broke the protocol: drop it soon */
	struct msg_rx rx;	/* the control message being received */
	uint64_t bad_requests;	/* refused descriptors (logs are capped) */
	struct daemon_seg segs[TALLY_MAX_SEGMENTS];
};

/* all-reduce size classes of the latency histograms (collect.c) */
#define DAEMON_SIZE_CLASSES 5

struct metrics_http;

struct tallyd {
	struct tally_config cfg;
	int listen_fd;
	int epoll_fd;
	int signal_fd;		/* SIGINT, SIGTERM, SIGHUP (see tallyd.c) */
	/* the command line, parsed again on SIGHUP (reload.c) */
	int argc;
	char **argv;
	struct {			/* what notify.c last told systemd */
		bool ready;
		bool broken;
		int clients;
	} notify;
	bool stop;
	/* Set when a member left while others remain: every pending and new
	 * operation fails with TALLY_EPEERLOST until all members are gone. */
	bool job_broken;
	int n_clients;
	struct daemon_client clients[CONFIG_MAX_LOCAL_SIZE];
	struct daemon_conn pending[DAEMON_MAX_PENDING];
	int conn_timer_fd;		/* sweeps pending connections */
	bool conn_timer_armed;
	uint64_t stat_conns_refused;
	struct local_group groups;
	struct reduce_pool *reducer;
	struct cluster *cluster;	/* NULL when this host is alone */
	struct watchdog *watchdog;	/* NULL when daemon.stuck_ms = 0 */
	bool cluster_aborted;		/* told the job our local job broke */
	uint64_t stat_ops_done, stat_ops_failed, stat_bytes_reduced;
	uint64_t stat_ctl_queries, stat_ctl_refused;
	uint64_t start_ns;		/* for the uptime */
	/* local groups' submission-to-completion time by size class */
	struct metrics_hist op_latency[DAEMON_SIZE_CLASSES];
	struct metrics_http *metrics_http;	/* NULL: metrics.listen off */
};

/* admission.c */
int daemon_listen(struct tallyd *d);
void daemon_accept(struct tallyd *d);
/* Take the connected, non-blocking @sock as a pending connection: its
 * HELLO is read now or on later events (daemon_conn_event), and WELCOME
 * replied; the socket is closed when the client is refused. */
void daemon_admit(struct tallyd *d, int sock);
void daemon_conn_event(struct tallyd *d, int slot);
void daemon_conns_close(struct tallyd *d);
void daemon_client_ctrl(struct tallyd *d, struct daemon_client *cl);
void daemon_client_drop(struct tallyd *d, struct daemon_client *cl,
			const char *why);
struct daemon_seg *daemon_seg_find(struct daemon_client *cl, uint32_t id);
void daemon_seg_put(struct daemon_seg *s);
/* Fail every pending local group with TALLY_EPEERLOST; the local job stays
 * broken (new operations fail too) until all its clients have left. */
void daemon_abort_job(struct tallyd *d, const char *why);

/* submit.c */
int daemon_drain_sq(struct tallyd *d, struct daemon_client *cl);
void daemon_complete(struct tallyd *d, struct daemon_client *cl,
		     uint64_t user_data, int res);
/* Count one refused request of @cl; true if it should be logged. */
bool daemon_log_bad(struct daemon_client *cl);

/* collect.c: the one place the metrics and tally-ctl read the daemon's
 * numbers from.  0 or -1 (out of memory). */
int daemon_collect_metrics(struct tallyd *d, struct metrics *m);
void daemon_metrics_init(struct tallyd *d);
/* A local group of @bytes completed: its latency goes to the histogram. */
void daemon_observe_op(struct tallyd *d, const struct lg_op *op,
		       uint64_t bytes);
/* A CTL_QUERY arrived on pending connection @sock: reply and return. */
void daemon_ctl_reply(struct tallyd *d, int sock, const struct tally_msg *q);

/* loop.c */
int daemon_run(struct tallyd *d);

/* reload.c: SIGHUP.  Parse the command line (and its --config file) again
 * and apply what can change while the daemon runs; a configuration with
 * errors is refused whole and the running one kept. */
void daemon_reload(struct tallyd *d);
/* Can section.key change without a restart? */
bool daemon_key_reloadable(const char *section, const char *key);

#endif /* TALLY_CTRL_DAEMON_H */
