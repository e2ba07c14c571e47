// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_wire.c - header and envelope encode/parse: round trips, and one
 * test per way a packet can be malformed or foreign.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/engine/wire.h"

#define K 64

static const struct tly_wire_limits lim = {
	.job = 0xbeef, .cookie = 0xc001d00du, .k = K, .n_ranks = 8,
	.n_slots = 1000, .n_hops = 6,
};

static uint8_t pkt[TLY_L2L4_LEN + TLY_HDR_LEN + 4 * K + 64];

static struct tly_hdr data_hdr(void)
{
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = TLY_F_ACK_REQ, .job = 0xbeef,
		.rank = 5, .tensor = 0xdeadbeef, .chunk = 777, .shift = -3,
		.cookie = 0xc001d00du,
	};

	h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, 0, lim.n_slots);
	return h;
}

static size_t data_len(void)
{
	return TLY_HDR_LEN + 4 * K;
}

static enum tly_drop parse(const struct tly_hdr *in, size_t len)
{
	struct tly_hdr out;

	tly_hdr_write(pkt, in);
	return tly_hdr_parse(pkt, len, &lim, &out);
}

static void test_roundtrip(void **state)
{
	struct tly_hdr h = data_hdr(), out;

	(void)state;
	tly_hdr_write(pkt, &h);
	/* fixed offsets, network byte order */
	assert_int_equal(pkt[0], 0x21);
	assert_int_equal(pkt[1], TLY_F_ACK_REQ);
	assert_int_equal(pkt[2], 0xbe);
	assert_int_equal(pkt[3], 0xef);
	assert_int_equal(pkt[5], 5);
	assert_int_equal(pkt[8], 0xde);
	assert_int_equal(pkt[11], 0xef);
	assert_int_equal(pkt[12] << 8 | pkt[13], 777);
	assert_int_equal((int8_t)pkt[14], -3);
	assert_int_equal(TLY_HDR_LEN, 20);
	assert_int_equal(pkt[16], 0xc0);
	assert_int_equal(pkt[17], 0x01);
	assert_int_equal(pkt[18], 0xd0);
	assert_int_equal(pkt[19], 0x0d);
	assert_int_equal(tly_hdr_parse(pkt, data_len(), &lim, &out), TLY_OK);
	assert_int_equal(out.type, h.type);
	assert_int_equal(out.flags, h.flags);
	assert_int_equal(out.job, h.job);
	assert_int_equal(out.rank, h.rank);
	assert_int_equal(out.slot, h.slot);
	assert_int_equal(out.tensor, h.tensor);
	assert_int_equal(out.chunk, h.chunk);
	assert_int_equal(out.shift, h.shift);
	assert_int_equal(out.aux, 0);
	assert_int_equal(out.cookie, h.cookie);
}

static void test_short(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	assert_int_equal(parse(&h, 0), TLY_E_SHORT);
	assert_int_equal(parse(&h, TLY_HDR_LEN - 1), TLY_E_SHORT);
}

static void test_version(void **state)
{
	struct tly_hdr h = data_hdr(), out;

	(void)state;
	tly_hdr_write(pkt, &h);
	pkt[0] = (uint8_t)(1 << 4 | TLY_T_DATA);	/* before the cookie */
	assert_int_equal(tly_hdr_parse(pkt, data_len(), &lim, &out),
			 TLY_E_VERSION);
	pkt[0] = TLY_T_DATA;		/* version 0 */
	assert_int_equal(tly_hdr_parse(pkt, data_len(), &lim, &out),
			 TLY_E_VERSION);
}

static void test_type(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	h.type = 0;
	assert_int_equal(parse(&h, data_len()), TLY_E_TYPE);
	h.type = TLY_T_MAX + 1;
	assert_int_equal(parse(&h, data_len()), TLY_E_TYPE);
}

static void test_flags(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	h.flags = TLY_F_EXP | TLY_F_INT;
	assert_int_equal(parse(&h, data_len()), TLY_E_FLAGS);
	h = data_hdr();
	h.flags = TLY_F_FALLBACK;	/* only the aggregator sets it */
	assert_int_equal(parse(&h, data_len()), TLY_E_FLAGS);
	h.type = TLY_T_RING;
	h.flags = TLY_F_EXP;
	h.slot = 1;
	h.shift = 0;
	assert_int_equal(parse(&h, data_len()), TLY_E_FLAGS);
}

/* the lane code (docs/compression.md, section 7): 01 int16, 10 int8 on
 * DATA and RESULT with a shift; 11 (sign) too, with a RESULT's part in
 * aux; never with EXP or INT, never on ACK, BUSY or RING */
static void test_lanes(void **state)
{
	static const uint8_t types[] = { TLY_T_DATA, TLY_T_RESULT };
	struct tly_hdr h, out;
	unsigned int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		h = data_hdr();
		h.type = types[i];
		h.flags = TLY_F_LANE16;
		assert_int_equal(parse(&h, data_len()), TLY_OK);
		h.flags = TLY_F_LANE8 | TLY_F_RETX;
		h.shift = -126;
		assert_int_equal(parse(&h, data_len()), TLY_OK);
		h.shift = -127;		/* TLY_SHIFT_NONFINITE */
		assert_int_equal(parse(&h, data_len()), TLY_OK);
		/* what a receiver learns of the width */
		assert_int_equal(tly_hdr_parse(pkt, data_len(), &lim, &out),
				 TLY_OK);
		assert_int_equal(tly_lane_bytes(out.flags), 1);
		/* 11: sign_ef, DATA and RESULT */
		h.flags = TLY_F_SIGN;
		assert_int_equal(parse(&h, data_len()), TLY_OK);
		h.flags = TLY_F_SIGN | TLY_F_EXP;
		assert_int_equal(parse(&h, data_len()), TLY_E_FLAGS);
		h.flags = TLY_F_SIGN | TLY_F_INT;
		h.shift = 0;
		assert_int_equal(parse(&h, data_len()), TLY_E_FLAGS);
		h.shift = -127;
		h.flags = TLY_F_LANE16 | TLY_F_INT;
		h.shift = 0;
		assert_int_equal(parse(&h, data_len()), TLY_E_FLAGS);
		h.flags = TLY_F_LANE8 | TLY_F_EXP;
		h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, 1,
					       lim.n_slots);
		assert_int_equal(parse(&h, data_len()), TLY_E_FLAGS);
		/* the same packet lengths as int32 */
		h = data_hdr();
		h.type = types[i];
		h.flags = TLY_F_LANE16;
		assert_int_equal(parse(&h, data_len() - 2), TLY_E_LEN);
	}
	assert_int_equal(tly_lane_bytes(TLY_F_LANE16), 2);
	assert_int_equal(tly_lane_bytes(TLY_F_SIGN), 1);
	assert_int_equal(tly_lane_bytes(0), 4);
	/* aux: a sign RESULT carries none (one RESULT a chunk), nor does
	 * any other lane code's DATA or RESULT */
	h = data_hdr();
	h.type = TLY_T_RESULT;
	h.flags = TLY_F_SIGN;
	assert_int_equal(parse(&h, data_len()), TLY_OK);
	h.aux = 1;
	assert_int_equal(parse(&h, data_len()), TLY_E_LEN);
	h.flags = TLY_F_LANE8;
	assert_int_equal(parse(&h, data_len()), TLY_E_LEN);
	h.flags = 0;
	assert_int_equal(parse(&h, data_len()), TLY_E_LEN);
	h.type = TLY_T_DATA;		/* a DATA's aux is 0, sign or not */
	h.flags = TLY_F_SIGN;
	assert_int_equal(parse(&h, data_len()), TLY_E_LEN);
	h = data_hdr();
	h.type = TLY_T_ACK;
	h.shift = 0;
	h.flags = TLY_F_LANE8;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_FLAGS);
	h.flags = TLY_F_LANE16;		/* RELEASED in the switch profile */
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_FLAGS);
	h.type = TLY_T_BUSY;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_FLAGS);
	h.type = TLY_T_RING;
	h.slot = 1;
	assert_int_equal(parse(&h, data_len()), TLY_E_FLAGS);
}

/* block_topk (docs/compression.md, section 7): a DATA of lane code 00
 * carries m(b) in aux, 1 <= m <= n, bit 7 PULL; an exponent round's aux
 * is 0 or TLY_AUX_COUNT; a data RESULT carries no m */
static void test_sparse_aux(void **state)
{
	struct tly_hdr h, out;
	unsigned int m;

	(void)state;
	for (m = 0; m <= 0xff; m++) {
		unsigned int mm = m & TLY_AUX_M;
		int ok = m == 0 || (mm >= 1 && mm <= lim.n_ranks);

		h = data_hdr();
		h.aux = (uint8_t)m;
		assert_int_equal(parse(&h, data_len()),
				 ok ? TLY_OK : TLY_E_LEN);
		if (ok) {
			assert_int_equal(tly_hdr_parse(pkt, data_len(), &lim,
						       &out), TLY_OK);
			assert_int_equal(out.aux, m);
		}
		/* never with a lane code or INT, never on a data RESULT */
		h.flags = TLY_F_LANE16;
		assert_int_equal(parse(&h, data_len()),
				 m ? TLY_E_LEN : TLY_OK);
		h.flags = TLY_F_SIGN;
		assert_int_equal(parse(&h, data_len()),
				 m ? TLY_E_LEN : TLY_OK);
		h.flags = TLY_F_INT;
		h.shift = 0;
		assert_int_equal(parse(&h, data_len()),
				 m ? TLY_E_LEN : TLY_OK);
		h = data_hdr();
		h.type = TLY_T_RESULT;
		h.flags = TLY_F_RETX;
		h.aux = (uint8_t)m;
		assert_int_equal(parse(&h, data_len()),
				 m ? TLY_E_LEN : TLY_OK);
		/* the round: DATA and RESULT, aux 0 or 1 */
		h = data_hdr();
		h.flags = TLY_F_EXP;
		h.shift = 0;
		h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, 1,
					       lim.n_slots);
		h.aux = (uint8_t)m;
		assert_int_equal(parse(&h, data_len()),
				 m <= TLY_AUX_COUNT ? TLY_OK : TLY_E_LEN);
		h.type = TLY_T_RESULT;
		assert_int_equal(parse(&h, data_len()),
				 m <= TLY_AUX_COUNT ? TLY_OK : TLY_E_LEN);
	}
	/* ACK and BUSY carry none */
	h = data_hdr();
	h.type = TLY_T_ACK;
	h.flags = 0;
	h.shift = 0;
	h.aux = 1;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_LEN);
}

static void test_job_key(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	h.job = 0xbeee;
	assert_int_equal(parse(&h, data_len()), TLY_E_JOB);
}

/*
 * The cookie is the first check: a packet of the job's key without it is
 * a cookie drop whatever else is wrong; with another job's key as well it
 * is counted as that job's.  Every bit of it counts.
 */
static void test_cookie_first(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	for (int bit = 0; bit < 32; bit++) {
		h.cookie = lim.cookie ^ (1u << bit);
		assert_int_equal(parse(&h, data_len()), TLY_E_COOKIE);
	}
	h.type = 15;			/* and a bad type, rank, length */
	h.rank = 1000;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_COOKIE);
	h.job = 0xbeee;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_JOB);
	h = data_hdr();
	h.cookie = 0;
	assert_int_equal(parse(&h, data_len()), TLY_E_COOKIE);
	h.cookie = lim.cookie;
	assert_int_equal(parse(&h, data_len()), TLY_OK);
	assert_string_equal(tly_drop_name(TLY_E_COOKIE), "cookie");
}

static void test_length(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	assert_int_equal(parse(&h, data_len() - 4), TLY_E_LEN);
	assert_int_equal(parse(&h, data_len() + 4), TLY_E_LEN);
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_LEN);
	h.type = TLY_T_ACK;
	h.flags = 0;
	h.shift = 0;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_OK);
	assert_int_equal(parse(&h, TLY_HDR_LEN + 4), TLY_E_LEN);
	h.aux = 1;			/* aux is CONFIRM's alone */
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_LEN);
}

static void test_rank(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	h.rank = lim.n_ranks;
	assert_int_equal(parse(&h, data_len()), TLY_E_RANK);
	h.rank = 0xffff;
	assert_int_equal(parse(&h, data_len()), TLY_E_RANK);
}

static void test_slot(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	/* a slot that is not the chunk's */
	h.slot = (uint16_t)((h.slot + 1) % lim.n_slots);
	assert_int_equal(parse(&h, data_len()), TLY_E_SLOT);
	h.slot = (uint16_t)lim.n_slots;
	assert_int_equal(parse(&h, data_len()), TLY_E_SLOT);
	h = data_hdr();
	h.flags |= TLY_F_EXP;	/* the exponent round hashes elsewhere */
	h.shift = 0;
	h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, 0, lim.n_slots);
	if (h.slot != tly_slot_of(h.tensor, h.chunk, 1, lim.n_slots))
		assert_int_equal(parse(&h, data_len()), TLY_E_SLOT);
	h.type = TLY_T_RING;
	h.flags = 0;
	h.slot = lim.n_hops;
	assert_int_equal(parse(&h, data_len()), TLY_E_SLOT);
	h.slot = lim.n_hops - 1;
	assert_int_equal(parse(&h, data_len()), TLY_OK);
	/* a RING_ACK names chunks chunk .. chunk + aux */
	h.type = TLY_T_RING_ACK;
	h.chunk = 0xff00;
	h.aux = 0xff;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_OK);
	h.chunk = 0xff01;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_LEN);
}

static void test_shift(void **state)
{
	struct tly_hdr h = data_hdr();

	(void)state;
	h.shift = -128;
	assert_int_equal(parse(&h, data_len()), TLY_E_SHIFT);
	h.shift = 127;
	assert_int_equal(parse(&h, data_len()), TLY_OK);
	h.flags = TLY_F_INT;		/* exact mode has no scale */
	h.shift = 1;
	assert_int_equal(parse(&h, data_len()), TLY_E_SHIFT);
	h.type = TLY_T_ACK;
	h.flags = 0;
	assert_int_equal(parse(&h, TLY_HDR_LEN), TLY_E_SHIFT);
}

static void put_range(uint8_t *p, uint32_t tensor, uint16_t first,
		      uint8_t exp, unsigned int count)
{
	tly_put32(p, tensor);
	tly_put16(p + 4, first);
	p[6] = (uint8_t)(exp << 7);
	p[7] = (uint8_t)(count - 1);
}

static void test_confirm(void **state)
{
	struct tly_hdr h = { .type = TLY_T_CONFIRM, .job = 0xbeef,
			     .rank = 1, .aux = 2, .cookie = 0xc001d00du }, out;
	size_t len = TLY_HDR_LEN + 16;

	(void)state;
	tly_hdr_write(pkt, &h);
	put_range(pkt + TLY_HDR_LEN, 42, 10, 0, 256);
	put_range(pkt + TLY_HDR_LEN + 8, 43, 0, 1, 1);
	assert_int_equal(tly_hdr_parse(pkt, len, &lim, &out), TLY_OK);
	assert_int_equal(out.aux, 2);
	/* range past chunk 65535 */
	put_range(pkt + TLY_HDR_LEN + 8, 43, 0xffff, 0, 2);
	assert_int_equal(tly_hdr_parse(pkt, len, &lim, &out), TLY_E_CONFIRM);
	/* reserved bits */
	put_range(pkt + TLY_HDR_LEN + 8, 43, 0, 0, 1);
	pkt[TLY_HDR_LEN + 8 + 6] = 0x01;
	assert_int_equal(tly_hdr_parse(pkt, len, &lim, &out), TLY_E_CONFIRM);
	/* length must match aux */
	put_range(pkt + TLY_HDR_LEN + 8, 43, 0, 0, 1);
	assert_int_equal(tly_hdr_parse(pkt, len - 8, &lim, &out), TLY_E_LEN);
	/* empty confirm, or one naming a tensor in the header */
	h.aux = 0;
	tly_hdr_write(pkt, &h);
	assert_int_equal(tly_hdr_parse(pkt, TLY_HDR_LEN, &lim, &out),
			 TLY_E_CONFIRM);
	h.aux = 2;
	h.tensor = 1;
	tly_hdr_write(pkt, &h);
	assert_int_equal(tly_hdr_parse(pkt, len, &lim, &out), TLY_E_CONFIRM);
}

static const struct tly_addr src = {
	.mac = { 2, 0, 0, 0, 0, 1 }, .ip = 0x0a000001, .port = 9191,
};
static const struct tly_addr dst = {
	.mac = { 2, 0, 0, 0, 0, 2 }, .ip = 0x0a000002, .port = 9191,
};

static size_t build_frame(void)
{
	struct tly_hdr h = data_hdr();

	tly_l2l4_write(pkt, &src, &dst, 40, data_len());
	tly_hdr_write(pkt + TLY_L2L4_LEN, &h);
	return TLY_L2L4_LEN + data_len();
}

static void test_l2l4_ok(void **state)
{
	size_t len = build_frame(), tl = 0;

	(void)state;
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_OK);
	assert_int_equal(tl, data_len());
	assert_int_equal(pkt[TLY_ETH_LEN + 1] >> 2, 40);	/* DSCP */
	/* Ethernet padding after the IP packet is fine */
	assert_int_equal(tly_l2l4_parse(pkt, len + 6, 9191, &tl), TLY_OK);
	assert_int_equal(tl, data_len());
	/* re-addressing keeps the checksum valid */
	tly_frame_readdress(pkt, &src, 3);
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_OK);
	assert_int_equal(pkt[TLY_L2L4_LEN + 5], 3);
	assert_int_equal(pkt[TLY_ETH_LEN + 19], 1);
}

static void test_l2l4_bad(void **state)
{
	size_t len = build_frame(), tl;

	(void)state;
	assert_int_equal(tly_l2l4_parse(pkt, TLY_L2L4_LEN - 1, 9191, &tl),
			 TLY_E_SHORT);
	assert_int_equal(tly_l2l4_parse(pkt, len - 1, 9191, &tl), TLY_E_L3);
	assert_int_equal(tly_l2l4_parse(pkt, len, 9192, &tl), TLY_E_L4);
	pkt[12] = 0x86;			/* IPv6 ethertype */
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_E_L2);
	len = build_frame();
	pkt[TLY_ETH_LEN] = 0x46;	/* IP options */
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_E_L3);
	len = build_frame();
	pkt[TLY_ETH_LEN + 7] = 1;	/* fragment offset */
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_E_L3);
	len = build_frame();
	pkt[TLY_ETH_LEN + 9] = 6;	/* TCP */
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_E_L3);
	len = build_frame();
	pkt[TLY_ETH_LEN + 12] ^= 1;	/* checksum no longer matches */
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_E_L3);
	len = build_frame();
	pkt[TLY_ETH_LEN + TLY_IP_LEN + 5] ^= 4;	/* UDP length */
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_E_L4);
}

/*
 * RFC 768 the plain way, for comparison: 16-bit big-endian words of the
 * pseudo-header and the datagram (checksum field taken as 0), an odd
 * last byte padded, folded, complemented; 0 sent as 0xffff.
 */
static uint16_t udp_checksum_ref(const uint8_t *ip)
{
	const uint8_t *udp = ip + TLY_IP_LEN;
	uint32_t i, n = tly_get16(udp + 4), sum = 17 + n;

	for (i = 0; i < 8; i += 2)
		sum += tly_get16(ip + 12 + i);
	for (i = 0; i + 1 < n; i += 2)
		sum += i == 6 ? 0 : tly_get16(udp + i);
	if (n & 1)
		sum += (uint32_t)udp[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sum = ~sum & 0xffff;
	return sum ? (uint16_t)sum : 0xffff;
}

/* a frame with @tally_len bytes after the UDP header, its checksum set */
static size_t build_summed(size_t tally_len)
{
	uint8_t *ip = pkt + TLY_ETH_LEN;
	size_t i;

	assert_true(TLY_L2L4_LEN + tally_len <= sizeof(pkt));
	tly_l2l4_write(pkt, &src, &dst, 40, tally_len);
	for (i = 0; i < tally_len; i++)
		pkt[TLY_L2L4_LEN + i] = (uint8_t)(i * 29 + 7);
	tly_put16(ip + TLY_IP_LEN + 6, tly_udp_checksum(ip));
	return TLY_L2L4_LEN + tally_len;
}

/*
 * A UDP checksum of 0 is none (tally's own frames); any other must be
 * right (the XDP aggregator's frames carry one; the kernel checks it
 * for the socket transport, the parser for the frame transports).
 */
static void test_l2l4_udp_checksum(void **state)
{
	static const size_t lens[] = {
		0, 1, 2, 3, 21, 64, sizeof(pkt) - TLY_L2L4_LEN - 1,
		sizeof(pkt) - TLY_L2L4_LEN,
	};
	uint8_t *ip = pkt + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;
	size_t i, len, tl;

	(void)state;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		len = build_summed(lens[i]);
		assert_int_equal(tly_get16(udp + 6), udp_checksum_ref(ip));
		assert_int_equal(tly_udp_sum(ip), 0xffff);
		assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_OK);
		assert_int_equal(tl, lens[i]);
		/* a flipped bit anywhere in the datagram or the addresses */
		pkt[len - 1] ^= 0x10;
		assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl),
				 TLY_E_L4);
		pkt[len - 1] ^= 0x10;
		udp[6] ^= 0x01;
		assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl),
				 TLY_E_L4);
		udp[6] ^= 0x01;
		/* the source address, with the IPv4 checksum made right:
		 * only the pseudo-header catches it */
		ip[15] ^= 0x02;
		tly_put16(ip + 10, tly_ip_checksum(ip));
		assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl),
				 TLY_E_L4);
		ip[15] ^= 0x02;
		tly_put16(ip + 10, tly_ip_checksum(ip));
		assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_OK);
		/* no checksum: a corruption passes the envelope */
		tly_put16(udp + 6, 0);
		udp[0] ^= 0x10;		/* the source port */
		assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_OK);
	}
	/* the checksum whose sum is 0 is sent as 0xffff, and verifies */
	len = build_summed(2);
	for (i = 0; i < 0x10000; i++) {
		tly_put16(pkt + TLY_L2L4_LEN, (uint16_t)i);
		if (tly_udp_checksum(ip) == 0xffff)
			break;
	}
	assert_true(i < 0x10000);
	tly_put16(udp + 6, tly_udp_checksum(ip));
	assert_int_equal(tly_get16(udp + 6), udp_checksum_ref(ip));
	assert_int_equal(tly_l2l4_parse(pkt, len, 9191, &tl), TLY_OK);
}

/* the general path's verdict on a frame: DATA accepted, and its header */
static int general_data(const uint8_t *f, size_t len, int l2,
			struct tly_hdr *h)
{
	size_t tl = len;

	if (l2) {
		if (tly_l2l4_parse(f, len, 9191, &tl) != TLY_OK)
			return 0;
		f += TLY_L2L4_LEN;
	}
	return tly_hdr_parse(f, tl, &lim, h) == TLY_OK &&
	       h->type == TLY_T_DATA;
}

/* the fast DATA check says yes exactly when the general path does */
static void assert_fast_agrees(const uint8_t *f, size_t len, int l2,
			       const struct tly_data_rx *fr)
{
	struct tly_hdr g, h;
	uint64_t key = 0, hash = 0;
	uint8_t dscp = 0xff;
	int want = general_data(f, len, l2, &g);

	/* a DATA with aux (block_topk's m(b), PULL, a counted round) is
	 * the general path's alone */
	if (want && g.aux)
		want = 0;
	assert_int_equal(tly_data_rx(fr, f, len, &h, &key, &dscp) &&
			 tly_data_slot_ok(fr, &h, key, &hash), want);
	if (!want)
		return;
	assert_true(key == tly_chunk_key(g.tensor, g.chunk,
					 g.flags & TLY_F_EXP));
	assert_int_equal(h.type, g.type);
	assert_int_equal(h.flags, g.flags);
	assert_int_equal(h.job, g.job);
	assert_int_equal(h.rank, g.rank);
	assert_int_equal(h.slot, g.slot);
	assert_int_equal(h.tensor, g.tensor);
	assert_int_equal(h.chunk, g.chunk);
	assert_int_equal(h.shift, g.shift);
	assert_int_equal(h.aux, g.aux);
	assert_int_equal(h.cookie, g.cookie);
	assert_true(hash == tly_chunk_hash(g.tensor, g.chunk,
					   g.flags & TLY_F_EXP));
	assert_int_equal(dscp, l2 ? f[TLY_ETH_LEN + 1] >> 2 : 0);
}

/* a DATA packet with these flags and shift, in a frame or bare */
static size_t build_data(int l2, uint8_t flags, int8_t shift)
{
	struct tly_hdr h = data_hdr();
	size_t off = l2 ? TLY_L2L4_LEN : 0;
	size_t i;

	h.flags = flags;
	h.shift = shift;
	h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk,
				       flags & TLY_F_EXP, lim.n_slots);
	memset(pkt, 0, sizeof(pkt));
	if (l2)
		tly_l2l4_write(pkt, &src, &dst, 40, data_len());
	tly_hdr_write(pkt + off, &h);
	for (i = 0; i < 4 * K; i++)
		pkt[off + TLY_HDR_LEN + i] = (uint8_t)(i * 13);
	return off + data_len();
}

static void test_fast_data_check(void **state)
{
	static const uint8_t flags[] = {
		0, TLY_F_ACK_REQ, TLY_F_RETX, TLY_F_EXP, TLY_F_INT,
		TLY_F_EXP | TLY_F_INT, TLY_F_ACK_REQ | TLY_F_RETX | TLY_F_INT,
		TLY_F_FALLBACK, TLY_F_REFUSE, TLY_F_LANE16, TLY_F_LANE8,
		TLY_F_LANES, TLY_F_LANE16 | TLY_F_EXP, TLY_F_LANE8 | TLY_F_INT,
		TLY_F_LANE8 | TLY_F_ACK_REQ | TLY_F_RETX,
		TLY_F_SIGN | TLY_F_RETX, TLY_F_SIGN | TLY_F_EXP,
	};
	static const int8_t shifts[] = { 0, -3, 127, -127, -128, 1 };
	struct tly_data_rx fr[2];
	int l2;

	(void)state;
	for (l2 = 0; l2 < 2; l2++) {
		size_t off = l2 ? TLY_L2L4_LEN : 0, len, b;
		unsigned int i, j, bit;

		tly_data_rx_init(&fr[l2], &lim, l2, 9191);
		for (i = 0; i < sizeof(flags); i++)
			for (j = 0; j < sizeof(shifts); j++) {
				len = build_data(l2, flags[i], shifts[j]);
				assert_fast_agrees(pkt, len, l2, &fr[l2]);
			}
		/* every single-bit change of the headers; in the IP header
		 * with the checksum made right again, so the field's own
		 * check is what decides */
		for (b = 0; b < off + TLY_HDR_LEN; b++)
			for (bit = 0; bit < 8; bit++) {
				len = build_data(l2, TLY_F_ACK_REQ, -3);
				pkt[b] ^= (uint8_t)(1u << bit);
				if (l2 && b >= TLY_ETH_LEN &&
				    b < TLY_ETH_LEN + TLY_IP_LEN &&
				    b != TLY_ETH_LEN + 10 &&
				    b != TLY_ETH_LEN + 11)
					tly_put16(pkt + TLY_ETH_LEN + 10,
						  tly_ip_checksum(pkt +
								  TLY_ETH_LEN));
				assert_fast_agrees(pkt, len, l2, &fr[l2]);
			}
		/* lengths: short, long, Ethernet padding */
		len = build_data(l2, 0, 0);
		assert_fast_agrees(pkt, len - 1, l2, &fr[l2]);
		assert_fast_agrees(pkt, len + 1, l2, &fr[l2]);
		assert_fast_agrees(pkt, len + 6, l2, &fr[l2]);
		assert_fast_agrees(pkt, 0, l2, &fr[l2]);
		assert_true(tly_data_rx(&fr[l2], pkt, len,
					&(struct tly_hdr){ 0 },
					&(uint64_t){ 0 }, &(uint8_t){ 0 }));
		if (!l2)
			continue;
		/* a DATA with a right UDP checksum: the general path's,
		 * which verifies it; the fast check leaves it to it */
		tly_put16(pkt + TLY_ETH_LEN + TLY_IP_LEN + 6,
			  tly_udp_checksum(pkt + TLY_ETH_LEN));
		assert_true(general_data(pkt, len, l2, &(struct tly_hdr){ 0 }));
		assert_false(tly_data_rx(&fr[l2], pkt, len,
					 &(struct tly_hdr){ 0 },
					 &(uint64_t){ 0 }, &(uint8_t){ 0 }));
		pkt[len - 1] ^= 1;
		assert_false(general_data(pkt, len, l2,
					  &(struct tly_hdr){ 0 }));
	}
}

static void test_ids(void **state)
{
	(void)state;
	assert_int_equal(tly_tensor_id(1, 2, 3), tly_tensor_id(1, 2, 3));
	assert_int_not_equal(tly_tensor_id(1, 2, 3), tly_tensor_id(1, 3, 3));
	assert_int_not_equal(tly_tensor_id(1, 2, 3), tly_tensor_id(1, 2, 4));
	assert_int_not_equal(tly_tensor_id(1, 2, 3), tly_tensor_id(2, 2, 3));
	assert_int_not_equal(tly_chunk_hash(5, 1, 0), tly_chunk_hash(5, 1, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_type),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_lanes),
		cmocka_unit_test(test_sparse_aux),
		cmocka_unit_test(test_job_key),
		cmocka_unit_test(test_cookie_first),
		cmocka_unit_test(test_length),
		cmocka_unit_test(test_rank),
		cmocka_unit_test(test_slot),
		cmocka_unit_test(test_shift),
		cmocka_unit_test(test_confirm),
		cmocka_unit_test(test_l2l4_ok),
		cmocka_unit_test(test_l2l4_bad),
		cmocka_unit_test(test_l2l4_udp_checksum),
		cmocka_unit_test(test_fast_data_check),
		cmocka_unit_test(test_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
