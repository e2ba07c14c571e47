/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ef_cluster.h - what the error-feedback methods' cluster tests share
 * (test_cluster_sign_ef.c, test_cluster_sparse_ef.c): 2 tallyd hosts x
 * CL_LOCAL clients on the loopback, co-located aggregation, and the
 * client programs every method runs alike: convergence with the same
 * gradient every round, the bytes of one large tensor, and the refusals
 * of a submission.  Each test brings its method's invariant check.
 */
#ifndef TALLY_TESTS_INTEGRATION_EF_CLUSTER_H
#define TALLY_TESTS_INTEGRATION_EF_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <tally/tally.h>
#include "cluster_clients.h"

#define EF_HOSTS 2
#define EF_N 20011		/* elements of the tensors */
#define EF_ROUNDS 80
#define EF_NB (1u << 21)	/* elements of the tensor whose bytes count */

enum ef_mode {
	EF_INVARIANT,		/* the method's check, then the refusals */
	EF_CONVERGE,		/* the same g every round: the running mean */
	EF_CONVERGE_RESET,	/* the same, residuals reset every round */
	EF_CONVERGE_MERGED,	/* the same, two keys of one mgwfbp unit */
	EF_BYTES,		/* one EF_NB-element tensor, for the counters */
};

struct ef_job;

/* EF_INVARIANT's check of one process (rank @proc of the job) with two
 * EF_N-element float buffers in tally memory; 0 or a CHECK code */
typedef int (*ef_invariant_fn)(struct tally_client *c,
			       const struct ef_job *j, int proc, float *g,
			       float *r);

struct ef_job {
	const char *sock;
	int host;
	enum ef_mode mode;
	enum tally_compression method;	/* in the flags */
	ef_invariant_fn invariant;
	double *err;			/* shared: per process (CONVERGE) */
	float *results;			/* shared: for the invariant */
};

/* the daemons' options for the invariant runs: 1 % loss, 2 % reordered */
extern const char *const ef_lossy[];

/* magnitudes changing every 300 elements, over 2^-6 .. 2^6 */
float ef_value(int proc, size_t i, int round);

/* one EF_N-element float32 sum in method @m, waited for */
int ef_reduce(struct tally_client *c, float *send, float *recv,
	      uint64_t key, uint64_t it, enum tally_compression m);

/*
 * A job of EF_HOSTS daemons (@extra: their options) whose clients run
 * @mode in method @m.  EF_CONVERGE*: err[proc] = mean |mean_t r_t - 4 g|;
 * EF_BYTES: *err = the bytes the daemons' transports sent.  0, or how
 * many clients and daemons failed.
 */
int ef_run(const char *const *extra, enum ef_mode mode,
	   enum tally_compression m, ef_invariant_fn invariant, double *err,
	   float *results);

#endif /* TALLY_TESTS_INTEGRATION_EF_CLUSTER_H */
