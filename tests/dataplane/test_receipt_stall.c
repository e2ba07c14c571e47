// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_receipt_stall.c - issue 14's stall in miniature (docs/protocol.md
 * section 13, "When a worker sends no receipt"): three workers, one
 * tensor of more chunks than the aggregator has slots and no fallback
 * store, and an aggregator whose re-sent RESULTs do not echo INT (tally's
 * aggregator, with the INT bit cleared on every RESULT that carries
 * RETX).  Worker 1's first CONFIRM is lost, so the slots it names wait
 * for receipts that only the re-sends can bring.  A worker that withheld
 * the receipt of a chunk it had already placed while its tensor was in
 * flight left those slots held, the chunks hashing to them got BUSY for
 * ever, and the tensor never finished.  Now it completes, exactly.
 *
 * A small network of its own: frames are queued in order and delivered
 * at the next step; every step advances the clock by 10 us and polls
 * every engine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/engine/agg.h"
#include "dataplane/engine/worker.h"

#define K 8
#define N 3			/* workers: nodes 0..2; the aggregator: 3 */
#define AGG 3
#define SLOTS 16
#define CHUNKS 96		/* 6 per slot */
#define QMAX 4096
#define FLEN (TLY_HDR_LEN + 8 * 64 + 4 * K)

static struct {
	uint16_t dst;
	uint16_t len;
	uint8_t f[FLEN];
} q[QMAX];
static unsigned int q_head, q_tail;
static uint8_t scratch[8][FLEN];
static unsigned int scratch_next, lost_confirms, stripped;

static uint8_t *n_alloc(void *ctx, size_t len)
{
	(void)ctx;
	assert_true(len <= FLEN);
	return scratch[scratch_next++ % 8];
}

/* @ctx: the sending node */
static void n_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	uintptr_t src = (uintptr_t)ctx;
	uint8_t type = f[0] & 0x0f;

	if (src == 1 && type == TLY_T_CONFIRM && !lost_confirms) {
		lost_confirms++;		/* worker 1's first receipts */
		return;
	}
	assert_true(q_tail - q_head < QMAX);
	memcpy(q[q_tail % QMAX].f, f, len);
	if (src == AGG && type == TLY_T_RESULT && (f[1] & TLY_F_RETX) &&
	    (f[1] & TLY_F_INT)) {
		q[q_tail % QMAX].f[1] &= (uint8_t)~TLY_F_INT;
		stripped++;
	}
	q[q_tail % QMAX].dst = dst;
	q[q_tail % QMAX].len = (uint16_t)len;
	q_tail++;
}

static unsigned int n_done;

static void on_done(void *ctx, const struct tly_tensor_desc *d)
{
	(void)ctx;
	(void)d;
	n_done++;
}

static void test_lost_receipt_int_not_echoed(void **state)
{
	static const uint16_t aggs[1] = { AGG };
	static int32_t x[N][CHUNKS * K];
	struct tly_worker *w[N];
	struct tly_agg *a;
	struct tly_agg_cfg ac = {
		.job = 7, .cookie = 0x5eed, .k = K, .n_workers = N,
		.self = AGG, .n_slots = SLOTS, .n_fallback = 0,
		.evict_ns = 1000000000ull, .probe_ns = 200000,
		.ops = { .alloc = n_alloc, .send = n_send,
			 .ctx = (void *)(uintptr_t)AGG },
	};
	uint64_t now = 0;
	uint16_t r;
	size_t i;

	(void)state;
	q_head = q_tail = 0;
	lost_confirms = stripped = n_done = 0;
	a = tly_agg_create(&ac);
	assert_non_null(a);
	for (r = 0; r < N; r++) {
		struct tly_worker_cfg c = {
			.job = 7, .cookie = 0x5eed, .k = K, .n_workers = N,
			.rank = r, .n_slots = SLOTS, .n_aggs = 1,
			.agg_nodes = aggs, .window = 8, .max_tensors = 1,
			.rto_ns = 100000, .acked_ns = 400000,
			.busy_ns = 50000, .confirm_ns = 20000,
			.confirm_batch = 4, .cc_off = 1,
			.ops = { .alloc = n_alloc, .send = n_send,
				 .ctx = (void *)(uintptr_t)r },
			.done = on_done,
		};
		struct tly_tensor_desc d = {
			.id = 0xfeed, .dtype = TLY_DT_I32, .src = x[r],
			.dst = x[r], .count = CHUNKS * K,
		};

		for (i = 0; i < CHUNKS * K; i++)
			x[r][i] = (int32_t)(i * 7 + r * 1000003u);
		w[r] = tly_worker_create(&c);
		assert_non_null(w[r]);
		assert_int_equal(tly_worker_submit(w[r], &d, 0), 0);
	}
	/* 2 s of virtual time: the tensor needs a few ms */
	while (n_done < N && now < 2000000000ull) {
		unsigned int end = q_tail;

		while (q_head != end) {
			unsigned int j = q_head++ % QMAX;

			if (q[j].dst == AGG)
				tly_agg_rx(a, q[j].f, q[j].len, now);
			else
				tly_worker_rx(w[q[j].dst], q[j].f, q[j].len,
					      now);
		}
		now += 10000;
		tly_agg_poll(a, now);
		for (r = 0; r < N; r++)
			tly_worker_poll(w[r], now);
	}
	assert_int_equal(lost_confirms, 1);
	assert_true(stripped > 0);		/* re-sends did happen */
	assert_int_equal(n_done, N);
	for (r = 0; r < N; r++)
		for (i = 0; i < CHUNKS * K; i++)
			assert_int_equal(x[r][i],
					 (int32_t)(3 * (i * 7) + 3 * 1000003u));
	for (r = 0; r < N; r++)
		tly_worker_destroy(w[r]);
	tly_agg_destroy(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_receipt_int_not_echoed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
