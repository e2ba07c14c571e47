/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * daemon.h - tallyd's state on one host: the client socket and the
 * connections saying HELLO, the table of admitted clients, the table of
 * jobs they belong to, and the event loop around them.  The top of the
 * ctrl/ layers (client.h has the map).
 */
#ifndef TALLY_CTRL_DAEMON_H
#define TALLY_CTRL_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctrl/client.h"
#include "ctrl/config.h"
#include "ctrl/job_table.h"
#include "ctrl/metrics.h"
#include "dataplane/reduce_pool.h"
#include "shm/fdpass.h"
#include "shm/proto.h"
#include "shm/ring.h"
#include "shm/segment.h"

/* A connection that has not completed its HELLO yet. */
struct daemon_conn {
	bool used;
	int sock;
	pid_t pid;
	uid_t uid;
	uint64_t deadline_ns;	/* dropped if still silent by then */
	struct msg_rx rx;
	/* the job description that follows a HELLO (proto.h) */
	bool hello_done;	/* rx holds the whole HELLO */
	struct tally_job_wire job;
	size_t job_len, job_got;
};

/* Connections waiting for their HELLO at once; more are refused. */
#define DAEMON_MAX_PENDING TALLY_MAX_PENDING
/* A connection has this long to send its whole HELLO. */
#define DAEMON_HELLO_TIMEOUT_NS 2000000000ull

/* Clients the daemon serves at once, over all its jobs. */
#define DAEMON_MAX_CLIENTS 256
/* Jobs at once: service.max_jobs is at most this. */
#define DAEMON_MAX_JOBS 1024

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
		int clients, jobs;
	} notify;
	bool stop;
	int n_clients;
	struct daemon_client clients[DAEMON_MAX_CLIENTS];
	struct daemon_conn pending[DAEMON_MAX_PENDING];
	int conn_timer_fd;		/* sweeps pending connections */
	bool conn_timer_armed;
	uint64_t stat_conns_refused;
	uint64_t stat_limit_refusals;	/* connections and segments */
	struct job_table jobs;
	struct job *static_job;		/* the command line's; NULL: service */
	struct reduce_pool *reducer;
	uint64_t stat_ctl_queries, stat_ctl_refused;
	uint64_t start_ns;		/* for the uptime */
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

/* job_desc.c: the job a HELLO names.  Check a client's description
 * (0, or -TALLY_EDENIED with @why set), and make a job's configuration
 * from the daemon's and the description. */
int daemon_job_desc_check(const struct tally_config *cfg,
			  const struct tally_job_wire *w, const char **why);
void daemon_job_config(const struct tally_config *base,
		       const struct tally_job_wire *w,
		       struct tally_config *out);
/* job_service.c: a service's job for the description @w of a client of
 * @uid: the running one of its id, or a new one.  NULL with @status
 * (-TALLY_E*) and @why set. */
struct job *daemon_service_job(struct tallyd *d,
			       const struct tally_job_wire *w, uid_t uid,
			       int *status, const char **why);
/* Count a refusal over a limit; *@why = @what; returns -TALLY_ELIMIT. */
int daemon_limit_hit(struct tallyd *d, const char **why, const char *what);

/* submit.c */
int daemon_drain_sq(struct tallyd *d, struct daemon_client *cl);

/* collect.c: the one place the metrics and tally-ctl read the daemon's
 * numbers from.  0 or -1 (out of memory). */
int daemon_collect_metrics(struct tallyd *d, struct metrics *m);
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
