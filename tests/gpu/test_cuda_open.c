// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cuda_open.c - tally_cuda_open() against a real tallyd, on any host:
 * bad options are refused with a message naming what is wrong; where the
 * CUDA driver cannot be used (no GPU: this CI machine) the open fails
 * with -TALLY_EDEVICE and a message naming the CUDA call and
 * cudaGetErrorString() of its error, and the client is left working;
 * where a GPU is present the open succeeds and the staging memory is on
 * the GPU's NUMA node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include <tally/tally_cuda.h>

#include "tests/integration/harness.h"

static struct test_daemon daemon1;
static struct tally_client *client;

static int setup(void **state)
{
	(void)state;
	if (daemon_start(&daemon1, 1, NULL))
		return -1;
	return tally_connect(daemon1.sock, &client) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	tally_disconnect(client);
	return daemon_stop(&daemon1) == 0 ? 0 : -1;
}

static void expect_einval(const struct tally_cuda_opts *o, const char *what)
{
	struct tally_cuda *tc = NULL;

	assert_int_equal(tally_cuda_open(client, o, &tc), -TALLY_EINVAL);
	assert_null(tc);
	if (!strstr(tally_cuda_open_error(), what))
		fail_msg("message '%s' does not name '%s'",
			 tally_cuda_open_error(), what);
}

static void test_bad_options(void **state)
{
	struct tally_cuda_opts o = TALLY_CUDA_OPTS_INIT;
	struct tally_cuda *tc = NULL;

	(void)state;
	assert_int_equal(tally_cuda_open(NULL, &o, &tc), -TALLY_EINVAL);
	assert_int_equal(tally_cuda_open(client, &o, NULL), -TALLY_EINVAL);
	expect_einval(NULL, "opts");
	o.size = sizeof(o) - 1;
	expect_einval(&o, "opts.size");
	o = (struct tally_cuda_opts)TALLY_CUDA_OPTS_INIT;
	o.depth = TALLY_CUDA_DEPTH_MIN - 1;
	expect_einval(&o, "depth");
	o.depth = TALLY_CUDA_DEPTH_MAX + 1;
	expect_einval(&o, "depth");
	o = (struct tally_cuda_opts)TALLY_CUDA_OPTS_INIT;
	o.chunk_bytes = 4000;
	expect_einval(&o, "chunk size");
	o.chunk_bytes = 4096 + 32;
	expect_einval(&o, "chunk size");
	o = (struct tally_cuda_opts)TALLY_CUDA_OPTS_INIT;
	o.numa_node = -3;
	expect_einval(&o, "numa_node");
}

static void test_open_reports_the_device(void **state)
{
	struct tally_cuda_opts o = TALLY_CUDA_OPTS_INIT;
	struct tally_cuda *tc = NULL;
	char want[256];
	cudaError_t e;
	int n = 0, r;

	(void)state;
	r = tally_cuda_open(client, &o, &tc);
	e = cudaGetDeviceCount(&n);
	if (e == cudaSuccess && n > 0) {
		assert_int_equal(r, 0);
		assert_non_null(tc);
		assert_string_equal(tally_cuda_open_error(), "");
		tally_cuda_close(tc);
		return;
	}
	/* no usable driver or device: the first CUDA call, named */
	assert_int_equal(r, -TALLY_EDEVICE);
	assert_null(tc);
	snprintf(want, sizeof(want), "cudaGetDeviceCount: %s",
		 cudaGetErrorString(e));
	assert_string_equal(tally_cuda_open_error(), want);
	assert_string_equal(tally_strerror(r),
			    "GPU device error (a CUDA call failed)");
}

/* whatever tally_cuda_open() met, the client still works */
static void test_client_survives(void **state)
{
	struct tally_cuda_opts o = TALLY_CUDA_OPTS_INIT;
	struct tally_cuda *tc = NULL;
	float *buf;
	uint64_t req;
	int i;

	(void)state;
	if (tally_cuda_open(client, &o, &tc) == 0)
		tally_cuda_close(tc);
	buf = tally_alloc(client, 1024 * sizeof(float));
	assert_non_null(buf);
	for (i = 0; i < 1024; i++)
		buf[i] = (float)i;
	assert_int_equal(tally_allreduce(client,
		&(struct tally_allreduce_args){
			.key = 1, .iteration = 1, .sendbuf = buf,
			.recvbuf = buf, .count = 1024,
			.dtype = TALLY_FLOAT32, .op = TALLY_SUM }, &req), 0);
	assert_int_equal(tally_wait(client, req, 10000), 0);
	for (i = 0; i < 1024; i++)
		assert_true(buf[i] == (float)i);	/* one member: itself */
	tally_free(client, buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_open_reports_the_device),
		cmocka_unit_test(test_client_survives),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
