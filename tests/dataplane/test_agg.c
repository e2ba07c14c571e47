// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_agg.c - the aggregator's slot machine packet by packet: sums,
 * duplicates, late packets, receipts and slot reuse, collisions (fallback,
 * BUSY), eviction, the exponent round, foreign and inconsistent packets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "dataplane/compress/narrow.h"
#include "dataplane/compress/sign_ef.h"
#include "dataplane/compress/sparse.h"
#include "dataplane/engine/agg.h"
#include "dataplane/engine/quant.h"

#define K 8
#define JOB 0x1234
#define COOKIE 0x5eed1e55u	/* the epoch's; ctrl derives it */
#define MAX_OUT 256

struct sent {
	uint16_t dst;
	struct tly_hdr h;
	int32_t v[K];
	uint64_t mask;		/* multicast */
};

static struct sent out[MAX_OUT];
static unsigned int n_out;
static uint8_t txbuf[4][4096];

/* distinct buffers: the engine may hold two frames at once */
static uint8_t *cap_alloc(void *ctx, size_t len)
{
	static unsigned int next;

	(void)ctx;
	assert_true(len <= sizeof(txbuf[0]));
	return txbuf[next++ % 4];
}

static void record(uint16_t dst, const uint8_t *f, size_t len, uint64_t m)
{
	static const struct tly_wire_limits lim = {
		.job = JOB, .cookie = COOKIE, .k = K, .n_ranks = 64,
		.n_slots = 64,
	};
	struct sent *s = &out[n_out++];
	unsigned int i;

	assert_true(n_out <= MAX_OUT);
	s->dst = dst;
	s->mask = m;
	assert_int_equal(tly_hdr_parse(f, len, &lim, &s->h), TLY_OK);
	for (i = 0; i < K && len > TLY_HDR_LEN; i++)
		s->v[i] = (int32_t)tly_get32(f + TLY_HDR_LEN + 4 * i);
}

static void cap_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	(void)ctx;
	record(dst, f, len, 0);
}

static void cap_multicast(void *ctx, uint64_t mask, uint8_t *f, size_t len)
{
	(void)ctx;
	record(0xffff, f, len, mask);
}

static struct tly_agg *make_cookie(uint16_t n, uint32_t fallback, int mcast,
				   uint32_t cookie)
{
	struct tly_agg_cfg c = {
		.job = JOB, .cookie = cookie, .k = K, .n_workers = n,
		.self = 100,
		.n_slots = 64, .n_fallback = fallback,
		.evict_ns = 1000, .probe_ns = 500, .poll_budget = 1000,
		.ops = { .alloc = cap_alloc, .send = cap_send,
			 .multicast = mcast ? cap_multicast : NULL },
	};

	n_out = 0;
	return tly_agg_create(&c);
}

static struct tly_agg *make(uint16_t n, uint32_t fallback, int mcast)
{
	return make_cookie(n, fallback, mcast, COOKIE);
}

static void send_data_cookie(struct tly_agg *a, uint16_t rank,
			     uint32_t tensor, uint16_t chunk, uint8_t flags,
			     int8_t shift, int32_t base, uint64_t now,
			     uint32_t cookie)
{
	uint8_t f[TLY_HDR_LEN + 4 * K];
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = flags, .job = JOB, .rank = rank,
		.tensor = tensor, .chunk = chunk, .shift = shift,
		.cookie = cookie,
	};
	unsigned int i;

	h.slot = (uint16_t)tly_slot_of(tensor, chunk,
				       !!(flags & TLY_F_EXP), 64);
	tly_hdr_write(f, &h);
	for (i = 0; i < K; i++)
		tly_put32(f + TLY_HDR_LEN + 4 * i, (uint32_t)base + i);
	tly_agg_rx(a, f, sizeof(f), now);
}

static void send_data(struct tly_agg *a, uint16_t rank, uint32_t tensor,
		      uint16_t chunk, uint8_t flags, int8_t shift,
		      int32_t base, uint64_t now)
{
	send_data_cookie(a, rank, tensor, chunk, flags, shift, base, now,
			 COOKIE);
}

static void send_confirm(struct tly_agg *a, uint16_t rank, uint32_t tensor,
			 uint16_t first, unsigned int count, uint64_t now)
{
	uint8_t f[TLY_HDR_LEN + 8];
	struct tly_hdr h = { .type = TLY_T_CONFIRM, .job = JOB, .rank = rank,
			     .aux = 1, .cookie = COOKIE };
	uint8_t *r = f + TLY_HDR_LEN;

	tly_hdr_write(f, &h);
	tly_put32(r, tensor);
	tly_put16(r + 4, first);
	r[6] = 0;
	r[7] = (uint8_t)(count - 1);
	tly_agg_rx(a, f, sizeof(f), now);
}

/* a chunk of @tensor other than @chunk that lands in the same slot */
static uint16_t colliding_chunk(uint32_t tensor, uint16_t chunk)
{
	uint32_t s = tly_slot_of(tensor, chunk, 0, 64);
	uint16_t c;

	for (c = chunk + 1;; c++)
		if (tly_slot_of(tensor, c, 0, 64) == s)
			return c;
}

/* the sum of n contributions base_w + i is sum(base_w) + n * i */
static void assert_result(const struct sent *s, uint16_t dst,
			  uint32_t tensor, uint16_t chunk, int32_t base,
			  int32_t n)
{
	unsigned int i;

	assert_int_equal(s->h.type, TLY_T_RESULT);
	assert_int_equal(s->dst, dst);
	assert_int_equal(s->h.rank, dst);
	assert_int_equal(s->h.tensor, tensor);
	assert_int_equal(s->h.chunk, chunk);
	for (i = 0; i < K; i++)
		assert_int_equal(s->v[i], base + (int32_t)i * n);
}

static void test_sum_to_every_worker(void **state)
{
	struct tly_agg *a = make(3, 0, 0);
	unsigned int i;

	(void)state;
	send_data(a, 0, 7, 1, TLY_F_INT, 0, 100, 0);
	send_data(a, 2, 7, 1, TLY_F_INT, 0, -30, 0);
	assert_int_equal(n_out, 0);
	send_data(a, 1, 7, 1, TLY_F_INT, 0, 5, 0);
	assert_int_equal(n_out, 3);
	for (i = 0; i < 3; i++)
		assert_result(&out[i], out[i].dst, 7, 1, 75, 3);
	assert_int_not_equal(out[0].dst, out[1].dst);
	assert_int_not_equal(out[1].dst, out[2].dst);
	assert_int_not_equal(out[0].dst, out[2].dst);
	tly_agg_destroy(a);
}

/* resident pages of this process (/proc/self/statm), in bytes */
static size_t resident_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%lu %lu", &size, &res), 2);
	fclose(f);
	return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * Creating an aggregator leaves its sums untouched (zero pages from the
 * kernel): clearing them cost 40 ms of page faults on the daemon's
 * control thread at every roster.  64 MiB of sums (65536 slots, K = 256)
 * may add at most half that to the resident size; the slot table itself
 * (4 MiB) is written.  (That the sums start at zero where it matters is
 * every other test here.)
 */
static void test_create_leaves_sums_untouched(void **state)
{
	struct tly_agg_cfg c = {
		.job = JOB, .cookie = COOKIE, .k = 256, .n_workers = 2,
		.self = 100, .n_slots = 65536, .n_fallback = 0,
		.evict_ns = 1000, .probe_ns = 500, .poll_budget = 1000,
		.ops = { .alloc = cap_alloc, .send = cap_send },
	};
	size_t sums = (size_t)c.n_slots * c.k * 4, before, grown;
	struct tly_agg *a;

	(void)state;
	before = resident_bytes();
	a = tly_agg_create(&c);
	assert_non_null(a);
	grown = resident_bytes() - before;
	if (grown >= sums / 2)
		fail_msg("creating the aggregator made %zu bytes resident "
			 "(sums %zu)", grown, sums);
	tly_agg_destroy(a);
}

/*
 * tly_agg_prefault() brings the sums in, a bounded piece a call, and
 * stops when all are in; a partial sum it passes over keeps its value.
 */
static void test_prefault_brings_sums_in(void **state)
{
	struct tly_agg_cfg c = {
		.job = JOB, .cookie = COOKIE, .k = 256, .n_workers = 2,
		.self = 100, .n_slots = 16384, .n_fallback = 0,
		.evict_ns = 1000, .probe_ns = 500, .poll_budget = 1000,
		.ops = { .alloc = cap_alloc, .send = cap_send },
	};
	size_t sums = (size_t)c.n_slots * c.k * 4, before, grown;
	struct tly_agg *a, *b;
	unsigned int calls = 0;

	(void)state;
	before = resident_bytes();
	a = tly_agg_create(&c);
	assert_non_null(a);
	while (tly_agg_prefault(a, 1 << 20))
		calls++;
	assert_int_equal(calls, sums >> 20);
	assert_int_equal(tly_agg_prefault(a, 1 << 20), 0);
	grown = resident_bytes() - before;
	if (grown < sums)
		fail_msg("prefault left sums out: %zu of %zu bytes resident",
			 grown, sums);
	tly_agg_destroy(a);

	b = make(2, 4, 0);
	send_data(b, 0, 7, 1, 0, 0, 10, 0);
	while (tly_agg_prefault(b, 4096))
		;
	send_data(b, 1, 7, 1, 0, 0, 20, 0);
	assert_int_equal(n_out, 2);
	assert_result(&out[0], out[0].dst, 7, 1, 30, 2);
	tly_agg_destroy(b);
}

static void test_int32_wraps(void **state)
{
	struct tly_agg *a = make(2, 0, 0);

	(void)state;
	send_data(a, 0, 7, 1, TLY_F_INT, 0, INT32_MAX - 3, 0);
	send_data(a, 1, 7, 1, TLY_F_INT, 0, 10, 0);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[0].v[0], (int32_t)((uint32_t)INT32_MAX + 7));
	tly_agg_destroy(a);
}

static void test_duplicate_counted_once(void **state)
{
	struct tly_agg *a = make(2, 0, 0);

	(void)state;
	send_data(a, 0, 7, 1, 0, 4, 10, 0);
	send_data(a, 0, 7, 1, 0, 4, 10, 1);	/* plain duplicate: silent */
	assert_int_equal(n_out, 0);
	send_data(a, 0, 7, 1, TLY_F_RETX, 4, 10, 2);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_ACK);
	assert_int_equal(out[0].dst, 0);
	send_data(a, 1, 7, 1, 0, 4, 0, 3);
	assert_int_equal(n_out, 3);
	assert_int_equal(out[1].v[2], 10 + 2 + 2);
	assert_int_equal(out[1].h.shift, 4);
	assert_int_equal(tly_agg_counters(a)->dups, 2);
	tly_agg_destroy(a);
}

static void test_ack_requested(void **state)
{
	struct tly_agg *a = make(2, 0, 0);

	(void)state;
	send_data(a, 1, 7, 1, TLY_F_ACK_REQ, 0, 10, 0);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_ACK);
	assert_int_equal(out[0].h.tensor, 7);
	assert_int_equal(out[0].h.chunk, 1);
	assert_int_equal(out[0].dst, 1);
	tly_agg_destroy(a);
}

static void test_late_duplicate_gets_result(void **state)
{
	struct tly_agg *a = make(2, 0, 0);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 1, 0);
	send_data(a, 1, 7, 1, 0, 0, 2, 0);
	n_out = 0;
	send_data(a, 1, 7, 1, TLY_F_RETX, 0, 2, 10);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_RESULT);
	assert_int_equal(out[0].h.flags & TLY_F_RETX, TLY_F_RETX);
	assert_int_equal(out[0].dst, 1);
	assert_int_equal(out[0].v[1], 1 + 2 + 2);
	tly_agg_destroy(a);
}

static void test_receipts_free_slot(void **state)
{
	struct tly_agg *a = make(3, 0, 0);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 1, 0);
	send_data(a, 1, 7, 1, 0, 0, 1, 0);
	send_data(a, 2, 7, 1, 0, 0, 1, 0);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	send_confirm(a, 0, 7, 0, 2, 1);
	send_confirm(a, 2, 7, 1, 1, 1);
	send_confirm(a, 2, 7, 1, 1, 1);		/* duplicate receipt */
	assert_int_equal(tly_agg_slots_busy(a), 1);
	send_confirm(a, 1, 8, 1, 1, 1);		/* another tensor */
	assert_int_equal(tly_agg_slots_busy(a), 1);
	send_confirm(a, 1, 7, 1, 1, 1);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	tly_agg_destroy(a);
}

static void test_probe_unconfirmed(void **state)
{
	struct tly_agg *a = make(3, 0, 0);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 1, 0);
	send_data(a, 1, 7, 1, 0, 0, 1, 0);
	send_data(a, 2, 7, 1, 0, 0, 1, 0);
	send_confirm(a, 0, 7, 1, 1, 1);
	n_out = 0;
	tly_agg_poll(a, 100);			/* too early */
	assert_int_equal(n_out, 0);
	tly_agg_poll(a, 500);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[0].dst, 1);
	assert_int_equal(out[1].dst, 2);
	assert_int_equal(out[0].h.type, TLY_T_RESULT);
	n_out = 0;
	tly_agg_poll(a, 600);			/* backed off */
	assert_int_equal(n_out, 0);
	tly_agg_destroy(a);
}

/* a stray from a finished use of the slot never touches the next use */
static void test_slot_reuse_is_safe(void **state)
{
	struct tly_agg *a = make(2, 4, 0);
	uint16_t c2 = colliding_chunk(7, 1);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 1000, 0);
	send_data(a, 1, 7, 1, 0, 0, 1000, 0);
	send_confirm(a, 0, 7, 1, 1, 1);
	send_confirm(a, 1, 7, 1, 1, 1);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	send_data(a, 0, 7, c2, 0, 0, 1, 2);	/* next use of the slot */
	send_data(a, 1, 7, 1, TLY_F_RETX, 0, 1000, 3);	/* late stray */
	n_out = 0;
	send_data(a, 1, 7, c2, 0, 0, 2, 4);
	assert_int_equal(n_out, 2);
	assert_result(&out[0], out[0].dst, 7, c2, 3, 2);
	tly_agg_destroy(a);
}

/* a duplicate of a finished, confirmed chunk starts nothing */
static void test_stray_after_free_dropped(void **state)
{
	struct tly_agg *a = make(2, 4, 0);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 1, 0);
	send_data(a, 1, 7, 1, 0, 0, 1, 0);
	send_confirm(a, 0, 7, 1, 1, 1);
	send_confirm(a, 1, 7, 1, 1, 1);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	n_out = 0;
	send_data(a, 1, 7, 1, TLY_F_RETX, 0, 1, 2);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	assert_int_equal(n_out, 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_STALE], 1);
	/* the exponent round of the same chunk number is another chunk */
	send_data(a, 1, 7, 1, TLY_F_EXP, 0, 1, 3);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	tly_agg_destroy(a);
}

/*
 * A tombstone lasts tombstone_ns (here 4 * evict_ns = 4000 ns): after it
 * the same chunk id is a new chunk (a later job on the same daemons
 * reusing its keys and iterations), summed afresh and delivered.
 */
static void test_tombstone_expires(void **state)
{
	struct tly_agg *a = make(2, 4, 0);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 1, 0);
	send_data(a, 1, 7, 1, 0, 0, 1, 0);
	send_confirm(a, 0, 7, 1, 1, 1);
	send_confirm(a, 1, 7, 1, 1, 1);		/* freed at t = 1 */
	n_out = 0;
	send_data(a, 0, 7, 1, 0, 0, 10, 4000);	/* 3999 ns: still a stray */
	assert_int_equal(tly_agg_slots_busy(a), 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_STALE], 1);
	send_data(a, 0, 7, 1, 0, 0, 10, 4001);	/* the next job's chunk */
	assert_int_equal(tly_agg_slots_busy(a), 1);
	assert_int_equal(n_out, 0);
	send_data(a, 1, 7, 1, 0, 0, 20, 4002);
	assert_int_equal(n_out, 2);
	assert_result(&out[0], out[0].dst, 7, 1, 30, 2);
	assert_result(&out[1], out[1].dst, 7, 1, 30, 2);
	tly_agg_destroy(a);
}

static void test_collision_uses_fallback(void **state)
{
	struct tly_agg *a = make(2, 4, 0);
	uint16_t c2 = colliding_chunk(7, 1);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 10, 0);
	send_data(a, 0, 7, c2, 0, 0, 20, 0);
	send_data(a, 1, 7, c2, 0, 0, 30, 0);
	assert_int_equal(n_out, 2);
	assert_result(&out[0], out[0].dst, 7, c2, 50, 2);
	assert_int_equal(out[0].h.flags & TLY_F_FALLBACK, TLY_F_FALLBACK);
	send_data(a, 1, 7, 1, 0, 0, 1, 0);
	assert_int_equal(n_out, 4);
	assert_result(&out[2], out[2].dst, 7, 1, 11, 2);
	assert_int_equal(out[2].h.flags & TLY_F_FALLBACK, 0);
	assert_true(tly_agg_counters(a)->fallback >= 2);
	tly_agg_destroy(a);
}

/*
 * A chunk collects in a fallback entry while its primary slot frees: its
 * later packets still find the entry (fb_refs counts it for the primary),
 * the middle one through the common path, and none claims the free
 * primary slot, which would split the sum.
 */
static void test_fallback_outlives_primary(void **state)
{
	struct tly_agg *a = make(3, 4, 0);
	uint16_t c2 = colliding_chunk(7, 1);
	unsigned int r;

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 1, 0);
	send_data(a, 0, 7, c2, 0, 0, 10, 0);	/* to the fallback store */
	for (r = 1; r < 3; r++)
		send_data(a, (uint16_t)r, 7, 1, 0, 0, 1, 0);
	for (r = 0; r < 3; r++)
		send_confirm(a, (uint16_t)r, 7, 1, 1, 1);
	assert_int_equal(tly_agg_slots_busy(a), 1);	/* c2 alone */
	n_out = 0;
	send_data(a, 1, 7, c2, 0, 0, 20, 2);
	assert_int_equal(n_out, 0);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	send_data(a, 2, 7, c2, 0, 0, 30, 3);
	assert_int_equal(n_out, 3);
	assert_result(&out[0], out[0].dst, 7, c2, 60, 3);
	assert_int_equal(out[0].h.flags & TLY_F_FALLBACK, TLY_F_FALLBACK);
	assert_int_equal(tly_agg_counters(a)->fallback, 3);
	tly_agg_destroy(a);
}

/*
 * A chunk that completed in a fallback entry leaves its tombstone there:
 * a stray of it is dropped even with its primary slot free, and takes
 * nothing; after tombstone_ns the same id is a new chunk again.
 */
static void test_fallback_tombstone(void **state)
{
	struct tly_agg *a = make(2, 4, 0);
	uint16_t c2 = colliding_chunk(7, 1);
	unsigned int r;

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 1, 0);
	send_data(a, 0, 7, c2, 0, 0, 10, 0);
	send_data(a, 1, 7, c2, 0, 0, 20, 0);	/* done in the fallback */
	send_data(a, 1, 7, 1, 0, 0, 1, 0);
	for (r = 0; r < 2; r++) {
		send_confirm(a, (uint16_t)r, 7, 1, 1, 1);
		send_confirm(a, (uint16_t)r, 7, c2, 1, 1);
	}
	assert_int_equal(tly_agg_slots_busy(a), 0);
	n_out = 0;
	send_data(a, 1, 7, c2, TLY_F_RETX, 0, 20, 2);
	assert_int_equal(n_out, 0);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_STALE], 1);
	send_data(a, 1, 7, c2, 0, 0, 5, 4001);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	send_data(a, 0, 7, c2, 0, 0, 6, 4002);
	assert_int_equal(n_out, 2);
	assert_result(&out[0], out[0].dst, 7, c2, 11, 2);
	tly_agg_destroy(a);
}

static void test_full_answers_busy(void **state)
{
	struct tly_agg *a = make(2, 0, 0);
	uint16_t c2 = colliding_chunk(7, 1);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 10, 0);
	send_data(a, 1, 7, c2, 0, 0, 20, 10);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_BUSY);
	assert_int_equal(out[0].dst, 1);
	assert_int_equal(out[0].h.chunk, c2);
	/* the chunk in the slot still completes correctly */
	send_data(a, 1, 7, 1, 0, 0, 5, 20);
	assert_int_equal(n_out, 3);
	assert_result(&out[1], out[1].dst, 7, 1, 15, 2);
	tly_agg_destroy(a);
}

static void test_idle_partial_evicted(void **state)
{
	struct tly_agg *a = make(2, 0, 0);
	uint16_t c2 = colliding_chunk(7, 1);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 10, 0);
	send_data(a, 1, 7, c2, 0, 0, 20, 999);	/* not idle long enough */
	assert_int_equal(out[0].h.type, TLY_T_BUSY);
	n_out = 0;
	send_data(a, 1, 7, c2, 0, 0, 20, 1000);
	assert_int_equal(n_out, 0);
	assert_int_equal(tly_agg_counters(a)->evictions, 1);
	send_data(a, 0, 7, c2, 0, 0, 1, 1001);
	assert_int_equal(n_out, 2);
	assert_result(&out[0], out[0].dst, 7, c2, 21, 2);
	tly_agg_destroy(a);
}

static void test_exponent_round_takes_max(void **state)
{
	struct tly_agg *a = make(3, 0, 0);

	(void)state;
	send_data(a, 0, 7, 0, TLY_F_EXP, 0, -5, 0);
	send_data(a, 1, 7, 0, TLY_F_EXP, 0, 3, 0);
	send_data(a, 2, 7, 0, TLY_F_EXP, 0, -1000, 0);
	assert_int_equal(n_out, 3);
	assert_int_equal(out[0].h.flags & TLY_F_EXP, TLY_F_EXP);
	assert_int_equal(out[0].v[0], 3);
	assert_int_equal(out[0].v[7], 10);
	/* the data chunk with the same number is a different slot key */
	send_data(a, 0, 7, 0, 0, 2, 1, 0);
	assert_int_equal(n_out, 3);
	tly_agg_destroy(a);
}

static void test_shift_mismatch_dropped(void **state)
{
	struct tly_agg *a = make(2, 0, 0);

	(void)state;
	send_data(a, 0, 7, 1, 0, 5, 10, 0);
	send_data(a, 1, 7, 1, 0, 6, 10, 0);
	send_data(a, 1, 7, 1, TLY_F_INT, 0, 10, 0);
	assert_int_equal(n_out, 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_MISMATCH], 2);
	tly_agg_destroy(a);
}

/*
 * Narrow lanes (docs/compression.md): the slot keeps the lane code, a DATA
 * with another code is a mismatch, the RESULT echoes the code and holds
 * the lane-wise sums, each lane wrapping at its own width (no carry into
 * its neighbour), as tly_narrow_add() says.
 */
static void test_lane_codes(void **state)
{
	static const uint8_t codes[2] = { TLY_F_LANE16, TLY_F_LANE8 };
	unsigned int c, i;

	(void)state;
	for (c = 0; c < 2; c++) {
		struct tly_agg *a = make(2, 0, 0);
		uint8_t p0[4 * K], p1[4 * K];
		unsigned int lb = c ? 1 : 2;

		for (i = 0; i < K; i++) {
			tly_put32(p0 + 4 * i, (uint32_t)0x7fff80f0 + i);
			tly_put32(p1 + 4 * i, (uint32_t)0x0002ff20 + i);
		}
		tly_narrow_add(p0, p1, 4 * K / lb, lb);
		n_out = 0;
		send_data(a, 0, 7, 1, codes[c], -3, 0x7fff80f0, 0);
		send_data(a, 1, 7, 1, codes[1 - c], -3, 0x0002ff20, 0);
		send_data(a, 1, 7, 1, 0, -3, 0x0002ff20, 0);
		assert_int_equal(n_out, 0);
		assert_int_equal(tly_agg_counters(a)->drops[TLY_E_MISMATCH],
				 2);
		send_data(a, 1, 7, 1, codes[c], -3, 0x0002ff20, 0);
		assert_int_equal(n_out, 2);
		for (i = 0; i < 2; i++) {
			assert_int_equal(out[i].h.flags & TLY_F_LANES,
					 codes[c]);
			assert_int_equal(out[i].h.shift, -3);
			for (unsigned int j = 0; j < K; j++)
				assert_int_equal(out[i].v[j],
						 (int32_t)tly_get32(p0 + 4 * j));
		}
		/* the lanes did wrap, each alone */
		assert_int_equal(out[0].v[0], c ? (int32_t)0x7f017f10 :
				 (int32_t)0x80018010);
		tly_agg_destroy(a);
	}
}

/* a DATA of @K words @v with aux @aux (block_topk: m(b), PULL, or the
 * round's TLY_AUX_COUNT) */
static void send_words(struct tly_agg *a, uint16_t rank, uint32_t tensor,
		       uint16_t chunk, uint8_t flags, int8_t shift, uint8_t aux,
		       const int32_t *v, uint64_t now)
{
	uint8_t f[TLY_HDR_LEN + 4 * K];
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = flags, .job = JOB, .rank = rank,
		.tensor = tensor, .chunk = chunk, .shift = shift, .aux = aux,
		.cookie = COOKIE,
	};
	unsigned int i;

	h.slot = (uint16_t)tly_slot_of(tensor, chunk,
				       !!(flags & TLY_F_EXP), 64);
	tly_hdr_write(f, &h);
	for (i = 0; i < K; i++)
		tly_put32(f + TLY_HDR_LEN + 4 * i, (uint32_t)v[i]);
	tly_agg_rx(a, f, sizeof(f), now);
}

/*
 * sign_ef (docs/compression.md section 3): count lanes and the scale sum,
 * another lane code a mismatch, one RESULT to every worker holding what
 * tly_sign_result() makes of the three DATA, and it again for a late DATA
 * of the completed chunk.
 */
static void test_sign_slots(void **state)
{
	static const int32_t base[3] = { 0x100, 0x7a5b3c1d, 0x1234567 };
	struct tly_agg *a = make(3, 0, 0);
	uint8_t counts[32 * (K - 1)], want[4 * K], pl[4 * K];
	struct tly_sign_acc acc;
	unsigned int i, seen = 0;

	(void)state;
	tly_sign_acc_init(&acc, counts, sizeof(counts));
	for (unsigned int w = 0; w < 3; w++) {
		for (i = 0; i < K; i++)
			tly_put32(pl + 4 * i, (uint32_t)base[w] + i);
		tly_sign_acc_add(&acc, pl);
	}
	tly_sign_result(want, &acc, 3, tly_sign_tie_seed(7, 1));
	n_out = 0;
	send_data(a, 0, 7, 1, TLY_F_SIGN, 9, base[0], 0);
	send_data(a, 1, 7, 1, TLY_F_LANE8, 9, base[1], 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_MISMATCH], 1);
	send_data(a, 1, 7, 1, TLY_F_SIGN, 9, base[1], 0);
	send_data(a, 1, 7, 1, TLY_F_SIGN, 9, base[1], 0);	/* dup */
	assert_int_equal(n_out, 0);
	send_data(a, 2, 7, 1, TLY_F_SIGN, 9, base[2], 0);
	assert_int_equal(n_out, 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(out[i].h.flags & TLY_F_LANES, TLY_F_SIGN);
		assert_int_equal(out[i].h.shift, 9);
		assert_int_equal(out[i].h.aux, 0);
		seen |= 1u << out[i].dst;
		for (unsigned int j = 0; j < K; j++)
			assert_int_equal(out[i].v[j],
					 (int32_t)tly_get32(want + 4 * j));
	}
	assert_int_equal(seen, 0x7);	/* to every worker */
	/* the scale words were added as int32 */
	assert_int_equal(out[0].v[0], base[0] + base[1] + base[2]);
	n_out = 0;
	send_data(a, 1, 7, 1, TLY_F_SIGN, 9, base[1], 0);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].dst, 1);
	assert_true(out[0].h.flags & TLY_F_RETX);
	for (i = 0; i < K; i++)
		assert_int_equal(out[0].v[i], (int32_t)tly_get32(want + 4 * i));
	tly_agg_destroy(a);
}

/* the vote of sign element @i of @n_workers' bit words @bits */
static unsigned int vote_model(const uint32_t *bits, unsigned int n_workers,
			       uint32_t tensor, uint16_t chunk, unsigned int i)
{
	unsigned int c = 0, w;

	for (w = 0; w < n_workers; w++)
		c += (bits[w] >> (31 - i % 32)) & 1;
	if (2 * c != n_workers)
		return 2 * c > n_workers;
	/* a tie: docs/compression.md section 3's coin, from the spec */
	return (unsigned int)(tly_key_hash(tly_chunk_hash(tensor, chunk, 0) +
					   i) >> 63);
}

/*
 * An even n: ties broken by the coin of (tensor, chunk, element), the
 * same in every worker's RESULT and in a re-sent one, other coins in
 * another chunk, about half of them +1; the rest is the majority.
 */
static void test_sign_ties(void **state)
{
	/* bit patterns of the 4 workers: counts 1..3 */
	static const uint32_t bits[4] = { 0xffffffff, 0xff00ff00,
					  0xf0f0f0f0, 0 };
	struct tly_agg *a = make(4, 0, 0);
	unsigned int i, w, c, ones = 0, same = 0, ties = 0;
	uint32_t plane[2][K - 1];
	int32_t v[K];

	(void)state;
	for (c = 0; c < 2; c++) {
		n_out = 0;
		for (w = 0; w < 4; w++) {
			v[0] = 0x40 + (int32_t)w;
			for (i = 1; i < K; i++)
				v[i] = (int32_t)bits[w];
			send_words(a, (uint16_t)w, 11, (uint16_t)c,
				   TLY_F_SIGN, 5, 0, v, 0);
		}
		assert_int_equal(n_out, 4);
		for (i = 0; i < 4; i++) {
			assert_int_equal(out[i].v[0], 0x40 * 4 + 6);
			for (w = 1; w < K; w++)
				assert_int_equal(out[i].v[w], out[0].v[w]);
		}
		for (i = 0; i < 32 * (K - 1); i++) {
			uint32_t word = (uint32_t)out[0].v[1 + i / 32];
			unsigned int got = (word >> (31 - i % 32)) & 1;

			assert_int_equal(got, vote_model(bits, 4, 11,
							 (uint16_t)c, i));
		}
		for (i = 1; i < K; i++)
			plane[c][i - 1] = (uint32_t)out[0].v[i];
		/* a late DATA: the same bytes again */
		n_out = 0;
		send_words(a, 2, 11, (uint16_t)c, TLY_F_SIGN, 5, 0, v, 0);
		assert_int_equal(n_out, 1);
		for (i = 1; i < K; i++)
			assert_int_equal((uint32_t)out[0].v[i],
					 plane[c][i - 1]);
	}
	/* the tied elements (count 2): coins about half +1, and not the
	 * same in both chunks */
	for (i = 0; i < 32 * (K - 1); i++) {
		uint32_t m = 0x80000000u >> (i % 32);
		unsigned int cnt = 0;

		for (w = 0; w < 4; w++)
			cnt += !!(bits[w] & m);
		if (cnt != 2)
			continue;
		ties++;
		ones += !!(plane[0][i / 32] & m);
		same += !!(plane[0][i / 32] & m) == !!(plane[1][i / 32] & m);
	}
	assert_int_equal(ties, 16 * (K - 1));
	assert_in_range(ones, ties / 4, 3 * ties / 4);
	assert_true(same < ties);
	tly_agg_destroy(a);
}

/*
 * block_topk (docs/compression.md section 4): a sparse block completes
 * at m(b) distinct senders and goes to every worker; another m is a
 * mismatch; a PULL never claims nor adds (stale before any DATA, ACK
 * while collecting, the RESULT again once done); a DATA of an (m+1)-th
 * rank after completion gets the RESULT, adds nothing; the slot stays
 * until all n confirmed, probes go to non-senders too.
 */
static void test_sparse_slots(void **state)
{
	struct tly_agg *a = make(4, 0, 0);
	int32_t v0[K], v1[K], v2[K], zero[K] = { 0 };
	unsigned int i, seen = 0;

	(void)state;
	for (i = 0; i < K; i++) {
		v0[i] = 0x100 + (int32_t)i;
		v1[i] = -0x7000 + 3 * (int32_t)i;
		v2[i] = 0x55555;
	}
	send_words(a, 3, 7, 2, 0, 9, TLY_AUX_PULL | 2, zero, 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_STALE], 1);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	send_words(a, 0, 7, 2, 0, 9, 2, v0, 0);
	send_words(a, 1, 7, 2, 0, 9, 3, v1, 0);		/* another m */
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_MISMATCH], 1);
	send_words(a, 0, 7, 2, 0, 9, 2, v1, 0);		/* duplicate */
	assert_int_equal(n_out, 0);
	send_words(a, 3, 7, 2, 0, 9, TLY_AUX_PULL | 2, zero, 0);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_ACK);
	assert_int_equal(out[0].dst, 3);
	assert_int_equal(out[0].h.aux, 0);
	n_out = 0;
	send_words(a, 1, 7, 2, 0, 9, 2, v1, 0);		/* completes */
	assert_int_equal(n_out, 4);
	for (i = 0; i < 4; i++) {
		assert_int_equal(out[i].h.type, TLY_T_RESULT);
		assert_int_equal(out[i].h.aux, 0);
		assert_int_equal(out[i].h.shift, 9);
		seen |= 1u << out[i].dst;
		for (unsigned int j = 0; j < K; j++)
			assert_int_equal(out[i].v[j], v0[j] + v1[j]);
	}
	assert_int_equal(seen, 0xf);	/* senders and non-senders */
	n_out = 0;
	send_words(a, 2, 7, 2, 0, 9, 2, v2, 0);		/* a third rank */
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].dst, 2);
	assert_int_equal(out[0].v[0], v0[0] + v1[0]);
	send_words(a, 3, 7, 2, 0, 9, TLY_AUX_PULL | 2, zero, 0);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[1].h.type, TLY_T_RESULT);
	assert_int_equal(out[1].dst, 3);
	assert_true(out[1].h.flags & TLY_F_RETX);
	/* the senders' receipts do not free it; a probe reaches the rest */
	send_confirm(a, 0, 7, 2, 1, 0);
	send_confirm(a, 1, 7, 2, 1, 0);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	n_out = 0;
	tly_agg_poll(a, 600);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[0].dst + out[1].dst, 2 + 3);
	send_confirm(a, 2, 7, 2, 1, 700);
	send_confirm(a, 3, 7, 2, 1, 700);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	/* m = 1: the one DATA completes it */
	n_out = 0;
	send_words(a, 2, 7, 3, 0, 4, 1, v2, 800);
	assert_int_equal(n_out, 4);
	assert_int_equal(out[0].v[K - 1], v2[K - 1]);
	tly_agg_destroy(a);
}

/* the counted exponent round: per lane E * 256 + m, the max of the
 * words and the number that are not TLY_EXP_NONE; aux 1 on the RESULT,
 * a plain round's DATA a mismatch there */
static void test_sparse_exp_round(void **state)
{
	struct tly_agg *a = make(3, 0, 0);
	int32_t w[3][K];
	unsigned int i, r;

	(void)state;
	for (r = 0; r < 3; r++)
		for (i = 0; i < K; i++)
			w[r][i] = i % 3 == r || i == 7 ? (int32_t)(i + r) - 4 :
				  TLY_EXP_NONE;
	send_words(a, 0, 7, 0, TLY_F_EXP, 0, TLY_AUX_COUNT, w[0], 0);
	send_words(a, 1, 7, 0, TLY_F_EXP, 0, 0, w[1], 0);	/* plain */
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_MISMATCH], 1);
	send_words(a, 1, 7, 0, TLY_F_EXP, 0, TLY_AUX_COUNT, w[1], 0);
	send_words(a, 2, 7, 0, TLY_F_EXP, 0, TLY_AUX_COUNT, w[2], 0);
	assert_int_equal(n_out, 3);
	assert_int_equal(out[0].h.aux, TLY_AUX_COUNT);
	for (i = 0; i < K; i++) {
		int32_t e = TLY_EXP_NONE;
		unsigned int m = 0, got_m;
		int32_t got_e;

		for (r = 0; r < 3; r++)
			if (w[r][i] != TLY_EXP_NONE) {
				m++;
				e = w[r][i] > e ? w[r][i] : e;
			}
		tly_sparse_exp_unword((uint32_t)out[0].v[i], &got_e, &got_m);
		assert_int_equal(got_e, e);
		assert_int_equal(got_m, m);
		assert_int_equal(out[0].v[i], (int32_t)((uint32_t)e * 256 + m));
	}
	tly_agg_destroy(a);
}

static void test_foreign_dropped(void **state)
{
	struct tly_agg *a = make(2, 0, 0);
	uint8_t f[TLY_HDR_LEN + 4 * K] = { 0 };
	struct tly_hdr h = { .type = TLY_T_DATA, .job = JOB + 1,
			     .cookie = COOKIE };

	(void)state;
	h.slot = (uint16_t)tly_slot_of(0, 0, 0, 64);
	tly_hdr_write(f, &h);
	tly_agg_rx(a, f, sizeof(f), 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_JOB], 1);
	h.job = JOB;
	h.rank = 2;				/* only 2 workers */
	tly_hdr_write(f, &h);
	tly_agg_rx(a, f, sizeof(f), 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_RANK], 1);
	h.rank = 0;
	h.type = TLY_T_RESULT;			/* not for an aggregator */
	tly_hdr_write(f, &h);
	tly_agg_rx(a, f, sizeof(f), 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_ROLE], 1);
	tly_agg_rx(a, f, 3, 0);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_SHORT], 1);
	assert_int_equal(n_out, 0);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	tly_agg_destroy(a);
}

/*
 * The right job key without the epoch's cookie (a guessed key, a forger
 * without the secret): dropped by the first check and counted as such,
 * before any other field is looked at; the honest sum is untouched.
 */
/* a DATA of @tensor/@chunk from @rank carrying slot field @slot */
static void send_data_slot(struct tly_agg *a, uint16_t rank, uint32_t tensor,
			   uint16_t chunk, uint16_t slot, int32_t base)
{
	uint8_t f[TLY_HDR_LEN + 4 * K];
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = TLY_F_INT, .job = JOB,
		.rank = rank, .slot = slot, .tensor = tensor, .chunk = chunk,
		.cookie = COOKIE,
	};
	unsigned int i;

	tly_hdr_write(f, &h);
	for (i = 0; i < K; i++)
		tly_put32(f + TLY_HDR_LEN + 4 * i, (uint32_t)base + i);
	tly_agg_rx(a, f, sizeof(f), 0);
}

/*
 * The slot field must be the chunk's hashed slot whatever the slots hold:
 * the engine skips the hash when the named slot holds the packet's key,
 * so try a slot collecting another chunk, another slot than the one
 * collecting this chunk, a slot never used (a chunk whose key is all
 * zeroes), and a slot that held the chunk and was freed.
 */
static void test_wrong_slot_dropped(void **state)
{
	struct tly_agg *a = make(3, 0, 1);
	const struct tly_counters *c = tly_agg_counters(a);
	uint16_t s = (uint16_t)tly_slot_of(7, 1, 0, 64);
	uint16_t other = (uint16_t)((s + 1) % 64);
	uint16_t z = 2;
	unsigned int i;

	(void)state;
	while (tly_slot_of(7, z, 0, 64) == s)
		z++;
	send_data_slot(a, 0, 7, 1, s, 100);		/* X collects in s */
	send_data_slot(a, 1, 7, 1, other, 50);		/* X, wrong slot */
	assert_int_equal(c->drops[TLY_E_SLOT], 1);
	send_data_slot(a, 1, 7, z, s, 50);		/* Z names X's slot */
	assert_int_equal(c->drops[TLY_E_SLOT], 2);
	send_data_slot(a, 1, 0, 0, (uint16_t)((tly_slot_of(0, 0, 0, 64) + 1)
					      % 64), 50);	/* never used */
	assert_int_equal(c->drops[TLY_E_SLOT], 3);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	send_data_slot(a, 1, 7, 1, s, 50);
	send_data_slot(a, 2, 7, 1, s, 25);
	assert_int_equal(n_out, 1);			/* the right sum */
	assert_int_equal(out[0].h.type, TLY_T_RESULT);
	for (i = 0; i < K; i++)
		assert_int_equal(out[0].v[i], 175 + 3 * (int32_t)i);
	for (i = 0; i < 3; i++)
		send_confirm(a, (uint16_t)i, 7, 1, 1, 0);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	send_data_slot(a, 0, 7, 1, other, 1);		/* freed, wrong slot */
	assert_int_equal(c->drops[TLY_E_SLOT], 4);
	tly_agg_destroy(a);
}

static void test_wrong_cookie_dropped_first(void **state)
{
	struct tly_agg *a = make(2, 0, 0);
	uint8_t f[TLY_HDR_LEN + 4 * K] = { 0 };
	struct tly_hdr h = { .type = TLY_T_DATA, .job = JOB,
			     .cookie = COOKIE ^ 1, .rank = 1, .tensor = 7,
			     .chunk = 1 };
	const struct tly_counters *k = tly_agg_counters(a);

	(void)state;
	send_data(a, 0, 7, 1, 0, 0, 5, 0);
	h.slot = (uint16_t)tly_slot_of(7, 1, 0, 64);
	tly_hdr_write(f, &h);
	f[TLY_HDR_LEN + 3] = 100;		/* would corrupt the sum */
	tly_agg_rx(a, f, sizeof(f), 1);
	assert_int_equal(k->drops[TLY_E_COOKIE], 1);
	/* a forgery that is wrong everywhere else too is still a cookie
	 * drop: nothing past the cookie was looked at */
	h.rank = 99;
	tly_hdr_write(f, &h);
	f[0] = 0xff;				/* version 15, type 15 */
	tly_agg_rx(a, f, 3 + TLY_HDR_LEN, 2);
	assert_int_equal(k->drops[TLY_E_COOKIE], 2);
	assert_int_equal(k->drops[TLY_E_VERSION], 0);
	assert_int_equal(k->drops[TLY_E_RANK], 0);
	assert_int_equal(k->drops[TLY_E_LEN], 0);
	assert_int_equal(n_out, 0);
	/* the honest contribution completes the honest sum */
	send_data(a, 1, 7, 1, 0, 0, 5, 3);
	assert_int_equal(n_out, 2);
	assert_result(&out[0], out[0].dst, 7, 1, 10, 2);
	tly_agg_destroy(a);
}

/* The engine of the next epoch drops what the previous epoch sent. */
static void test_previous_epoch_cookie_dropped(void **state)
{
	const uint32_t epoch1 = 0x11111111u, epoch2 = 0x22222222u;
	struct tly_agg *a = make_cookie(2, 0, 0, epoch1);

	(void)state;
	send_data_cookie(a, 0, 7, 1, 0, 0, 5, 0, epoch1);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	tly_agg_destroy(a);
	a = make_cookie(2, 0, 0, epoch2);
	send_data_cookie(a, 0, 7, 1, TLY_F_RETX, 0, 5, 1, epoch1);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_COOKIE], 1);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	send_data_cookie(a, 0, 7, 1, 0, 0, 5, 2, epoch2);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	assert_int_equal(tly_agg_counters(a)->drops[TLY_E_COOKIE], 1);
	tly_agg_destroy(a);
}

static void test_64_workers_multicast(void **state)
{
	struct tly_agg *a = make(64, 0, 1);
	uint16_t r;

	(void)state;
	for (r = 0; r < 64; r++) {
		assert_int_equal(n_out, 0);
		send_data(a, r, 9, 3, 0, 0, 1, 0);
	}
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].mask, ~0ull);
	assert_int_equal(out[0].v[1], 64 * 2);
	tly_agg_destroy(a);
}

/*
 * Every payload loop (the portable one and, where the CPU has it, the
 * AVX2 one), at lengths that are not multiples of the vector widths, with
 * and without the L2-L4 envelope: the RESULT is the exact wrapped sum
 * (or the max in the exponent round) of random contributions.
 */
#define LANES_W 3

static uint8_t lanes_tx[2][TLY_L2L4_LEN + TLY_HDR_LEN + 4 * TLY_K_MAX];
static uint8_t lanes_res[sizeof(lanes_tx[0])];
static size_t lanes_res_len;
static unsigned int lanes_n_res;

static uint8_t *lanes_alloc(void *ctx, size_t len)
{
	static unsigned int next;

	(void)ctx;
	assert_true(len <= sizeof(lanes_tx[0]));
	return lanes_tx[next++ % 2];
}

static void lanes_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	(void)ctx;
	(void)dst;
	(void)f;
	(void)len;
	fail_msg("only RESULTs, by multicast");
}

static void lanes_multicast(void *ctx, uint64_t mask, uint8_t *f,
			    size_t len)
{
	(void)ctx;
	assert_true(mask == (1u << LANES_W) - 1);
	memcpy(lanes_res, f, len);
	lanes_res_len = len;
	lanes_n_res++;
}

/* three chunks (the last with another DSCP), each from LANES_W workers */
static void lanes_case(uint16_t k, int portable, int l2, uint8_t flags,
		       unsigned int seed)
{
	static struct tly_addr addrs[LANES_W + 1];
	static uint8_t f[sizeof(lanes_tx[0])];
	static uint32_t want[TLY_K_MAX];
	static const uint8_t dscps[] = { 0, 0, 46 };
	struct tly_agg_cfg c = {
		.job = JOB, .cookie = COOKIE, .k = k, .n_workers = LANES_W,
		.self = LANES_W, .n_slots = 16, .n_fallback = 2,
		.evict_ns = 1000, .probe_ns = 500, .portable_loops = portable,
		.ops = { .alloc = lanes_alloc, .send = lanes_send,
			 .multicast = lanes_multicast },
	};
	struct tly_wire_limits lim = {
		.job = JOB, .cookie = COOKIE, .k = k, .n_ranks = LANES_W,
		.n_slots = 16,
	};
	size_t off = l2 ? TLY_L2L4_LEN : 0, tl = TLY_HDR_LEN + 4u * k, rtl;
	int exp = flags & TLY_F_EXP;
	struct tly_agg *a;
	struct tly_hdr h;
	unsigned int i, ch;
	uint16_t w;

	for (i = 0; i <= LANES_W; i++) {
		addrs[i] = (struct tly_addr){ .mac = { 2, 0, 0, 0, 0, i },
					      .ip = 0x0a000001u + i,
					      .port = 9191 };
	}
	if (l2)
		c.net = (struct tly_net){ .addrs = addrs,
					  .n_nodes = LANES_W + 1,
					  .port = 9191 };
	a = tly_agg_create(&c);
	assert_non_null(a);
	srand(seed);
	for (ch = 0; ch < sizeof(dscps); ch++) {
		lanes_n_res = 0;
		for (w = 0; w < LANES_W; w++) {
			h = (struct tly_hdr){
				.type = TLY_T_DATA, .flags = flags,
				.job = JOB, .rank = w, .tensor = 77 + k,
				.chunk = (uint16_t)(5 + ch), .cookie = COOKIE,
			};
			h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk,
						       !!exp, 16);
			if (l2)
				tly_l2l4_write(f, &addrs[w], &addrs[LANES_W],
					       dscps[ch], tl);
			tly_hdr_write(f + off, &h);
			for (i = 0; i < k; i++) {
				uint32_t v = (uint32_t)rand() * 2654435761u;

				if (exp)	/* small, either sign */
					v = (uint32_t)((int32_t)(v >> 24) -
						       128);
				if (!w)
					want[i] = v;
				else if (exp)
					want[i] = (int32_t)v >
						  (int32_t)want[i] ?
						  v : want[i];
				else
					want[i] += v;
				tly_put32(f + off + TLY_HDR_LEN + 4 * i, v);
			}
			tly_agg_rx(a, f, off + tl, 0);
		}
		assert_int_equal(lanes_n_res, 1);
		assert_int_equal(lanes_res_len, off + tl);
		if (l2) {	/* the envelope: addresses, checksum, DSCP */
			assert_int_equal(tly_l2l4_parse(lanes_res,
							lanes_res_len, 9191,
							&rtl), TLY_OK);
			assert_int_equal(rtl, tl);
			assert_int_equal(lanes_res[TLY_ETH_LEN + 1] >> 2,
					 dscps[ch]);
			assert_memory_equal(lanes_res, addrs[0].mac, 6);
		}
		assert_int_equal(tly_hdr_parse(lanes_res + off, tl, &lim, &h),
				 TLY_OK);
		assert_int_equal(h.type, TLY_T_RESULT);
		assert_int_equal(h.chunk, 5 + ch);
		for (i = 0; i < k; i++)
			assert_int_equal(tly_get32(lanes_res + off +
						   TLY_HDR_LEN + 4 * i),
					 want[i]);
	}
	assert_int_equal(tly_agg_counters(a)->completions, sizeof(dscps));
	tly_agg_destroy(a);
}

static void test_payload_loops_exact(void **state)
{
	static const uint16_t ks[] = {
		8, 9, 13, 31, 32, 33, 40, 63, 255, 256, 257, 1000, 1024,
	};
	unsigned int i, seed = 1;
	int portable, l2;

	(void)state;
	for (portable = 0; portable < 2; portable++)
		for (l2 = 0; l2 < 2; l2++)
			for (i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
				lanes_case(ks[i], portable, l2, TLY_F_INT,
					   seed++);
				lanes_case(ks[i], portable, l2, 0, seed++);
				lanes_case(ks[i], portable, l2, TLY_F_EXP,
					   seed++);
			}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sum_to_every_worker),
		cmocka_unit_test(test_create_leaves_sums_untouched),
		cmocka_unit_test(test_prefault_brings_sums_in),
		cmocka_unit_test(test_int32_wraps),
		cmocka_unit_test(test_duplicate_counted_once),
		cmocka_unit_test(test_ack_requested),
		cmocka_unit_test(test_late_duplicate_gets_result),
		cmocka_unit_test(test_receipts_free_slot),
		cmocka_unit_test(test_probe_unconfirmed),
		cmocka_unit_test(test_slot_reuse_is_safe),
		cmocka_unit_test(test_stray_after_free_dropped),
		cmocka_unit_test(test_tombstone_expires),
		cmocka_unit_test(test_collision_uses_fallback),
		cmocka_unit_test(test_fallback_outlives_primary),
		cmocka_unit_test(test_fallback_tombstone),
		cmocka_unit_test(test_full_answers_busy),
		cmocka_unit_test(test_idle_partial_evicted),
		cmocka_unit_test(test_exponent_round_takes_max),
		cmocka_unit_test(test_shift_mismatch_dropped),
		cmocka_unit_test(test_lane_codes),
		cmocka_unit_test(test_sign_slots),
		cmocka_unit_test(test_sign_ties),
		cmocka_unit_test(test_sparse_slots),
		cmocka_unit_test(test_sparse_exp_round),
		cmocka_unit_test(test_foreign_dropped),
		cmocka_unit_test(test_wrong_slot_dropped),
		cmocka_unit_test(test_wrong_cookie_dropped_first),
		cmocka_unit_test(test_previous_epoch_cookie_dropped),
		cmocka_unit_test(test_64_workers_multicast),
		cmocka_unit_test(test_payload_loops_exact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
