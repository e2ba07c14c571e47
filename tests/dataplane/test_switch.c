// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_switch.c - the switch profile (docs/switch-profile.md) packet by
 * packet: the parser's CONFIRM of one chunk and ACK with RELEASED (and the
 * software profile's parsing left as it was), the aggregator's table row
 * by row, its sweep, and the worker's releases.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/engine/agg.h"
#include "dataplane/engine/frame.h"
#include "dataplane/engine/worker.h"

#define K 64
#define JOB 0x5a17
#define COOKIE 0x0badf00du
#define SLOTS 64
#define MAX_OUT 2048

static const struct tly_wire_limits sw_lim = {
	.job = JOB, .cookie = COOKIE, .k = K, .n_ranks = 32,
	.n_slots = SLOTS, .profile = TLY_PROFILE_SWITCH,
};
static const struct tly_wire_limits soft_lim = {
	.job = JOB, .cookie = COOKIE, .k = K, .n_ranks = 32,
	.n_slots = SLOTS, .profile = TLY_PROFILE_SOFTWARE,
};

/* ---- what the engine sends, parsed with the switch profile's limits */

static struct sent {
	uint16_t dst;
	struct tly_hdr h;
	int32_t v[K];
} out[MAX_OUT];
static unsigned int n_out;
static uint8_t txbuf[64][TLY_HDR_LEN + 4 * K];	/* RESULT to 32: 33 held */

static uint8_t *cap_alloc(void *ctx, size_t len)
{
	static unsigned int next;

	(void)ctx;
	assert_true(len <= sizeof(txbuf[0]));
	return txbuf[next++ % 64];
}

static void cap_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	struct sent *s = &out[n_out++];
	unsigned int i;

	(void)ctx;
	assert_true(n_out <= MAX_OUT);
	s->dst = dst;
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &s->h), TLY_OK);
	for (i = 0; i < K && len > TLY_HDR_LEN; i++)
		s->v[i] = (int32_t)tly_get32(f + TLY_HDR_LEN + 4 * i);
}

static uint16_t slot_of(uint32_t tensor, uint16_t chunk, uint8_t exp)
{
	return (uint16_t)tly_slot_of(tensor, chunk, exp, SLOTS);
}

/* a header-only packet of the switch profile's CONFIRM */
static void confirm_pkt(uint8_t *f, uint16_t rank, uint32_t tensor,
			uint16_t chunk, uint8_t flags)
{
	struct tly_hdr h = {
		.type = TLY_T_CONFIRM, .flags = flags, .job = JOB,
		.rank = rank, .tensor = tensor, .chunk = chunk,
		.slot = slot_of(tensor, chunk, !!(flags & TLY_F_EXP)),
		.cookie = COOKIE,
	};

	tly_hdr_write(f, &h);
}

/* ---- the parser ---- */

static void test_parse_confirm(void **state)
{
	uint8_t f[TLY_HDR_LEN + 8] = { 0 };
	struct tly_hdr h;

	(void)state;
	confirm_pkt(f, 7, 0xdeadbeef, 300, TLY_F_ACK_REQ);
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h), TLY_OK);
	assert_int_equal(h.type, TLY_T_CONFIRM);
	assert_int_equal(h.rank, 7);
	assert_int_equal(h.tensor, 0xdeadbeef);
	assert_int_equal(h.chunk, 300);
	assert_int_equal(h.aux, 0);
	assert_int_equal(h.flags, TLY_F_ACK_REQ);
	assert_int_equal(h.slot, slot_of(0xdeadbeef, 300, 0));
	/* every allowed flag, the exponent chunk at its own slot */
	confirm_pkt(f, 7, 0xdeadbeef, 3,
		    TLY_F_EXP | TLY_F_ACK_REQ | TLY_F_RETX);
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h), TLY_OK);
	assert_int_equal(h.slot, slot_of(0xdeadbeef, 3, 1));
	/* the software profile refuses it as it always did */
	confirm_pkt(f, 7, 0xdeadbeef, 300, 0);
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &soft_lim, &h),
			 TLY_E_CONFIRM);
	confirm_pkt(f, 7, 0xdeadbeef, 300, TLY_F_ACK_REQ);
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &soft_lim, &h),
			 TLY_E_FLAGS);
}

static void test_parse_confirm_bad(void **state)
{
	static const uint8_t bad_flags[] = {
		TLY_F_INT, TLY_F_FALLBACK, TLY_F_REFUSE, TLY_F_RELEASED, 0x80,
	};
	uint8_t f[TLY_HDR_LEN + 8] = { 0 };
	struct tly_hdr h;
	unsigned int i;
	uint16_t s = slot_of(42, 9, 0);

	(void)state;
	for (i = 0; i < sizeof(bad_flags); i++) {
		confirm_pkt(f, 1, 42, 9, bad_flags[i]);
		assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h),
				 TLY_E_FLAGS);
	}
	/* not the chunk's slot: another slot, the exponent chunk's slot
	 * without EXP, out of range */
	confirm_pkt(f, 1, 42, 9, 0);
	tly_put16(f + 6, (uint16_t)((s + 1) % SLOTS));
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h),
			 TLY_E_SLOT);
	if (slot_of(42, 9, 1) != s) {
		tly_put16(f + 6, slot_of(42, 9, 1));
		assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h),
				 TLY_E_SLOT);
	}
	tly_put16(f + 6, SLOTS + s);
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h),
			 TLY_E_SLOT);
	/* a receipt that is not a chunk's slot; a length that is not the
	 * header's and aux's */
	confirm_pkt(f, 1, 42, 9, 0);
	f[15] = 1;
	tly_receipt_put(f + TLY_HDR_LEN, 42, 10,
			(uint16_t)((slot_of(42, 10, 0) + 1) % SLOTS));
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN + 8, &sw_lim, &h),
			 TLY_E_SLOT);
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h),
			 TLY_E_LEN);
	f[15] = 0;
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN + 1, &sw_lim, &h),
			 TLY_E_LEN);
	/* shift, rank, cookie */
	f[14] = 3;
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h),
			 TLY_E_SHIFT);
	confirm_pkt(f, 32, 42, 9, 0);
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h),
			 TLY_E_RANK);
	confirm_pkt(f, 1, 42, 9, 0);
	tly_put32(f + TLY_COOKIE_OFF, COOKIE ^ 1);
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &sw_lim, &h),
			 TLY_E_COOKIE);
}

/*
 * A RESULT of rank TLY_RANK_ALL (the aggregator's RESULT to a multicast
 * result group): accepted with rank_all only, in either profile, and for
 * RESULT only.
 */
static void test_parse_rank_all(void **state)
{
	uint8_t f[TLY_HDR_LEN + 4 * K] = { 0 };
	struct tly_wire_limits grp = sw_lim, soft_grp = soft_lim;
	struct tly_hdr h = {
		.type = TLY_T_RESULT, .flags = TLY_F_INT, .job = JOB,
		.rank = TLY_RANK_ALL, .tensor = 9, .chunk = 3,
		.slot = slot_of(9, 3, 0), .cookie = COOKIE,
	};

	(void)state;
	grp.rank_all = 1;
	soft_grp.rank_all = 1;
	tly_hdr_write(f, &h);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &sw_lim, &h),
			 TLY_E_RANK);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &soft_lim, &h),
			 TLY_E_RANK);
	memset(&h, 0, sizeof(h));
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &soft_grp, &h), TLY_OK);
	assert_int_equal(h.rank, TLY_RANK_ALL);
	memset(&h, 0, sizeof(h));
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &grp, &h), TLY_OK);
	assert_int_equal(h.rank, TLY_RANK_ALL);
	assert_int_equal(h.tensor, 9);
	/* other ranks past n stay refused, and other types of rank ALL */
	tly_put16(f + 4, TLY_RANK_ALL - 1);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &grp, &h), TLY_E_RANK);
	tly_put16(f + 4, TLY_RANK_ALL);
	f[0] = (uint8_t)(TLY_VERSION << 4 | TLY_T_DATA);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &grp, &h), TLY_E_RANK);
	f[0] = (uint8_t)(TLY_VERSION << 4 | TLY_T_ACK);
	f[1] = 0;
	assert_int_equal(tly_hdr_parse(f, TLY_HDR_LEN, &grp, &h), TLY_E_RANK);
}

/*
 * A worker over full frames (dpdk) takes the group's RESULT at the
 * group's port as well as its own, and no other port.
 */
static void test_frame_rx_group_port(void **state)
{
	uint8_t f[TLY_L2L4_LEN + TLY_HDR_LEN + 4 * K] = { 0 };
	struct tly_addr addrs[2] = {
		{ .mac = { 2, 0, 0, 0, 0, 1 }, .ip = 0x0a000001, .port = 7000 },
		{ .mac = { 2, 0, 0, 0, 0, 2 }, .ip = 0x0a000002, .port = 7000 },
	};
	struct tly_addr group = { .mac = { 1, 0, 0x5e, 1, 2, 3 },
				  .ip = 0xef010203, .port = 7700 };
	struct tly_net net = { .addrs = addrs, .n_nodes = 2, .port = 7000 };
	struct tly_wire_limits grp = sw_lim;
	struct tly_counters c = { 0 };
	struct tly_hdr h = {
		.type = TLY_T_RESULT, .flags = TLY_F_INT, .job = JOB,
		.rank = TLY_RANK_ALL, .tensor = 9, .chunk = 3,
		.slot = slot_of(9, 3, 0), .cookie = COOKIE,
	};
	const uint8_t *pkt;
	uint8_t dscp;

	(void)state;
	grp.rank_all = 1;
	tly_l2l4_write(f, &addrs[1], &group, 0, TLY_HDR_LEN + 4 * K);
	tly_hdr_write(f + TLY_L2L4_LEN, &h);
	assert_int_equal(tly_frame_rx(&net, &grp, f, sizeof(f), &h, &pkt,
				      &dscp, &c), TLY_E_L4);
	net.group_port = 7700;
	assert_int_equal(tly_frame_rx(&net, &grp, f, sizeof(f), &h, &pkt,
				      &dscp, &c), TLY_OK);
	assert_ptr_equal(pkt, f + TLY_L2L4_LEN);
	assert_int_equal(h.rank, TLY_RANK_ALL);
	net.group_port = 7701;
	assert_int_equal(tly_frame_rx(&net, &grp, f, sizeof(f), &h, &pkt,
				      &dscp, &c), TLY_E_L4);
	assert_int_equal(c.drops[TLY_E_L4], 2);
}

/* the software profile's multi-range CONFIRM: that profile only */
static void test_parse_ranges_by_profile(void **state)
{
	uint8_t f[TLY_HDR_LEN + 8] = { 0 };
	struct tly_hdr h = { .type = TLY_T_CONFIRM, .job = JOB, .rank = 2,
			     .aux = 1, .cookie = COOKIE };

	(void)state;
	tly_hdr_write(f, &h);
	tly_put32(f + TLY_HDR_LEN, 77);
	tly_put16(f + TLY_HDR_LEN + 4, 10);
	f[TLY_HDR_LEN + 7] = 4;
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &soft_lim, &h), TLY_OK);
	assert_int_equal(h.aux, 1);
	/* read as the switch profile's receipts it names no chunk's slot
	 * (range words are not receipts) */
	assert_int_not_equal(tly_hdr_parse(f, sizeof(f), &sw_lim, &h),
			     TLY_OK);
}

/* a packet of the switch profile: @type with the header's chunk and
 * @n receipts (chunks @first + 1 ..), at their slots; its length */
static size_t receipts_pkt(uint8_t *f, uint8_t type, uint8_t flags,
			   uint16_t rank, uint32_t tensor, uint16_t first,
			   unsigned int n)
{
	uint8_t exp = !!(flags & TLY_F_EXP);
	struct tly_hdr h = {
		.type = type, .flags = flags, .job = JOB, .rank = rank,
		.tensor = tensor, .chunk = first,
		.slot = slot_of(tensor, first, exp), .aux = (uint8_t)n,
		.cookie = COOKIE,
	};
	unsigned int i;

	tly_hdr_write(f, &h);
	for (i = 0; i < n; i++)
		tly_receipt_put(f + TLY_HDR_LEN + TLY_RECEIPT_LEN * i, tensor,
				(uint16_t)(first + 1 + i),
				slot_of(tensor, (uint16_t)(first + 1 + i),
					exp));
	return TLY_HDR_LEN + TLY_RECEIPT_LEN * n;
}

/* CONFIRM of up to 8 chunks, and the ACK with RELEASED echoing them */
static void test_parse_receipts(void **state)
{
	uint8_t f[TLY_HDR_LEN + TLY_RECEIPT_LEN * TLY_SWITCH_RECEIPTS];
	struct tly_hdr h;
	size_t len;

	(void)state;
	len = receipts_pkt(f, TLY_T_CONFIRM, TLY_F_ACK_REQ, 3, 42, 9, 7);
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h), TLY_OK);
	assert_int_equal(h.aux, 7);
	assert_int_equal(h.chunk, 9);
	assert_int_equal(tly_get16(f + TLY_HDR_LEN + 6 * TLY_RECEIPT_LEN + 4),
			 16);
	/* every receipt's slot is checked, the last one too */
	tly_put16(f + TLY_HDR_LEN + 6 * TLY_RECEIPT_LEN + 6,
		  (uint16_t)((slot_of(42, 16, 0) + 1) % SLOTS));
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h), TLY_E_SLOT);
	tly_put16(f + TLY_HDR_LEN + 6 * TLY_RECEIPT_LEN + 6, SLOTS);
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h), TLY_E_SLOT);
	/* EXP: every receipt is an exponent chunk, at that chunk's slot */
	len = receipts_pkt(f, TLY_T_CONFIRM, TLY_F_EXP, 3, 42, 9, 3);
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h), TLY_OK);
	if (slot_of(42, 10, 1) != slot_of(42, 10, 0)) {
		tly_put16(f + TLY_HDR_LEN + 6, slot_of(42, 10, 0));
		assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h),
				 TLY_E_SLOT);
	}
	/* 9 chunks is one too many; aux and length must agree */
	len = receipts_pkt(f, TLY_T_CONFIRM, 0, 3, 42, 9, 7);
	f[15] = 8;
	assert_int_equal(tly_hdr_parse(f, len + 8, &sw_lim, &h),
			 TLY_E_CONFIRM);
	f[15] = 7;
	assert_int_equal(tly_hdr_parse(f, len - 8, &sw_lim, &h), TLY_E_LEN);
	/* the ACK with RELEASED echoes them; any other ACK has no aux */
	len = receipts_pkt(f, TLY_T_ACK, TLY_F_RELEASED, 3, 42, 9, 7);
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h), TLY_OK);
	assert_int_equal(h.aux, 7);
	tly_put16(f + TLY_HDR_LEN + 6, SLOTS);
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h), TLY_E_SLOT);
	len = receipts_pkt(f, TLY_T_ACK, 0, 3, 42, 9, 2);
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h), TLY_E_LEN);
	len = receipts_pkt(f, TLY_T_ACK, TLY_F_RELEASED, 3, 42, 9, 7);
	f[15] = 8;
	assert_int_equal(tly_hdr_parse(f, len + 8, &sw_lim, &h), TLY_E_LEN);
	/* the software profile has neither */
	len = receipts_pkt(f, TLY_T_ACK, TLY_F_RELEASED, 3, 42, 9, 2);
	assert_int_equal(tly_hdr_parse(f, len, &soft_lim, &h), TLY_E_FLAGS);
	len = receipts_pkt(f, TLY_T_BUSY, 0, 3, 42, 9, 2);
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &h), TLY_E_LEN);
}

static void test_parse_ack_busy_flags(void **state)
{
	uint8_t f[TLY_HDR_LEN];
	struct tly_hdr h = {
		.type = TLY_T_ACK, .job = JOB, .rank = 3, .tensor = 5,
		.chunk = 6, .slot = slot_of(5, 6, 0), .cookie = COOKIE,
	};

	(void)state;
	h.flags = TLY_F_RELEASED;
	tly_hdr_write(f, &h);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &sw_lim, &h), TLY_OK);
	assert_int_equal(h.flags, TLY_F_RELEASED);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &soft_lim, &h),
			 TLY_E_FLAGS);
	/* no fallback store in the switch profile */
	h.flags = TLY_F_FALLBACK;
	tly_hdr_write(f, &h);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &sw_lim, &h),
			 TLY_E_FLAGS);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &soft_lim, &h), TLY_OK);
	h.type = TLY_T_BUSY;
	tly_hdr_write(f, &h);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &sw_lim, &h),
			 TLY_E_FLAGS);
	/* RELEASED is an ACK's only */
	h.type = TLY_T_BUSY;
	h.flags = TLY_F_RELEASED;
	tly_hdr_write(f, &h);
	assert_int_equal(tly_hdr_parse(f, sizeof(f), &sw_lim, &h),
			 TLY_E_FLAGS);
}

/* ---- the aggregator, row by row ---- */

static struct tly_agg *make_agg(uint16_t n, uint32_t fallback)
{
	struct tly_agg_cfg c = {
		.job = JOB, .cookie = COOKIE, .k = K, .n_workers = n,
		.self = 100, .n_slots = SLOTS, .n_fallback = fallback,
		.evict_ns = 1000, .probe_ns = 10, .poll_budget = 1000,
		.profile = TLY_PROFILE_SWITCH,
		.ops = { .alloc = cap_alloc, .send = cap_send },
	};

	n_out = 0;
	return tly_agg_create(&c);
}

/* lanes base + i (EXP: the exponent words) */
static void data(struct tly_agg *a, uint16_t rank, uint32_t tensor,
		 uint16_t chunk, uint8_t flags, int32_t base, uint64_t now)
{
	uint8_t f[TLY_HDR_LEN + 4 * K];
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = flags | TLY_F_INT, .job = JOB,
		.rank = rank, .tensor = tensor, .chunk = chunk,
		.slot = slot_of(tensor, chunk, !!(flags & TLY_F_EXP)),
		.cookie = COOKIE,
	};
	unsigned int i;

	if (flags & TLY_F_EXP)
		h.flags = flags;
	tly_hdr_write(f, &h);
	for (i = 0; i < K; i++)
		tly_put32(f + TLY_HDR_LEN + 4 * i, (uint32_t)(base + (int)i));
	tly_agg_rx(a, f, sizeof(f), now);
}

static void confirm(struct tly_agg *a, uint16_t rank, uint32_t tensor,
		    uint16_t chunk, uint8_t flags, uint64_t now)
{
	uint8_t f[TLY_HDR_LEN];

	confirm_pkt(f, rank, tensor, chunk, flags);
	tly_agg_rx(a, f, sizeof(f), now);
}

/* a chunk of tensor @t other than @c hashed to the same slot */
static uint16_t colliding(uint32_t t, uint16_t c)
{
	uint16_t x;

	for (x = 0; x < 60000; x++)
		if (x != c && slot_of(t, x, 0) == slot_of(t, c, 0))
			return x;
	fail();
	return 0;
}

static void test_agg_create_limits(void **state)
{
	struct tly_agg_cfg c = {
		.job = JOB, .cookie = COOKIE, .k = K, .n_workers = 32,
		.n_slots = SLOTS, .evict_ns = 1000,
		.profile = TLY_PROFILE_SWITCH,
		.ops = { .alloc = cap_alloc, .send = cap_send },
	};
	static const uint16_t ks[] = { 8, 16, 48, 80, 336, 400, 864, 1024 };
	struct tly_agg *a;
	unsigned int i;

	(void)state;
	a = tly_agg_create(&c);
	assert_non_null(a);
	tly_agg_destroy(a);
	c.n_workers = 33;
	assert_null(tly_agg_create(&c));
	c.n_workers = 4;
	for (i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		c.k = ks[i];
		assert_null(tly_agg_create(&c));
	}
	/* whole half passes of 32 lanes, up to 832 (jumbo frames) */
	for (c.k = 32; c.k <= TLY_SWITCH_K_MAX; c.k += 32) {
		a = tly_agg_create(&c);
		assert_non_null(a);
		tly_agg_destroy(a);
	}
	c.k = 256;
	c.profile = 2;
	assert_null(tly_agg_create(&c));
}

/* FREE + DATA: claimed; n = 1 completes at once */
static void test_row_free_data(void **state)
{
	struct tly_agg *a = make_agg(3, 0);

	(void)state;
	data(a, 1, 10, 0, 0, 100, 0);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	assert_int_equal(n_out, 0);
	tly_agg_destroy(a);

	a = make_agg(1, 0);
	data(a, 0, 10, 0, 0, 100, 0);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_RESULT);
	assert_int_equal(out[0].v[5], 105);
	tly_agg_destroy(a);
}

/* AGG(X) + DATA with a new bit: summed; all n: one RESULT to each */
static void test_row_agg_complete(void **state)
{
	struct tly_agg *a = make_agg(32, 0);
	uint16_t r;
	unsigned int i;
	uint32_t seen = 0;
	int32_t want = 0;

	(void)state;
	for (r = 0; r < 32; r++) {
		data(a, (uint16_t)(31 - r), 11, 4, 0, (int32_t)r * 1000, r);
		want += (int32_t)r * 1000;
		if (r < 31)
			assert_int_equal(n_out, 0);
	}
	assert_int_equal(n_out, 32);
	for (i = 0; i < 32; i++) {
		assert_int_equal(out[i].h.type, TLY_T_RESULT);
		assert_true(out[i].dst < 32);
		assert_false(seen & (1u << out[i].dst));	/* once each */
		seen |= 1u << out[i].dst;
		assert_int_equal(out[i].h.rank, out[i].dst);
		assert_int_equal(out[i].h.tensor, 11);
		assert_int_equal(out[i].h.chunk, 4);
		assert_int_equal(out[i].h.flags & TLY_F_RETX, 0);
		assert_int_equal(out[i].v[0], want);
		assert_int_equal(out[i].v[K - 1], want + 32 * (K - 1));
	}
	assert_int_equal(tly_agg_counters(a)->completions, 1);
	tly_agg_destroy(a);
}

/* the exponent round: combined by signed max */
static void test_row_agg_exp(void **state)
{
	struct tly_agg *a = make_agg(2, 0);

	(void)state;
	data(a, 0, 12, 0, TLY_F_EXP, -50, 0);
	data(a, 1, 12, 0, TLY_F_EXP, -60, 0);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[0].h.flags & TLY_F_EXP, TLY_F_EXP);
	assert_int_equal(out[0].v[0], -50);
	/* its CONFIRMs name the exponent chunk; the data chunk's do not
	 * free it */
	confirm(a, 0, 12, 0, 0, 1);
	confirm(a, 1, 12, 0, 0, 1);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	confirm(a, 0, 12, 0, TLY_F_EXP, 2);
	confirm(a, 1, 12, 0, TLY_F_EXP, 2);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	tly_agg_destroy(a);
}

/* AGG(X) + DATA with its bit set: ACK if ACK_REQ or RETX, else drop */
static void test_row_agg_dup(void **state)
{
	struct tly_agg *a = make_agg(3, 0);

	(void)state;
	data(a, 1, 13, 2, 0, 5, 0);
	data(a, 1, 13, 2, 0, 5, 1);
	assert_int_equal(n_out, 0);
	assert_int_equal(tly_agg_counters(a)->dups, 1);
	data(a, 1, 13, 2, TLY_F_ACK_REQ, 5, 2);
	data(a, 1, 13, 2, TLY_F_RETX, 5, 3);
	assert_int_equal(n_out, 2);
	for (unsigned int i = 0; i < 2; i++) {
		assert_int_equal(out[i].h.type, TLY_T_ACK);
		assert_int_equal(out[i].dst, 1);
		assert_int_equal(out[i].h.flags, TLY_F_INT);	/* echoed */
		assert_int_equal(out[i].h.chunk, 2);
	}
	/* the duplicate was not added */
	data(a, 0, 13, 2, 0, 5, 4);
	data(a, 2, 13, 2, 0, 5, 5);
	assert_int_equal(n_out, 5);
	assert_int_equal(out[2].v[1], 18);
	tly_agg_destroy(a);
}

/* AGG(Y) or DONE(Y) + DATA of X: BUSY, never a second table */
static void test_row_collision_busy(void **state)
{
	struct tly_agg *a = make_agg(2, 16);	/* n_fallback ignored */
	uint16_t y = 7, x = colliding(14, 7);

	(void)state;
	data(a, 0, 14, y, 0, 1, 0);
	data(a, 1, 14, x, 0, 1, 1);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_BUSY);
	assert_int_equal(out[0].dst, 1);
	assert_int_equal(out[0].h.chunk, x);
	assert_int_equal(out[0].h.flags, TLY_F_INT);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	/* old enough to be evicted in the software profile: still BUSY */
	data(a, 0, 14, x, 0, 1, 1000000);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[1].h.type, TLY_T_BUSY);
	/* DONE(Y) */
	data(a, 1, 14, y, 0, 1, 1000001);
	assert_int_equal(n_out, 4);
	data(a, 1, 14, x, TLY_F_ACK_REQ, 1, 1000002);
	assert_int_equal(n_out, 5);
	assert_int_equal(out[4].h.type, TLY_T_BUSY);
	assert_int_equal(tly_agg_counters(a)->fallback, 0);
	assert_int_equal(tly_agg_counters(a)->evictions, 0);
	tly_agg_destroy(a);
}

/* DONE(X) + DATA of X: the RESULT to that worker only, RETX */
static void test_row_done_data(void **state)
{
	struct tly_agg *a = make_agg(3, 0);
	uint16_t r;

	(void)state;
	for (r = 0; r < 3; r++)
		data(a, r, 15, 1, 0, 10 * r, 0);
	assert_int_equal(n_out, 3);
	data(a, 2, 15, 1, TLY_F_ACK_REQ | TLY_F_RETX, 999, 5);
	assert_int_equal(n_out, 4);
	assert_int_equal(out[3].h.type, TLY_T_RESULT);
	assert_int_equal(out[3].dst, 2);
	assert_int_equal(out[3].h.flags & TLY_F_RETX, TLY_F_RETX);
	assert_int_equal(out[3].v[2], 30 + 3 * 2);
	/* ... even from a worker whose receipt is in */
	confirm(a, 0, 15, 1, 0, 6);
	data(a, 0, 15, 1, 0, 999, 7);
	assert_int_equal(n_out, 5);
	assert_int_equal(out[4].dst, 0);
	assert_int_equal(out[4].v[0], 30);
	tly_agg_destroy(a);
}

/* DONE(X) + CONFIRM of X: the receipt bit, the ACK, FREE when all in */
static void test_row_done_confirm(void **state)
{
	struct tly_agg *a = make_agg(3, 0);
	uint16_t r;

	(void)state;
	for (r = 0; r < 3; r++)
		data(a, r, 16, 3, 0, 1, 0);
	n_out = 0;
	confirm(a, 2, 16, 3, TLY_F_ACK_REQ, 1);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_ACK);
	assert_int_equal(out[0].dst, 2);
	assert_int_equal(out[0].h.flags, TLY_F_RELEASED);
	assert_int_equal(out[0].h.tensor, 16);
	assert_int_equal(out[0].h.chunk, 3);
	assert_int_equal(out[0].h.slot, slot_of(16, 3, 0));
	/* no ACK_REQ, no ACK; a repeated receipt counts once */
	confirm(a, 0, 16, 3, 0, 2);
	confirm(a, 0, 16, 3, TLY_F_RETX, 2);
	assert_int_equal(n_out, 1);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	/* nothing on a timer: polling re-sends no RESULT */
	tly_agg_poll(a, 1000000000ull);
	assert_int_equal(n_out, 1);
	confirm(a, 1, 16, 3, TLY_F_ACK_REQ | TLY_F_RETX, 3);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[1].h.flags, TLY_F_RELEASED);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	/* the slot is free: a new chunk claims it, with a fresh sum */
	data(a, 0, 16, colliding(16, 3), 0, 4, 4);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	assert_int_equal(n_out, 2);
	tly_agg_destroy(a);
}

/* a tensor whose chunks 0 .. n-1 sit in n different slots */
static uint32_t tensor_apart(uint32_t from, unsigned int n)
{
	uint32_t t;
	unsigned int i, j;

	for (t = from; t < from + 10000; t++) {
		for (i = 1; i < n; i++)
			for (j = 0; j < i; j++)
				if (slot_of(t, (uint16_t)i, 0) ==
				    slot_of(t, (uint16_t)j, 0))
					goto next;
		return t;
next:;
	}
	fail();
	return 0;
}

/*
 * A CONFIRM of several chunks: each receipt is taken at its slot, a slot
 * is freed by its n-th receipt whichever CONFIRM carried it, and the ACK
 * with RELEASED echoes every receipt (and is sent whatever the slots'
 * state, only if asked).
 */
static void test_row_confirm_receipts(void **state)
{
	struct tly_agg *a = make_agg(3, 0);
	uint8_t f[TLY_HDR_LEN + TLY_RECEIPT_LEN * TLY_SWITCH_RECEIPTS];
	uint32_t t = tensor_apart(30, TLY_SWITCH_RECEIPTS);
	uint16_t c, r;
	size_t len;

	(void)state;
	for (c = 0; c < TLY_SWITCH_RECEIPTS; c++)
		for (r = 0; r < 3; r++)
			data(a, r, t, c, 0, 1, 0);
	assert_int_equal(tly_agg_slots_busy(a), TLY_SWITCH_RECEIPTS);
	n_out = 0;
	len = receipts_pkt(f, TLY_T_CONFIRM, TLY_F_ACK_REQ, 0, t, 0, 7);
	tly_agg_rx(a, f, len, 1);
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_ACK);
	assert_int_equal(out[0].h.flags, TLY_F_RELEASED);
	assert_int_equal(out[0].dst, 0);
	assert_int_equal(out[0].h.chunk, 0);
	assert_int_equal(out[0].h.aux, 7);
	for (c = 1; c < TLY_SWITCH_RECEIPTS; c++) {
		assert_int_equal((uint32_t)out[0].v[2 * (c - 1)], t);
		assert_int_equal((uint32_t)out[0].v[2 * (c - 1) + 1],
				 (uint32_t)c << 16 | slot_of(t, c, 0));
	}
	len = receipts_pkt(f, TLY_T_CONFIRM, 0, 1, t, 0, 7);
	tly_agg_rx(a, f, len, 2);
	assert_int_equal(n_out, 1);
	assert_int_equal(tly_agg_slots_busy(a), TLY_SWITCH_RECEIPTS);
	/* the third worker's receipts, in two CONFIRMs of other sizes */
	len = receipts_pkt(f, TLY_T_CONFIRM, 0, 2, t, 0, 2);
	tly_agg_rx(a, f, len, 3);
	assert_int_equal(tly_agg_slots_busy(a), TLY_SWITCH_RECEIPTS - 3);
	len = receipts_pkt(f, TLY_T_CONFIRM, TLY_F_ACK_REQ | TLY_F_RETX, 2,
			   t, 3, 4);
	tly_agg_rx(a, f, len, 4);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[1].h.aux, 4);
	assert_int_equal(out[1].h.chunk, 3);
	/* all freed: asked again, ACKed again, nothing else */
	tly_agg_rx(a, f, len, 5);
	assert_int_equal(n_out, 3);
	assert_int_equal(out[2].h.flags, TLY_F_RELEASED);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	tly_agg_destroy(a);
}

/* FREE, AGG(Y), DONE(Y) (and a stray AGG(X)) + CONFIRM of X: ACK only */
static void test_row_confirm_freed(void **state)
{
	struct tly_agg *a = make_agg(2, 0);
	uint16_t x = 2, y = colliding(17, 2);

	(void)state;
	confirm(a, 1, 17, x, TLY_F_ACK_REQ, 0);		/* FREE */
	assert_int_equal(n_out, 1);
	assert_int_equal(out[0].h.type, TLY_T_ACK);
	assert_int_equal(out[0].h.flags, TLY_F_RELEASED);
	confirm(a, 1, 17, x, 0, 0);
	assert_int_equal(n_out, 1);
	data(a, 0, 17, y, 0, 1, 1);			/* AGG(Y) */
	confirm(a, 1, 17, x, TLY_F_ACK_REQ, 2);
	assert_int_equal(n_out, 2);
	assert_int_equal(out[1].h.chunk, x);
	data(a, 1, 17, y, 0, 1, 3);			/* DONE(Y) */
	assert_int_equal(n_out, 4);
	confirm(a, 1, 17, x, TLY_F_ACK_REQ, 4);
	assert_int_equal(n_out, 5);
	assert_int_equal(out[4].h.type, TLY_T_ACK);
	assert_int_equal(out[4].h.chunk, x);
	/* DONE(Y) kept its state: Y's receipts still free it */
	assert_int_equal(tly_agg_slots_busy(a), 1);
	confirm(a, 0, 17, y, 0, 5);
	confirm(a, 1, 17, y, 0, 5);
	assert_int_equal(tly_agg_slots_busy(a), 0);
	/* a stray partial of X: a CONFIRM of X does not complete it */
	data(a, 0, 17, x, 0, 1, 6);
	confirm(a, 0, 17, x, TLY_F_ACK_REQ, 7);
	confirm(a, 1, 17, x, TLY_F_ACK_REQ, 7);
	assert_int_equal(tly_agg_slots_busy(a), 1);
	assert_int_equal(out[n_out - 1].h.type, TLY_T_ACK);
	tly_agg_destroy(a);
}

/* malformed, another job, a wrong cookie: dropped and counted */
static void test_row_malformed(void **state)
{
	struct tly_agg *a = make_agg(2, 0);
	uint8_t f[TLY_HDR_LEN + 4] = { 0 };
	const struct tly_counters *c = tly_agg_counters(a);

	(void)state;
	confirm_pkt(f, 0, 18, 1, TLY_F_ACK_REQ);
	tly_put32(f + TLY_COOKIE_OFF, COOKIE + 1);
	tly_agg_rx(a, f, TLY_HDR_LEN, 0);
	confirm_pkt(f, 0, 18, 1, TLY_F_ACK_REQ);
	tly_put16(f + 2, JOB + 1);
	tly_agg_rx(a, f, TLY_HDR_LEN, 0);
	confirm_pkt(f, 0, 18, 1, TLY_F_ACK_REQ);
	tly_put16(f + 6, (uint16_t)((slot_of(18, 1, 0) + 1) % SLOTS));
	tly_agg_rx(a, f, TLY_HDR_LEN, 0);
	confirm_pkt(f, 0, 18, 1, TLY_F_ACK_REQ);
	tly_agg_rx(a, f, TLY_HDR_LEN + 1, 0);
	assert_int_equal(n_out, 0);
	assert_int_equal(c->drops[TLY_E_COOKIE], 1);
	assert_int_equal(c->drops[TLY_E_JOB], 1);
	assert_int_equal(c->drops[TLY_E_SLOT], 1);
	assert_int_equal(c->drops[TLY_E_LEN], 1);
	tly_agg_destroy(a);
}

/*
 * The control plane's sweep: AGG slots claimed evict_ns ago or longer
 * are freed (by claim time: contributions since do not count), DONE
 * slots never; a stray partial that held a slot stops blocking it.
 */
static void test_sweep(void **state)
{
	struct tly_agg *a = make_agg(3, 0);
	uint16_t x = 4, y = colliding(19, 4);

	(void)state;
	/* three slots apart */
	assert_int_not_equal(slot_of(19, x, 0), slot_of(20, 0, 0));
	assert_int_not_equal(slot_of(19, x, 0), slot_of(21, 0, 0));
	assert_int_not_equal(slot_of(20, 0, 0), slot_of(21, 0, 0));
	data(a, 0, 19, x, 0, 1, 100);		/* claimed at 100 */
	data(a, 1, 19, x, 0, 1, 900);
	data(a, 0, 20, 0, 0, 1, 500);		/* claimed at 500 */
	data(a, 0, 21, 0, 0, 1, 0);		/* DONE at 0 */
	data(a, 1, 21, 0, 0, 1, 0);
	data(a, 2, 21, 0, 0, 1, 0);
	assert_int_equal(tly_agg_slots_busy(a), 3);
	assert_int_equal(tly_agg_sweep(a, 1099), 0);
	assert_int_equal(tly_agg_sweep(a, 1100), 1);
	assert_int_equal(tly_agg_slots_busy(a), 2);
	assert_int_equal(tly_agg_counters(a)->evictions, 1);
	/* y gets x's slot now; x's partial is gone (rebuilt by probes) */
	n_out = 0;
	data(a, 2, 19, y, 0, 1, 1101);
	assert_int_equal(n_out, 0);
	assert_int_equal(tly_agg_sweep(a, 1000000), 2);
	assert_int_equal(tly_agg_slots_busy(a), 1);	/* DONE stays */
	/* the partial of x is rebuilt from all three contributions */
	data(a, 0, 19, x, 0, 1, 1000001);
	data(a, 1, 19, x, 0, 2, 1000001);
	data(a, 2, 19, x, 0, 3, 1000001);
	assert_int_equal(n_out, 3);
	assert_int_equal(out[0].v[0], 6);
	tly_agg_destroy(a);
}

/* ---- the worker's releases ---- */

static struct wsent {
	uint16_t dst;
	struct tly_hdr h;
	uint16_t rc[TLY_SWITCH_RECEIPTS];	/* CONFIRM: receipts' chunks */
} ws[MAX_OUT];
static unsigned int n_ws, n_done;
static uint8_t wbuf[4][TLY_HDR_LEN + 4 * K];

static uint8_t *w_alloc(void *ctx, size_t len)
{
	static unsigned int next;

	(void)ctx;
	assert_true(len <= sizeof(wbuf[0]));
	return wbuf[next++ % 4];
}

static void w_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	(void)ctx;
	assert_true(n_ws < MAX_OUT);
	ws[n_ws].dst = dst;
	assert_int_equal(tly_hdr_parse(f, len, &sw_lim, &ws[n_ws].h), TLY_OK);
	if (ws[n_ws].h.type == TLY_T_CONFIRM) {
		unsigned int i;

		for (i = 0; i < ws[n_ws].h.aux; i++) {
			const uint8_t *r = f + TLY_HDR_LEN +
					   TLY_RECEIPT_LEN * i;

			assert_int_equal(tly_get32(r), ws[n_ws].h.tensor);
			ws[n_ws].rc[i] = tly_get16(r + 4);
		}
	}
	n_ws++;
}

static void w_done(void *ctx, const struct tly_tensor_desc *d)
{
	(void)ctx;
	(void)d;
	n_done++;
}

#define AGG_NODE 40

static uint8_t mk_group;	/* make_worker's cfg.result_group */
/* make_worker's cfg.release_batch: one chunk a CONFIRM unless a test
 * batches (0: the default, TLY_SWITCH_RECEIPTS) */
static uint32_t mk_batch = 1;
static uint32_t mk_ack;		/* make_worker's cfg.ack_every */
/* make_worker's congestion window at start; 0: cc off (a fixed window) */
static uint32_t mk_cwnd;
/* make_worker's cfg.switch_busy_ns (0: busy_ns, 50) */
static uint64_t mk_sbusy;
/* make_worker's cfg.held_max (0: the default, a window with SLOTS) */
static uint32_t mk_held;

static struct tly_worker *make_worker(uint32_t release_max)
{
	static const uint16_t aggs[1] = { AGG_NODE };
	struct tly_worker_cfg c = {
		.job = JOB, .cookie = COOKIE, .k = K, .n_workers = 2,
		.rank = 1, .n_slots = SLOTS, .n_aggs = 1, .agg_nodes = aggs,
		.window = mk_cwnd ? 64 : 8, .max_tensors = 4, .rto_ns = 100,
		.rto_max_ns = 800, .acked_ns = 1000, .busy_ns = 50,
		.switch_busy_ns = mk_sbusy,
		.cc_off = !mk_cwnd, .cc_init_window = mk_cwnd,
		.cc_min_window = mk_cwnd, .profile = TLY_PROFILE_SWITCH,
		.release_max = release_max, .held_max = mk_held,
		.result_group = mk_group,
		.release_batch = mk_batch, .ack_every = mk_ack,
		.ops = { .alloc = w_alloc, .send = w_send }, .done = w_done,
	};

	n_ws = 0;
	n_done = 0;
	return tly_worker_create(&c);
}

/* an aggregator's packet of @rank about a chunk */
static void to_worker_rank(struct tly_worker *w, uint16_t rank, uint8_t type,
			   uint8_t flags, uint32_t tensor, uint16_t chunk,
			   int32_t v, uint64_t now)
{
	uint8_t f[TLY_HDR_LEN + 4 * K];
	struct tly_hdr h = {
		.type = type, .flags = flags, .job = JOB, .rank = rank,
		.tensor = tensor, .chunk = chunk,
		.slot = slot_of(tensor, chunk, !!(flags & TLY_F_EXP)),
		.cookie = COOKIE,
	};
	unsigned int i;

	tly_hdr_write(f, &h);
	for (i = 0; i < K; i++)
		tly_put32(f + TLY_HDR_LEN + 4 * i, (uint32_t)v);
	tly_worker_rx(w, f, type == TLY_T_RESULT ? sizeof(f) : TLY_HDR_LEN,
		      now);
}

/* an aggregator's packet to the worker (rank 1) about a chunk */
static void to_worker(struct tly_worker *w, uint8_t type, uint8_t flags,
		      uint32_t tensor, uint16_t chunk, int32_t v,
		      uint64_t now)
{
	to_worker_rank(w, 1, type, flags, tensor, chunk, v, now);
}

static unsigned int count_confirms(unsigned int from, uint16_t chunk,
				   uint8_t flags)
{
	unsigned int i, n = 0;

	for (i = from; i < n_ws; i++)
		if (ws[i].h.type == TLY_T_CONFIRM && ws[i].h.chunk == chunk &&
		    ws[i].h.flags == flags) {
			assert_int_equal(ws[i].dst, AGG_NODE);
			assert_int_equal(ws[i].h.aux, 0);
			assert_int_equal(ws[i].h.rank, 1);
			n++;
		}
	return n;
}

static void test_worker_create_limits(void **state)
{
	static const uint16_t aggs[1] = { AGG_NODE };
	struct tly_worker_cfg c = {
		.job = JOB, .cookie = COOKIE, .k = 48, .n_workers = 2,
		.rank = 1, .n_slots = SLOTS, .n_aggs = 1, .agg_nodes = aggs,
		.window = 8, .max_tensors = 4, .rto_ns = 100,
		.profile = TLY_PROFILE_SWITCH,
		.ops = { .alloc = w_alloc, .send = w_send },
	};
	struct tly_worker *w;
	int32_t x[4] = { 0 };
	struct tly_tensor_desc d = {
		.id = 1, .dtype = TLY_DT_I32, .algo = TLY_ALGO_RING,
		.src = x, .dst = x, .count = 4,
	};

	(void)state;
	assert_null(tly_worker_create(&c));
	c.k = 256;
	c.n_workers = 33;
	assert_null(tly_worker_create(&c));
	c.n_workers = 32;
	w = tly_worker_create(&c);
	assert_non_null(w);
	assert_int_equal(tly_worker_submit(w, &d, 0), -EINVAL);
	d.algo = TLY_ALGO_AGG;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_destroy(w);
}

/*
 * DONE -> RELEASING: CONFIRM(X) with ACK_REQ on placing; again on
 * rto x 2^retries (capped) until the ACK; the tensor completes at once.
 */
static void test_worker_release(void **state)
{
	struct tly_worker *w = make_worker(0);
	int32_t in[2 * K], res[2 * K];
	struct tly_tensor_desc d = {
		.id = 77, .dtype = TLY_DT_I32, .src = in, .dst = res,
		.count = 2 * K,
	};
	uint64_t t;
	unsigned int mark, n_retx = 0;
	uint64_t last = 0, gaps[8], stale;

	(void)state;
	memset(in, 0, sizeof(in));
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_ws, 2);		/* two DATA, ACK asked */
	assert_int_equal(ws[0].h.flags, TLY_F_INT | TLY_F_ACK_REQ);
	assert_int_equal(ws[1].h.flags, TLY_F_INT | TLY_F_ACK_REQ);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 77, 0, 5, 10);
	assert_int_equal(count_confirms(0, 0, TLY_F_ACK_REQ), 1);
	assert_int_equal(ws[n_ws - 1].h.slot, slot_of(77, 0, 0));
	assert_int_equal(tly_worker_releasing(w), 1);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 77, 1, 6, 11);
	assert_int_equal(n_done, 1);		/* not held by the releases */
	assert_int_equal(res[0], 5);
	assert_int_equal(res[K], 6);
	assert_int_equal(tly_worker_releasing(w), 2);
	/* chunk 1 is ACKed at once; chunk 0's CONFIRM is lost for a while */
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 77, 1, 0, 12);
	assert_int_equal(tly_worker_releasing(w), 1);
	mark = n_ws;
	for (t = 12; t < 4000; t++) {
		unsigned int before = n_ws;

		tly_worker_poll(w, t);
		if (n_ws > before) {
			assert_int_equal(count_confirms(before, 0,
					 TLY_F_ACK_REQ | TLY_F_RETX), 1);
			if (n_retx < 8)
				gaps[n_retx] = t - (n_retx ? last : 10);
			last = t;
			n_retx++;
		}
	}
	assert_int_equal(count_confirms(mark, 1, TLY_F_ACK_REQ | TLY_F_RETX),
			 0);
	/* 100 << 1, << 2, << 3 capped at 800: 200 400 800 800 ... after the
	 * first 100 */
	assert_true(n_retx >= 5);
	assert_int_equal(gaps[0], 100);
	assert_int_equal(gaps[1], 200);
	assert_int_equal(gaps[2], 400);
	assert_int_equal(gaps[3], 800);
	assert_int_equal(gaps[4], 800);
	/* a DATA's ACK (no RELEASED) does not release it */
	to_worker(w, TLY_T_ACK, TLY_F_INT, 77, 0, 0, 4000);
	stale = tly_worker_counters(w)->drops[TLY_E_STALE];
	assert_int_equal(tly_worker_releasing(w), 1);
	/* a RESULT again while releasing: CONFIRM again, ACK still wanted */
	mark = n_ws;
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 77, 0, 5, 4001);
	assert_int_equal(count_confirms(mark, 0, TLY_F_ACK_REQ | TLY_F_RETX),
			 1);
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 77, 0, 0, 4002);
	assert_int_equal(tly_worker_releasing(w), 0);
	/* released: a RESULT again (a slot that completed again from late
	 * DATA) is released again until ACKed; a duplicate ACK is stale;
	 * no timers left */
	mark = n_ws;
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 77, 0, 5, 4003);
	assert_int_equal(count_confirms(mark, 0, TLY_F_ACK_REQ), 1);
	assert_int_equal(tly_worker_releasing(w), 1);
	tly_worker_poll(w, 4103);
	assert_int_equal(count_confirms(mark, 0, TLY_F_ACK_REQ | TLY_F_RETX),
			 1);
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 77, 0, 0, 4104);
	assert_int_equal(tly_worker_releasing(w), 0);
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 77, 0, 0, 4104);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_STALE],
			 stale + 1);
	mark = n_ws;
	for (t = 4104; t < 10000; t += 50)
		tly_worker_poll(w, t);
	assert_int_equal(n_ws, mark);
	tly_worker_destroy(w);
}

/*
 * Receipts batched: a CONFIRM leaves when cfg.release_batch chunks are
 * queued for its aggregator or at the end of the poll, naming each at its
 * slot; one ACK with RELEASED releases every chunk it echoes, and the
 * re-sends of the rest are batched too.
 */
static void test_worker_release_batch(void **state)
{
	struct tly_worker *w;
	uint32_t t = tensor_apart(600, 10);
	int32_t in[10 * K], res[10 * K];
	struct tly_tensor_desc d = {
		.id = t, .dtype = TLY_DT_I32, .src = in, .dst = res,
		.count = 10 * K,
	};
	uint8_t f[TLY_HDR_LEN + TLY_RECEIPT_LEN * TLY_SWITCH_RECEIPTS];
	unsigned int mark, i, c;
	size_t len;

	(void)state;
	memset(in, 0, sizeof(in));
	mk_batch = 0;
	w = make_worker(0);
	mk_batch = 1;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_ws, 8);			/* the window */
	mark = n_ws;
	for (c = 0; c < 7; c++)
		to_worker(w, TLY_T_RESULT, TLY_F_INT, t, (uint16_t)c, 1, 10);
	assert_int_equal(n_ws, mark);			/* queued */
	to_worker(w, TLY_T_RESULT, TLY_F_INT, t, 7, 1, 10);
	assert_int_equal(n_ws, mark + 1);		/* the eighth: sent */
	assert_int_equal(ws[mark].h.type, TLY_T_CONFIRM);
	assert_int_equal(ws[mark].dst, AGG_NODE);
	assert_int_equal(ws[mark].h.flags, TLY_F_ACK_REQ);
	assert_int_equal(ws[mark].h.chunk, 0);
	assert_int_equal(ws[mark].h.aux, 7);
	for (i = 0; i < 7; i++)
		assert_int_equal(ws[mark].rc[i], i + 1);
	assert_int_equal(tly_worker_releasing(w), 8);
	/* the last two chunks: their CONFIRM leaves at the end of a poll */
	tly_worker_poll(w, 11);
	mark = n_ws;
	to_worker(w, TLY_T_RESULT, TLY_F_INT, t, 8, 1, 12);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, t, 9, 1, 12);
	assert_int_equal(n_ws, mark);
	assert_int_equal(n_done, 1);
	tly_worker_poll(w, 12);
	assert_int_equal(n_ws, mark + 1);
	assert_int_equal(ws[mark].h.chunk, 8);
	assert_int_equal(ws[mark].h.aux, 1);
	assert_int_equal(ws[mark].rc[0], 9);
	assert_int_equal(tly_worker_releasing(w), 10);
	/* one ACK releases the first eight; chunks 8 and 9 are re-sent
	 * together on their timer */
	len = receipts_pkt(f, TLY_T_ACK, TLY_F_RELEASED, 1, t, 0, 7);
	tly_worker_rx(w, f, len, 13);
	assert_int_equal(tly_worker_releasing(w), 2);
	mark = n_ws;
	tly_worker_poll(w, 200);
	assert_int_equal(n_ws, mark + 1);
	assert_int_equal(ws[mark].h.flags, TLY_F_ACK_REQ | TLY_F_RETX);
	assert_int_equal(ws[mark].h.aux, 1);		/* in table order */
	assert_int_equal(ws[mark].h.chunk + ws[mark].rc[0], 8 + 9);
	assert_int_not_equal(ws[mark].h.chunk, ws[mark].rc[0]);
	len = receipts_pkt(f, TLY_T_ACK, TLY_F_RELEASED, 1, t, 8, 1);
	tly_worker_rx(w, f, len, 201);
	assert_int_equal(tly_worker_releasing(w), 0);
	assert_int_equal(tly_worker_counters(w)->confirms, 12);
	tly_worker_destroy(w);
}

/* the DATA sent since @from: how many, and whether each of @chunks is one */
static unsigned int data_since(unsigned int from, uint8_t flags,
			       const uint16_t *chunks, unsigned int n)
{
	unsigned int i, j, found = 0, all = 0;

	for (i = from; i < n_ws; i++) {
		if (ws[i].h.type != TLY_T_DATA)
			continue;
		all++;
		assert_int_equal(ws[i].h.flags, flags);
		for (j = 0; j < n; j++)
			found += ws[i].h.chunk == chunks[j];
	}
	assert_int_equal(found, n);
	return all;
}

/*
 * The ack_every tests' start: a worker with cfg.ack_every = @every (and
 * make_worker's mk_cwnd = @cwnd), tensor @t of @n chunks of zeros from
 * @in into @res (n * K words each) submitted and polled at 0, which
 * sends its window of 8; @c gets those 8 chunks in send order.
 */
static struct tly_worker *ack_worker_start(uint32_t every, uint32_t cwnd,
					   uint32_t t, uint32_t n, int32_t *in,
					   int32_t *res, uint16_t *c)
{
	struct tly_tensor_desc d = {
		.id = t, .dtype = TLY_DT_I32, .src = in, .dst = res,
		.count = n * K,
	};
	struct tly_worker *w;
	unsigned int i;

	memset(in, 0, n * K * sizeof(*in));
	mk_ack = every;
	mk_cwnd = cwnd;
	w = make_worker(0);
	mk_ack = 0;
	mk_cwnd = 0;
	assert_non_null(w);
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_ws, 8);
	for (i = 0; i < 8; i++)
		c[i] = ws[i].h.chunk;
	return w;
}

/*
 * cfg.ack_every = 4 (worker_ack.c): one fresh DATA in four asks for its
 * ACK, and that ACK stands for the fresh DATA sent there before it: they
 * are held as placed (their credit back) and probed once at their DATA's
 * rto, then, once a probe is answered, every acked_ns; the later ones
 * time out; the ACK of a retransmission stands for nothing; a chunk taken
 * as placed whose DATA and probe were lost is probed again, and the
 * tensor completes with the RESULTs.
 */
static void test_worker_ack_every(void **state)
{
	uint32_t t = tensor_apart(700, 8);
	int32_t in[8 * K], res[8 * K];
	const uint8_t retx = TLY_F_INT | TLY_F_RETX | TLY_F_ACK_REQ;
	struct tly_worker *w;
	struct tly_worker_held h;
	uint16_t c[8];
	unsigned int i, mark;

	(void)state;
	w = ack_worker_start(4, 0, t, 8, in, res, c);
	for (i = 0; i < 8; i++)
		assert_int_equal(ws[i].h.flags, i % 4 == 3 ?
				 TLY_F_INT | TLY_F_ACK_REQ : TLY_F_INT);
	/* the fourth's ACK: the three before it are placed too */
	to_worker(w, TLY_T_ACK, TLY_F_INT, t, c[3], 0, 10);
	assert_int_equal(tly_worker_held(w, AGG_NODE, &h), 0);
	assert_int_equal(h.inferred, 3);
	/* rto 100: the later ones time out, the placed ones are probed */
	mark = n_ws;
	tly_worker_poll(w, 150);
	assert_int_equal(data_since(mark, retx, (const uint16_t[]){
			c[0], c[1], c[2], c[4], c[5], c[6], c[7] }, 7), 7);
	assert_int_equal(tly_worker_held(w, AGG_NODE, &h), 0);
	assert_int_equal(h.probes, 3);
	assert_int_equal(h.inferred_probed, 3);
	/* the ACK of a retransmission stands for nothing */
	to_worker(w, TLY_T_ACK, TLY_F_INT, t, c[6], 0, 160);
	assert_int_equal(tly_worker_held(w, AGG_NODE, &h), 0);
	assert_int_equal(h.inferred, 3);
	/* c[0]'s and c[2]'s probes are answered; c[1]'s was lost */
	to_worker(w, TLY_T_ACK, TLY_F_INT, t, c[0], 0, 160);
	to_worker(w, TLY_T_ACK, TLY_F_INT, t, c[2], 0, 160);
	mark = n_ws;
	tly_worker_poll(w, 400);			/* rto x 2 */
	assert_int_equal(data_since(mark, retx, (const uint16_t[]){
					    c[4], c[5], c[7] }, 3), 3);
	/* acked_ns after its ACK c[3] is probed (and c[4], c[5], c[7]
	 * time out again, rto x 4); c[1] acked_ns after its probe */
	mark = n_ws;
	tly_worker_poll(w, 1100);
	assert_int_equal(data_since(mark, retx, (const uint16_t[]){
					    c[3], c[4], c[5], c[7] }, 4), 4);
	mark = n_ws;
	tly_worker_poll(w, 1155);
	assert_int_equal(data_since(mark, retx, &c[1], 1), 1);
	/* c[3] placed by its own ACK, c[1] probed again: counted once */
	assert_int_equal(tly_worker_held(w, AGG_NODE, &h), 0);
	assert_int_equal(h.probes, 5);
	assert_int_equal(h.inferred_probed, 3);
	for (i = 0; i < 8; i++)
		to_worker(w, TLY_T_RESULT, TLY_F_INT, t, c[i],
			  (int32_t)c[i] + 1, 1200);
	assert_int_equal(n_done, 1);
	for (i = 0; i < 8; i++)
		assert_int_equal(res[c[i] * K + K - 1], c[i] + 1);
	tly_worker_destroy(w);
}

/*
 * A BUSY says as much as an ACK (worker_ack.c): the aggregator refuses a
 * DATA whether it asked or not, so the fresh DATA before a refused one
 * that are still in flight were placed.  A chunk sent again after its
 * refusal is fresh: the answer to it stands for the ones before it.
 */
static void test_worker_ack_every_busy(void **state)
{
	uint32_t t = tensor_apart(1000, 8);
	int32_t in[8 * K], res[8 * K];
	struct tly_worker *w;
	struct tly_worker_held h;
	uint16_t c[8];
	unsigned int i, mark, fresh = 0;

	(void)state;
	w = ack_worker_start(4, 0, t, 8, in, res, c);
	/* c[4] refused: c[0..3] were placed, c[3]'s ACK not come yet */
	to_worker(w, TLY_T_BUSY, TLY_F_INT, t, c[4], 0, 1);
	assert_int_equal(tly_worker_held(w, AGG_NODE, &h), 0);
	assert_int_equal(h.inferred, 4);
	to_worker(w, TLY_T_BUSY, TLY_F_INT, t, c[5], 0, 1);
	to_worker(w, TLY_T_ACK, TLY_F_INT, t, c[7], 0, 2);
	assert_int_equal(tly_worker_held(w, AGG_NODE, &h), 0);
	assert_int_equal(h.inferred, 5);		/* c[6] */
	/* the back-off over (busy_ns x 2), both go again, fresh */
	mark = n_ws;
	tly_worker_poll(w, 102);
	for (i = mark; i < n_ws; i++) {
		if (ws[i].h.chunk != c[4] && ws[i].h.chunk != c[5])
			continue;
		assert_int_equal(ws[i].h.flags & TLY_F_RETX, 0);
		fresh++;
	}
	assert_int_equal(fresh, 2);
	/* c[5] refused again: c[4], sent again before it, was placed */
	to_worker(w, TLY_T_BUSY, TLY_F_INT, t, c[5], 0, 103);
	assert_int_equal(tly_worker_held(w, AGG_NODE, &h), 0);
	assert_int_equal(h.inferred, 6);
	tly_worker_destroy(w);
}

/* DATA of @chunk the worker sent since ws[@from] */
static unsigned int sent_since(unsigned int from, uint16_t chunk)
{
	unsigned int i, n = 0;

	for (i = from; i < n_ws; i++)
		n += ws[i].h.type == TLY_T_DATA && ws[i].h.chunk == chunk;
	return n;
}

/*
 * In the switch profile a BUSY is a slot that another chunk in progress
 * holds: the refused chunk goes again after switch_busy_ns x 2^retries
 * (switch_busy_ns 10 here), not after the software profile's busy_ns x
 * 2^retries (busy_ns 50).
 */
static void test_worker_busy_wait(void **state)
{
	uint32_t t = tensor_apart(1100, 8);
	int32_t in[8 * K], res[8 * K];
	struct tly_worker *w;
	uint16_t c[8];
	unsigned int mark;

	(void)state;
	mk_sbusy = 10;
	w = ack_worker_start(1, 0, t, 8, in, res, c);
	mk_sbusy = 0;
	to_worker(w, TLY_T_BUSY, TLY_F_INT, t, c[0], 0, 1);
	mark = n_ws;
	tly_worker_poll(w, 20);
	assert_int_equal(sent_since(mark, c[0]), 0);
	tly_worker_poll(w, 21);				/* 1 + 10 x 2 */
	assert_int_equal(sent_since(mark, c[0]), 1);
	/* sent again fresh (no RETX), asking for its ACK */
	assert_int_equal(ws[n_ws - 1].h.flags, TLY_F_INT | TLY_F_ACK_REQ);
	/* refused again: twice as long */
	to_worker(w, TLY_T_BUSY, TLY_F_INT, t, c[0], 0, 22);
	mark = n_ws;
	tly_worker_poll(w, 61);
	assert_int_equal(sent_since(mark, c[0]), 0);
	tly_worker_poll(w, 62);				/* 22 + 10 x 4 */
	assert_int_equal(sent_since(mark, c[0]), 1);
	tly_worker_destroy(w);
}

/*
 * At least two DATA a congestion window ask, however large ack_every:
 * with a window of 8 and ack_every 16, every fourth.
 */
static void test_worker_ack_every_cwnd(void **state)
{
	uint32_t t = tensor_apart(900, 8);
	int32_t in[8 * K], res[8 * K];
	struct tly_worker *w;
	uint16_t c[8];
	unsigned int i;

	(void)state;
	w = ack_worker_start(16, 8, t, 8, in, res, c);	/* the cc window */
	for (i = 0; i < 8; i++)
		assert_int_equal(ws[i].h.flags, i % 4 == 3 ?
				 TLY_F_INT | TLY_F_ACK_REQ : TLY_F_INT);
	tly_worker_destroy(w);
}

/*
 * The records of fresh DATA are a ring of the window: a chunk in flight
 * at its front with the ones after it answered keeps it full, and then
 * every fresh DATA asks (and is not recorded); once the front is
 * answered the stale records go and every fourth asks again.
 */
static void test_worker_ack_every_full(void **state)
{
	uint32_t t = tensor_apart(800, 16);
	int32_t in[16 * K], res[16 * K];
	struct tly_worker *w;
	uint16_t c[8];
	unsigned int i, mark;

	(void)state;
	w = ack_worker_start(4, 0, t, 16, in, res, c);
	for (i = 1; i < 8; i++)
		to_worker(w, TLY_T_RESULT, TLY_F_INT, t, c[i], 1, 5);
	mark = n_ws;
	tly_worker_poll(w, 6);
	assert_int_equal(data_since(mark, TLY_F_INT | TLY_F_ACK_REQ, NULL, 0),
			 7);
	/* c[0]'s ACK: nothing before it; the next fresh DATA does not ask */
	to_worker(w, TLY_T_ACK, TLY_F_INT, t, c[0], 0, 7);
	mark = n_ws;
	tly_worker_poll(w, 8);
	assert_int_equal(data_since(mark, TLY_F_INT, NULL, 0), 1);
	tly_worker_destroy(w);
}

/*
 * The result group: a worker with cfg.result_group places a RESULT of rank
 * TLY_RANK_ALL as its own (and releases it with a CONFIRM of its rank); a
 * worker without drops it as a bad rank and the tensor stays open.
 */
static void test_worker_result_group(void **state)
{
	struct tly_worker *w;
	int32_t in[2 * K], res[2 * K];
	struct tly_tensor_desc d = {
		.id = 91, .dtype = TLY_DT_I32, .src = in, .dst = res,
		.count = 2 * K,
	};
	uint64_t bad;
	unsigned int mark;

	(void)state;
	memset(in, 0, sizeof(in));
	mk_group = 0;
	w = make_worker(0);
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	bad = tly_worker_counters(w)->drops[TLY_E_RANK];
	to_worker_rank(w, TLY_RANK_ALL, TLY_T_RESULT, TLY_F_INT, 91, 0, 7, 1);
	to_worker_rank(w, TLY_RANK_ALL, TLY_T_RESULT, TLY_F_INT, 91, 1, 8, 1);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_RANK], bad + 2);
	assert_int_equal(n_done, 0);
	assert_int_equal(tly_worker_releasing(w), 0);
	tly_worker_destroy(w);

	mk_group = 1;
	w = make_worker(0);
	mk_group = 0;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	mark = n_ws;
	to_worker_rank(w, TLY_RANK_ALL, TLY_T_RESULT, TLY_F_INT, 91, 0, 7, 1);
	assert_int_equal(count_confirms(mark, 0, TLY_F_ACK_REQ), 1);
	/* a RESULT to another rank is still not ours */
	bad = tly_worker_counters(w)->drops[TLY_E_RANK];
	to_worker_rank(w, 0, TLY_T_RESULT, TLY_F_INT, 91, 1, 9, 2);
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_RANK], bad + 1);
	assert_int_equal(n_done, 0);
	to_worker_rank(w, TLY_RANK_ALL, TLY_T_RESULT, TLY_F_INT, 91, 1, 8, 3);
	assert_int_equal(n_done, 1);
	assert_int_equal(res[0], 7);
	assert_int_equal(res[K - 1], 7);
	assert_int_equal(res[K], 8);
	assert_int_equal(res[2 * K - 1], 8);
	assert_int_equal(tly_worker_releasing(w), 2);
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 91, 0, 0, 4);
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 91, 1, 0, 4);
	assert_int_equal(tly_worker_releasing(w), 0);
	/* narrow lanes by group are refused: the XDP aggregator adds int32 */
	{
		float fin[K], fres[K];
		struct tly_tensor_desc n8 = {
			.id = 92, .dtype = TLY_DT_F32, .src = fin, .dst = fres,
			.count = K, .codec = TLY_CODEC_INT8,
		};

		memset(fin, 0, sizeof(fin));
		assert_int_equal(tly_worker_submit(w, &n8, 0), -EINVAL);
		n8.codec = TLY_CODEC_NONE;
		assert_int_equal(tly_worker_submit(w, &n8, 0), 0);
	}
	tly_worker_destroy(w);
}

/* the releasing state is bounded: a RESULT past it waits (not placed) */
static void test_worker_release_bound(void **state)
{
	struct tly_worker *w = make_worker(2);
	int32_t in[3 * K], res[3 * K];
	struct tly_tensor_desc d = {
		.id = 78, .dtype = TLY_DT_I32, .src = in, .dst = res,
		.count = 3 * K,
	};

	(void)state;
	memset(in, 0, sizeof(in));
	memset(res, 0xff, sizeof(res));
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 78, 0, 1, 1);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 78, 1, 2, 1);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 78, 2, 3, 1);
	assert_int_equal(tly_worker_releasing(w), 2);
	assert_int_equal(res[2 * K], -1);		/* not placed */
	assert_int_equal(n_done, 0);
	assert_int_equal(tly_worker_inflight(w), 1);	/* still in flight */
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 78, 0, 0, 2);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 78, 2, 3, 3);
	assert_int_equal(res[2 * K], 3);
	assert_int_equal(n_done, 1);
	assert_int_equal(tly_worker_releasing(w), 2);
	tly_worker_destroy(w);
}

/*
 * An ACKED chunk whose RESULT finds the releasing table full is probed a
 * timeout later (when ACKs will have made room), not acked_ns later.
 */
static void test_worker_release_bound_acked(void **state)
{
	struct tly_worker *w = make_worker(2);
	int32_t in[3 * K], res[3 * K];
	struct tly_tensor_desc d = {
		.id = 81, .dtype = TLY_DT_I32, .src = in, .dst = res,
		.count = 3 * K,
	};
	unsigned int mark;

	(void)state;
	memset(in, 0, sizeof(in));
	memset(res, 0xff, sizeof(res));
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	to_worker(w, TLY_T_ACK, TLY_F_INT, 81, 2, 0, 1);   /* 2 is ACKED */
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 81, 0, 1, 2);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 81, 1, 2, 2);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 81, 2, 3, 3);   /* no room */
	assert_int_equal(tly_worker_counters(w)->tx_nobuf, 1);
	assert_int_equal(res[2 * K], -1);
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 81, 0, 0, 4);
	/* its rto (100) after the drop, long before acked_ns (1000) */
	mark = n_ws;
	tly_worker_poll(w, 102);
	assert_int_equal(sent_since(mark, 2), 0);
	tly_worker_poll(w, 103);			/* 3 + 100 */
	assert_int_equal(sent_since(mark, 2), 1);
	assert_int_equal(ws[n_ws - 1].h.chunk, 2);
	assert_int_equal(ws[n_ws - 1].h.flags,
			 TLY_F_INT | TLY_F_ACK_REQ | TLY_F_RETX);
	tly_worker_poll(w, 110);
	assert_int_equal(sent_since(mark, 2), 1);
	to_worker(w, TLY_T_RESULT, TLY_F_INT, 81, 2, 3, 111);
	assert_int_equal(res[2 * K], 3);
	assert_int_equal(n_done, 1);
	tly_worker_destroy(w);
}

/*
 * The default releasing table holds two of a worker's largest bursts of
 * RESULTs (held_max + window chunks), so RESULTs read while the ACKs of
 * earlier releases are still on their way are all placed: here 640
 * chunks with a window of 64 and held_max 256, none ACKed.
 */
static void test_worker_release_default(void **state)
{
	static int32_t in[640 * K], res[640 * K];
	struct tly_tensor_desc d = {
		.id = 82, .dtype = TLY_DT_I32, .src = in, .dst = res,
		.count = 640 * K,
	};
	struct tly_worker *w;
	unsigned int i, mark = 0;
	uint64_t t;

	(void)state;
	mk_held = 256;		/* 4 windows, a large pool's default */
	mk_cwnd = 64;
	mk_batch = 0;		/* 8 receipts a CONFIRM */
	w = make_worker(0);
	mk_held = 0;
	mk_cwnd = 0;
	mk_batch = 1;
	assert_non_null(w);
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	for (t = 1; n_done == 0 && t < 100; t++) {
		unsigned int end;

		tly_worker_poll(w, t);
		end = n_ws;
		for (i = mark; i < end; i++)
			if (ws[i].h.type == TLY_T_DATA)
				to_worker(w, TLY_T_RESULT, TLY_F_INT, 82,
					  ws[i].h.chunk, (int32_t)ws[i].h.chunk,
					  t);
		mark = end;
	}
	assert_int_equal(n_done, 1);
	assert_int_equal(tly_worker_counters(w)->tx_nobuf, 0);
	assert_int_equal(tly_worker_releasing(w), 640);
	for (i = 0; i < 640; i++)
		assert_int_equal(res[i * K], (int32_t)i);
	tly_worker_destroy(w);
}

/* exponent chunks are released too, by CONFIRMs with EXP */
static void test_worker_release_exp(void **state)
{
	struct tly_worker *w = make_worker(0);
	float in[K], res[K];
	struct tly_tensor_desc d = {
		.id = 79, .dtype = TLY_DT_F32, .src = in, .dst = res,
		.count = K,
	};
	unsigned int mark;

	(void)state;
	for (unsigned int i = 0; i < K; i++)
		in[i] = 1.0f;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	tly_worker_poll(w, 0);
	assert_int_equal(n_ws, 1);
	assert_int_equal(ws[0].h.flags & TLY_F_EXP, TLY_F_EXP);
	mark = n_ws;
	to_worker(w, TLY_T_RESULT, TLY_F_EXP, 79, 0, 10, 1);
	assert_int_equal(count_confirms(mark, 0, TLY_F_EXP | TLY_F_ACK_REQ),
			 1);
	assert_int_equal(ws[mark].h.slot, slot_of(79, 0, 1));
	assert_int_equal(tly_worker_releasing(w), 1);
	/* the data chunk's ACK does not release the exponent chunk */
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 79, 0, 0, 2);
	assert_int_equal(tly_worker_releasing(w), 1);
	to_worker(w, TLY_T_ACK, TLY_F_RELEASED | TLY_F_EXP, 79, 0, 0, 3);
	assert_int_equal(tly_worker_releasing(w), 0);
	tly_worker_destroy(w);
}

/* many releases at once: the table's deletions keep every entry found */
static void test_worker_release_table(void **state)
{
	struct tly_worker *w = make_worker(0);	/* 256 */
	static int32_t in[200 * K], res[200 * K];
	struct tly_tensor_desc d = {
		.id = 80, .dtype = TLY_DT_I32, .src = in, .dst = res,
		.count = 200 * K,
	};
	uint64_t rng = 12345;
	uint16_t order[200], c;
	unsigned int i;

	(void)state;
	assert_int_equal(tly_worker_submit(w, &d, 0), 0);
	for (c = 0; c < 200; c++) {
		tly_worker_poll(w, c);
		to_worker(w, TLY_T_RESULT, TLY_F_INT, 80, c, c, c);
		order[c] = c;
	}
	assert_int_equal(n_done, 1);
	assert_int_equal(tly_worker_releasing(w), 200);
	for (i = 199; i > 0; i--) {	/* a seeded shuffle */
		uint16_t tmp;
		uint32_t j;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		j = (uint32_t)(rng >> 33) % (i + 1);
		tmp = order[i];
		order[i] = order[j];
		order[j] = tmp;
	}
	for (i = 0; i < 200; i++) {
		to_worker(w, TLY_T_ACK, TLY_F_RELEASED, 80, order[i], 0, 300);
		assert_int_equal(tly_worker_releasing(w), 199 - i);
	}
	assert_int_equal(tly_worker_counters(w)->drops[TLY_E_STALE], 0);
	tly_worker_destroy(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_confirm),
		cmocka_unit_test(test_parse_confirm_bad),
		cmocka_unit_test(test_parse_rank_all),
		cmocka_unit_test(test_frame_rx_group_port),
		cmocka_unit_test(test_parse_ranges_by_profile),
		cmocka_unit_test(test_parse_receipts),
		cmocka_unit_test(test_parse_ack_busy_flags),
		cmocka_unit_test(test_agg_create_limits),
		cmocka_unit_test(test_row_free_data),
		cmocka_unit_test(test_row_agg_complete),
		cmocka_unit_test(test_row_agg_exp),
		cmocka_unit_test(test_row_agg_dup),
		cmocka_unit_test(test_row_collision_busy),
		cmocka_unit_test(test_row_done_data),
		cmocka_unit_test(test_row_done_confirm),
		cmocka_unit_test(test_row_confirm_freed),
		cmocka_unit_test(test_row_confirm_receipts),
		cmocka_unit_test(test_row_malformed),
		cmocka_unit_test(test_sweep),
		cmocka_unit_test(test_worker_create_limits),
		cmocka_unit_test(test_worker_release),
		cmocka_unit_test(test_worker_release_batch),
		cmocka_unit_test(test_worker_ack_every),
		cmocka_unit_test(test_worker_ack_every_full),
		cmocka_unit_test(test_worker_ack_every_busy),
		cmocka_unit_test(test_worker_ack_every_cwnd),
		cmocka_unit_test(test_worker_busy_wait),
		cmocka_unit_test(test_worker_result_group),
		cmocka_unit_test(test_worker_release_bound),
		cmocka_unit_test(test_worker_release_bound_acked),
		cmocka_unit_test(test_worker_release_default),
		cmocka_unit_test(test_worker_release_exp),
		cmocka_unit_test(test_worker_release_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
