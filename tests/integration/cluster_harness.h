/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_harness.h - several tallyd daemons forming one job, and client
 * processes on each of them, for the multi-host integration tests.
 */
#ifndef TALLY_TESTS_CLUSTER_HARNESS_H
#define TALLY_TESTS_CLUSTER_HARNESS_H

#include "harness.h"

#define CL_MAX_DAEMONS 8
#define CL_LOCAL 2		/* clients per worker host */

struct cluster_spec {
	int workers;			/* hosts with clients */
	int aggregators;		/* dedicated aggregator daemons */
	const char *role;		/* of the workers */
	const char *algorithm;
	const char *transport;		/* udp (default) or dpdk */
	const char *const *extra;	/* more tallyd arguments, NULL-ended */
	/* and more for the workers / for the aggregators only (after extra:
	 * a later --set wins), NULL-ended or NULL */
	const char *const *extra_worker;
	const char *const *extra_agg;
	/* data ports this far apart (0: 1); dataplane.threads = N takes
	 * port + 0 .. N-1 */
	int port_stride;
	/* dpdk: per daemon, run inside this netns with these EAL args */
	const char *netns[CL_MAX_DAEMONS];
	const char *eal_args[CL_MAX_DAEMONS];
	const char *ip[CL_MAX_DAEMONS];	/* data addresses (default loopback) */
	const char *coord_ip;		/* default: ip[0] */
	const char *mac[CL_MAX_DAEMONS];
	/* a daemon's own secret file (default: the shared secret, below) */
	const char *secret_file[CL_MAX_DAEMONS];
};

struct test_cluster {
	int n;
	int base;			/* the coordinator's port */
	struct test_daemon d[CL_MAX_DAEMONS];
};

/* Every multi-host job needs a job secret (ctrl/auth.h): the daemons of
 * a test job share $TALLY_JOB_SECRET, set here unless the caller did.
 * cluster_up() calls it; tests that start daemons alone call it too. */
void cluster_default_secret(void);

/* Start every daemon (rank 0 first) and wait until each client socket
 * accepts.  0 or -1. */
int cluster_up(struct test_cluster *tc, const struct cluster_spec *spec);
/* Start rank @r of @spec again (stopping it first if it still runs), as
 * a host whose daemon restarted: same rank, address and arguments.  0 or
 * -1. */
int cluster_restart(struct test_cluster *tc, const struct cluster_spec *spec,
		    int r);
/* Print every daemon's warnings and errors so far (a failed test says
 * why: which peer was lost and how). */
void cluster_show_warnings(const struct test_cluster *tc);
/* Stop all; returns the number of daemons that did not exit cleanly. */
int cluster_down(struct test_cluster *tc);
/* tally_transport_sent_bytes_total of the daemon at @sock (tally-ctl at
 * $TALLY_CTL, --json counters), once its dataplane threads published it:
 * the bytes its transports sent (what tools/compress-study reads); -1 on
 * failure */
double cluster_sent_bytes(const char *sock);

/* Stop every daemon (SIGTERM, then wait up to 5 s), the last first, and
 * keep their files (logs) for cluster_down(); returns the number that did
 * not exit cleanly (each said on stderr). */
int cluster_terminate(struct test_cluster *tc);

/*
 * cluster_terminate(), then read the closing
 * counters each logged per dataplane thread.  Every daemon must have
 * exited cleanly, and each of its @threads threads must have received
 * and sent frames: returns the number of daemons for which either fails
 * (each said on stderr).  *passed_out, *passed_in sum the frames threads
 * passed to other threads and took from them (dpdk's software split).
 * The daemons' files stay for cluster_down().
 */
int cluster_stop_check_threads(struct test_cluster *tc, unsigned int threads,
			       unsigned long long *passed_out,
			       unsigned long long *passed_in);

#endif /* TALLY_TESTS_CLUSTER_HARNESS_H */
