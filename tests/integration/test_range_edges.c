// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_range_edges.c - buffer ranges at the exact end of their segment,
 * against a real tallyd: a buffer that ends exactly at the end of its
 * segment is accepted and reduced, one that ends a single element past it
 * is refused with TALLY_ERANGE, for the send and the receive buffer, by
 * the client library (at submission) and by the daemon (raw descriptors
 * that skip the library's check).  One that ends a single byte past it
 * starts off its element alignment, which both refuse first, with
 * TALLY_EINVAL; the library's range check itself is held to the byte by
 * test_translate_exact_end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "harness.h"
#include "shm/client_internal.h"

#define COUNT 16

static struct test_daemon dmn;
static struct tally_client *cl;
static uint8_t *seg_base;
static size_t seg_size;

static int setup(void **state)
{
	(void)state;
	if (daemon_start(&dmn, 1, NULL))
		return -1;
	if (tally_connect(dmn.sock, &cl))
		return -1;
	seg_base = tally_alloc(cl, 4096);
	if (!seg_base)
		return -1;
	/* the segment's real size (rounded up to its pages) */
	for (int i = 0; i < TALLY_MAX_SEGMENTS; i++)
		if (cl->segs[i].id && cl->segs[i].seg.base == seg_base)
			seg_size = cl->segs[i].seg.size;
	return seg_size >= 4096 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tally_disconnect(cl);
	return daemon_stop(&dmn);	/* non-zero if it crashed */
}

static void allreduce_args(enum tally_dtype dt, void *send, void *recv,
			   struct tally_allreduce_args *a)
{
	static uint64_t iteration;

	*a = (struct tally_allreduce_args){
		.key = 1, .iteration = iteration++, .sendbuf = send,
		.recvbuf = recv, .count = COUNT, .dtype = dt,
	};
}

/* submitted, and completed with this result */
static int allreduce(enum tally_dtype dt, void *send, void *recv)
{
	struct tally_allreduce_args a;
	uint64_t req;
	int ret;

	allreduce_args(dt, send, recv, &a);
	ret = tally_allreduce(cl, &a, &req);
	return ret ? ret : tally_wait(cl, req, 5000);
}

/* the library's own verdict at submission (the daemon never sees it) */
static int submit_only(enum tally_dtype dt, void *send, void *recv)
{
	struct tally_allreduce_args a;
	uint64_t req;
	int ret;

	allreduce_args(dt, send, recv, &a);
	ret = tally_allreduce(cl, &a, &req);
	if (ret == 0)		/* accepted: reap it, report acceptance */
		tally_wait(cl, req, 5000);
	return ret;
}

/* one member: the sum is the input, bit for bit (finite values) */
static void fill(void *p, enum tally_dtype dt, uint16_t seed)
{
	for (size_t i = 0; i < COUNT; i++) {
		if (dt == TALLY_FLOAT16)	/* 1.0 .. 2.0 */
			((uint16_t *)p)[i] = (uint16_t)(0x3c00 + seed + 7 * i);
		else
			((int32_t *)p)[i] = (int32_t)(seed * 1000003u + i);
	}
}

static void test_translate_exact_end(void **state)
{
	uint32_t seg;
	uint64_t off;

	(void)state;
	for (uint64_t len = 1; len <= 64; len++) {
		const uint8_t *end_at = seg_base + seg_size - len;

		assert_int_equal(client_translate(cl, end_at, len, &seg, &off),
				 0);
		assert_int_equal(off, seg_size - len);
		assert_int_equal(client_translate(cl, end_at + 1, len, &seg,
						  &off), -TALLY_ERANGE);
	}
	assert_int_equal(client_translate(cl, seg_base, seg_size, &seg, &off),
			 0);
	assert_int_equal(client_translate(cl, seg_base, seg_size + 1, &seg,
					  &off), -TALLY_ERANGE);
}

static void test_client_checks_exact_end(void **state)
{
	static const enum tally_dtype dts[] = { TALLY_INT32, TALLY_FLOAT16 };

	(void)state;
	for (size_t t = 0; t < sizeof(dts) / sizeof(dts[0]); t++) {
		size_t bytes = COUNT * tally_dtype_size(dts[t]);
		/* ends exactly at the segment's end, one element past it,
		 * and one byte past it (misaligned) */
		uint8_t *last = seg_base + seg_size - bytes;
		uint8_t *past = last + tally_dtype_size(dts[t]);
		uint8_t *odd = last + 1;

		/* send buffer at the end, receive at the start */
		fill(last, dts[t], 3);
		memset(seg_base, 0, bytes);
		assert_int_equal(allreduce(dts[t], last, seg_base), 0);
		assert_memory_equal(seg_base, last, bytes);
		assert_int_equal(submit_only(dts[t], past, seg_base),
				 -TALLY_ERANGE);
		assert_int_equal(submit_only(dts[t], odd, seg_base),
				 -TALLY_EINVAL);
		/* receive buffer at the end */
		fill(seg_base, dts[t], 5);
		memset(last, 0, bytes);
		assert_int_equal(allreduce(dts[t], seg_base, last), 0);
		assert_memory_equal(last, seg_base, bytes);
		assert_int_equal(submit_only(dts[t], seg_base, past),
				 -TALLY_ERANGE);
		assert_int_equal(submit_only(dts[t], seg_base, odd),
				 -TALLY_EINVAL);
		/* in place at the end, and one byte past */
		assert_int_equal(allreduce(dts[t], last, last), 0);
		assert_int_equal(submit_only(dts[t], past, past),
				 -TALLY_ERANGE);
		assert_int_equal(submit_only(dts[t], odd, odd),
				 -TALLY_EINVAL);
	}
}

static int raw_submit(struct tally_sqe *s)
{
	uint64_t req;
	int ret = client_submit_sqe(cl, s, &req);

	return ret ? ret : tally_wait(cl, req, 5000);
}

/* the daemon's own check, past the library's */
static void test_daemon_checks_exact_end(void **state)
{
	size_t bytes = COUNT * 4;
	uint64_t last = seg_size - bytes;
	struct tally_sqe good, s;
	uint32_t seg;
	uint64_t off;

	(void)state;
	assert_int_equal(client_translate(cl, seg_base, bytes, &seg, &off), 0);
	good = (struct tally_sqe){ .opcode = TALLY_OP_ALLREDUCE,
		.dtype = TALLY_INT32, .redop = TALLY_SUM, .count = COUNT,
		.send_seg = seg, .recv_seg = seg, .key = 2 };

	fill(seg_base + last, TALLY_INT32, 9);
	memset(seg_base, 0, bytes);
	s = good;
	s.send_off = last;
	assert_int_equal(raw_submit(&s), 0);
	assert_memory_equal(seg_base, seg_base + last, bytes);
	s.iteration = 1;
	s.send_off = last + 4;
	assert_int_equal(raw_submit(&s), -TALLY_ERANGE);
	s.iteration = 6;
	s.send_off = last + 1;
	assert_int_equal(raw_submit(&s), -TALLY_EINVAL);

	fill(seg_base, TALLY_INT32, 11);
	memset(seg_base + last, 0, bytes);
	s = good;
	s.iteration = 2;
	s.recv_off = last;
	assert_int_equal(raw_submit(&s), 0);
	assert_memory_equal(seg_base + last, seg_base, bytes);
	s.iteration = 3;
	s.recv_off = last + 4;
	assert_int_equal(raw_submit(&s), -TALLY_ERANGE);
	s.iteration = 7;
	s.recv_off = last + 1;
	assert_int_equal(raw_submit(&s), -TALLY_EINVAL);

	s = good;
	s.iteration = 4;
	s.send_off = s.recv_off = last;
	assert_int_equal(raw_submit(&s), 0);
	s.iteration = 5;
	s.send_off = s.recv_off = last + 4;
	assert_int_equal(raw_submit(&s), -TALLY_ERANGE);
	s.iteration = 8;
	s.send_off = s.recv_off = last + 1;
	assert_int_equal(raw_submit(&s), -TALLY_EINVAL);
	assert_true(daemon_alive(&dmn));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_translate_exact_end),
		cmocka_unit_test(test_client_checks_exact_end),
		cmocka_unit_test(test_daemon_checks_exact_end),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
