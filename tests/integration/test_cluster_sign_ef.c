// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_sign_ef.c - sign_ef (docs/compression.md sections 3 and 5)
 * through real tallyd daemons: 2 hosts x 2 clients over kernel UDP on the
 * loopback, co-located aggregation, loss.
 *
 * Error feedback lives in libtally.  Checked:
 *  - the invariant, on every process, over R rounds of different
 *    gradients per process: sum_t g_t - sum_t sent_t / L - e_R = 0 up to
 *    float32 rounding, 2^-23 sum_t (|p_t| + |e_t+1|) (sent and e read
 *    from the library's internals); every result a +-S or 0 per chunk
 *    (a vote times one scale sum), the same on both clients of a host;
 *  - convergence: with the same gradient g on every process every round,
 *    the running mean of the results nears the true sum 4 g, much closer
 *    than plain sign (the same run with tally_ef_reset_all() before each
 *    round: the error of sign without feedback, computed here too); also
 *    with two keys merged into one mgwfbp unit, and in bytescheduler
 *    partitions smaller than a chunk;
 *  - tally_ef_reset() zeroes a residual; a chunk with inf resets its own;
 *  - the bytes the daemons' transports sent (tally-ctl's counters):
 *    about 2/64 of the int32 path's for a large tensor;
 *  - refusals: sign_ef for an int32 tensor (-TALLY_EINVAL), a job with
 *    sign_ef and cluster.algorithm = ring or dataplane.profile = switch.
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

/* every result chunk holds 0 and one magnitude (a vote times S) */
static int votes_ok(const float *r, size_t m)
{
	for (size_t c0 = 0; c0 < N; c0 += m) {
		float s = 0;

		for (size_t i = c0; i < c0 + m && i < N; i++) {
			float a = fabsf(r[i]);

			if (a != 0 && s != 0 && a != s)
				return 0;
			if (a != 0)
				s = a;
		}
	}
	return 1;
}

static int invariant_main(struct tally_client *c, const struct ef_job *j,
			  int proc, float *g, float *r)
{
	double *sg = calloc(N, sizeof(double)), *ss = calloc(N, sizeof(double));
	double *slack = calloc(N, sizeof(double));
	const float *e;
	const void *sent;
	size_t i;
	int t;

	(void)j;
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
		CHECK(ef_reduce(c, g, r, 1, (uint64_t)t + 1,
			     TALLY_COMPRESS_SIGN_EF) == 0, 22);
		CHECK(!client_ef_peek(c, 1, N, &e, &sent), 23);
		for (i = 0; i < N; i++) {
			ss[i] += ((const float *)sent)[i] / CL_LOCAL;
			slack[i] += fabs(e[i]);
		}
		/* 8160 elements per chunk at K = 256 */
		CHECK(votes_ok(r, 32 * 255), 24);
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
	/* the residual is not trivially zero: signs lose information */
	for (i = 0; i < N && e[i] == 0; i++)
		;
	CHECK(i < N, 26);
	/* an inf in process 0's chunk 0: that chunk's residual resets on
	 * every process (its "sent" is NaN), the others' do not */
	for (i = 0; i < N; i++)
		g[i] = ef_value(proc, i, 0);
	if (proc == 0)
		g[5] = INFINITY;
	CHECK(ef_reduce(c, g, r, 1, EF_ROUNDS + 1, TALLY_COMPRESS_SIGN_EF) == 0,
	      27);
	CHECK(!isfinite(r[0]) && !isfinite(r[100]) && isfinite(r[N - 1]), 28);
	CHECK(!client_ef_peek(c, 1, N, &e, &sent), 29);
	for (i = 0; i < 32 * 255; i++)
		CHECK(e[i] == 0, 30);
	for (i = 32 * 255; i < N && e[i] == 0; i++)
		;
	CHECK(i < N, 31);
	/* reset: zero */
	CHECK(tally_ef_reset(c, 1) == 0, 32);
	CHECK(!client_ef_peek(c, 1, N, &e, &sent), 33);
	for (i = 0; i < N; i++)
		CHECK(e[i] == 0, 34);
	CHECK(tally_ef_reset(c, 999) == -TALLY_ENOENT, 35);
	/* a reset while the key's request is pending (not reaped yet)
	 * takes effect when it completes */
	{
		uint64_t req;

		CHECK(tally_allreduce(c, &(struct tally_allreduce_args){
			.key = 1, .iteration = EF_ROUNDS + 2, .sendbuf = g,
			.recvbuf = r, .count = N, .dtype = TALLY_FLOAT32,
			.op = TALLY_SUM,
			.flags = TALLY_F_COMPRESS(TALLY_COMPRESS_SIGN_EF) },
			&req) == 0, 36);
		CHECK(tally_ef_reset(c, 1) == 0, 37);
		CHECK(tally_wait(c, req, 60000) == 0, 38);
		CHECK(!client_ef_peek(c, 1, N, &e, &sent), 39);
		for (i = 0; i < N; i++)
			CHECK(e[i] == 0, 40);
	}
	free(sg);
	free(ss);
	free(slack);
	return 0;
}

/* the job of this test's method; its invariant check above */
static int run(const char *const *extra, enum ef_mode mode,
	       enum tally_compression m, double *err)
{
	return ef_run(extra, mode, m, invariant_main, err, NULL);
}

static const char *const job_sign[] = {
	"--set", "compression.method=sign_ef",
	"--set", "emulator.loss_ppm=10000",
	NULL,
};

/* partitions of 12 KiB: 3072 elements, less than a sign chunk */
static const char *const job_sign_parts[] = {
	"--set", "compression.method=sign_ef",
	"--set", "cluster.schedule=bytescheduler",
	"--set", "cluster.partition_kib=12",
	"--set", "emulator.loss_ppm=10000",
	NULL,
};

static const char *const job_sign_mgwfbp[] = {
	"--set", "compression.method=sign_ef",
	"--set", "cluster.schedule=mgwfbp",
	"--set", "emulator.loss_ppm=10000",
	NULL,
};

static void test_invariant(void **state)
{
	(void)state;
	assert_int_equal(run(ef_lossy, EF_INVARIANT, TALLY_COMPRESS_SIGN_EF,
			     NULL), 0);
}

/* the job's method (DEFAULT: the library learns it at WELCOME) */
static void test_converge(void **state)
{
	double *err = mmap(NULL, 4 * EF_HOSTS * CL_LOCAL * sizeof(double),
			   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	double *reset = err + EF_HOSTS * CL_LOCAL, plain = 0, amean = 0;
	double *merged = reset + EF_HOSTS * CL_LOCAL;
	double *parts = merged + EF_HOSTS * CL_LOCAL;

	(void)state;
	assert_true(err != MAP_FAILED);
	assert_int_equal(run(job_sign, EF_CONVERGE, TALLY_COMPRESS_DEFAULT, err),
			 0);
	assert_int_equal(run(job_sign, EF_CONVERGE_RESET, TALLY_COMPRESS_DEFAULT,
			     reset), 0);
	/* two keys merged into one unit (mgwfbp): "sent" scattered back */
	assert_int_equal(run(job_sign_mgwfbp, EF_CONVERGE_MERGED,
			     TALLY_COMPRESS_SIGN_EF, merged), 0);
	/* bytescheduler partitions: each its own engine tensor, "sent" at
	 * its offset */
	assert_int_equal(run(job_sign_parts, EF_CONVERGE, TALLY_COMPRESS_DEFAULT,
			     parts), 0);
	/* plain sign, computed: every host sends sign(2 g) with the chunk's
	 * scale mean |2 g|, the hosts agree, the result is 4 mean|g| sign(g)
	 * every round (the scale's quantization aside) */
	for (size_t c0 = 0; c0 < N; c0 += 32 * 255) {
		size_t end = c0 + 32 * 255 < N ? c0 + 32 * 255 : N;
		double a = 0;

		for (size_t i = c0; i < end; i++)
			a += fabs(ef_value(0, i, 0));
		a /= (double)(end - c0);
		for (size_t i = c0; i < end; i++) {
			double x = ef_value(0, i, 0);

			plain += fabs(4 * (x >= 0 ? a : -a) - 4 * x);
			amean += fabs(4 * x);
		}
	}
	plain /= N;
	amean /= N;
	for (int p = 0; p < EF_HOSTS * CL_LOCAL; p++) {
		print_message("proc %d: mean |error| with feedback %.4g "
			      "(merged units %.4g, partitions %.4g), reset "
			      "every round %.4g, plain sign %.4g (mean |sum| "
			      "%.4g)\n", p, err[p], merged[p], parts[p],
			      reset[p], plain, amean);
		assert_true(err[p] > 0);
		assert_true(err[p] < 0.2 * plain);
		assert_true(merged[p] > 0);
		assert_true(merged[p] < 0.2 * plain);
		assert_true(parts[p] > 0);
		assert_true(parts[p] < 0.2 * plain);
		assert_true(fabs(reset[p] - plain) < 0.05 * plain);
	}
	munmap(err, 4 * EF_HOSTS * CL_LOCAL * sizeof(double));
}

/* what the daemons' transports sent for one 8 MiB float tensor, no loss:
 * sign_ef against the int32 path (1/32 up, 2/32 down, so about 3/64 of
 * both ways; heartbeats and receipts do not shrink) */
static void test_counters_bytes(void **state)
{
	double b32 = 0, bs = 0;

	(void)state;
	assert_int_equal(run(NULL, EF_BYTES, TALLY_COMPRESS_NONE, &b32), 0);
	assert_int_equal(run(NULL, EF_BYTES, TALLY_COMPRESS_SIGN_EF, &bs), 0);
	print_message("transport bytes: int32 %.0f, sign_ef %.0f (%.4f)\n",
		      b32, bs, bs / b32);
	/* 1 bit up and 1 down per element against 32 and 32: 1/32 and
	 * the headers, rounds, receipts and heartbeats of both */
	assert_true(bs > 0.025 * b32);
	assert_true(bs < 0.045 * b32);
}

static void test_refused(void **state)
{
	const char *ring[] = { "--rank", "0", "--world", "2",
			       "--coordinator", "127.0.0.1:9", "--address",
			       "127.0.0.1:10", "--set", "cluster.algorithm=ring",
			       "--set", "compression.method=sign_ef", NULL };
	const char *sw[] = { "--rank", "0", "--world", "2",
			     "--coordinator", "127.0.0.1:9", "--address",
			     "127.0.0.1:10", "--set", "dataplane.profile=switch",
			     "--set", "compression.method=sign_ef", NULL };

	(void)state;
	cluster_default_secret();
	assert_int_equal(daemon_refuses(ring,
					"compression.method = sign_ef needs "
					"cluster.algorithm = aggregate"), 0);
	assert_int_equal(daemon_refuses(sw,
					"compression.method = sign_ef needs "
					"dataplane.profile = software"), 0);
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
