// SPDX-License-Identifier: BSD-3-Clause
/*
 * ef_cluster.c - the error-feedback methods' shared cluster programs
 * (ef_cluster.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ef_cluster.h"

const char *const ef_lossy[] = {
	/* the tests' chunk arithmetic is K = 256's; a job without a
	 * compression.method would take 360 (config_k) */
	"--set", "dataplane.k=256",
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.reorder_ppm=20000",
	"--set", "emulator.reorder_us=200",
	NULL,
};

float ef_value(int proc, size_t i, int round)
{
	uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(proc * 40503) ^
		     (uint32_t)(round * 977);
	double u = (double)(h % 2001) / 1000.0 - 1.0;

	return (float)ldexp(u, (int)((i / 300) % 13) - 6);
}

int ef_reduce(struct tally_client *c, float *send, float *recv,
	      uint64_t key, uint64_t it, enum tally_compression m)
{
	uint64_t req;
	int ret;

	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = key, .iteration = it, .sendbuf = send, .recvbuf = recv,
		.count = EF_N, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(m) }, &req);
	if (!ret)
		ret = tally_wait(c, req, 60000);
	return ret;
}

static int submit(struct tally_client *c, const struct ef_job *j, float *g,
		  float *r, int k, int t, uint32_t group, uint64_t *req)
{
	return tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 7 + (uint64_t)k, .iteration = (uint64_t)t + 1,
		.sendbuf = g + (size_t)k * EF_N,
		.recvbuf = r + (size_t)k * EF_N,
		.count = EF_N, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.group = group,
		.flags = TALLY_F_COMPRESS(j->method) |
			 (group && k ? TALLY_F_LAST_OF_ITERATION : 0) }, req);
}

/*
 * The same g everywhere: mean |mean_t r_t - 4 g| over the elements (of
 * one key, or of two that travel as one merged unit)
 */
static int converge_main(struct tally_client *c, const struct ef_job *j,
			 int proc, float *g, float *r)
{
	int keys = j->mode == EF_CONVERGE_MERGED ? 2 : 1, t, k;
	double *sum = calloc(2 * EF_N, sizeof(double)), err = 0;
	uint64_t req[2];
	size_t i;

	CHECK(sum, 43);
	for (t = 0; t < EF_ROUNDS; t++) {
		if (j->mode == EF_CONVERGE_RESET)
			tally_ef_reset_all(c);
		for (i = 0; i < 2 * EF_N; i++)
			g[i] = ef_value(0, i % EF_N, 0);
		for (k = 0; k < keys; k++)
			CHECK(submit(c, j, g, r, k, t, keys > 1, &req[k]) == 0,
			      41);
		for (k = 0; k < keys; k++)
			CHECK(tally_wait(c, req[k], 60000) == 0, 42);
		for (i = 0; i < (size_t)keys * EF_N; i++)
			sum[i] += r[i];
	}
	for (i = 0; i < (size_t)keys * EF_N; i++)
		err += fabs(sum[i] / EF_ROUNDS - 4.0 * ef_value(0, i % EF_N, 0));
	j->err[proc] = err / ((double)keys * EF_N);
	free(sum);
	return 0;
}

/* one large float tensor in the job's method, for the bytes */
static int bytes_main(struct tally_client *c, const struct ef_job *j)
{
	float *g = tally_alloc(c, EF_NB * 4);
	uint64_t req;
	int ret;

	CHECK(g, 50);
	for (size_t i = 0; i < EF_NB; i++)
		g[i] = ef_value(0, i, 1);
	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 9, .iteration = 1, .sendbuf = g, .recvbuf = g,
		.count = EF_NB, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(j->method) }, &req);
	if (!ret)
		ret = tally_wait(c, req, 60000);
	CHECK(ret == 0, 51);
	tally_disconnect(c);
	return 0;
}

/* the method named for an int32 tensor, and a value past the 3-bit
 * field's last method: refused at submission */
static int refusals(struct tally_client *c, const struct ef_job *j,
		    int32_t *ib)
{
	uint64_t req;
	int ret;

	memset(ib, 0, EF_N * 4);
	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 3, .iteration = 1, .sendbuf = ib, .recvbuf = ib,
		.count = EF_N, .dtype = TALLY_INT32, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(j->method) }, &req);
	if (!ret)
		ret = tally_wait(c, req, 60000);
	CHECK(ret == -TALLY_EINVAL, 4);
	ret = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 4, .iteration = 1, .sendbuf = ib, .recvbuf = ib,
		.count = EF_N, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(7) }, &req);
	CHECK(ret == -TALLY_EINVAL, 5);
	return 0;
}

static int client_main(void *arg)
{
	const struct ef_job *j = arg;
	struct tally_client *c;
	float *g, *r;
	int proc, ret;

	CHECK(tally_connect(j->sock, &c) == 0, 2);
	if (j->mode == EF_BYTES)
		return bytes_main(c, j);
	proc = j->host * CL_LOCAL + tally_rank(c);
	g = tally_alloc(c, 2 * EF_N * 4);
	r = tally_alloc(c, 2 * EF_N * 4);
	CHECK(g && r, 3);
	if (j->mode == EF_INVARIANT) {
		ret = j->invariant(c, j, proc, g, r);
		if (!ret)
			ret = refusals(c, j, (int32_t *)g);
	} else {
		ret = converge_main(c, j, proc, g, r);
	}
	if (ret)
		return ret;
	tally_disconnect(c);
	return 0;
}

int ef_run(const char *const *extra, enum ef_mode mode,
	   enum tally_compression m, ef_invariant_fn invariant, double *err,
	   float *results)
{
	struct cluster_spec s = { .workers = EF_HOSTS,
				  .role = "worker+aggregator",
				  .algorithm = "aggregate", .extra = extra };
	struct test_cluster tc;
	struct ef_job jobs[EF_HOSTS];
	pid_t pid[EF_HOSTS * CL_LOCAL];
	int n = 0, failed = 0;

	if (cluster_up(&tc, &s))
		return -1;
	for (int h = 0; h < EF_HOSTS; h++) {
		jobs[h] = (struct ef_job){ .sock = tc.d[h].sock, .host = h,
					   .mode = mode, .method = m,
					   .invariant = invariant,
					   .err = err, .results = results };
		for (int l = 0; l < CL_LOCAL; l++)
			pid[n++] = child_start(client_main, &jobs[h]);
	}
	for (int i = 0; i < n; i++)
		failed += child_wait(pid[i], 240000) != 0;
	if (failed)
		cluster_show_warnings(&tc);
	for (int h = 0; mode == EF_BYTES && h < EF_HOSTS; h++) {
		double b = cluster_sent_bytes(tc.d[h].sock);

		*err = h ? *err + b : b;
		if (b <= 0)
			failed++;
	}
	return failed + cluster_down(&tc);
}
