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
 *    about 3/64 of the int32 path's for a large tensor;
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
#include "cluster_clients.h"
#include "shm/client_internal.h"

#define HOSTS 2
#define N 20011
#define ROUNDS 80

enum mode { INVARIANT, CONVERGE, CONVERGE_RESET, BYTES };

/* elements of the tensor whose bytes on the wire are counted */
#define NB (1u << 21)

struct sjob {
	const char *sock;
	int host;
	enum mode mode;
	enum tally_compression method;	/* in the flags */
	bool merged;			/* CONVERGE: two keys of one mgwfbp
					 * group, one unit */
	double *err;			/* shared: per process */
};

/* magnitudes changing every 300 elements, over 2^-6 .. 2^6 */
static float value(int proc, size_t i, int round)
{
	uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(proc * 40503) ^
		     (uint32_t)(round * 977);
	double u = (double)(h % 2001) / 1000.0 - 1.0;

	return (float)ldexp(u, (int)((i / 300) % 13) - 6);
}

static int reduce(struct tally_client *c, float *send, float *recv,
		  uint64_t key, uint64_t it, enum tally_compression m)
{
	uint64_t req;
	int ret;

	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = key, .iteration = it, .sendbuf = send, .recvbuf = recv,
		.count = N, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(m) }, &req);
	if (!ret)
		ret = tally_wait(c, req, 60000);
	return ret;
}

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

static int invariant_main(struct tally_client *c, int proc, float *g,
			  float *r)
{
	double *sg = calloc(N, sizeof(double)), *ss = calloc(N, sizeof(double));
	double *slack = calloc(N, sizeof(double));
	const float *e;
	const void *sent;
	size_t i;
	int t;

	CHECK(sg && ss && slack, 20);
	for (t = 0; t < ROUNDS; t++) {
		for (i = 0; i < N; i++) {
			g[i] = value(proc, i, t);
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
		CHECK(reduce(c, g, r, 1, (uint64_t)t + 1,
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
		g[i] = value(proc, i, 0);
	if (proc == 0)
		g[5] = INFINITY;
	CHECK(reduce(c, g, r, 1, ROUNDS + 1, TALLY_COMPRESS_SIGN_EF) == 0,
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
			.key = 1, .iteration = ROUNDS + 2, .sendbuf = g,
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

/* key 7 + @k of round @t, in merge group @group (0: none) */
static int submit(struct tally_client *c, const struct sjob *j, float *g,
		  float *r, int k, int t, uint32_t group, uint64_t *req)
{
	return tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 7 + (uint64_t)k, .iteration = (uint64_t)t + 1,
		.sendbuf = g + (size_t)k * N, .recvbuf = r + (size_t)k * N,
		.count = N, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.group = group,
		.flags = TALLY_F_COMPRESS(j->method) |
			 (group && k ? TALLY_F_LAST_OF_ITERATION : 0) }, req);
}

/*
 * The same g everywhere: mean |mean_t r_t - 4 g| over the elements (of
 * one key, or of two that travel as one merged unit)
 */
static int converge_main(struct tally_client *c, const struct sjob *j,
			 int proc, float *g, float *r)
{
	int keys = j->merged ? 2 : 1, t, k;
	double *sum = calloc(2 * N, sizeof(double)), err = 0;
	uint64_t req[2];
	size_t i;

	CHECK(sum, 43);
	for (t = 0; t < ROUNDS; t++) {
		if (j->mode == CONVERGE_RESET)
			tally_ef_reset_all(c);
		for (i = 0; i < 2 * N; i++)
			g[i] = value(0, i % N, 0);
		for (k = 0; k < keys; k++)
			CHECK(submit(c, j, g, r, k, t, j->merged, &req[k]) == 0,
			      41);
		for (k = 0; k < keys; k++)
			CHECK(tally_wait(c, req[k], 60000) == 0, 42);
		for (i = 0; i < (size_t)keys * N; i++)
			sum[i] += r[i];
	}
	for (i = 0; i < (size_t)keys * N; i++)
		err += fabs(sum[i] / ROUNDS - 4.0 * value(0, i % N, 0));
	j->err[proc] = err / ((double)keys * N);
	free(sum);
	return 0;
}

/* one large float tensor in the job's method, for the bytes */
static int bytes_main(struct tally_client *c, const struct sjob *j)
{
	float *g = tally_alloc(c, NB * 4);
	uint64_t req;
	int ret;

	CHECK(g, 50);
	for (size_t i = 0; i < NB; i++)
		g[i] = value(0, i, 1);
	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 9, .iteration = 1, .sendbuf = g, .recvbuf = g,
		.count = NB, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(j->method) }, &req);
	if (!ret)
		ret = tally_wait(c, req, 60000);
	CHECK(ret == 0, 51);
	tally_disconnect(c);
	return 0;
}

static int client_main(void *arg)
{
	const struct sjob *j = arg;
	struct tally_client *c;
	float *g, *r;
	int proc, ret;

	CHECK(tally_connect(j->sock, &c) == 0, 2);
	if (j->mode == BYTES)
		return bytes_main(c, j);
	proc = j->host * CL_LOCAL + tally_rank(c);
	g = tally_alloc(c, 2 * N * 4);
	r = tally_alloc(c, 2 * N * 4);
	CHECK(g && r, 3);
	if (j->mode == INVARIANT) {
		int32_t *ib = (int32_t *)g;
		uint64_t req;

		ret = invariant_main(c, proc, g, r);
		if (ret)
			return ret;
		/* sign_ef named for an int32 tensor: refused */
		memset(ib, 0, N * 4);
		ret = tally_allreduce(c, &(struct tally_allreduce_args){
			.key = 3, .iteration = 1, .sendbuf = ib, .recvbuf = ib,
			.count = N, .dtype = TALLY_INT32, .op = TALLY_SUM,
			.flags = TALLY_F_COMPRESS(TALLY_COMPRESS_SIGN_EF) },
			&req);
		if (!ret)
			ret = tally_wait(c, req, 60000);
		CHECK(ret == -TALLY_EINVAL, 4);
		/* the 3-bit field's values after sign_ef: refused here */
		ret = tally_allreduce(c, &(struct tally_allreduce_args){
			.key = 4, .iteration = 1, .sendbuf = g, .recvbuf = g,
			.count = N, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
			.flags = TALLY_F_COMPRESS(7) }, &req);
		CHECK(ret == -TALLY_EINVAL, 5);
	} else {
		ret = converge_main(c, j, proc, g, r);
		if (ret)
			return ret;
	}
	tally_disconnect(c);
	return 0;
}

static int run_merged(const char *const *extra, enum mode mode,
		      enum tally_compression m, bool merged, double *err)
{
	struct cluster_spec s = { .workers = HOSTS,
				  .role = "worker+aggregator",
				  .algorithm = "aggregate", .extra = extra };
	struct test_cluster tc;
	struct sjob jobs[HOSTS];
	pid_t pid[HOSTS * CL_LOCAL];
	int n = 0, failed = 0;

	if (cluster_up(&tc, &s))
		return -1;
	for (int h = 0; h < HOSTS; h++) {
		jobs[h] = (struct sjob){ .sock = tc.d[h].sock, .host = h,
					 .mode = mode, .method = m,
					 .merged = merged, .err = err };
		for (int l = 0; l < CL_LOCAL; l++)
			pid[n++] = child_start(client_main, &jobs[h]);
	}
	for (int i = 0; i < n; i++)
		failed += child_wait(pid[i], 240000) != 0;
	if (failed)
		cluster_show_warnings(&tc);
	for (int h = 0; mode == BYTES && h < HOSTS; h++) {
		double b = cluster_sent_bytes(tc.d[h].sock);

		*err = h ? *err + b : b;
		if (b <= 0)
			failed++;
	}
	return failed + cluster_down(&tc);
}

static int run(const char *const *extra, enum mode mode,
	       enum tally_compression m, double *err)
{
	return run_merged(extra, mode, m, false, err);
}

static const char *const lossy[] = {
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.reorder_ppm=20000",
	"--set", "emulator.reorder_us=200",
	NULL,
};

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
	assert_int_equal(run(lossy, INVARIANT, TALLY_COMPRESS_SIGN_EF, NULL),
			 0);
}

/* the job's method (DEFAULT: the library learns it at WELCOME) */
static void test_converge(void **state)
{
	double *err = mmap(NULL, 4 * HOSTS * CL_LOCAL * sizeof(double),
			   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	double *reset = err + HOSTS * CL_LOCAL, plain = 0, amean = 0;
	double *merged = reset + HOSTS * CL_LOCAL;
	double *parts = merged + HOSTS * CL_LOCAL;

	(void)state;
	assert_true(err != MAP_FAILED);
	assert_int_equal(run(job_sign, CONVERGE, TALLY_COMPRESS_DEFAULT, err),
			 0);
	assert_int_equal(run(job_sign, CONVERGE_RESET, TALLY_COMPRESS_DEFAULT,
			     reset), 0);
	/* two keys merged into one unit (mgwfbp): "sent" scattered back */
	assert_int_equal(run_merged(job_sign_mgwfbp, CONVERGE,
				    TALLY_COMPRESS_SIGN_EF, true, merged), 0);
	/* bytescheduler partitions: each its own engine tensor, "sent" at
	 * its offset */
	assert_int_equal(run(job_sign_parts, CONVERGE, TALLY_COMPRESS_DEFAULT,
			     parts), 0);
	/* plain sign, computed: every host sends sign(2 g) with the chunk's
	 * scale mean |2 g|, the hosts agree, the result is 4 mean|g| sign(g)
	 * every round (the scale's quantization aside) */
	for (size_t c0 = 0; c0 < N; c0 += 32 * 255) {
		size_t end = c0 + 32 * 255 < N ? c0 + 32 * 255 : N;
		double a = 0;

		for (size_t i = c0; i < end; i++)
			a += fabs(value(0, i, 0));
		a /= (double)(end - c0);
		for (size_t i = c0; i < end; i++) {
			double x = value(0, i, 0);

			plain += fabs(4 * (x >= 0 ? a : -a) - 4 * x);
			amean += fabs(4 * x);
		}
	}
	plain /= N;
	amean /= N;
	for (int p = 0; p < HOSTS * CL_LOCAL; p++) {
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
	munmap(err, 4 * HOSTS * CL_LOCAL * sizeof(double));
}

/* what the daemons' transports sent for one 8 MiB float tensor, no loss:
 * sign_ef against the int32 path (1/32 up, 2/32 down, so about 3/64 of
 * both ways; heartbeats and receipts do not shrink) */
static void test_counters_bytes(void **state)
{
	double b32 = 0, bs = 0;

	(void)state;
	assert_int_equal(run(NULL, BYTES, TALLY_COMPRESS_NONE, &b32), 0);
	assert_int_equal(run(NULL, BYTES, TALLY_COMPRESS_SIGN_EF, &bs), 0);
	print_message("transport bytes: int32 %.0f, sign_ef %.0f (%.4f)\n",
		      b32, bs, bs / b32);
	assert_true(bs > 0.03 * b32);
	assert_true(bs < 0.07 * b32);
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
