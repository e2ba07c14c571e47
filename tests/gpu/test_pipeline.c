// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_pipeline.c - tally_cuda_allreduce() end to end on a device: a real
 * tallyd with --local-size 2 and two client processes sharing GPU 0.
 *
 * Float32 tensors from 4 KiB to 256 MiB (one of them not a multiple of a
 * chunk), in place and out of place, on a non-default stream; narrowed to
 * bfloat16 and float16 on the wire; small chunks through a 3-slot pipeline
 * (many passes over each slot); the flag-polling kernel instead of
 * cuStreamWaitValue32; and the arguments the call must refuse.  Every
 * result is compared on the device, bit for bit, with the sum of the two
 * ranks' patterns (device_check.h), with the output poisoned beforehand
 * and a poisoned guard after the tensor that must stay untouched.
 *
 * CUDA is used only in the client processes, after fork(): the parent
 * never initialises it.  Suite 'gpu' (tests/gpu/run-device.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#include <tally/tally.h>
#include <tally/tally_cuda.h>
#include "../integration/harness.h"
#include "device_check.h"

#define NCLIENTS 2
#define GUARD 1024		/* poisoned elements after each tensor */
#define CHILD_TIMEOUT_MS 90000	/* a test's clients take seconds */

#define MIB(n) ((uint64_t)(n) << 20)
#define KIB(n) ((uint64_t)(n) << 10)

struct op_case {
	uint64_t bytes;		/* of float32; a multiple of 4 */
	enum tally_dtype wire;
};

struct run_arg {
	const char *sock;
	const struct op_case *cases;
	size_t ncases;
	size_t chunk_bytes;	/* 0: the default */
	unsigned int depth;	/* 0: the default */
	const char *wait_kind;	/* $TALLY_CUDA_WAIT, or NULL */
	int bad_args;		/* check the refused arguments first */
};

static struct test_daemon daemon_;

static const char *wire_name(enum tally_dtype t)
{
	return t == TALLY_BFLOAT16 ? "bfloat16" :
	       t == TALLY_FLOAT16 ? "float16" : "float32";
}

/* @n elements of @buf equal the ranks' sum (or one rank's own values) */
static int expect_values(const float *buf, uint64_t n, int first_rank,
			 int nranks, unsigned int salt, cudaStream_t s,
			 const char *what)
{
	struct dc_mismatch m;

	CHECK_CUDA(dc_count_mismatches(buf, n, first_rank, nranks, salt, s,
				       &m), -1);
	if (m.count) {
		fprintf(stderr, "%s: %llu of %llu elements wrong, first at "
			"%llu: got %a, want %a\n", what,
			(unsigned long long)m.count, (unsigned long long)n,
			(unsigned long long)m.first, m.got, m.want);
		return -1;
	}
	return 0;
}

/* the GUARD elements after the tensor still hold the poison */
static int expect_guard(const float *buf, uint64_t n, const char *what)
{
	static uint32_t host[GUARD];

	CHECK_CUDA(cudaMemcpy(host, buf + n, sizeof(host),
			      cudaMemcpyDeviceToHost), -1);
	for (int i = 0; i < GUARD; i++) {
		if (host[i] != DC_POISON_BITS) {
			fprintf(stderr, "%s: element %llu after the tensor "
				"was written (0x%08x)\n", what,
				(unsigned long long)n + (unsigned long long)i,
				host[i]);
			return -1;
		}
	}
	return 0;
}

/* one all-reduce of @n elements, checked; @salt is the same on all ranks */
static int run_one(struct tally_cuda *tc, int rank, float *send, float *recv,
		   uint64_t n, enum tally_dtype wire, uint64_t key,
		   unsigned int salt, cudaStream_t s)
{
	struct tally_cuda_allreduce_args args = {
		.key = key, .iteration = salt,
		.sendbuf = send, .recvbuf = recv, .count = n,
		.dtype = TALLY_FLOAT32, .wire_dtype = wire, .op = TALLY_SUM,
	};
	char what[128];
	int r;

	snprintf(what, sizeof(what), "rank %d, %llu bytes, %s wire, %s",
		 rank, (unsigned long long)n * 4, wire_name(wire),
		 send == recv ? "in place" : "out of place");
	CHECK_CUDA(dc_fill_nan(send, n + GUARD, s), -1);
	CHECK_CUDA(dc_fill_pattern(send, n, rank, salt, s), -1);
	if (recv != send)
		CHECK_CUDA(dc_fill_nan(recv, n + GUARD, s), -1);
	r = tally_cuda_allreduce(tc, &args, s);
	if (r) {
		fprintf(stderr, "%s: tally_cuda_allreduce: %s (%s)\n", what,
			tally_strerror(r), tally_cuda_error_message(tc));
		return -1;
	}
	CHECK_CUDA(cudaStreamSynchronize(s), -1);
	r = tally_cuda_async_error(tc);
	if (r) {
		fprintf(stderr, "%s: async error %s (%s)\n", what,
			tally_strerror(r), tally_cuda_error_message(tc));
		return -1;
	}
	if (expect_values(recv, n, 0, NCLIENTS, salt, s, what) ||
	    expect_guard(recv, n, what))
		return -1;
	if (recv != send) {	/* the input is left alone */
		strncat(what, " (sendbuf)", sizeof(what) - strlen(what) - 1);
		if (expect_values(send, n, rank, 1, salt, s, what) ||
		    expect_guard(send, n, what))
			return -1;
	}
	return 0;
}

/* a refused call names the argument and leaves no async error behind */
static int expect_einval(struct tally_cuda *tc,
			 const struct tally_cuda_allreduce_args *args,
			 cudaStream_t s, const char *named)
{
	int r = tally_cuda_allreduce(tc, args, s);

	if (r != -TALLY_EINVAL) {
		fprintf(stderr, "expected -TALLY_EINVAL naming %s, got %d "
			"(%s)\n", named, r, tally_cuda_error_message(tc));
		return -1;
	}
	if (!strstr(tally_cuda_error_message(tc), named)) {
		fprintf(stderr, "error message \"%s\" does not name %s\n",
			tally_cuda_error_message(tc), named);
		return -1;
	}
	CHECK_CUDA(cudaStreamSynchronize(s), -1);
	if (tally_cuda_async_error(tc)) {
		fprintf(stderr, "a refused call left an async error\n");
		return -1;
	}
	return 0;
}

static int check_bad_args(struct tally_cuda *tc, float *dev, cudaStream_t s)
{
	float *host = malloc(KIB(64));
	struct tally_cuda_allreduce_args a = {
		.key = 1, .sendbuf = host, .recvbuf = dev, .count = 1024,
		.dtype = TALLY_FLOAT32, .wire_dtype = TALLY_FLOAT32,
		.op = TALLY_SUM,
	};
	int r = -1;

	CHECK(host, -1);
	if (expect_einval(tc, &a, s, "sendbuf"))
		goto out;
	a.sendbuf = dev;
	a.recvbuf = host;
	if (expect_einval(tc, &a, s, "recvbuf"))
		goto out;
	a.recvbuf = dev;
	a.key = TALLY_CUDA_KEY_LIMIT;
	if (expect_einval(tc, &a, s, "key"))
		goto out;
	r = 0;
out:
	free(host);
	return r;
}

static int client_run(void *p)
{
	const struct run_arg *a = p;
	struct tally_cuda_opts opts = TALLY_CUDA_OPTS_INIT;
	struct tally_client *c;
	struct tally_cuda *tc;
	uint64_t max = 0;
	float *send, *recv;
	cudaStream_t s;
	int rank;

	CHECK_CUDA(cudaSetDevice(0), 2);
	if (a->wait_kind)
		setenv("TALLY_CUDA_WAIT", a->wait_kind, 1);
	CHECK(tally_connect(a->sock, &c) == 0, 3);
	rank = tally_rank(c);
	CHECK(tally_size(c) == NCLIENTS, 4);
	opts.chunk_bytes = a->chunk_bytes;
	opts.depth = a->depth;
	if (dc_cuda_open(c, &opts, &tc))
		return 5;
	for (size_t k = 0; k < a->ncases; k++)
		if (a->cases[k].bytes / 4 > max)
			max = a->cases[k].bytes / 4;
	CHECK_CUDA(cudaMalloc((void **)&send, (max + GUARD) * 4), 6);
	CHECK_CUDA(cudaMalloc((void **)&recv, (max + GUARD) * 4), 6);
	CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), 6);
	if (a->bad_args)
		CHECK(check_bad_args(tc, send, s) == 0, 7);
	/* the same sequence on both ranks: the salt doubles as iteration */
	for (size_t k = 0; k < a->ncases; k++) {
		const struct op_case *oc = &a->cases[k];
		unsigned int salt = (unsigned int)(2 * k);

		CHECK(run_one(tc, rank, send, send, oc->bytes / 4, oc->wire,
			      2 * k, salt, s) == 0, 8);
		CHECK(run_one(tc, rank, send, recv, oc->bytes / 4, oc->wire,
			      2 * k + 1, salt + 1, s) == 0, 9);
	}
	tally_cuda_close(tc);
	CHECK_CUDA(cudaStreamDestroy(s), 10);
	CHECK_CUDA(cudaFree(send), 10);
	CHECK_CUDA(cudaFree(recv), 10);
	tally_disconnect(c);
	return 0;
}

static void run_clients(struct run_arg *a)
{
	pid_t pid[NCLIENTS];

	a->sock = daemon_.sock;
	for (int i = 0; i < NCLIENTS; i++)
		pid[i] = child_start(client_run, a);
	for (int i = 0; i < NCLIENTS; i++)
		assert_int_equal(child_wait(pid[i], CHILD_TIMEOUT_MS), 0);
}

static int start_daemon(void **state)
{
	(void)state;
	return daemon_start(&daemon_, NCLIENTS, NULL);
}

static int stop_daemon(void **state)
{
	(void)state;
	/* 0: it exited cleanly; a crash or a hang fails the test */
	return daemon_stop(&daemon_) == 0 ? 0 : -1;
}

static void test_float32_sizes(void **state)
{
	static const struct op_case cases[] = {
		{ KIB(4), TALLY_FLOAT32 },
		{ KIB(64), TALLY_FLOAT32 },
		{ MIB(1), TALLY_FLOAT32 },
		{ MIB(4) + 4, TALLY_FLOAT32 },	/* a short last chunk */
		{ MIB(64), TALLY_FLOAT32 },
		{ MIB(256), TALLY_FLOAT32 },
	};
	struct run_arg a = { .cases = cases, .ncases = 6 };

	(void)state;
	run_clients(&a);
}

static void test_narrow_wire(void **state)
{
	static const struct op_case cases[] = {
		{ KIB(64), TALLY_BFLOAT16 },
		{ MIB(4) + 4, TALLY_BFLOAT16 },
		{ MIB(64), TALLY_BFLOAT16 },
		{ KIB(64), TALLY_FLOAT16 },
		{ MIB(4) + 4, TALLY_FLOAT16 },
		{ MIB(64), TALLY_FLOAT16 },
	};
	struct run_arg a = { .cases = cases, .ncases = 6 };

	(void)state;
	run_clients(&a);
}

/* 64 KiB chunks through 3 slots: each slot is reused hundreds of times */
static void test_small_chunks(void **state)
{
	static const struct op_case cases[] = {
		{ KIB(4), TALLY_FLOAT32 },
		{ MIB(4) + 4, TALLY_FLOAT32 },
		{ MIB(64), TALLY_FLOAT32 },
		{ MIB(4) + 4, TALLY_BFLOAT16 },
	};
	struct run_arg a = { .cases = cases, .ncases = 4,
			     .chunk_bytes = KIB(64), .depth = 3 };

	(void)state;
	run_clients(&a);
}

/* the flag-polling kernel instead of cuStreamWaitValue32 */
static void test_wait_kernel(void **state)
{
	static const struct op_case cases[] = {
		{ MIB(4) + 4, TALLY_FLOAT32 },
		{ MIB(64), TALLY_FLOAT32 },
	};
	struct run_arg a = { .cases = cases, .ncases = 2,
			     .wait_kind = "kernel" };

	(void)state;
	run_clients(&a);
}

/* host pointers and too large keys are refused; the context still works */
static void test_bad_args(void **state)
{
	static const struct op_case cases[] = {
		{ MIB(1), TALLY_FLOAT32 },
	};
	struct run_arg a = { .cases = cases, .ncases = 1, .bad_args = 1 };

	(void)state;
	run_clients(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bad_args,
			start_daemon, stop_daemon),
		cmocka_unit_test_setup_teardown(test_float32_sizes,
			start_daemon, stop_daemon),
		cmocka_unit_test_setup_teardown(test_narrow_wire,
			start_daemon, stop_daemon),
		cmocka_unit_test_setup_teardown(test_small_chunks,
			start_daemon, stop_daemon),
		cmocka_unit_test_setup_teardown(test_wait_kernel,
			start_daemon, stop_daemon),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
