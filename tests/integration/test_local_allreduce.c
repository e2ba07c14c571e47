// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_local_allreduce.c - 4 client processes all-reduce through a real
 * tallyd: every dtype, SUM and AVG, in place and out of place, sizes on
 * and off block boundaries and large enough to use the reduce threads.
 *
 * Inputs are small integers, so every dtype represents every partial sum
 * exactly and the expected result is computed here independently, in
 * double, then compared bit for bit.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "harness.h"

#define NCLIENTS 4

static const uint64_t counts[] = { 1, 7, 4095, 4097, 3 * 4096 + 5, 300001 };

static int value(int rank, size_t i)
{
	return (int)((i * 31 + (size_t)rank * 7) % 23) - 11;
}

static void store(void *buf, enum tally_dtype t, size_t i, double v)
{
	float f = (float)v;

	switch (t) {
	case TALLY_FLOAT32:
		((float *)buf)[i] = f;
		break;
	case TALLY_INT32:
		((int32_t *)buf)[i] = (int32_t)v;
		break;
	case TALLY_FLOAT16: {
		_Float16 h = (_Float16)f;

		memcpy((uint16_t *)buf + i, &h, 2);
		break;
	}
	default: {		/* bfloat16: exact for these values */
		uint32_t u;

		memcpy(&u, &f, 4);
		((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
		break;
	}
	}
}

static double expected(enum tally_dtype t, enum tally_op op, size_t i)
{
	double sum = 0;

	for (int r = 0; r < NCLIENTS; r++)
		sum += value(r, i);
	if (op == TALLY_SUM)
		return sum;
	if (t == TALLY_INT32)
		return trunc(sum / NCLIENTS);
	return sum / NCLIENTS;	/* |sum| <= 44: sum/4 is exact everywhere */
}

/* Compare by the bytes the dtype would store for the expected value. */
static int check(const void *buf, enum tally_dtype t, enum tally_op op,
		 size_t count)
{
	size_t esz = tally_dtype_size(t);
	unsigned char want[4];

	for (size_t i = 0; i < count; i++) {
		store(want, t, 0, expected(t, op, i));
		if (memcmp((const char *)buf + i * esz, want, esz)) {
			fprintf(stderr, "dtype %d op %d count %zu: element %zu "
				"wrong\n", t, op, count, i);
			return -1;
		}
	}
	return 0;
}

struct run_arg {
	const char *sock;
};

static int client_all_cases(void *p)
{
	struct run_arg *a = p;
	size_t max = counts[sizeof(counts) / sizeof(counts[0]) - 1] * 4;
	struct tally_client *c;
	uint64_t iteration = 0, req;
	void *send, *recv;
	int rank;

	CHECK(tally_connect(a->sock, &c) == 0, 2);
	rank = tally_rank(c);
	CHECK(tally_size(c) == NCLIENTS, 3);
	send = tally_alloc(c, max);
	recv = tally_alloc(c, max);
	CHECK(send && recv, 4);
	CHECK(((uintptr_t)send & 63) == 0, 5);

	for (int t = 0; t < TALLY_DTYPE_MAX; t++)
	for (int op = 0; op < TALLY_OP_MAX; op++)
	for (int inplace = 0; inplace < 2; inplace++)
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		struct tally_allreduce_args args = {
			.key = k, .iteration = iteration++,
			.sendbuf = send, .recvbuf = inplace ? send : recv,
			.count = counts[k], .dtype = t, .op = op,
			.priority = (uint32_t)k,
		};

		for (size_t i = 0; i < counts[k]; i++)
			store(send, t, i, value(rank, i));
		if (!inplace)
			memset(recv, 0x5a, counts[k] * tally_dtype_size(t));
		CHECK(tally_allreduce(c, &args, &req) == 0, 6);
		CHECK(tally_wait(c, req, 10000) == 0, 7);
		CHECK(check(args.recvbuf, t, op, counts[k]) == 0, 8);
	}
	tally_free(c, send);
	tally_free(c, recv);
	tally_disconnect(c);
	return 0;
}

/* Many operations in flight at once, completed out of submission order. */
static int client_pipelined(void *p)
{
	struct run_arg *a = p;
	enum { N = 64, COUNT = 1000 };
	struct tally_client *c;
	uint64_t req[N];
	float *buf;
	int rank;

	CHECK(tally_connect(a->sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, N * COUNT * sizeof(float));
	CHECK(buf, 3);
	for (int k = 0; k < N; k++) {
		/* ranks submit in different orders */
		int key = rank % 2 ? N - 1 - k : k;
		struct tally_allreduce_args args = {
			.key = (uint64_t)key, .sendbuf = buf + key * COUNT,
			.recvbuf = buf + key * COUNT, .count = COUNT,
		};

		for (int i = 0; i < COUNT; i++)
			buf[key * COUNT + i] = (float)(key + rank);
		CHECK(tally_allreduce(c, &args, &req[key]) == 0, 4);
	}
	for (int k = N - 1; k >= 0; k--) {
		float want = (float)(NCLIENTS * k + 0 + 1 + 2 + 3);

		CHECK(tally_wait(c, req[k], 10000) == 0, 5);
		for (int i = 0; i < COUNT; i++)
			CHECK(buf[k * COUNT + i] == want, 6);
	}
	tally_disconnect(c);
	return 0;
}

static void run_clients(int (*fn)(void *))
{
	struct test_daemon d;
	struct run_arg arg;
	pid_t pids[NCLIENTS];
	int status[NCLIENTS], alive;

	assert_int_equal(daemon_start(&d, NCLIENTS, NULL), 0);
	arg.sock = d.sock;
	for (int i = 0; i < NCLIENTS; i++)
		pids[i] = child_start(fn, &arg);
	for (int i = 0; i < NCLIENTS; i++)
		status[i] = child_wait(pids[i], 60000);
	alive = daemon_alive(&d);
	assert_int_equal(daemon_stop(&d), 0);	/* before any assert fails */
	for (int i = 0; i < NCLIENTS; i++)
		assert_int_equal(status[i], 0);
	assert_true(alive);
}

static void test_four_clients_every_dtype_op_and_size(void **state)
{
	(void)state;
	run_clients(client_all_cases);
}

static void test_four_clients_pipelined_in_different_orders(void **state)
{
	(void)state;
	run_clients(client_pipelined);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_four_clients_every_dtype_op_and_size),
		cmocka_unit_test(test_four_clients_pipelined_in_different_orders),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
