// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_pipeline_ef.c - error feedback on the device (gpu/ef.h,
 * docs/compression.md section 5): libtally-cuda keeps each key's residual
 * in device memory, adds it to the gradient before the copy to shared
 * memory and feeds back what the host sent after the result.  Through
 * real tallyd daemons, 2 hosts x 2 GPU client processes, co-located
 * aggregation over UDP on the loopback with loss and reordering.
 *
 * Built twice: test_pipeline_ef_emu (tests/gpu/emu: the pipeline over the
 * CUDA emulation, kernels as their C references; CI) and gpu_test_pipeline_ef
 * (suite 'gpu': a real device, tests/gpu/run-device.sh).  It reads the
 * context's internals (gpu/context.h): the residual (copied from the
 * device) and the slots' `sent` buffers.
 *
 * Checked, for sign_ef (the job's method, DEFAULT in the flags) and
 * block_topk10_ef (named in the flags), on every process:
 *  - libtally keeps no residual of its own for the chunks;
 *  - the invariant sum_t g_t - sum_t sent_t / L - e_R = 0 up to float32
 *    rounding, 2^-22 sum_t (|g_t + e_t| + |e_t+1|) per element, over R
 *    rounds of different gradients, for float32 on the wire, float32
 *    narrowed to bfloat16 and to float16, and a bfloat16 tensor;
 *    the residual is not trivially zero;
 *  - every process gets the same result (compared in the parent);
 *  - an inf in process 0's gradient: the sign chunk (or sparse block) it
 *    is in resets its residual on every process, the rest keep theirs;
 *  - two operations of a key queued back to back leave the residual
 *    that the same two waited for leave (the second waits for the
 *    first's feedback);
 *  - tally_cuda_ef_reset() zeroes a key's residual, also queued right
 *    behind the key's operation in flight; -TALLY_ENOENT for an unknown
 *    key; tally_cuda_ef_reset_all() zeroes every key's;
 * and with one host alone (nothing compressed, the sum exact) the
 * residual stays 0 (libtally's NaN "sent") and the result is the sum.
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

#include <tally/tally_cuda.h>

#include "gpu/context.h"
#include "gpu/kernels/numerics.h"
#include "shm/client_internal.h"
#include "tests/integration/cluster_harness.h"

#define HOSTS 2
#define LOCAL 2			/* clients per host */
#define PROCS (HOSTS * LOCAL)
#define N 40000			/* elements: 3 pipeline chunks of float32 */
#define ROUNDS 8
#define CHUNK_BYTES (64u << 10)
#define DEPTH 3u
#define K 256			/* dataplane.k: the chunk's words */
#define SIGN_CHUNK (32 * (K - 1))	/* elements of a sign chunk */
#define NONFINITE_AT 5		/* process 0's inf: chunk 0, block 0 */
#define NB 5000			/* elements of a one-chunk key */
#define CLIENT_TIMEOUT_MS 90000

struct key_case {
	uint64_t key;
	enum tally_dtype dtype, wire;
};

static const struct key_case cases[] = {
	{ 1, TALLY_FLOAT32, TALLY_FLOAT32 },
	{ 2, TALLY_FLOAT32, TALLY_BFLOAT16 },
	{ 3, TALLY_FLOAT32, TALLY_FLOAT16 },
	{ 4, TALLY_BFLOAT16, TALLY_BFLOAT16 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

struct ef_job {
	const char *sock;
	int host;
	int hosts;
	enum tally_compression named;	/* in the flags (DEFAULT: the job's) */
	float *results;			/* shared: [proc][case][N] */
};

/* magnitudes changing every 300 elements, over 2^-6 .. 2^6 */
static float value(int proc, size_t i, int round)
{
	uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(proc * 40503) ^
		     (uint32_t)(round * 977);
	double u = (double)(h % 2001) / 1000.0 - 1.0;

	return (float)ldexp(u, (int)((i / 300) % 13) - 6);
}

/* @v as the tensor's dtype holds it */
static float as_dtype(float v, enum tally_dtype t)
{
	if (t == TALLY_BFLOAT16)
		return tcu_bf16_to_f32(tcu_f32_to_bf16(v));
	if (t == TALLY_FLOAT16)
		return tcu_f16_to_f32(tcu_f32_to_f16(v));
	return v;
}

/* ---- one client process ---- */

struct proc {
	int id;
	struct tally_client *c;
	struct tally_cuda *tc;
	cudaStream_t stream;
	void *d_g, *d_r;
	void *h;			/* N elements of any dtype */
	float *e;
	double *sg, *ss, *slack;
};

#define CU(call) CHECK((call) == cudaSuccess, 60)

static int upload(struct proc *p, const float *g, enum tally_dtype t)
{
	for (size_t i = 0; i < N; i++)
		tcu_store(p->h, (int)t, i, g[i]);
	CU(cudaMemcpy(p->d_g, p->h, N * tally_dtype_size(t),
		      cudaMemcpyHostToDevice));
	return 0;
}

/* the residual of @key once its last feedback or reset ran (on the
 * context's copy_out stream, not the caller's); zeros if it has none */
static int peek_n(struct proc *p, uint64_t key, uint64_t n)
{
	for (size_t k = 0; k < p->tc->ef.n_keys; k++) {
		struct tcu_ef_key *ek = &p->tc->ef.keys[k];

		if (ek->key != key)
			continue;
		CHECK(ek->count == n, 61);
		CU(cudaEventSynchronize(ek->fed));
		CU(cudaMemcpy(p->e, ek->e, n * sizeof(float),
			      cudaMemcpyDeviceToHost));
		return 0;
	}
	memset(p->e, 0, n * sizeof(float));
	return 0;
}

static int peek_e(struct proc *p, uint64_t key)
{
	return peek_n(p, key, N);
}

static int allreduce_n(struct proc *p, const struct ef_job *j,
		       const struct key_case *kc, uint64_t it,
		       const void *d_g, uint64_t n)
{
	int r = tally_cuda_allreduce(p->tc, &(struct tally_cuda_allreduce_args){
		.key = kc->key, .iteration = it, .sendbuf = d_g,
		.recvbuf = p->d_r, .count = n, .dtype = kc->dtype,
		.wire_dtype = kc->wire, .op = TALLY_SUM,
		.flags = TALLY_F_COMPRESS(j->named) }, p->stream);

	if (r)
		fprintf(stderr, "proc %d: tally_cuda_allreduce: %s (%s)\n",
			p->id, tally_strerror(r),
			tally_cuda_error_message(p->tc));
	return r;
}

static int allreduce(struct proc *p, const struct ef_job *j,
		     const struct key_case *kc, uint64_t it)
{
	return allreduce_n(p, j, kc, it, p->d_g, N);
}

/* wait for the stream; the operation's async error */
static int finish(struct proc *p)
{
	int r;

	CU(cudaStreamSynchronize(p->stream));
	r = tally_cuda_async_error(p->tc);
	if (r)
		fprintf(stderr, "proc %d: async: %s (%s)\n", p->id,
			tally_strerror(r), tally_cuda_error_message(p->tc));
	return r;
}

/* chunk c's "sent", as libtally left it in its slot's `sent` buffer
 * (the tensor's chunks are at most DEPTH: none was overwritten) */
static void add_sent(struct proc *p, const struct key_case *kc,
		     uint64_t seq0, float inv_l)
{
	uint64_t ce = CHUNK_BYTES / tally_dtype_size(kc->wire);

	for (uint64_t c = 0; c * ce < N; c++) {
		const void *s = p->tc->slot[(seq0 + c) % DEPTH].sent;

		for (uint64_t i = c * ce; i < N && i < (c + 1) * ce; i++)
			p->ss[i] += (double)tcu_load(s, (int)kc->wire,
						     i - c * ce) * inv_l;
	}
}

static int invariant(struct proc *p, const struct ef_job *j, size_t ci)
{
	const struct key_case *kc = &cases[ci];
	float *g = malloc(N * sizeof(float));
	float inv_l = 1.0f / LOCAL;
	size_t i;

	CHECK(g, 62);
	CHECK(N * tally_dtype_size(kc->wire) <= DEPTH * CHUNK_BYTES, 63);
	memset(p->sg, 0, N * sizeof(double));
	memset(p->ss, 0, N * sizeof(double));
	memset(p->slack, 0, N * sizeof(double));
	for (int t = 0; t < ROUNDS; t++) {
		uint64_t seq0 = p->tc->next_seq;

		CHECK(!peek_e(p, kc->key), 64);
		for (i = 0; i < N; i++) {
			g[i] = as_dtype(value(p->id, i, t), kc->dtype);
			p->sg[i] += g[i];
			p->slack[i] += fabs((double)g[i] + p->e[i]);
		}
		CHECK(!upload(p, g, kc->dtype), 65);
		CHECK(!allreduce(p, j, kc, (uint64_t)t + 1), 66);
		CHECK(!finish(p), 67);
		add_sent(p, kc, seq0, inv_l);
		CHECK(!peek_e(p, kc->key), 68);
		for (i = 0; i < N; i++)
			p->slack[i] += fabs(p->e[i]);
	}
	for (i = 0; i < N; i++) {
		double d = p->sg[i] - p->ss[i] - p->e[i];
		double bound = ldexp(p->slack[i], -22);

		if (!(fabs(d) <= bound)) {
			fprintf(stderr, "proc %d key %llu elem %zu: sum g %.9g "
				"- sum sent/L %.9g - e %.9g = %g > %g\n",
				p->id, (unsigned long long)kc->key, i,
				p->sg[i], p->ss[i], p->e[i], d, bound);
			free(g);
			return 69;
		}
	}
	/* compression loses information: the residual is not 0 */
	for (i = 0; i < N && p->e[i] == 0; i++)
		;
	CHECK(i < N, 70);
	/* libtally kept none of its own (TALLY_F_EF_CALLER) */
	CHECK(p->c->ef == NULL, 59);
	/* the last round's result, for the parent to compare */
	CU(cudaMemcpy(p->h, p->d_r, N * tally_dtype_size(kc->dtype),
		      cudaMemcpyDeviceToHost));
	for (i = 0; i < N; i++)
		j->results[((size_t)p->id * NCASES + ci) * N + i] =
			tcu_load(p->h, (int)kc->dtype, i);
	free(g);
	return 0;
}

/*
 * An inf in process 0's first chunk: the result of that sign chunk (or
 * sparse block) is non-finite everywhere; a sign chunk resets its
 * residual on every process, a block on the host that had it (the other
 * host may not have sent the block: its "sent" there is 0), the rest
 * keep theirs.
 */
static int nonfinite(struct proc *p, const struct ef_job *j)
{
	const struct key_case *kc = &cases[0];
	bool sparse = j->named == TALLY_COMPRESS_BLOCK_TOPK10_EF;
	size_t span = sparse ? K : SIGN_CHUNK, i;
	float *g = malloc(N * sizeof(float)), *r = p->h;

	CHECK(g, 71);
	for (i = 0; i < N; i++)
		g[i] = value(p->id, i, ROUNDS);
	if (p->id == 0)
		g[NONFINITE_AT] = INFINITY;
	CHECK(!upload(p, g, kc->dtype), 72);
	free(g);
	CHECK(!allreduce(p, j, kc, ROUNDS + 1), 73);
	CHECK(!finish(p), 74);
	CU(cudaMemcpy(r, p->d_r, N * 4, cudaMemcpyDeviceToHost));
	CHECK(!isfinite(r[0]) && !isfinite(r[span - 1]), 79);
	CHECK(isfinite(r[N - 1]), 79);
	CHECK(!peek_e(p, kc->key), 75);
	for (i = 0; i < span && (!sparse || j->host == 0); i++)
		CHECK(p->e[i] == 0, 76);
	for (i = span; i < N && p->e[i] == 0; i++)
		;
	CHECK(i < N, 77);
	for (i = 0; i < N; i++)
		CHECK(isfinite(p->e[i]), 78);
	return 0;
}

/*
 * Two operations of a one-chunk key queued back to back leave the
 * residual two waited-for ones leave: the second's e += g waits for the
 * first's feedback (one chunk, fewer than the slots: nothing else orders
 * them).  Inputs from two device buffers, so that no upload comes between.
 */
static int back_to_back(struct proc *p, const struct ef_job *j)
{
	const struct key_case kc = { 5, TALLY_FLOAT32, TALLY_FLOAT32 };
	float *g = malloc(NB * sizeof(float)), *want = p->e + NB;
	void *d_g2 = NULL;
	uint64_t it = 1;
	size_t i;

	CHECK(g, 110);
	CU(cudaMalloc(&d_g2, NB * 4));
	for (int round = 0; round < 3; round++) {
		for (int b = 0; b < 2; b++) {
			for (i = 0; i < NB; i++)
				g[i] = value(p->id, i, 50 + round + b);
			CU(cudaMemcpy(b ? d_g2 : p->d_g, g, NB * 4,
				      cudaMemcpyHostToDevice));
		}
		/* waited for */
		CHECK(!allreduce_n(p, j, &kc, it++, p->d_g, NB), 111);
		CHECK(!finish(p), 112);
		CHECK(!allreduce_n(p, j, &kc, it++, d_g2, NB), 113);
		CHECK(!finish(p), 114);
		CHECK(!peek_n(p, kc.key, NB), 115);
		memcpy(want, p->e, NB * sizeof(float));
		for (i = 0; i < NB && want[i] == 0; i++)
			;
		CHECK(i < NB, 116);
		/* back to back, from zero again */
		CHECK(tally_cuda_ef_reset(p->tc, kc.key) == 0, 117);
		CHECK(!allreduce_n(p, j, &kc, it++, p->d_g, NB), 118);
		CHECK(!allreduce_n(p, j, &kc, it++, d_g2, NB), 119);
		CHECK(!finish(p), 120);
		CHECK(!peek_n(p, kc.key, NB), 121);
		CHECK(!memcmp(p->e, want, NB * sizeof(float)), 122);
		CHECK(tally_cuda_ef_reset(p->tc, kc.key) == 0, 123);
	}
	cudaFree(d_g2);
	free(g);
	return 0;
}

static int all_zero(struct proc *p, uint64_t key)
{
	CHECK(!peek_e(p, key), 80);
	for (size_t i = 0; i < N; i++)
		CHECK(p->e[i] == 0, 81);
	return 0;
}

static int resets(struct proc *p, const struct ef_job *j)
{
	const struct key_case *kc = &cases[0];
	uint64_t it = ROUNDS + 2;
	float *g = malloc(N * sizeof(float));
	size_t i;

	CHECK(g, 82);
	for (i = 0; i < N; i++)
		g[i] = value(p->id, i, 99);
	CHECK(!upload(p, g, kc->dtype), 83);
	free(g);
	/* a residual to reset, then the reset */
	CHECK(!allreduce(p, j, kc, it++), 84);
	CHECK(!finish(p), 85);
	CHECK(!peek_e(p, kc->key), 86);
	for (i = 0; i < N && p->e[i] == 0; i++)
		;
	CHECK(i < N, 87);
	CHECK(tally_cuda_ef_reset(p->tc, kc->key) == 0, 88);
	CHECK(!finish(p), 89);
	CHECK(!all_zero(p, kc->key), 90);
	CHECK(tally_cuda_ef_reset(p->tc, 999) == -TALLY_ENOENT, 91);
	/* queued right behind the key's operation: after its feedback */
	CHECK(!allreduce(p, j, kc, it++), 92);
	CHECK(tally_cuda_ef_reset(p->tc, kc->key) == 0, 93);
	CHECK(!finish(p), 94);
	CHECK(!all_zero(p, kc->key), 95);
	/* every key's */
	for (size_t ci = 1; ci < NCASES; ci++) {
		CHECK(!peek_e(p, cases[ci].key), 96);
		for (i = 0; i < N && p->e[i] == 0; i++)
			;
		CHECK(i < N, 97);
	}
	CHECK(tally_cuda_ef_reset_all(p->tc) == 0, 98);
	CHECK(!finish(p), 99);
	for (size_t ci = 0; ci < NCASES; ci++)
		CHECK(!all_zero(p, cases[ci].key), 100);
	return 0;
}

/* one host alone: nothing compressed, the exact sum, no residual */
static int exact(struct proc *p, const struct ef_job *j)
{
	const struct key_case *kc = &cases[0];
	float *g = malloc(N * sizeof(float)), *r = p->h;
	size_t i;

	CHECK(g, 101);
	for (int t = 0; t < 2; t++) {
		for (i = 0; i < N; i++)
			g[i] = value(p->id, i, t);
		CHECK(!upload(p, g, kc->dtype), 102);
		CHECK(!allreduce(p, j, kc, (uint64_t)t + 1), 103);
		CHECK(!finish(p), 104);
		CHECK(!all_zero(p, kc->key), 105);
		CU(cudaMemcpy(r, p->d_r, N * 4, cudaMemcpyDeviceToHost));
		for (i = 0; i < N; i++)
			CHECK(r[i] == value(0, i, t) + value(1, i, t), 106);
	}
	free(g);
	return 0;
}

static int proc_open(struct proc *p, const struct ef_job *j)
{
	struct tally_cuda_opts o = TALLY_CUDA_OPTS_INIT;
	int r;

	CHECK(tally_connect(j->sock, &p->c) == 0, 2);
	p->id = j->host * LOCAL + tally_rank(p->c);
	CHECK(tally_size(p->c) == LOCAL, 3);
	o.chunk_bytes = CHUNK_BYTES;
	o.depth = DEPTH;
	r = tally_cuda_open(p->c, &o, &p->tc);
	if (r)
		fprintf(stderr, "tally_cuda_open: %s\n",
			tally_cuda_open_error());
	CHECK(r == 0, 4);
	CU(cudaStreamCreate(&p->stream));
	CU(cudaMalloc(&p->d_g, N * 4));
	CU(cudaMalloc(&p->d_r, N * 4));
	p->h = malloc(N * 4);
	p->e = malloc(N * sizeof(float));
	p->sg = malloc(N * sizeof(double));
	p->ss = malloc(N * sizeof(double));
	p->slack = malloc(N * sizeof(double));
	CHECK(p->h && p->e && p->sg && p->ss && p->slack, 5);
	return 0;
}

static void proc_close(struct proc *p)
{
	cudaFree(p->d_g);
	cudaFree(p->d_r);
	cudaStreamDestroy(p->stream);
	tally_cuda_close(p->tc);
	tally_disconnect(p->c);
	free(p->h);
	free(p->e);
	free(p->sg);
	free(p->ss);
	free(p->slack);
}

static int client_main(void *arg)
{
	const struct ef_job *j = arg;
	struct proc p = { 0 };
	int r;

	alarm(CLIENT_TIMEOUT_MS / 1000 + 10);
	r = proc_open(&p, j);
	if (r)
		return r;
	if (j->hosts == 1) {
		r = exact(&p, j);
	} else {
		for (size_t ci = 0; ci < NCASES && !r; ci++)
			r = invariant(&p, j, ci);
		if (!r)
			r = back_to_back(&p, j);
		if (!r)
			r = nonfinite(&p, j);
		if (!r)
			r = resets(&p, j);
	}
	if (r)
		return r;
	proc_close(&p);
	return 0;
}

/* ---- the parent: daemons, clients, the comparison ---- */

static int run_job(const char *const *extra, int hosts,
		   enum tally_compression named, float *results)
{
	struct cluster_spec s = { .workers = hosts,
				  .role = "worker+aggregator",
				  .algorithm = "aggregate", .extra = extra };
	struct test_cluster tc;
	struct ef_job jobs[HOSTS];
	pid_t pid[PROCS];
	int n = 0, failed = 0;

	if (cluster_up(&tc, &s))
		return -1;
	for (int h = 0; h < hosts; h++) {
		jobs[h] = (struct ef_job){ .sock = tc.d[h].sock, .host = h,
					   .hosts = hosts, .named = named,
					   .results = results };
		for (int l = 0; l < LOCAL; l++)
			pid[n++] = child_start(client_main, &jobs[h]);
	}
	for (int i = 0; i < n; i++)
		failed += child_wait(pid[i], CLIENT_TIMEOUT_MS) != 0;
	if (failed)
		cluster_show_warnings(&tc);
	return failed + cluster_down(&tc);
}

static float *shared_results(void)
{
	size_t bytes = (size_t)PROCS * NCASES * N * sizeof(float);
	float *r = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(r != MAP_FAILED);
	return r;
}

/* every process got the same result, finite, not all zero */
static void same_results(const float *res)
{
	for (size_t ci = 0; ci < NCASES; ci++) {
		const float *r0 = res + ci * N;
		size_t nonzero = 0;

		for (size_t i = 0; i < N; i++) {
			assert_true(isfinite(r0[i]));
			nonzero += r0[i] != 0;
		}
		assert_true(nonzero > 0);
		for (int p = 1; p < PROCS; p++)
			assert_memory_equal(res + ((size_t)p * NCASES + ci) * N,
					    r0, N * sizeof(float));
	}
	munmap((void *)res, (size_t)PROCS * NCASES * N * sizeof(float));
}

static const char *const job_sign[] = {
	"--set", "compression.method=sign_ef",
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.reorder_ppm=20000",
	"--set", "emulator.reorder_us=200",
	NULL,
};

static const char *const job_lossy[] = {
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.reorder_ppm=20000",
	"--set", "emulator.reorder_us=200",
	NULL,
};

/* the job's method: the flags say DEFAULT */
static void test_sign_ef(void **state)
{
	float *res = shared_results();

	(void)state;
	assert_int_equal(run_job(job_sign, HOSTS, TALLY_COMPRESS_DEFAULT, res),
			 0);
	same_results(res);
}

/* named per tensor in a job without a method */
static void test_block_topk10_ef(void **state)
{
	float *res = shared_results();

	(void)state;
	assert_int_equal(run_job(job_lossy, HOSTS,
				 TALLY_COMPRESS_BLOCK_TOPK10_EF, res), 0);
	same_results(res);
}

static void test_one_host_exact(void **state)
{
	float *res = shared_results();

	(void)state;
	assert_int_equal(run_job(job_lossy, 1, TALLY_COMPRESS_SIGN_EF, res),
			 0);
	munmap(res, (size_t)PROCS * NCASES * N * sizeof(float));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sign_ef),
		cmocka_unit_test(test_block_topk10_ef),
		cmocka_unit_test(test_one_host_exact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
