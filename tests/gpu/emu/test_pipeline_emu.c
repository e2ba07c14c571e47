// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_pipeline_emu.c - libtally-cuda's real pipeline (the C files of
 * gpu/) over the host EMULATION of the CUDA runtime (cuda_emu.c,
 * kernels_emu.c), two client processes through a real tallyd.  An
 * addition to the device tests of tests/gpu/run-device.sh, not a
 * replacement: it checks the pipeline's ordering (slots, events, flags,
 * the progress thread, error release, narrowing), where CI has no GPU.
 *
 * Chunks of 64 KiB and 3 slots, so that tensors cycle through the slots
 * many times.  Inputs are small integers: every sum is exact in float32,
 * bfloat16 and float16, and each result is compared element by element
 * with the sum computed here.  The emulated streams sleep at random
 * before each op, so a missing dependency shows up as wrong data.
 *
 * Only the client processes use CUDA (the emulation's threads would not
 * survive a fork); the parent runs the daemon and the checks of cmocka.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <tally/tally_cuda.h>

#include "cuda_emu.h"
#include "tests/integration/harness.h"

#define NRANKS 2
#define CHUNK_BYTES (64u << 10)
#define DEPTH 3u
#define RANK_TIMEOUT_MS 60000
#define WATCHDOG_S 50		/* a hung stream fails the rank, loudly */

/* a failed check in a client process: say where, fail the process */
#define TRY(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "rank %d: %s:%d: check failed: "\
				"%s\n", rank_now, __FILE__, __LINE__,	\
				#cond);					\
			return 1;					\
		}							\
	} while (0)

static struct test_daemon dmn;
static int rank_now = -1;

struct rank_ctx {
	int rank;
	struct tally_client *c;
	struct tally_cuda *tc;	/* NULL once the body closed it */
	cudaStream_t stream;
	int to_peer, from_peer;	/* pipe ends */
};

typedef int (*rank_body)(struct rank_ctx *r);

/* ---- inputs and their sums ---- */

static float value_f32(int rank, uint64_t key, uint64_t i)
{
	return (float)((int)((i * 31 + (uint64_t)rank * 7 + key * 5) % 23) -
		       11);
}

static int32_t value_i32(int rank, uint64_t key, uint64_t i)
{
	return (int32_t)((i * 2654435761u + (uint64_t)rank * 977 +
			  key * 13) % 2000001) - 1000000;
}

static float sum_f32(uint64_t key, uint64_t i)
{
	double s = 0;

	for (int r = 0; r < NRANKS; r++)
		s += value_f32(r, key, i);
	return (float)s;
}

static int32_t sum_i32(uint64_t key, uint64_t i)
{
	int64_t s = 0;

	for (int r = 0; r < NRANKS; r++)
		s += value_i32(r, key, i);
	return (int32_t)s;
}

static void fill(void *buf, enum tally_dtype t, int rank, uint64_t key,
		 uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		if (t == TALLY_INT32)
			((int32_t *)buf)[i] = value_i32(rank, key, i);
		else
			((float *)buf)[i] = value_f32(rank, key, i);
	}
}

/* @got holds @scale times the sums of @key's inputs, element by element */
static int check_sums(const char *what, const void *got, enum tally_dtype t,
		      uint64_t key, uint64_t n, int scale)
{
	for (uint64_t i = 0; i < n; i++) {
		if (t == TALLY_INT32) {
			int32_t want = sum_i32(key, i) * scale;
			int32_t have = ((const int32_t *)got)[i];

			if (have == want)
				continue;
			fprintf(stderr, "rank %d: %s: key %llu element %llu "
				"of %llu is %d, not %d\n", rank_now, what,
				(unsigned long long)key,
				(unsigned long long)i,
				(unsigned long long)n, have, want);
			return 1;
		} else {
			float want = sum_f32(key, i) * (float)scale;
			float have = ((const float *)got)[i];

			if (have == want)
				continue;
			fprintf(stderr, "rank %d: %s: key %llu element %llu "
				"of %llu is %g, not %g\n", rank_now, what,
				(unsigned long long)key,
				(unsigned long long)i,
				(unsigned long long)n, have, want);
			return 1;
		}
	}
	return 0;
}

/* elements of @wire that fill one pipeline chunk */
static uint64_t chunk_elems(enum tally_dtype wire)
{
	return CHUNK_BYTES / tally_dtype_size(wire);
}

/* ---- one all-reduce of device buffers ---- */

struct op {
	uint64_t key, count;
	enum tally_dtype dtype, wire;
	bool in_place;
	void *d_send, *d_recv;
};

#define POISON 0xa5	/* 0xa5a5a5a5: no sum of the inputs */

/* device buffers: the inputs in sendbuf, recvbuf poisoned */
static int op_prepare(struct op *o)
{
	size_t bytes = o->count * 4;
	void *h = malloc(bytes ? bytes : 1);

	TRY(h);
	fill(h, o->dtype, rank_now, o->key, o->count);
	TRY(cudaMalloc(&o->d_send, bytes) == cudaSuccess);
	TRY(cudaMemcpy(o->d_send, h, bytes, cudaMemcpyHostToDevice) ==
	    cudaSuccess);
	free(h);
	o->d_recv = o->d_send;
	if (!o->in_place) {
		TRY(cudaMalloc(&o->d_recv, bytes) == cudaSuccess);
		TRY(cudaMemset(o->d_recv, POISON, bytes) == cudaSuccess);
	}
	return 0;
}

/* tally_cuda_allreduce() of @o on the rank's stream: its return value */
static int op_submit(struct rank_ctx *r, const struct op *o)
{
	struct tally_cuda_allreduce_args a = {
		.key = o->key, .iteration = 1,
		.sendbuf = o->d_send, .recvbuf = o->d_recv,
		.count = o->count, .dtype = o->dtype, .wire_dtype = o->wire,
		.op = TALLY_SUM,
	};

	return tally_cuda_allreduce(r->tc, &a, r->stream);
}

static int op_queue(struct rank_ctx *r, const struct op *o)
{
	int ret = op_submit(r, o);

	if (ret)
		fprintf(stderr, "rank %d: tally_cuda_allreduce: %s (%s)\n",
			r->rank, tally_strerror(ret),
			tally_cuda_error_message(r->tc));
	TRY(ret == 0);
	return 0;
}

/* recvbuf holds @scale times the sums; an out-of-place sendbuf is intact */
static int op_check(const struct op *o, int scale)
{
	size_t bytes = o->count * 4;
	void *h = malloc(bytes ? bytes : 1);
	int bad;

	TRY(h);
	TRY(cudaMemcpy(h, o->d_recv, bytes, cudaMemcpyDeviceToHost) ==
	    cudaSuccess);
	bad = check_sums("recvbuf", h, o->dtype, o->key, o->count, scale);
	if (!bad && !o->in_place) {
		void *want = malloc(bytes ? bytes : 1);

		TRY(want);
		TRY(cudaMemcpy(h, o->d_send, bytes, cudaMemcpyDeviceToHost) ==
		    cudaSuccess);
		fill(want, o->dtype, rank_now, o->key, o->count);
		bad = memcmp(h, want, bytes) != 0;
		if (bad)
			fprintf(stderr, "rank %d: key %llu: out of place, "
				"sendbuf changed\n", rank_now,
				(unsigned long long)o->key);
		free(want);
	}
	free(h);
	return bad;
}

static void op_release(struct op *o)
{
	if (o->d_recv != o->d_send)
		cudaFree(o->d_recv);
	cudaFree(o->d_send);
}

/* queue a prepared @o, synchronize, check: no asynchronous error, the
 * right sums */
static int op_queue_and_check(struct rank_ctx *r, struct op *o)
{
	TRY(op_queue(r, o) == 0);
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(tally_cuda_async_error(r->tc) == 0);
	TRY(op_check(o, 1) == 0);
	op_release(o);
	return 0;
}

static int op_run(struct rank_ctx *r, struct op *o)
{
	TRY(op_prepare(o) == 0);
	return op_queue_and_check(r, o);
}

/* ---- client processes ---- */

struct scenario {
	rank_body body;
	int pipe[NRANKS][2];	/* pipe[r]: rank r to the other */
};

struct rank_arg {
	struct scenario *sc;
	int rank;
};

static void on_watchdog(int sig)
{
	static const char msg[] = "rank watchdog: a stream or a close hung\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(90);
}

/* a crash says which signal (child_wait() only sees -1) */
static void on_fatal(int sig)
{
	char msg[] = "rank ?: fatal signal ??\n";

	msg[5] = (char)('0' + rank_now);
	msg[21] = (char)('0' + sig / 10);
	msg[22] = (char)('0' + sig % 10);
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(100 + sig);
}

static int rank_open(struct rank_ctx *r)
{
	struct tally_cuda_opts o = TALLY_CUDA_OPTS_INIT;
	int ret;

	o.chunk_bytes = CHUNK_BYTES;
	o.depth = DEPTH;
	TRY(tally_connect(dmn.sock, &r->c) == 0);
	ret = tally_cuda_open(r->c, &o, &r->tc);
	if (ret)
		fprintf(stderr, "rank %d: tally_cuda_open: %s\n", r->rank,
			tally_cuda_open_error());
	TRY(ret == 0);
	TRY(cudaStreamCreate(&r->stream) == cudaSuccess);
	return 0;
}

static void rank_close(struct rank_ctx *r)
{
	if (r->tc) {
		cudaStreamDestroy(r->stream);
		tally_cuda_close(r->tc);
	}
	tally_disconnect(r->c);
}

static int rank_main(void *p)
{
	struct rank_arg *a = p;
	struct rank_ctx r = {
		.rank = a->rank,
		.to_peer = a->sc->pipe[a->rank][1],
		.from_peer = a->sc->pipe[!a->rank][0],
	};
	int ret;

	rank_now = a->rank;
	signal(SIGALRM, on_watchdog);
	signal(SIGSEGV, on_fatal);
	signal(SIGBUS, on_fatal);
	signal(SIGABRT, on_fatal);
	signal(SIGPIPE, on_fatal);
	alarm(WATCHDOG_S);
	ret = rank_open(&r);
	if (ret)
		return ret;
	ret = a->sc->body(&r);
	if (ret)
		fprintf(stderr, "rank %d failed; emulation seed %#llx "
			"($TALLY_CUDA_EMU_SEED)\n", r.rank,
			(unsigned long long)emu_seed());
	else
		rank_close(&r);
	return ret;
}

/* run @body in NRANKS client processes; each must exit 0 */
static void run_ranks(rank_body body)
{
	struct scenario sc = { .body = body };
	struct rank_arg args[NRANKS];
	pid_t pid[NRANKS];
	int r;

	for (r = 0; r < NRANKS; r++)
		assert_int_equal(pipe(sc.pipe[r]), 0);
	for (r = 0; r < NRANKS; r++) {
		args[r] = (struct rank_arg){ &sc, r };
		pid[r] = child_start(rank_main, &args[r]);
		assert_true(pid[r] > 0);
	}
	for (r = 0; r < NRANKS; r++)
		assert_int_equal(child_wait(pid[r], RANK_TIMEOUT_MS), 0);
	for (r = 0; r < NRANKS; r++) {
		close(sc.pipe[r][0]);
		close(sc.pipe[r][1]);
	}
}

static int setup(void **state)
{
	(void)state;
	return daemon_start(&dmn, NRANKS, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return daemon_stop(&dmn) == 0 ? 0 : -1;
}

/* ---- sizes, dtypes, in and out of place ---- */

static int sizes_for(enum tally_dtype dtype, enum tally_dtype wire,
		     uint64_t key0, struct rank_ctx *r)
{
	uint64_t ce = chunk_elems(wire);
	const uint64_t counts[] = { 0, 1, 1000, ce, ce + 1, 40 * ce + 3 };
	uint64_t key = key0;

	for (int place = 0; place < 2; place++)
		for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]);
		     i++) {
			struct op o = { .key = key++, .count = counts[i],
					.dtype = dtype, .wire = wire,
					.in_place = place == 0 };

			TRY(op_run(r, &o) == 0);
			if (!o.count)	/* nothing was queued */
				TRY(cudaStreamQuery(r->stream) ==
				    cudaSuccess);
		}
	return 0;
}

static int body_sizes(struct rank_ctx *r)
{
	TRY(sizes_for(TALLY_FLOAT32, TALLY_FLOAT32, 100, r) == 0);
	TRY(sizes_for(TALLY_INT32, TALLY_INT32, 200, r) == 0);
	return 0;
}

static void test_sizes_and_dtypes(void **state)
{
	(void)state;
	run_ranks(body_sizes);
}

/* float32 tensors carried as bfloat16 and float16 (narrowed, widened) */
static int body_narrowing(struct rank_ctx *r)
{
	TRY(sizes_for(TALLY_FLOAT32, TALLY_BFLOAT16, 300, r) == 0);
	TRY(sizes_for(TALLY_FLOAT32, TALLY_FLOAT16, 400, r) == 0);
	return 0;
}

static void test_narrowing(void **state)
{
	(void)state;
	run_ranks(body_narrowing);
}

/* ---- stream order: kernels before and after, no host sync ---- */

struct fill_kernel {
	void *dst;
	enum tally_dtype dtype;
	int rank;
	uint64_t key, n;
	unsigned int delay_us;	/* a slow kernel: later work must wait */
};

static cudaError_t run_fill(void *arg)
{
	struct fill_kernel *k = arg;
	struct timespec ts = { 0, (long)k->delay_us * 1000 };

	nanosleep(&ts, NULL);
	if (!emu_device_accessible(k->dst, k->n * 4))
		return cudaErrorIllegalAddress;
	fill(k->dst, k->dtype, k->rank, k->key, k->n);
	return cudaSuccess;
}

struct copy_kernel {
	void *dst;
	const void *src;
	size_t bytes;
};

static cudaError_t run_copy(void *arg)
{
	struct copy_kernel *k = arg;

	if (!emu_device_accessible(k->dst, k->bytes) ||
	    !emu_device_accessible(k->src, k->bytes))
		return cudaErrorIllegalAddress;
	memcpy(k->dst, k->src, k->bytes);
	return cudaSuccess;
}

static int stream_order_case(struct rank_ctx *r, struct op *o)
{
	size_t bytes = o->count * 4;
	struct fill_kernel in = { .dtype = o->dtype, .rank = r->rank,
				  .key = o->key, .n = o->count,
				  .delay_us = 3000 };
	struct fill_kernel junk = in;
	struct copy_kernel out = { .bytes = bytes };
	void *d_out, *h;

	TRY(cudaMalloc(&o->d_send, bytes) == cudaSuccess);
	TRY(cudaMemset(o->d_send, POISON, bytes) == cudaSuccess);
	o->d_recv = o->d_send;
	if (!o->in_place) {
		TRY(cudaMalloc(&o->d_recv, bytes) == cudaSuccess);
		TRY(cudaMemset(o->d_recv, POISON, bytes) == cudaSuccess);
	}
	TRY(cudaMalloc(&d_out, bytes) == cudaSuccess);
	TRY(cudaMemset(d_out, POISON, bytes) == cudaSuccess);
	/* a slow kernel writes the input ... */
	in.dst = o->d_send;
	TRY(emu_launch(r->stream, run_fill, &in, sizeof(in)) == cudaSuccess);
	TRY(op_queue(r, o) == 0);
	/* ... a kernel reads the result, then others overwrite both */
	out.dst = d_out;
	out.src = o->d_recv;
	TRY(emu_launch(r->stream, run_copy, &out, sizeof(out)) ==
	    cudaSuccess);
	junk.key = o->key + 1000;
	junk.delay_us = 0;
	junk.dst = o->d_send;
	TRY(emu_launch(r->stream, run_fill, &junk, sizeof(junk)) ==
	    cudaSuccess);
	junk.dst = o->d_recv;
	TRY(emu_launch(r->stream, run_fill, &junk, sizeof(junk)) ==
	    cudaSuccess);
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(tally_cuda_async_error(r->tc) == 0);
	h = malloc(bytes);
	TRY(h);
	TRY(cudaMemcpy(h, d_out, bytes, cudaMemcpyDeviceToHost) ==
	    cudaSuccess);
	TRY(check_sums("copy made after the all-reduce", h, o->dtype, o->key,
		       o->count, 1) == 0);
	free(h);
	cudaFree(d_out);
	op_release(o);
	return 0;
}

static int body_stream_order(struct rank_ctx *r)
{
	uint64_t ce = chunk_elems(TALLY_FLOAT32);
	struct op cases[] = {
		{ .key = 500, .count = 40 * ce + 3, .dtype = TALLY_FLOAT32,
		  .wire = TALLY_FLOAT32, .in_place = true },
		{ .key = 501, .count = 40 * ce + 3, .dtype = TALLY_FLOAT32,
		  .wire = TALLY_FLOAT32 },
		{ .key = 502, .count = 1000, .dtype = TALLY_INT32,
		  .wire = TALLY_INT32 },
		{ .key = 503, .count = 20 * ce + 7, .dtype = TALLY_FLOAT32,
		  .wire = TALLY_BFLOAT16, .in_place = true },
		{ .key = 504, .count = 20 * ce + 7, .dtype = TALLY_FLOAT32,
		  .wire = TALLY_FLOAT16 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		TRY(stream_order_case(r, &cases[i]) == 0);
	return 0;
}

static void test_stream_order(void **state)
{
	(void)state;
	run_ranks(body_stream_order);
}

/* ---- the call returns before the work is done ---- */

/* rank 1 submits only once rank 0 saw its own stream still busy, so
 * nothing can have completed: the call must not have waited for it */
static int body_returns_early(struct rank_ctx *r)
{
	struct op o = { .key = 600, .count = 40 * chunk_elems(TALLY_FLOAT32)
				       + 3,
			.dtype = TALLY_FLOAT32, .wire = TALLY_FLOAT32 };
	struct timespec ts = { 0, 50 * 1000 * 1000 };

	TRY(op_prepare(&o) == 0);
	if (r->rank == 1)
		TRY(sync_wait(r->from_peer, 20000) == 0);
	TRY(op_queue(r, &o) == 0);
	if (r->rank == 0) {
		TRY(cudaStreamQuery(r->stream) == cudaErrorNotReady);
		nanosleep(&ts, NULL);	/* the peer is not there yet */
		TRY(cudaStreamQuery(r->stream) == cudaErrorNotReady);
		sync_signal(r->to_peer);
	}
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(cudaStreamQuery(r->stream) == cudaSuccess);
	TRY(tally_cuda_async_error(r->tc) == 0);
	TRY(op_check(&o, 1) == 0);
	op_release(&o);
	return 0;
}

static void test_returns_before_done(void **state)
{
	(void)state;
	run_ranks(body_returns_early);
}

/* ---- operations back to back on one stream ---- */

/* b reduces a's result (so it must wait for a), c is unrelated */
static int body_back_to_back(struct rank_ctx *r)
{
	uint64_t ce = chunk_elems(TALLY_FLOAT32);
	struct op a = { .key = 700, .count = 9 * ce + 11,
			.dtype = TALLY_FLOAT32, .wire = TALLY_FLOAT32,
			.in_place = true };
	struct op b = { .key = 700, .count = a.count,
			.dtype = TALLY_FLOAT32, .wire = TALLY_BFLOAT16 };
	struct op c = { .key = 702, .count = 5 * ce + 1,
			.dtype = TALLY_INT32, .wire = TALLY_INT32 };
	void *h;

	TRY(op_prepare(&a) == 0);
	TRY(op_prepare(&c) == 0);
	b.d_send = a.d_recv;
	TRY(cudaMalloc(&b.d_recv, b.count * 4) == cudaSuccess);
	TRY(cudaMemset(b.d_recv, POISON, b.count * 4) == cudaSuccess);
	TRY(op_queue(r, &a) == 0);
	b.key = 701;
	TRY(op_queue(r, &b) == 0);
	TRY(op_queue(r, &c) == 0);
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(tally_cuda_async_error(r->tc) == 0);
	TRY(op_check(&a, 1) == 0);
	TRY(op_check(&c, 1) == 0);
	h = malloc(b.count * 4);
	TRY(h);
	TRY(cudaMemcpy(h, b.d_recv, b.count * 4, cudaMemcpyDeviceToHost) ==
	    cudaSuccess);
	/* every rank had a's sums: b is twice them */
	TRY(check_sums("second of three", h, TALLY_FLOAT32, a.key, b.count,
		       NRANKS) == 0);
	free(h);
	cudaFree(b.d_recv);
	op_release(&a);
	op_release(&c);
	return 0;
}

static void test_back_to_back(void **state)
{
	(void)state;
	run_ranks(body_back_to_back);
}

/* ---- close with operations still queued ---- */

static int body_close_queued(struct rank_ctx *r)
{
	uint64_t ce = chunk_elems(TALLY_FLOAT32);
	struct op a = { .key = 800, .count = 40 * ce + 3,
			.dtype = TALLY_FLOAT32, .wire = TALLY_FLOAT32 };
	struct op b = { .key = 801, .count = 3 * ce + 5,
			.dtype = TALLY_INT32, .wire = TALLY_INT32,
			.in_place = true };

	TRY(op_prepare(&a) == 0);
	TRY(op_prepare(&b) == 0);
	TRY(op_queue(r, &a) == 0);
	TRY(op_queue(r, &b) == 0);
	tally_cuda_close(r->tc);
	r->tc = NULL;
	/* the emulation's device memory is host memory: read it as close
	 * left it, with no synchronization of ours */
	TRY(check_sums("recvbuf right after close", a.d_recv, a.dtype, a.key,
		       a.count, 1) == 0);
	TRY(check_sums("recvbuf right after close", b.d_recv, b.dtype, b.key,
		       b.count, 1) == 0);
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(op_check(&a, 1) == 0);
	op_release(&a);
	op_release(&b);
	TRY(cudaStreamDestroy(r->stream) == cudaSuccess);
	return 0;
}

static void test_close_with_queued_ops(void **state)
{
	(void)state;
	run_ranks(body_close_queued);
}

/* ---- errors found while queueing ---- */

static int expect_einval(struct rank_ctx *r,
			 const struct tally_cuda_allreduce_args *a,
			 const char *named)
{
	int ret = tally_cuda_allreduce(r->tc, a, r->stream);

	TRY(ret == -TALLY_EINVAL);
	if (!strstr(tally_cuda_error_message(r->tc), named)) {
		fprintf(stderr, "rank %d: message '%s' does not name '%s'\n",
			r->rank, tally_cuda_error_message(r->tc), named);
		return 1;
	}
	/* nothing of it was queued: the stream is not made to wait */
	TRY(cudaStreamQuery(r->stream) == cudaSuccess);
	return 0;
}

static int body_errors(struct rank_ctx *r)
{
	struct op o = { .key = 900, .count = 4 * chunk_elems(TALLY_FLOAT32)
				       + 1,
			.dtype = TALLY_FLOAT32, .wire = TALLY_FLOAT32 };
	float *host = malloc(o.count * 4);
	struct tally_cuda_allreduce_args a;

	TRY(host);
	TRY(op_prepare(&o) == 0);
	a = (struct tally_cuda_allreduce_args){
		.key = o.key, .sendbuf = host, .recvbuf = o.d_recv,
		.count = o.count, .dtype = TALLY_FLOAT32,
		.wire_dtype = TALLY_FLOAT32, .op = TALLY_SUM };
	TRY(expect_einval(r, &a, "sendbuf") == 0);
	a.sendbuf = o.d_send;
	a.recvbuf = host;
	TRY(expect_einval(r, &a, "recvbuf") == 0);
	a.recvbuf = o.d_recv;
	a.key = TALLY_CUDA_KEY_LIMIT;
	TRY(expect_einval(r, &a, "key") == 0);
	a.key = o.key;
	a.dtype = TALLY_BFLOAT16;	/* widening on the GPU: refused */
	a.wire_dtype = TALLY_FLOAT32;
	TRY(expect_einval(r, &a, "wire_dtype") == 0);
	a.dtype = TALLY_INT32;
	a.wire_dtype = TALLY_FLOAT16;
	TRY(expect_einval(r, &a, "wire_dtype") == 0);
	free(host);
	/* the refused calls left nothing behind: the next one works */
	return op_queue_and_check(r, &o);
}

static void test_errors_while_queueing(void **state)
{
	(void)state;
	run_ranks(body_errors);
}

/* ---- a CUDA call failing halfway through queueing ---- */

/*
 * Rank 0's copy back of its first chunk cannot be queued (after the flag
 * wait was): the call fails naming the copy, the caller's stream does not
 * wait for the operation, and the chunk is cancelled, never submitted to
 * tallyd, yet it frees its slot.  The next operation of both ranks then
 * goes through the same slots and must come out right; a chunk left in
 * tallyd, or a slot left marked busy, would hang it.
 */
static int body_copy_fails(struct rank_ctx *r)
{
	const uint64_t n = 3 * chunk_elems(TALLY_FLOAT32);
	struct op a = { .key = 960, .count = n, .dtype = TALLY_FLOAT32,
			.wire = TALLY_FLOAT32 };
	struct op b = { .key = 961, .count = n + 7, .dtype = TALLY_FLOAT32,
			.wire = TALLY_FLOAT32 };
	uint64_t t0;

	if (r->rank == 1) {
		TRY(sync_wait(r->from_peer, 20000) == 0);
		return op_run(r, &b);
	}
	TRY(op_prepare(&a) == 0);
	emu_fail_async_copy(cudaMemcpyHostToDevice, 1);
	TRY(op_submit(r, &a) == -TALLY_EDEVICE);
	TRY(strstr(tally_cuda_error_message(r->tc),
		   "cudaMemcpyAsync (to the device)"));
	t0 = test_now_ms();
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(test_now_ms() - t0 < 5000);
	TRY(tally_cuda_async_error(r->tc) == 0);
	(void)cudaGetLastError();	/* the failed copy's, as in CUDA */
	op_release(&a);
	sync_signal(r->to_peer);
	return op_run(r, &b);
}

static void test_copy_fails_while_queueing(void **state)
{
	(void)state;
	run_ranks(body_copy_fails);
}

/* ---- a stale error of the caller's thread ---- */

/*
 * A failed call the caller did not clear (cudaGetLastError) is none of
 * tally_cuda_allreduce's business: it must still queue and succeed.  (The
 * launchers once returned cudaGetLastError(), the caller's stale error
 * included: "narrowing kernel launch: ...".  They now return their own
 * launch's status, tcu_launch().)
 */
static int body_stale_error(struct rank_ctx *r)
{
	struct op o = { .key = 950, .count = 3 * chunk_elems(TALLY_BFLOAT16)
				       + 1,
			.dtype = TALLY_FLOAT32, .wire = TALLY_BFLOAT16 };
	int x;

	TRY(op_prepare(&o) == 0);
	TRY(cudaHostUnregister(&x) == cudaErrorHostMemoryNotRegistered);
	return op_queue_and_check(r, &o);
}

static void test_stale_error_of_caller(void **state)
{
	(void)state;
	run_ranks(body_stale_error);
}

/* ---- tally_cuda_alloc, tally_cuda_numa_node ---- */

/* the node sysfs gives the emulated GPU's PCI device, -1 for none */
static int expected_node(void)
{
	char id[32], path[128];
	int node = -1;
	FILE *f;

	if (cudaDeviceGetPCIBusId(id, sizeof(id), 0) != cudaSuccess)
		return -100;
	for (char *p = id; *p; p++)
		if (*p >= 'A' && *p <= 'F')
			*p = (char)(*p - 'A' + 'a');
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", id);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &node) != 1)
			node = -1;
		fclose(f);
	}
	return node < 0 ? -1 : node;
}

static int body_alloc(struct rank_ctx *r)
{
	struct cudaPointerAttributes at;
	size_t bytes = 1u << 20;
	char *p = tally_cuda_alloc(r->tc, bytes);

	TRY(p);
	TRY(cudaPointerGetAttributes(&at, p + bytes / 2) == cudaSuccess);
	TRY(at.type == cudaMemoryTypeHost);
	/* registered already: CUDA refuses a second registration */
	TRY(cudaHostRegister(p, 4096, cudaHostRegisterDefault) ==
	    cudaErrorHostMemoryAlreadyRegistered);
	TRY(cudaGetLastError() == cudaErrorHostMemoryAlreadyRegistered);
	memset(p, 1, bytes);
	tally_cuda_free(r->tc, p);
	TRY(tally_cuda_alloc(r->tc, 0) == NULL);
	TRY(tally_cuda_numa_node(r->tc) == expected_node());
	return 0;
}

static void test_alloc_and_numa_node(void **state)
{
	(void)state;
	run_ranks(body_alloc);
}

/* ---- a peer that dies mid-operation ---- */

static int survivor(struct rank_ctx *r, bool partial)
{
	uint64_t ce = chunk_elems(TALLY_FLOAT32);
	struct op o = { .key = 1000, .count = 40 * ce + 3,
			.dtype = TALLY_FLOAT32, .wire = TALLY_FLOAT32 };
	uint64_t t0;
	void *h;
	int err;

	TRY(op_prepare(&o) == 0);
	TRY(op_queue(r, &o) == 0);
	sync_signal(r->to_peer);
	t0 = test_now_ms();
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(test_now_ms() - t0 < 10000);
	err = tally_cuda_async_error(r->tc);
	if (err != -TALLY_EPEERLOST)
		fprintf(stderr, "rank 0: async error %d (%s): %s\n", err,
			tally_strerror(err), tally_cuda_error_message(r->tc));
	TRY(err == -TALLY_EPEERLOST);
	TRY(strstr(tally_cuda_error_message(r->tc), "tally_allreduce"));
	TRY(tally_cuda_async_error(r->tc) == 0);	/* read, cleared */
	if (partial) {	/* the two chunks the peer took part in are right */
		h = malloc(2 * ce * 4);
		TRY(h);
		TRY(cudaMemcpy(h, o.d_recv, 2 * ce * 4,
			       cudaMemcpyDeviceToHost) == cudaSuccess);
		TRY(check_sums("chunks done before the peer died", h,
			       o.dtype, o.key, 2 * ce, 1) == 0);
		free(h);
	}
	op_release(&o);
	/* close returns (the watchdog would end us) */
	return 0;
}

/* rank 1 connects and opens, then exits without a word */
static int body_peer_silent(struct rank_ctx *r)
{
	if (r->rank == 0)
		return survivor(r, false);
	TRY(sync_wait(r->from_peer, 20000) == 0);
	_exit(0);
}

static void test_peer_exits_silently(void **state)
{
	(void)state;
	run_ranks(body_peer_silent);
}

/* rank 1 takes part in the first two chunks, then exits */
static int body_peer_midway(struct rank_ctx *r)
{
	struct op o = { .key = 1000, .count = 2 * chunk_elems(TALLY_FLOAT32),
			.dtype = TALLY_FLOAT32, .wire = TALLY_FLOAT32 };

	if (r->rank == 0)
		return survivor(r, true);
	TRY(sync_wait(r->from_peer, 20000) == 0);
	TRY(op_prepare(&o) == 0);
	TRY(op_queue(r, &o) == 0);
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(tally_cuda_async_error(r->tc) == 0);
	TRY(op_check(&o, 1) == 0);
	_exit(0);
}

static void test_peer_dies_midway(void **state)
{
	(void)state;
	run_ranks(body_peer_midway);
}

/* ---- the daemon dies mid-operation ---- */

/* rank 0 queues a tensor rank 1 never sends, and kills tallyd: the chunks
 * in tallyd fail in tally_test, the later ones at submission; every one
 * must release the stream */
static int body_daemon_dies(struct rank_ctx *r)
{
	struct op o = { .key = 1100, .count = 40 * chunk_elems(TALLY_FLOAT32),
			.dtype = TALLY_FLOAT32, .wire = TALLY_FLOAT32 };
	uint64_t t0;
	int err;

	if (r->rank == 1) {
		TRY(sync_wait(r->from_peer, 20000) == 0);
		return 0;
	}
	/* SIGPIPE stays fatal (rank_main): libtally must not raise it when
	 * it rings a dead daemon's doorbell */
	TRY(op_prepare(&o) == 0);
	TRY(op_queue(r, &o) == 0);
	TRY(kill(dmn.pid, SIGKILL) == 0);
	t0 = test_now_ms();
	TRY(cudaStreamSynchronize(r->stream) == cudaSuccess);
	TRY(test_now_ms() - t0 < 10000);
	err = tally_cuda_async_error(r->tc);
	if (err != -TALLY_EDAEMONLOST)
		fprintf(stderr, "rank 0: async error %d (%s): %s\n", err,
			tally_strerror(err), tally_cuda_error_message(r->tc));
	TRY(err == -TALLY_EDAEMONLOST);
	TRY(strstr(tally_cuda_error_message(r->tc), "tally_allreduce"));
	op_release(&o);
	sync_signal(r->to_peer);
	return 0;
}

/* the daemon was killed: stop only reaps it */
static int teardown_killed(void **state)
{
	(void)state;
	daemon_stop(&dmn);
	return 0;
}

static void test_daemon_dies_midway(void **state)
{
	(void)state;
	run_ranks(body_daemon_dies);
}

/* ---- the emulation's own event semantics ---- */

/* sets *flag, after *gate (when given) is set by the host; the words are
 * read and written atomically: streams of the emulation are threads */
struct flag_kernel {
	int *flag;
	int *gate;
};

static cudaError_t run_set_flag(void *arg)
{
	struct flag_kernel *k = arg;
	struct timespec ts = { 0, 1000000 };

	nanosleep(&ts, NULL);	/* slow: waits on it must really wait */
	while (k->gate && !__atomic_load_n(k->gate, __ATOMIC_ACQUIRE))
		nanosleep(&ts, NULL);
	__atomic_store_n(k->flag, 1, __ATOMIC_RELEASE);
	return cudaSuccess;
}

struct read_kernel {
	int *from[2];
	int *to;
};

static cudaError_t run_read_flags(void *arg)
{
	struct read_kernel *k = arg;

	k->to[0] = __atomic_load_n(k->from[0], __ATOMIC_ACQUIRE);
	k->to[1] = __atomic_load_n(k->from[1], __ATOMIC_ACQUIRE);
	return cudaSuccess;
}

/* a wait is for the record before it, not a later one; an event may be
 * destroyed with waits queued; queries say NotReady until done */
static int emu_semantics(void *unused)
{
	static int x, y, gate;
	static int seen[2];
	struct flag_kernel fx = { &x, NULL }, fy = { &y, &gate };
	struct read_kernel rd = { { &x, &y }, seen };
	cudaStream_t a, b;
	cudaEvent_t e;

	(void)unused;
	rank_now = 0;
	signal(SIGALRM, on_watchdog);
	alarm(WATCHDOG_S);
	TRY(cudaStreamCreate(&a) == cudaSuccess);
	TRY(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) ==
	    cudaSuccess);
	TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) ==
	    cudaSuccess);
	TRY(cudaEventQuery(e) == cudaSuccess);	/* never recorded */
	TRY(emu_launch(a, run_set_flag, &fx, sizeof(fx)) == cudaSuccess);
	TRY(cudaEventRecord(e, a) == cudaSuccess);
	TRY(cudaEventQuery(e) == cudaErrorNotReady);
	TRY(cudaStreamWaitEvent(b, e, 0) == cudaSuccess);
	/* recorded again behind a kernel held until b is done */
	TRY(emu_launch(a, run_set_flag, &fy, sizeof(fy)) == cudaSuccess);
	TRY(cudaEventRecord(e, a) == cudaSuccess);
	TRY(emu_launch(b, run_read_flags, &rd, sizeof(rd)) == cudaSuccess);
	TRY(cudaEventDestroy(e) == cudaSuccess);	/* waits keep theirs */
	TRY(cudaStreamSynchronize(b) == cudaSuccess);
	TRY(seen[0] == 1 && seen[1] == 0);
	TRY(cudaStreamQuery(a) == cudaErrorNotReady);
	__atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
	TRY(cudaStreamSynchronize(a) == cudaSuccess);
	TRY(__atomic_load_n(&y, __ATOMIC_ACQUIRE) == 1);
	TRY(cudaStreamDestroy(a) == cudaSuccess);
	TRY(cudaStreamDestroy(b) == cudaSuccess);
	/* a device side outside device memory is refused */
	TRY(cudaMemcpy(seen, (void *)&x, 4, cudaMemcpyDeviceToHost) ==
	    cudaErrorInvalidValue);
	return 0;
}

static void test_emulation_semantics(void **state)
{
	pid_t pid;

	(void)state;
	pid = child_start(emu_semantics, NULL);
	assert_true(pid > 0);
	assert_int_equal(child_wait(pid, RANK_TIMEOUT_MS), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_emulation_semantics),
		cmocka_unit_test_setup_teardown(test_sizes_and_dtypes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_narrowing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_stream_order,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_returns_before_done,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_back_to_back,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_with_queued_ops,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors_while_queueing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_fails_while_queueing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_error_of_caller,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_and_numa_node,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_peer_exits_silently,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_peer_dies_midway,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon_dies_midway,
						setup, teardown_killed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
