/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_clients.h - the training processes of the multi-host tests:
 * every client of every host all-reduces the same sequence of tensors and
 * checks the result against the exact sum over all processes.
 */
#ifndef TALLY_TESTS_CLUSTER_CLIENTS_H
#define TALLY_TESTS_CLUSTER_CLIENTS_H

#include <stdbool.h>
#include <stdint.h>

#include <tally/tally.h>

#include "cluster_harness.h"

struct client_job {
	const char *sock;	/* its host's daemon */
	int host;		/* index among the worker hosts */
	int hosts;		/* worker hosts in the job */
	bool float_types;	/* also float16 and bfloat16 */
	int rounds;		/* how many times the sequence repeats */
	uint64_t first_iteration;
	int expect_error;	/* 0, or the error every op must end with */
	int go_fd;		/* -1, or read one byte before starting */
	/* NULL, or (shared with the parent) when the expected error came,
	 * test_now_ms(), one slot per local rank: a client's exit may be
	 * slow in the kernel, so its reaping is no measure of it */
	_Atomic uint64_t *error_seen_ms;
};

/* Fork one client per local rank of every worker host; wait for all.
 * Returns the number of clients that failed. */
int run_cluster_clients(struct test_cluster *tc, int hosts,
			struct client_job proto, int timeout_ms);

int client_job_main(void *arg);

/* Store @v as element @i of @buf in dtype @t (half types rounded to
 * nearest even, as the daemon's kernels). */
void store_value(void *buf, enum tally_dtype t, size_t i, double v);

/*
 * Start the job of @spec, run @rounds of the checked tensor sequence on
 * every worker host, stop the job.  Returns the number of clients that
 * failed plus the number of daemons that did not exit cleanly (0: good),
 * or -1 if the job did not start.
 */
int run_checked_job(const struct cluster_spec *spec, int rounds,
		    bool float_types, int timeout_ms);

/*
 * Kill the last host's daemon @run_ms into a run in which every client
 * has work in flight.  The other hosts' clients must end with
 * TALLY_EPEERLOST and the victim's with TALLY_EDAEMONLOST, nothing may
 * hang; then the survivors run a new job, checked.  Returns the number of
 * clients that failed (0: all good); *took_ms is how long after the
 * killed process was gone the last client had its error.
 */
int kill_mid_run(struct test_cluster *tc, int hosts, int run_ms,
		 uint64_t *took_ms);

#endif /* TALLY_TESTS_CLUSTER_CLIENTS_H */
