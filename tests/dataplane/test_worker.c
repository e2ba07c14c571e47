// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_worker.c - the worker's own rules: submission checks, the window,
 * in-place results, completion callbacks, one-worker jobs, and what it
 * sends before and after an aggregator answers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cluster.h"
#include "dataplane/compress/sparse.h"
#include "dataplane/engine/quant.h"

#define K 64
#define COOKIE 0xc0c0a5a5u
#define MAX_OUT 512

static struct {
	uint16_t dst;
	struct tly_hdr h;
	uint8_t range0[8];	/* CONFIRM: its first range */
} sent[MAX_OUT];
static unsigned int n_sent;
static uint8_t bufs[4][TLY_HDR_LEN + 4 * K];

static uint8_t *t_alloc(void *ctx, size_t len)
{
	static unsigned int next;

	(void)ctx;
	assert_true(len <= sizeof(bufs[0]));
	return bufs[next++ % 4];
}

static void t_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	static const struct tly_wire_limits lim = {
		.job = 1, .cookie = COOKIE, .k = K, .n_ranks = 4,
		.n_slots = 128, .n_hops = 6,
	};

	(void)ctx;
	assert_true(n_sent < MAX_OUT);
	sent[n_sent].dst = dst;
	assert_int_equal(tly_hdr_parse(f, len, &lim, &sent[n_sent].h),
			 TLY_OK);
	if (sent[n_sent].h.type == TLY_T_CONFIRM)
		memcpy(sent[n_sent].range0, f + TLY_HDR_LEN, 8);
	n_sent++;
}

static unsigned int n_done;

static void t_done(void *ctx, const struct tly_tensor_desc *d)
{
	(void)ctx;
	(void)d;
	n_done++;
}

static struct tly_worker *make(uint16_t n, uint32_t window)
{
	static const uint16_t aggs[1] = { 3 };
	struct tly_worker_cfg c = {
		.job = 1, .cookie = COOKIE, .k = K, .n_workers = n, .rank = 0,
		.n_slots = 128,
		.n_aggs = 1, .agg_nodes = aggs, .window = window,
		.max_tensors = 2, .rto_ns = 100, .acked_ns = 1000,
		.busy_ns = 50, .confirm_ns = 10,
		.ops = { .alloc = t_alloc, .send = t_send },
		.done = t_done,
	};

	n_sent = 0;
	n_done = 0;
	return tly_worker_create(&c);
}

/* an aggregator answer to sent[i], read at @now, that reached the host
 * at @arrival (0: not known) */
static void answer_at(struct tly_worker *w, unsigned int i, uint8_t type,
		      uint64_t now, uint64_t arrival)
{
	uint8_t f[TLY_HDR_LEN + 4 * K] = { 0 };
	struct tly_hdr h = sent[i].h;

	h.type = type;
	h.flags &= TLY_F_EXP | TLY_F_INT;
	if (type != TLY_T_RESULT)
		h.shift = 0;
	tly_hdr_write(f, &h);
	tly_worker_rx_at(w, f, type == TLY_T_RESULT ? sizeof(f) : TLY_HDR_LEN,
			 now, arrival);
}

static void answer(struct tly_worker *w, unsigned int i, uint8_t type,
		   uint64_t now)
{
	answer_at(w, i, type, now, 0);
}

static void test_submit_checks(void **state)
{
	struct tly_worker *w = make(2, 4);
	uint32_t x[10];
	struct tly_tensor_desc d = {
		.id = 1, .dtype = TLY_DT_I32, .src = x, .dst = x, .count = 10,
	};

	(void)state;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	assert_int_equal(tly_worker_submit(w, &d, 0), -EINVAL);	/* same id */
	d.id = 2;
	d.count = 0;
	assert_int_equal(tly_worker_submit(w, &d, 0), -EINVAL);
	d.count = (size_t)0x10000 * K + 1;
	assert_int_equal(tly_worker_submit(w, &d, 0), -EINVAL);
	d.count = 10;
	d.src = NULL;
	assert_int_equal(tly_worker_submit(w, &d, 0), -EINVAL);
	d.src = x;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	d.id = 3;
	assert_int_equal(tly_worker_submit(w, &d, 0), -EBUSY);	/* max 2 */
	assert_int_equal(tly_worker_active(w), 2);
	tly_worker_destroy(w);
}

static void test_window_and_ack(void **state)
{
	struct tly_worker *w = make(2, 3);
	static uint32_t x[K * 10];
	struct tly_tensor_desc d = {
		.id = 9, .dtype = TLY_DT_I32, .src = x, .dst = x,
		.count = K * 10,
	};

	(void)state;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_sent, 3);		/* the window */
	assert_int_equal(tly_worker_inflight(w), 3);
	tly_worker_poll(w, 1);
	assert_int_equal(n_sent, 3);
	answer(w, 0, TLY_T_ACK, 2);		/* credit back early */
	assert_int_equal(tly_worker_inflight(w), 2);
	tly_worker_poll(w, 3);
	assert_int_equal(n_sent, 4);
	answer(w, 1, TLY_T_BUSY, 4);		/* refused: credit back too */
	tly_worker_poll(w, 5);
	assert_int_equal(n_sent, 5);
	assert_int_equal(sent[4].h.chunk, 4);	/* the others go on */
	/* timeouts: in-flight chunks come back with RETX and ACK_REQ */
	tly_worker_poll(w, 200);
	assert_true(n_sent > 5);
	assert_int_equal(sent[5].h.flags & (TLY_F_RETX | TLY_F_ACK_REQ),
			 TLY_F_RETX | TLY_F_ACK_REQ);
	tly_worker_destroy(w);
}

static uint64_t srtt_to_agg(const struct tly_worker *w)
{
	struct tly_worker_path p;

	assert_int_equal(tly_worker_path(w, 3, &p), 0);
	return p.srtt_ns;
}

/* a worker with a tensor of 8 chunks whose first ones left at 1000 */
static struct tly_worker *sent_at_1000(void)
{
	struct tly_worker *w = make(2, 8);
	static uint32_t x[K * 8];
	struct tly_tensor_desc d = {
		.id = 4, .dtype = TLY_DT_I32, .src = x, .dst = x,
		.count = K * 8,
	};

	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 1000);
	assert_true(n_sent >= 4);
	assert_int_equal(srtt_to_agg(w), 0);
	return w;
}

/*
 * An answer's RTT ends when it reached the host, not when it was read:
 * the time it waited for the worker's thread is the host's, not a queue
 * on the path.  An arrival not known (0), or later than the read (a
 * clock's error), ends it at the read; one before the send answers an
 * earlier transmission and is no sample.
 */
static void test_rtt_ends_at_arrival(void **state)
{
	struct tly_worker *w = sent_at_1000();

	(void)state;
	answer_at(w, 0, TLY_T_ACK, 90000, 3000);	/* read 87 us late */
	assert_int_equal(srtt_to_agg(w), 2000);
	tly_worker_destroy(w);

	w = sent_at_1000();
	answer_at(w, 0, TLY_T_ACK, 90000, 0);	/* not known: the read */
	assert_int_equal(srtt_to_agg(w), 89000);
	tly_worker_destroy(w);

	w = sent_at_1000();
	answer_at(w, 0, TLY_T_ACK, 9000, 50000);	/* after the read */
	assert_int_equal(srtt_to_agg(w), 8000);
	answer_at(w, 1, TLY_T_ACK, 12000, 500);	/* before the send */
	assert_int_equal(srtt_to_agg(w), 8000);
	tly_worker_destroy(w);
}

/* An answer without the epoch's cookie moves nothing: no credit back. */
static void test_wrong_cookie_dropped(void **state)
{
	struct tly_worker *w = make(2, 1);
	static uint32_t x[K * 2];
	struct tly_tensor_desc d = {
		.id = 9, .dtype = TLY_DT_I32, .src = x, .dst = x,
		.count = K * 2,
	};

	(void)state;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_sent, 1);
	sent[0].h.cookie ^= 0x80000000u;
	answer(w, 0, TLY_T_ACK, 1);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_COOKIE], 1);
	assert_int_equal(tly_worker_inflight(w), 1);
	sent[0].h.cookie ^= 0x80000000u;
	answer(w, 0, TLY_T_ACK, 2);
	assert_int_equal(tly_worker_inflight(w), 0);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_COOKIE], 1);
	tly_worker_destroy(w);
}

/* how many of sent[@from..] are CONFIRMs whose one range is exactly
 * @chunk of tensor @t */
static unsigned int confirms_of(unsigned int from, uint32_t t, uint16_t chunk)
{
	unsigned int i, n = 0;

	for (i = from; i < n_sent; i++) {
		const uint8_t *r = sent[i].range0;

		n += sent[i].h.type == TLY_T_CONFIRM && sent[i].h.aux == 1 &&
		     tly_get32(r) == t && tly_get16(r + 4) == chunk &&
		     r[6] == 0 && r[7] == 0;
	}
	return n;
}

/*
 * A RESULT re-sent for a chunk the worker already placed gets a receipt
 * again even when its mode flags are not the chunk's (an aggregator that
 * does not echo INT on its re-sends): the receipt names the chunk, and a
 * worker that withheld it while the rest of its tensor was in flight
 * left the slot held; with a tensor of more chunks than slots, the pool
 * filled with such slots and everything else got BUSY (issue 14's stall).
 * A RESULT in the wrong mode for a chunk not yet placed is still refused.
 * All within the first rto (100 ns): nothing is retransmitted.
 */
static void test_receipt_for_placed_chunk(void **state)
{
	struct tly_worker *w = make(2, 4);
	static uint32_t x[K * 2];
	struct tly_tensor_desc d = {
		.id = 9, .dtype = TLY_DT_I32, .src = x, .dst = x,
		.count = K * 2,
	};
	unsigned int n;

	(void)state;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_sent, 2);		/* chunks 0 and 1 */
	answer(w, 0, TLY_T_RESULT, 1);		/* chunk 0 placed */
	n = n_sent;
	tly_worker_poll(w, 20);			/* its receipt is due */
	assert_int_equal(confirms_of(n, 9, 0), 1);
	/* the receipt was lost; the aggregator re-sends, without INT */
	sent[0].h.flags = TLY_F_RETX;
	n = n_sent;
	answer(w, 0, TLY_T_RESULT, 30);
	tly_worker_poll(w, 50);
	assert_int_equal(confirms_of(n, 9, 0), 1);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_STALE], 0);
	/* chunk 1 is not placed: a RESULT without INT is not its result */
	sent[1].h.flags = TLY_F_RETX;
	answer(w, 1, TLY_T_RESULT, 60);
	tly_worker_poll(w, 61);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_STALE], 1);
	assert_int_equal(n_done, 0);
	assert_int_equal(tly_worker_inflight(w), 1);
	tly_worker_destroy(w);
}

static void test_inplace_and_callback(void **state)
{
	struct cl_cfg c = {
		.n_workers = 3, .k = K, .role = CL_DEDICATED, .n_slots = 128,
		.n_fallback = 8, .window = 8,
		.fab = { .seed = 3, .loss = 0.05, .delay_ns = 1000,
			 .reorder_ns = 3000 },
	};
	struct cluster *cl = cl_create(&c);
	static int32_t buf[3][K * 5 + 7];
	uint16_t r;
	size_t i;

	(void)state;
	assert_non_null(cl);
	for (r = 0; r < 3; r++) {
		struct tly_tensor_desc d = {
			.id = 77, .dtype = TLY_DT_I32, .src = buf[r],
			.dst = buf[r], .count = K * 5 + 7,
		};

		for (i = 0; i < K * 5 + 7; i++)
			buf[r][i] = (int32_t)(i * (r + 1)) - 1000;
		assert_int_equal(tly_worker_submit(cl->w[r], &d, 0), 0);
	}
	assert_int_equal(cl_run(cl, 1, 1000000000ull), 0);
	for (r = 0; r < 3; r++) {
		assert_int_equal(cl->done[r], 1);
		for (i = 0; i < K * 5 + 7; i++)
			assert_int_equal(buf[r][i], (int32_t)(i * 6) - 3000);
	}
	cl_destroy(cl);
}

static void test_one_worker(void **state)
{
	static const enum cl_role roles[3] = { CL_DEDICATED, CL_COLOCATED,
					       CL_RING };
	int ro;

	(void)state;
	for (ro = 0; ro < 3; ro++) {
		struct cl_cfg c = {
			.n_workers = 1, .k = K, .role = roles[ro],
			.n_slots = 16, .window = 4,
			.fab = { .seed = 1, .delay_ns = 1000 },
		};
		struct cluster *cl = cl_create(&c);
		static float x[100], y[100];
		struct tly_tensor_desc d = {
			.id = 5, .dtype = TLY_DT_F32, .src = x, .dst = y,
			.count = 100,
			.algo = roles[ro] == CL_RING ? TLY_ALGO_RING :
						       TLY_ALGO_AGG,
		};
		int i;

		assert_non_null(cl);
		for (i = 0; i < 100; i++) {
			x[i] = (float)i * 0.25f - 3.0f;
			y[i] = -1;
		}
		assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), 0);
		assert_int_equal(cl_run(cl, 1, 100000000ull), 0);
		for (i = 0; i < 100; i++)	/* quarter steps are exact */
			assert_true(y[i] == x[i]);
		cl_destroy(cl);
	}
}

/* the exponent round goes first and data waits for it */
static void test_exponent_round_first(void **state)
{
	struct tly_worker *w = make(2, 8);
	static float x[K * 3];
	struct tly_tensor_desc d = {
		.id = 11, .dtype = TLY_DT_F32, .src = x, .dst = x,
		.count = K * 3,
	};
	uint8_t f[TLY_HDR_LEN + 4 * K] = { 0 };
	struct tly_hdr h;
	unsigned int i;

	(void)state;
	x[5] = 3.0f;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_sent, 1);
	assert_int_equal(sent[0].h.flags & TLY_F_EXP, TLY_F_EXP);
	h = sent[0].h;
	h.type = TLY_T_RESULT;
	h.flags = TLY_F_EXP;
	tly_hdr_write(f, &h);
	/* a "max" below our own exponent, or absurd, is not trusted */
	for (i = 0; i < K; i++)
		f[TLY_HDR_LEN + 4 * i + 3] = 1;
	tly_worker_rx(w, f, sizeof(f), 1);
	f[TLY_HDR_LEN + 3] = 2;
	f[TLY_HDR_LEN + 4] = 0x80;		/* chunk 1: INT32_MIN + 1 */
	tly_worker_rx(w, f, sizeof(f), 1);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_MISMATCH], 2);
	tly_worker_poll(w, 1);
	assert_int_equal(n_sent, 1);		/* data still waits */
	/* the agreed exponents: 2 for every chunk (|x| < 4) */
	for (i = 0; i < K; i++) {
		f[TLY_HDR_LEN + 4 * i] = 0;
		f[TLY_HDR_LEN + 4 * i + 3] = 2;
	}
	tly_worker_rx(w, f, sizeof(f), 1);
	tly_worker_poll(w, 2);
	assert_int_equal(n_sent, 4);
	for (i = 1; i < 4; i++) {
		assert_int_equal(sent[i].h.flags & TLY_F_EXP, 0);
		assert_int_equal(sent[i].h.shift, 30 - 2 - 1);
	}
	/* a RESULT with another shift is not placed */
	answer(w, 1, TLY_T_RESULT, 3);
	h = sent[2].h;
	h.type = TLY_T_RESULT;
	h.shift = 5;
	tly_hdr_write(f, &h);
	tly_worker_rx(w, f, sizeof(f), 4);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_MISMATCH], 3);
	assert_int_equal(tly_worker_inflight(w), 2);
	tly_worker_destroy(w);
}

/* a RESULT of @h's chunk with payload words @v (NULL: zeros) */
static void result_words(struct tly_worker *w, struct tly_hdr h,
			 const int32_t *v, uint64_t now)
{
	uint8_t f[TLY_HDR_LEN + 4 * K] = { 0 };
	unsigned int i;

	h.type = TLY_T_RESULT;
	h.flags &= TLY_F_EXP | TLY_F_INT;
	tly_hdr_write(f, &h);
	for (i = 0; v && i < K; i++)
		tly_put32(f + TLY_HDR_LEN + 4 * i, (uint32_t)v[i]);
	tly_worker_rx(w, f, sizeof(f), now);
}

/*
 * block_topk10_ef (docs/compression.md section 4) on one worker of 3:
 * four blocks, the largest selected; a counted round (EXP aux 1); round
 * words not trusted (a plain round, m > n, m = 0 with an exponent); then
 * per block: a sender with shift (E, m), a listener that PULLs on its
 * timer and places the RESULT with "sent" 0, blocks nobody sent zeros
 * without a packet.
 */
static void test_sparse_round(void **state)
{
	struct tly_worker *w = make(3, 8);
	static float x[K * 4], y[K * 4], s[K * 4];
	struct tly_tensor_desc d = {
		.id = 12, .dtype = TLY_DT_F32, .src = x, .dst = y, .sent = s,
		.count = K * 4, .codec = TLY_CODEC_TOPK10_EF,
	};
	int32_t words[K], v[K];
	struct tly_hdr h;
	unsigned int i, data = 0, pull = 0;

	(void)state;
	for (i = 0; i < K * 4; i++) {
		x[i] = i / K == 2 ? 3.0f : 0.25f;	/* block 2: E = 2 */
		y[i] = 7.0f;
		s[i] = 7.0f;
	}
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_sent, 1);
	assert_int_equal(sent[0].h.flags & TLY_F_EXP, TLY_F_EXP);
	assert_int_equal(sent[0].h.aux, TLY_AUX_COUNT);
	h = sent[0].h;
	for (i = 0; i < K; i++)
		words[i] = (int32_t)tly_sparse_exp_word(TLY_EXP_NONE, 0);
	words[0] = (int32_t)tly_sparse_exp_word(1, 2);	/* others sent it */
	words[2] = (int32_t)tly_sparse_exp_word(2, 2);	/* we and one more */
	h.aux = 0;				/* a plain round */
	result_words(w, h, words, 1);
	h.aux = TLY_AUX_COUNT;
	words[2] = (int32_t)tly_sparse_exp_word(2, 4);	/* m > n */
	result_words(w, h, words, 1);
	words[2] = (int32_t)tly_sparse_exp_word(2, 0);	/* m = 0, E set */
	result_words(w, h, words, 1);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_MISMATCH], 3);
	words[2] = (int32_t)tly_sparse_exp_word(2, 2);
	result_words(w, h, words, 1);
	tly_worker_poll(w, 2);
	/* blocks 1 and 3: zeros, "sent" zero, no packet */
	for (i = K; i < 2 * K; i++) {
		assert_true(y[i] == 0 && s[i] == 0);
		assert_true(y[i + 2 * K] == 0 && s[i + 2 * K] == 0);
	}
	for (i = 1; i < n_sent; i++) {
		if (sent[i].h.type != TLY_T_DATA)
			continue;
		data++;
		assert_int_equal(sent[i].h.chunk, 2);
		assert_int_equal(sent[i].h.aux, 2);
		assert_int_equal(sent[i].h.shift, 30 - 2 - 1);
	}
	assert_int_equal(data, 1);
	/* block 0: LISTEN, then a PULL on the timer */
	n_sent = 0;
	tly_worker_poll(w, 2 + 1000);
	for (i = 0; i < n_sent; i++) {
		if (sent[i].h.type != TLY_T_DATA || sent[i].h.chunk != 0)
			continue;
		pull++;
		assert_int_equal(sent[i].h.aux, TLY_AUX_PULL | 2);
		assert_true(sent[i].h.flags & TLY_F_RETX);
		assert_int_equal(sent[i].h.shift, 30 - 1 - 1);
	}
	assert_int_equal(pull, 1);
	assert_int_equal(tly_worker_inflight(w), 1);	/* block 2 only */
	/* the RESULTs: 1.0 in block 0 (shift 28), 6.0 in block 2 */
	h.flags = 0;
	h.aux = 0;
	h.chunk = 0;
	h.shift = 28;
	h.slot = (uint16_t)tly_slot_of(12, 0, 0, 128);
	for (i = 0; i < K; i++)
		v[i] = 1 << 28;
	result_words(w, h, v, 2000);
	h.chunk = 2;
	h.shift = 27;
	h.slot = (uint16_t)tly_slot_of(12, 2, 0, 128);
	for (i = 0; i < K; i++)
		v[i] = 6 << 27;
	result_words(w, h, v, 2000);
	assert_int_equal(n_done, 1);
	for (i = 0; i < K; i++) {
		assert_true(y[i] == 1.0f && s[i] == 0);
		assert_true(y[i + 2 * K] == 6.0f && s[i + 2 * K] == 3.0f);
	}
	assert_int_equal(tly_worker_inflight(w), 0);
	tly_worker_destroy(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_submit_checks),
		cmocka_unit_test(test_window_and_ack),
		cmocka_unit_test(test_rtt_ends_at_arrival),
		cmocka_unit_test(test_wrong_cookie_dropped),
		cmocka_unit_test(test_receipt_for_placed_chunk),
		cmocka_unit_test(test_inplace_and_callback),
		cmocka_unit_test(test_one_worker),
		cmocka_unit_test(test_exponent_round_first),
		cmocka_unit_test(test_sparse_round),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
