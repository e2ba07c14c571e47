// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_stream_order.c - tally_cuda_allreduce() is ordered on the caller's
 * stream and does not block the caller's thread: two client processes on
 * GPU 0 and a real tallyd (--local-size 2).
 *
 * On a non-default stream: a kernel that spins 100 ms, then a kernel that
 * writes the rank's pattern over a poisoned (NaN) buffer, then the 256 MiB
 * all-reduce, then at once, with no host synchronisation, a checksum
 * kernel that reads the result.  If the all-reduce did not wait for the
 * writer it would copy poison (the checksum counts non-finite elements);
 * if the checksum did not wait for the all-reduce it would read the
 * rank's own values or, out of place, poison.  The host must get control
 * back before the stream is done (cudaStreamQuery: not ready), and sooner
 * than the slow producer takes.
 *
 * CUDA is used only in the client processes, after fork().  Suite 'gpu'
 * (tests/gpu/run-device.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#include <tally/tally.h>
#include <tally/tally_cuda.h>
#include "../integration/harness.h"
#include "device_check.h"

#define NCLIENTS 2
#define COUNT ((uint64_t)64 << 20)	/* 256 MiB of float32 */
#define SPIN_NS 100000000ull		/* the slow producer: 100 ms */
/* a call that waited for the producer would take SPIN_NS at least */
#define CALL_MAX_NS (SPIN_NS / 2)
#define CHILD_TIMEOUT_MS 90000

static struct test_daemon daemon_;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* the checksum of ranks first .. first + nranks - 1 summed, on the host */
static int64_t host_checksum(int first, int nranks, unsigned int salt)
{
	int64_t sum = 0;

	for (uint64_t i = 0; i < COUNT; i++)
		for (int r = first; r < first + nranks; r++)
			sum += dc_value_x4(r, i, salt) * dc_weight(i);
	return sum;
}

/*
 * One ordered all-reduce: spin, write, all-reduce, checksum, all queued
 * before the host waits.  @recv == @send: in place.
 */
static int ordered_op(struct tally_cuda *tc, int rank, float *send,
		      float *recv, int64_t *sum_dev, unsigned int salt,
		      cudaStream_t s)
{
	struct tally_cuda_allreduce_args args = {
		.key = salt, .iteration = salt,
		.sendbuf = send, .recvbuf = recv, .count = COUNT,
		.dtype = TALLY_FLOAT32, .wire_dtype = TALLY_FLOAT32,
		.op = TALLY_SUM,
	};
	const char *how = send == recv ? "in place" : "out of place";
	int64_t want = host_checksum(0, NCLIENTS, salt);
	int64_t own = host_checksum(rank, 1, salt);
	int64_t got[2];
	uint64_t t0, call_ns;
	cudaError_t q;
	int r;

	/* else this test could not tell a result from its input */
	CHECK(want != own, -1);
	CHECK_CUDA(dc_fill_nan(send, COUNT, s), -1);
	if (recv != send)
		CHECK_CUDA(dc_fill_nan(recv, COUNT, s), -1);
	CHECK_CUDA(cudaStreamSynchronize(s), -1);

	CHECK_CUDA(dc_spin(SPIN_NS, s), -1);
	CHECK_CUDA(dc_fill_pattern(send, COUNT, rank, salt, s), -1);
	t0 = now_ns();
	r = tally_cuda_allreduce(tc, &args, s);
	call_ns = now_ns() - t0;
	q = cudaStreamQuery(s);
	if (r) {
		fprintf(stderr, "%s: tally_cuda_allreduce: %s (%s)\n", how,
			tally_strerror(r), tally_cuda_error_message(tc));
		return -1;
	}
	CHECK_CUDA(dc_checksum(recv, COUNT, sum_dev, s), -1);
	CHECK_CUDA(cudaMemcpyAsync(got, sum_dev, sizeof(got),
				   cudaMemcpyDeviceToHost, s), -1);
	CHECK_CUDA(cudaStreamSynchronize(s), -1);
	r = tally_cuda_async_error(tc);
	if (r) {
		fprintf(stderr, "%s: async error %s (%s)\n", how,
			tally_strerror(r), tally_cuda_error_message(tc));
		return -1;
	}
	if (q != cudaErrorNotReady) {
		fprintf(stderr, "%s: the stream was %s when "
			"tally_cuda_allreduce returned: it waited for the "
			"GPU\n", how, cudaGetErrorString(q));
		return -1;
	}
	if (call_ns > CALL_MAX_NS) {
		fprintf(stderr, "%s: tally_cuda_allreduce took %llu us: it "
			"waited for the stream's earlier work (%llu us)\n",
			how, (unsigned long long)call_ns / 1000,
			(unsigned long long)SPIN_NS / 1000);
		return -1;
	}
	if (got[1] || got[0] != want) {
		fprintf(stderr, "%s, rank %d: checksum %lld with %lld "
			"non-finite or off-pattern elements; want %lld (the "
			"rank's own values give %lld)\n", how, rank,
			(long long)got[0], (long long)got[1], (long long)want,
			(long long)own);
		return -1;
	}
	return 0;
}

static int client_run(void *p)
{
	const char *sock = p;
	struct tally_cuda_opts opts = TALLY_CUDA_OPTS_INIT;
	struct tally_client *c;
	struct tally_cuda *tc;
	float *send, *recv;
	int64_t *sum_dev;
	cudaStream_t s;
	int rank;

	CHECK_CUDA(cudaSetDevice(0), 2);
	CHECK(tally_connect(sock, &c) == 0, 3);
	rank = tally_rank(c);
	CHECK(tally_size(c) == NCLIENTS, 4);
	if (dc_cuda_open(c, &opts, &tc))
		return 5;
	CHECK_CUDA(cudaMalloc((void **)&send, COUNT * sizeof(float)), 6);
	CHECK_CUDA(cudaMalloc((void **)&recv, COUNT * sizeof(float)), 6);
	CHECK_CUDA(cudaMalloc((void **)&sum_dev, 2 * sizeof(int64_t)), 6);
	CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), 6);
	CHECK(ordered_op(tc, rank, send, send, sum_dev, 1, s) == 0, 7);
	CHECK(ordered_op(tc, rank, send, recv, sum_dev, 2, s) == 0, 8);
	tally_cuda_close(tc);
	CHECK_CUDA(cudaStreamDestroy(s), 9);
	CHECK_CUDA(cudaFree(sum_dev), 9);
	CHECK_CUDA(cudaFree(recv), 9);
	CHECK_CUDA(cudaFree(send), 9);
	tally_disconnect(c);
	return 0;
}

static int start_daemon(void **state)
{
	(void)state;
	return daemon_start(&daemon_, NCLIENTS, NULL);
}

static int stop_daemon(void **state)
{
	(void)state;
	return daemon_stop(&daemon_) == 0 ? 0 : -1;
}

static void test_ordered_on_stream(void **state)
{
	pid_t pid[NCLIENTS];

	(void)state;
	for (int i = 0; i < NCLIENTS; i++)
		pid[i] = child_start(client_run, daemon_.sock);
	for (int i = 0; i < NCLIENTS; i++)
		assert_int_equal(child_wait(pid[i], CHILD_TIMEOUT_MS), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ordered_on_stream,
			start_daemon, stop_daemon),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
