// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_compress.c - the int16 and int8 lanes (docs/compression.md)
 * through real tallyd daemons: 2 hosts x 2 clients over kernel UDP on the
 * loopback, co-located aggregation, 1 % loss.  Per tensor through the
 * client API (TALLY_F_COMPRESS) and per job ([compression] method): float32
 * results within the documented bound of the exact sum, and worse than
 * the int32 path's bound for int8 (the lanes were narrow); int32 tensors
 * exact under a job's method; a lossy method named for an int32 tensor
 * refused at submission; a ring job with a method refused at start.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "cluster_clients.h"

#define HOSTS 2
#define N 20011

struct cjob {
	const char *sock;
	int host;
	enum tally_compression method;	/* in the flags */
	int bits;			/* the lanes the job sends: 16, 8;
					 * 32: the int32 path (bytes runs) */
	bool float_only;		/* the float tensor alone */
};

/* magnitudes changing every 300 elements, over 2^-6 .. 2^6 */
static float value(int proc, size_t i)
{
	uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(proc * 40503);
	double u = (double)(h % 2001) / 1000.0 - 1.0;

	return (float)ldexp(u, (int)((i / 300) % 13) - 6);
}

static int client_main(void *arg)
{
	const struct cjob *j = arg;
	struct tally_client *c;
	uint64_t req;
	float *buf;
	int32_t *ibuf;
	double maxsum = 0, maxerr = 0, bound;
	int proc, e, ret;
	size_t i;

	CHECK(tally_connect(j->sock, &c) == 0, 2);
	proc = j->host * CL_LOCAL + tally_rank(c);
	buf = tally_alloc(c, N * 4);
	ibuf = tally_alloc(c, N * 4);
	CHECK(buf && ibuf, 3);
	for (i = 0; i < N; i++)
		buf[i] = value(proc, i);
	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 1, .iteration = 1, .sendbuf = buf, .recvbuf = buf,
		.count = N, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(j->method) }, &req);
	if (!ret)
		ret = tally_wait(c, req, 60000);
	if (ret) {
		fprintf(stderr, "proc %d: %s\n", proc, tally_strerror(ret));
		return 4;
	}
	/* the host's local sum is what the daemon quantizes */
	for (i = 0; i < N; i++)
		for (int h = 0; h < HOSTS; h++) {
			double s = fabs((double)(value(h * CL_LOCAL, i) +
						 value(h * CL_LOCAL + 1, i)));

			maxsum = s > maxsum ? s : maxsum;
		}
	frexp(maxsum, &e);		/* every block's E is at most e */
	/* n 2^(E + L + 1 - b) with n = 2 hosts, L = 1, plus the local
	 * float32 sums' rounding */
	bound = HOSTS * ldexp(1, e + 1 + 1 - j->bits) + ldexp(maxsum, -22);
	for (i = 0; i < N; i++) {
		double exact = 0, err;

		for (int p = 0; p < HOSTS * CL_LOCAL; p++)
			exact += value(p, i);
		err = fabs(buf[i] - exact);
		if (err > bound) {
			fprintf(stderr, "proc %d elem %zu: %.9g, exact %.9g, "
				"bound %g\n", proc, i, buf[i], exact, bound);
			return 5;
		}
		maxerr = err > maxerr ? err : maxerr;
	}
	/* the int32 path's bound is n 2^(E + L - 31): narrow lanes show */
	if (j->bits < 32 && maxerr <= HOSTS * ldexp(1, e + 1 - 31) * 1024) {
		fprintf(stderr, "proc %d: max error %g: not %d-bit lanes\n",
			proc, maxerr, j->bits);
		return 6;
	}
	if (j->float_only)
		goto out;
	/* int32: exact whatever the job's method (DEFAULT) */
	for (i = 0; i < N; i++)
		ibuf[i] = (int32_t)(i * 7 + (size_t)proc * 100003);
	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 2, .iteration = 1, .sendbuf = ibuf, .recvbuf = ibuf,
		.count = N, .dtype = TALLY_INT32, .op = TALLY_SUM }, &req);
	if (!ret)
		ret = tally_wait(c, req, 60000);
	CHECK(ret == 0, 7);
	for (i = 0; i < N; i++) {
		int64_t want = 0;

		for (int p = 0; p < HOSTS * CL_LOCAL; p++)
			want += (int64_t)(i * 7 + (size_t)p * 100003);
		CHECK(ibuf[i] == (int32_t)want, 8);
	}
	/* a lossy method named for an int32 tensor: refused */
	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 3, .iteration = 1, .sendbuf = ibuf, .recvbuf = ibuf,
		.count = N, .dtype = TALLY_INT32, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(TALLY_COMPRESS_INT8) }, &req);
	if (!ret)
		ret = tally_wait(c, req, 60000);
	CHECK(ret == -TALLY_EINVAL, 9);
out:
	tally_disconnect(c);
	return 0;
}

/* the job's run; *@bytes (when not NULL): what its transports sent */
static int run_bytes(const char *const *extra, enum tally_compression m,
		     int bits, double *bytes)
{
	struct cluster_spec s = { .workers = HOSTS,
				  .role = "worker+aggregator",
				  .algorithm = "aggregate", .extra = extra };
	struct test_cluster tc;
	struct cjob jobs[HOSTS];
	pid_t pid[HOSTS * CL_LOCAL];
	int n = 0, failed = 0;

	if (cluster_up(&tc, &s))
		return -1;
	for (int h = 0; h < HOSTS; h++) {
		jobs[h] = (struct cjob){ .sock = tc.d[h].sock, .host = h,
					 .method = m, .bits = bits,
					 .float_only = bytes != NULL };
		for (int l = 0; l < CL_LOCAL; l++)
			pid[n++] = child_start(client_main, &jobs[h]);
	}
	for (int i = 0; i < n; i++)
		failed += child_wait(pid[i], 120000) != 0;
	if (failed)
		cluster_show_warnings(&tc);
	for (int h = 0; bytes && h < HOSTS; h++) {
		double b = cluster_sent_bytes(tc.d[h].sock);

		*bytes = h ? *bytes + b : b;
		if (b <= 0)
			failed++;
	}
	return failed + cluster_down(&tc);
}

static int run(const char *const *extra, enum tally_compression m,
	       int bits)
{
	return run_bytes(extra, m, bits, NULL);
}

static const char *const lossy[] = {
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.reorder_ppm=20000",
	"--set", "emulator.reorder_us=200",
	NULL,
};

static const char *const job_int8[] = {
	"--set", "compression.method=int8",
	"--set", "emulator.loss_ppm=10000",
	NULL,
};

static void test_tensor_int16(void **state)
{
	(void)state;
	assert_int_equal(run(lossy, TALLY_COMPRESS_INT16, 16), 0);
}

static void test_tensor_int8(void **state)
{
	(void)state;
	assert_int_equal(run(lossy, TALLY_COMPRESS_INT8, 8), 0);
}

/* the job's method for the float tensor (DEFAULT), int32 left exact */
static void test_job_int8(void **state)
{
	(void)state;
	assert_int_equal(run(job_int8, TALLY_COMPRESS_DEFAULT, 8), 0);
}

/* tally's counters show the smaller bytes: the same float tensor, no
 * loss, with the int32 path, int16 and int8 lanes */
static void test_counters_bytes(void **state)
{
	double b32, b16, b8;

	(void)state;
	assert_int_equal(run_bytes(NULL, TALLY_COMPRESS_NONE, 32, &b32), 0);
	assert_int_equal(run_bytes(NULL, TALLY_COMPRESS_INT16, 16, &b16), 0);
	assert_int_equal(run_bytes(NULL, TALLY_COMPRESS_INT8, 8, &b8), 0);
	printf("transport bytes: int32 %.0f, int16 %.0f (%.3f), int8 %.0f "
	       "(%.3f)\n", b32, b16, b16 / b32, b8, b8 / b32);
	/* DATA, RESULTs and the exponent round shrink; receipts and
	 * heartbeats do not */
	assert_true(b16 < 0.6 * b32);
	assert_true(b16 > 0.4 * b32);
	assert_true(b8 < 0.35 * b32);
}

static void test_ring_refused(void **state)
{
	const char *args[] = { "--rank", "0", "--world", "2",
			       "--coordinator", "127.0.0.1:9", "--address",
			       "127.0.0.1:10", "--set", "cluster.algorithm=ring",
			       "--set", "compression.method=int16", NULL };

	(void)state;
	cluster_default_secret();
	assert_int_equal(daemon_refuses(args,
					 "compression.method = int16 needs"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tensor_int16),
		cmocka_unit_test(test_tensor_int8),
		cmocka_unit_test(test_job_int8),
		cmocka_unit_test(test_counters_bytes),
		cmocka_unit_test(test_ring_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
