// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_sparse_ef.c - block_topk10_ef (docs/compression.md
 * sections 4 and 5) through real tallyd daemons: 2 hosts x 2 clients over
 * kernel UDP on the loopback, co-located aggregation, loss.
 *
 * Error feedback lives in libtally.  Checked:
 *  - the invariant, on every process, over R rounds of different
 *    gradients per process: sum_t g_t - sum_t sent_t / L - e_R = 0 up to
 *    float32 rounding, 2^-23 sum_t (|p_t| + |e_t+1|) (sent and e read
 *    from the library's internals); each round the host sent at most
 *    ceil(10 % of the blocks) blocks of K = 256 ("sent" is zero in the
 *    others), at least one; both clients of a host get the same result;
 *  - convergence: with the same gradient g on every process every round,
 *    the running mean of the results nears the true sum 4 g, much closer
 *    than top-10 % without feedback (the same run with
 *    tally_ef_reset_all() before each round, which must match the error
 *    computed here: the 4 g of the blocks outside the top 10 %); also
 *    in bytescheduler partitions (top-k per partition) and with two keys
 *    merged into one mgwfbp unit;
 *  - a block with inf: non-finite on every process, its residual reset
 *    on the host that had it;
 *  - the bytes the daemons' transports sent (tally-ctl's counters) for a
 *    large tensor the hosts agree on: about a tenth of the int32 path's;
 *  - refusals: block_topk10_ef for an int32 tensor (-TALLY_EINVAL), a job
 *    with it and cluster.algorithm = ring or dataplane.profile = switch.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "ef_cluster.h"
#include "shm/client_internal.h"

#define N EF_N
#define K 256			/* the daemons' dataplane.k (a job with
				 * compression.method, or ef_lossy's) */
#define BLOCKS ((N + K - 1) / K)
#define TOPK ((BLOCKS + 9) / 10)
#define METHOD TALLY_COMPRESS_BLOCK_TOPK10_EF

/* blocks of K in which "sent" is not all zero */
static int blocks_sent(const float *sent)
{
	int n = 0;

	for (size_t b = 0; b < BLOCKS; b++)
		for (size_t i = b * K; i < (b + 1) * K && i < N; i++)
			if (sent[i] != 0) {
				n++;
				break;
			}
	return n;
}

static int invariant_main(struct tally_client *c, const struct ef_job *j,
			  int proc, float *g, float *r)
{
	double *sg = calloc(N, sizeof(double)), *ss = calloc(N, sizeof(double));
	double *slack = calloc(N, sizeof(double));
	const float *e;
	const void *sent;
	size_t i;
	int t, nb;

	CHECK(sg && ss && slack, 20);
	for (t = 0; t < EF_ROUNDS; t++) {
		for (i = 0; i < N; i++) {
			g[i] = ef_value(proc, i, t);
			sg[i] += g[i];
		}
		/* p_t = g_t + e_t, before the library takes it */
		if (t) {
			CHECK(!client_ef_peek(c, 1, N, &e, &sent), 21);
			for (i = 0; i < N; i++)
				slack[i] += fabs((double)g[i] + e[i]);
		} else {
			for (i = 0; i < N; i++)
				slack[i] += fabs(g[i]);
		}
		CHECK(ef_reduce(c, g, r, 1, (uint64_t)t + 1, METHOD) == 0, 22);
		CHECK(!client_ef_peek(c, 1, N, &e, &sent), 23);
		for (i = 0; i < N; i++) {
			ss[i] += ((const float *)sent)[i] / CL_LOCAL;
			slack[i] += fabs(e[i]);
		}
		nb = blocks_sent(sent);
		if (nb < 1 || nb > TOPK) {
			fprintf(stderr, "proc %d round %d: %d blocks sent, "
				"top-10 %% is %d of %d\n", proc, t, nb, TOPK,
				BLOCKS);
			return 24;
		}
	}
	for (i = 0; i < N; i++) {
		double d = sg[i] - ss[i] - e[i];

		if (fabs(d) > ldexp(slack[i], -23) * 2) {
			fprintf(stderr, "proc %d elem %zu: sum g %.9g - sum "
				"sent/L %.9g - e %.9g = %g > %g\n", proc, i,
				sg[i], ss[i], e[i], d,
				ldexp(slack[i], -23) * 2);
			return 25;
		}
	}
	/* the residual holds the blocks not sent */
	for (i = 0; i < N && e[i] == 0; i++)
		;
	CHECK(i < N, 26);
	/* the last round's result, for the comparison across processes */
	memcpy(j->results + (size_t)proc * N, r, N * sizeof(float));
	/* an inf in process 0's block 0: non-finite everywhere (host 0
	 * sends it first), its residual reset on host 0 */
	for (i = 0; i < N; i++)
		g[i] = ef_value(proc, i, 0);
	if (proc == 0)
		g[5] = INFINITY;
	CHECK(ef_reduce(c, g, r, 1, EF_ROUNDS + 1, METHOD) == 0, 27);
	CHECK(!isfinite(r[0]) && !isfinite(r[K - 1]), 28);
	CHECK(!client_ef_peek(c, 1, N, &e, &sent), 29);
	for (i = 0; j->host == 0 && i < K; i++)
		CHECK(e[i] == 0, 30);
	for (i = K; i < N && e[i] == 0; i++)
		;
	CHECK(i < N, 31);
	/* reset: zero */
	CHECK(tally_ef_reset(c, 1) == 0, 32);
	CHECK(!client_ef_peek(c, 1, N, &e, &sent), 33);
	for (i = 0; i < N; i++)
		CHECK(e[i] == 0, 34);
	free(sg);
	free(ss);
	free(slack);
	return 0;
}

/* the job of this test's method; its invariant check above */
static int run(const char *const *extra, enum ef_mode mode,
	       enum tally_compression m, double *err, float *results)
{
	return ef_run(extra, mode, m, invariant_main, err, results);
}

static const char *const job_topk[] = {
	"--set", "compression.method=block_topk10_ef",
	"--set", "emulator.loss_ppm=10000",
	NULL,
};

/* partitions of 12 KiB: 3072 elements, 12 blocks each (top-k per
 * partition: 2 blocks of 12) */
static const char *const job_topk_parts[] = {
	"--set", "compression.method=block_topk10_ef",
	"--set", "cluster.schedule=bytescheduler",
	"--set", "cluster.partition_kib=12",
	"--set", "emulator.loss_ppm=10000",
	NULL,
};

/* two keys merged into one mgwfbp unit: "sent" scattered back per op */
static const char *const job_topk_mgwfbp[] = {
	"--set", "compression.method=block_topk10_ef",
	"--set", "cluster.schedule=mgwfbp",
	"--set", "emulator.loss_ppm=10000",
	NULL,
};

static void test_invariant(void **state)
{
	float *res = mmap(NULL, EF_HOSTS * CL_LOCAL * N * sizeof(float),
			  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			  -1, 0);

	(void)state;
	assert_true(res != MAP_FAILED);
	assert_int_equal(run(ef_lossy, EF_INVARIANT, METHOD, NULL, res), 0);
	/* every process got the same last result, senders or not */
	for (int p = 1; p < EF_HOSTS * CL_LOCAL; p++)
		assert_memory_equal(res, res + (size_t)p * N,
				    N * sizeof(float));
	munmap(res, EF_HOSTS * CL_LOCAL * N * sizeof(float));
}

/* the 4 g of the blocks outside the top 10 % of 2 g (both hosts' local
 * sum; the same selection on both): top-10 % without feedback */
static double plain_error(double *amean)
{
	double norm[BLOCKS], e = 0;
	int sel[BLOCKS] = { 0 };

	*amean = 0;
	for (size_t b = 0; b < BLOCKS; b++) {
		norm[b] = 0;
		for (size_t i = b * K; i < (b + 1) * K && i < N; i++)
			norm[b] += (double)ef_value(0, i, 0) * ef_value(0, i, 0);
	}
	for (int k = 0; k < TOPK; k++) {
		size_t best = BLOCKS;

		for (size_t b = 0; b < BLOCKS; b++)
			if (!sel[b] && (best == BLOCKS ||
					norm[b] > norm[best]))
				best = b;
		sel[best] = 1;
	}
	for (size_t i = 0; i < N; i++) {
		*amean += fabs(4.0 * ef_value(0, i, 0));
		if (!sel[i / K])
			e += fabs(4.0 * ef_value(0, i, 0));
	}
	*amean /= N;
	return e / N;
}

/* the job's method (DEFAULT: the library learns it at WELCOME) */
static void test_converge(void **state)
{
	double *err = mmap(NULL, 4 * EF_HOSTS * CL_LOCAL * sizeof(double),
			   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	double *reset = err + EF_HOSTS * CL_LOCAL, amean, plain;
	double *parts = reset + EF_HOSTS * CL_LOCAL;
	double *merged = parts + EF_HOSTS * CL_LOCAL;

	(void)state;
	assert_true(err != MAP_FAILED);
	assert_int_equal(run(job_topk, EF_CONVERGE, TALLY_COMPRESS_DEFAULT, err,
			     NULL), 0);
	assert_int_equal(run(job_topk, EF_CONVERGE_RESET, TALLY_COMPRESS_DEFAULT,
			     reset, NULL), 0);
	/* bytescheduler partitions: each its own engine tensor (top-k per
	 * partition), "sent" at its offset */
	assert_int_equal(run(job_topk_parts, EF_CONVERGE, TALLY_COMPRESS_DEFAULT,
			     parts, NULL), 0);
	assert_int_equal(run(job_topk_mgwfbp, EF_CONVERGE_MERGED,
			     TALLY_COMPRESS_DEFAULT, merged, NULL), 0);
	plain = plain_error(&amean);
	for (int p = 0; p < EF_HOSTS * CL_LOCAL; p++) {
		print_message("proc %d: mean |error| with feedback %.4g "
			      "(partitions %.4g, merged units %.4g), reset "
			      "every round %.4g, top-10 %% without feedback "
			      "%.4g (mean |sum| %.4g)\n", p, err[p], parts[p],
			      merged[p], reset[p], plain, amean);
		assert_true(err[p] > 0);
		assert_true(err[p] < 0.3 * plain);
		assert_true(parts[p] > 0);
		assert_true(parts[p] < 0.3 * plain);
		assert_true(merged[p] > 0);
		assert_true(merged[p] < 0.3 * plain);
		assert_true(fabs(reset[p] - plain) < 0.05 * plain);
	}
	munmap(err, 4 * EF_HOSTS * CL_LOCAL * sizeof(double));
}

/* what the daemons' transports sent for one 8 MiB float tensor, no loss:
 * block_topk10_ef against the int32 path; the hosts' selections agree
 * (the same tensor), so about a tenth both ways, heartbeats and receipts
 * aside */
static void test_counters_bytes(void **state)
{
	double b32 = 0, bs = 0;

	(void)state;
	assert_int_equal(run(NULL, EF_BYTES, TALLY_COMPRESS_NONE, &b32, NULL),
			 0);
	assert_int_equal(run(NULL, EF_BYTES, METHOD, &bs, NULL), 0);
	print_message("transport bytes: int32 %.0f, block_topk10_ef %.0f "
		      "(%.4f)\n", b32, bs, bs / b32);
	assert_true(bs > 0.08 * b32);
	assert_true(bs < 0.15 * b32);
}

static void test_refused(void **state)
{
	const char *ring[] = { "--rank", "0", "--world", "2",
			       "--coordinator", "127.0.0.1:9", "--address",
			       "127.0.0.1:10", "--set", "cluster.algorithm=ring",
			       "--set", "compression.method=block_topk10_ef",
			       NULL };
	const char *sw[] = { "--rank", "0", "--world", "2",
			     "--coordinator", "127.0.0.1:9", "--address",
			     "127.0.0.1:10", "--set", "dataplane.profile=switch",
			     "--set", "compression.method=block_topk10_ef",
			     NULL };

	(void)state;
	cluster_default_secret();
	assert_int_equal(daemon_refuses(ring,
					"compression.method = block_topk10_ef "
					"needs cluster.algorithm = aggregate"),
			 0);
	assert_int_equal(daemon_refuses(sw,
					"compression.method = block_topk10_ef "
					"needs dataplane.profile = software"),
			 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invariant),
		cmocka_unit_test(test_converge),
		cmocka_unit_test(test_counters_bytes),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
