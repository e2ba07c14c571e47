// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_xdp_agg.c - the XDP aggregator (dataplane/xdp/agg.bpf.c) packet by
 * packet through BPF_PROG_TEST_RUN: the program the kernel verified runs
 * on frames built by the engine's own writers (tly_hdr_write,
 * tly_l2l4_write), and what it sends back is read with the engine's
 * parser.  Expected sums are computed here from the inputs.  Needs
 * CAP_BPF (root).
 *
 * Rows of docs/switch-profile.md checked: n DATA -> one RESULT to the
 * group (int32 wrapping, scaled int, EXP max; n = 1), ACK_REQ -> ACK,
 * duplicate -> drop or ACK, collision -> BUSY, DONE + DATA -> RESULT to
 * that worker, CONFIRM frees after all n, CONFIRM of a freed chunk ->
 * ACK, shift/mode mismatch, malformed and foreign frames -> the right
 * counter, the sweep frees a stale partial; the program's slot hash
 * against the engine's for many chunks; two CPUs on the same slots.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <cmocka.h>

#include "dataplane/xdp/xdp_ctl.h"

#define PORT		47300
#define GROUP_PORT	47301
#define GROUP_IP	0xef070001u	/* 239.7.0.1 */
#define COOKIE		0x5eed1234u
#define JOB		0x2a17
#define FRAME_MAX	(TLY_L2L4_LEN + TLY_HDR_LEN + 4 * TLY_XDP_K_MAX + 64)

static struct tly_xdp_ctl *ctl;
/* the build of the program the tests run: argv[1] (auto, res, spin) */
static enum tly_xdp_lock lock_arg = TLY_XDP_LOCK_AUTO;
static struct tly_xdp_job job;
static uint64_t before[TLY_XDP_C_COUNT];

static const struct tly_addr agg_addr = {
	{ 0x02, 0, 0, 0, 0, 0xaa }, 0x0a620001, PORT,
};

static struct tly_addr worker_addr(uint16_t rank)
{
	struct tly_addr a = { { 0x02, 0, 0, 0, 1, (uint8_t)rank },
			      0x0a620100u + rank, (uint16_t)(47400 + rank) };

	return a;
}

/* a frame out of the program */
struct out {
	uint32_t ret;
	uint8_t f[FRAME_MAX];
	uint32_t len;
};

static void set_job(uint16_t n, uint16_t k, uint32_t n_slots)
{
	job = (struct tly_xdp_job){
		.cookie = COOKIE, .job = JOB, .n_workers = n, .k = k,
		.port = PORT, .n_slots = n_slots, .group_ip = GROUP_IP,
		.group_port = GROUP_PORT,
	};
	tly_group_mac(GROUP_IP, job.group_mac);
	assert_int_equal(tly_xdp_set_job(ctl, &job), 0);
	assert_int_equal(tly_xdp_counters(ctl, before), 0);
}

/* counter @i's growth since the last call with @i (or set_job) */
static uint64_t delta(unsigned int i)
{
	uint64_t v[TLY_XDP_C_COUNT], d;

	assert_int_equal(tly_xdp_counters(ctl, v), 0);
	d = v[i] - before[i];
	before[i] = v[i];
	return d;
}

static void run(const uint8_t *frame, uint32_t len, struct out *o)
{
	LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = frame,
		    .data_size_in = len, .data_out = o->f,
		    .data_size_out = sizeof(o->f), .repeat = 1);

	assert_int_equal(bpf_prog_test_run_opts(tly_xdp_prog_fd(ctl), &t),
			 0);
	o->ret = t.retval;
	o->len = t.data_size_out;
}

/* a tally packet from @rank, in a frame; returns the frame's length */
static uint32_t build(uint8_t *f, const struct tly_hdr *h,
		      const int32_t *lanes, size_t n_lanes)
{
	struct tly_addr w = worker_addr(h->rank);
	struct tly_hdr hh = *h;
	size_t i, tl = TLY_HDR_LEN + 4 * n_lanes;

	if (!hh.job)
		hh.job = JOB;
	if (!hh.cookie)
		hh.cookie = COOKIE;
	tly_hdr_write(f + TLY_L2L4_LEN, &hh);
	for (i = 0; i < n_lanes; i++)
		tly_put32(f + TLY_L2L4_LEN + TLY_HDR_LEN + 4 * i,
			  (uint32_t)lanes[i]);
	tly_l2l4_write(f, &w, &agg_addr, 3, tl);
	/* an IP ID as a sender's kernel sets one: the replies must not
	 * keep it (check_csum) */
	tly_put16(f + TLY_ETH_LEN + 4, (uint16_t)(0x4000 + hh.chunk + hh.rank));
	tly_put16(f + TLY_ETH_LEN + 10, tly_ip_checksum(f + TLY_ETH_LEN));
	return (uint32_t)(TLY_L2L4_LEN + tl);
}

static struct tly_hdr data_hdr(uint32_t tensor, uint16_t chunk,
			       uint8_t flags, uint16_t rank, int8_t shift)
{
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = flags, .rank = rank,
		.tensor = tensor, .chunk = chunk, .shift = shift,
	};

	h.slot = (uint16_t)tly_slot_of(tensor, chunk, flags & TLY_F_EXP,
				       job.n_slots);
	return h;
}

static void send_data(const struct tly_hdr *h, const int32_t *lanes,
		      struct out *o)
{
	uint8_t f[FRAME_MAX];

	run(f, build(f, h, lanes, job.k), o);
}

static void send_confirm(uint32_t tensor, uint16_t chunk, uint8_t flags,
			 uint16_t rank, struct out *o)
{
	struct tly_hdr h = data_hdr(tensor, chunk, flags, rank, 0);
	uint8_t f[FRAME_MAX];

	h.type = TLY_T_CONFIRM;
	run(f, build(f, &h, NULL, 0), o);
}

/*
 * The UDP checksum of @f (a frame of @len bytes) verified as a receiver
 * does: the one's complement sum over the pseudo-header and the datagram,
 * checksum included, is all ones.  The program always sends one (zero
 * would keep GRO from merging its frames), and an atomic datagram with
 * ID 0 (DF set, not a fragment).
 */
static void check_csum(const uint8_t *f, uint32_t len)
{
	const uint8_t *ip = f + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;
	uint32_t n = len - TLY_ETH_LEN - TLY_IP_LEN;

	assert_int_equal(tly_get16(ip + 4), 0);
	assert_int_equal(tly_get16(ip + 6), 0x4000);
	assert_int_equal(tly_get16(udp + 4), n);
	assert_int_not_equal(tly_get16(udp + 6), 0);
	assert_int_equal(tly_udp_sum(ip), 0xffff);
}

/*
 * The frame the program sent: a valid envelope to @dst (the checksums
 * and lengths are checked by the engine's parser and check_csum());
 * returns the header.
 */
static struct tly_hdr check_out(const struct out *o, const uint8_t mac[6],
				uint32_t ip, uint16_t port, size_t tally_len)
{
	struct tly_wire_limits lim = {
		.job = JOB, .cookie = COOKIE, .k = job.k,
		.n_ranks = UINT16_MAX, .n_slots = job.n_slots,
		.profile = TLY_PROFILE_SWITCH,
	};
	uint8_t pkt[TLY_HDR_LEN + 4 * TLY_XDP_K_MAX];
	struct tly_hdr h;
	uint16_t rank;
	size_t tl;

	assert_int_equal(o->ret, XDP_TX);
	assert_int_equal(o->len, TLY_L2L4_LEN + tally_len);
	assert_int_equal(tly_l2l4_parse(o->f, o->len, port, &tl), TLY_OK);
	assert_int_equal(tl, tally_len);
	check_csum(o->f, o->len);
	assert_memory_equal(o->f, mac, 6);
	assert_memory_equal(o->f + 6, agg_addr.mac, 6);
	assert_int_equal(tly_get32(o->f + TLY_ETH_LEN + 12), agg_addr.ip);
	assert_int_equal(tly_get32(o->f + TLY_ETH_LEN + 16), ip);
	assert_int_equal(tly_get16(o->f + TLY_ETH_LEN + TLY_IP_LEN), PORT);
	/* the engine's parser; RANK_ALL is no rank it knows: read apart */
	assert_true(tl <= sizeof(pkt));
	memcpy(pkt, o->f + TLY_L2L4_LEN, tl);
	rank = tly_get16(pkt + 4);
	tly_put16(pkt + 4, 0);
	assert_int_equal(tly_hdr_parse(pkt, tl, &lim, &h), TLY_OK);
	h.rank = rank;
	return h;
}

/* a RESULT to the group with these lanes */
static void check_result_all(const struct out *o, uint32_t tensor,
			     uint16_t chunk, uint8_t mode, int8_t shift,
			     const int32_t *want)
{
	struct tly_hdr h = check_out(o, job.group_mac, GROUP_IP, GROUP_PORT,
				     TLY_HDR_LEN + 4u * job.k);
	unsigned int i;

	assert_int_equal(h.type, TLY_T_RESULT);
	assert_int_equal(h.flags, mode);
	assert_int_equal(h.rank, TLY_XDP_RANK_ALL);
	assert_int_equal(h.tensor, tensor);
	assert_int_equal(h.chunk, chunk);
	assert_int_equal(h.shift, shift);
	for (i = 0; i < job.k; i++)
		assert_int_equal((int32_t)tly_get32(o->f + TLY_L2L4_LEN +
						    TLY_HDR_LEN + 4 * i),
				 want[i]);
}

/* a header-only reply (ACK/BUSY) to worker @rank about this chunk */
static void check_reply(const struct out *o, uint8_t type, uint32_t tensor,
			uint16_t chunk, uint8_t flags, uint16_t rank)
{
	struct tly_addr w = worker_addr(rank);
	struct tly_hdr h = check_out(o, w.mac, w.ip, w.port, TLY_HDR_LEN);

	assert_int_equal(h.type, type);
	assert_int_equal(h.flags,
			 flags & (TLY_F_EXP | TLY_F_INT | TLY_F_RELEASED));
	assert_int_equal(h.rank, rank);
	assert_int_equal(h.tensor, tensor);
	assert_int_equal(h.chunk, chunk);
	assert_int_equal(h.slot, tly_slot_of(tensor, chunk, flags & TLY_F_EXP,
					     job.n_slots));
	assert_int_equal(h.shift, 0);
}

static uint32_t rnd_state = 12345;

static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

/*
 * n workers' DATA of one chunk; the last one completes.  @gen fills
 * worker w's lanes; @combine folds them into the expected result.
 */
static void run_chunk(uint16_t n, uint16_t k, uint8_t flags, int8_t shift,
		      int exp_max, int32_t (*gen)(unsigned int w,
						  unsigned int i))
{
	static int32_t lanes[TLY_XDP_MAX_WORKERS][TLY_XDP_K_MAX];
	int32_t want[TLY_XDP_K_MAX];
	uint32_t tensor = rnd();
	uint16_t chunk = (uint16_t)rnd(), w;
	unsigned int i;
	struct out o;

	set_job(n, k, 1024);
	for (w = 0; w < n; w++)
		for (i = 0; i < k; i++)
			lanes[w][i] = gen(w, i);
	for (i = 0; i < k; i++) {
		uint32_t s = (uint32_t)lanes[0][i];
		int32_t m = lanes[0][i];

		for (w = 1; w < n; w++) {
			s += (uint32_t)lanes[w][i];	/* wraps */
			if (lanes[w][i] > m)
				m = lanes[w][i];
		}
		want[i] = exp_max ? m : (int32_t)s;
	}
	/* a worker order that is not the rank order */
	for (w = 0; w < n; w++) {
		uint16_t r = (uint16_t)((w * 7 + 3) % n);
		struct tly_hdr h = data_hdr(tensor, chunk, flags, r, shift);

		send_data(&h, lanes[r], &o);
		if (w + 1 < n)
			assert_int_equal(o.ret, XDP_DROP);
	}
	check_result_all(&o, tensor, chunk, flags & (TLY_F_EXP | TLY_F_INT),
			 shift, want);
	assert_int_equal(delta(TLY_XDP_C_COMPLETIONS), 1);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 1);
	assert_int_equal(delta(TLY_XDP_C_DATA), n);
}

static int32_t gen_wrap(unsigned int w, unsigned int i)
{
	(void)w;
	(void)i;
	/* near the ends of int32: the sum wraps */
	return (int32_t)(rnd() | (rnd() & 1 ? 0x70000000u : 0x80000000u));
}

static int32_t gen_scaled(unsigned int w, unsigned int i)
{
	(void)w;
	(void)i;
	return (int32_t)(rnd() % (1u << 26)) - (1 << 25);
}

static int32_t gen_exp(unsigned int w, unsigned int i)
{
	(void)w;
	switch (rnd() % 8) {
	case 0:
		return -1000;	/* an all-zero block */
	case 1:
		return 129;	/* inf/NaN */
	default:
		return (int32_t)(rnd() % 300) - 150;
	}
	(void)i;
}

static void test_int32_wraps(void **state)
{
	(void)state;
	run_chunk(4, 64, TLY_F_INT, 0, 0, gen_wrap);
	run_chunk(32, 256, TLY_F_INT, 0, 0, gen_wrap);
	run_chunk(6, 192, TLY_F_INT, 0, 0, gen_wrap);
	run_chunk(32, 320, TLY_F_INT, 0, 0, gen_wrap);
	/* half passes: the last block of lanes is half a pass wide */
	run_chunk(3, 32, TLY_F_INT, 0, 0, gen_wrap);
	run_chunk(4, 96, TLY_F_INT, 0, 0, gen_wrap);
	run_chunk(32, 352, TLY_F_INT, 0, 0, gen_wrap);
	run_chunk(32, 832, TLY_F_INT, 0, 0, gen_wrap);
}

static void test_scaled_sum(void **state)
{
	(void)state;
	run_chunk(3, 128, 0, 17, 0, gen_scaled);
	run_chunk(8, 256, 0, -5, 0, gen_scaled);
	run_chunk(4, 320, 0, 3, 0, gen_scaled);
	run_chunk(4, 352, 0, 3, 0, gen_scaled);
	run_chunk(4, 832, 0, -2, 0, gen_scaled);
}

static void test_exp_max(void **state)
{
	(void)state;
	run_chunk(5, 64, TLY_F_EXP, 0, 1, gen_exp);
	run_chunk(2, 256, TLY_F_EXP, 0, 1, gen_exp);
	run_chunk(4, 320, TLY_F_EXP, 0, 1, gen_exp);
	run_chunk(3, 160, TLY_F_EXP, 0, 1, gen_exp);
	run_chunk(4, 352, TLY_F_EXP, 0, 1, gen_exp);
	run_chunk(3, 832, TLY_F_EXP, 0, 1, gen_exp);
}

static void fill(int32_t *l, int32_t base)
{
	unsigned int i;

	for (i = 0; i < TLY_XDP_K_MAX; i++)
		l[i] = base + (int32_t)i;
}

/* K is whole half passes (32 lanes) up to 832 (tly_switch_k_ok; above
 * 352 on jumbo frames): every one of them taken, others refused */
static void test_job_k(void **state)
{
	static const uint16_t bad[] = { 0, 8, 16, 48, 255, 257, 336, 400,
					816, 864, 1024 };
	int32_t l[TLY_XDP_K_MAX];
	uint8_t f[FRAME_MAX];
	struct tly_xdp_job j;
	struct tly_hdr h;
	unsigned int i;
	struct out o;

	(void)state;
	set_job(2, 352, 64);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = job;
		j.k = bad[i];
		assert_int_equal(tly_xdp_set_job(ctl, &j), -EINVAL);
	}
	for (i = TLY_SWITCH_K_STEP; i <= TLY_SWITCH_K_MAX;
	     i += TLY_SWITCH_K_STEP) {
		j = job;
		j.k = (uint16_t)i;
		assert_int_equal(tly_xdp_set_job(ctl, &j), 0);
	}
	/* and each sums and checksums its RESULT (every split of the
	 * payload into the checksum's calls of 512, 256 and 128 bytes) */
	for (i = TLY_SWITCH_K_STEP; i <= TLY_SWITCH_K_MAX;
	     i += TLY_SWITCH_K_STEP)
		run_chunk(2, (uint16_t)i, TLY_F_INT, 0, 0, gen_wrap);
	set_job(2, 352, 64);
	/* a DATA of 320 lanes to a job of 352 is a length error */
	fill(l, 5);
	h = data_hdr(77, 1, TLY_F_INT, 0, 0);
	run(f, build(f, &h, l, 320), &o);
	assert_int_equal(o.ret, XDP_DROP);
	assert_int_equal(delta(TLY_E_LEN), 1);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 0);
}

static void test_single_worker(void **state)
{
	(void)state;
	run_chunk(1, 128, TLY_F_INT, 0, 0, gen_wrap);
}

/* ACK_REQ, duplicates, DONE + DATA, CONFIRM and release */
static void test_chunk_life(void **state)
{
	int32_t l[3][TLY_XDP_K_MAX], want[TLY_XDP_K_MAX];
	uint32_t tensor = 0x01020304;
	uint16_t chunk = 9, w;
	struct tly_hdr h;
	struct out o;
	unsigned int i;

	(void)state;
	set_job(3, 64, 256);
	for (w = 0; w < 3; w++)
		fill(l[w], 1000 * (w + 1));
	for (i = 0; i < 64; i++)
		want[i] = l[0][i] + l[1][i] + l[2][i];
	/* ACK_REQ on a contribution that does not complete */
	h = data_hdr(tensor, chunk, TLY_F_INT | TLY_F_ACK_REQ, 0, 0);
	send_data(&h, l[0], &o);
	check_reply(&o, TLY_T_ACK, tensor, chunk, TLY_F_INT, 0);
	assert_int_equal(delta(TLY_XDP_C_ACK), 1);
	/* a duplicate: dropped; as a retransmission: ACK; never added */
	h = data_hdr(tensor, chunk, TLY_F_INT, 0, 0);
	send_data(&h, l[0], &o);
	assert_int_equal(o.ret, XDP_DROP);
	h.flags |= TLY_F_RETX;
	send_data(&h, l[0], &o);
	check_reply(&o, TLY_T_ACK, tensor, chunk, TLY_F_INT, 0);
	assert_int_equal(delta(TLY_XDP_C_DUPS), 2);
	/* another mode or shift for the same chunk: mismatch */
	h = data_hdr(tensor, chunk, 0, 1, 3);
	send_data(&h, l[1], &o);
	assert_int_equal(o.ret, XDP_DROP);
	assert_int_equal(delta(TLY_E_MISMATCH), 1);
	/* the other two complete it */
	h = data_hdr(tensor, chunk, TLY_F_INT, 1, 0);
	send_data(&h, l[1], &o);
	assert_int_equal(o.ret, XDP_DROP);
	h = data_hdr(tensor, chunk, TLY_F_INT, 2, 0);
	send_data(&h, l[2], &o);
	check_result_all(&o, tensor, chunk, TLY_F_INT, 0, want);
	/* DONE + DATA: the RESULT again, to that worker only */
	h = data_hdr(tensor, chunk, TLY_F_INT | TLY_F_RETX, 1, 0);
	send_data(&h, l[1], &o);
	{
		struct tly_addr a = worker_addr(1);
		struct tly_hdr r = check_out(&o, a.mac, a.ip, a.port,
					     TLY_HDR_LEN + 4u * job.k);

		assert_int_equal(r.type, TLY_T_RESULT);
		assert_int_equal(r.flags, TLY_F_INT | TLY_F_RETX);
		assert_int_equal(r.rank, 1);
		for (i = 0; i < job.k; i++)
			assert_int_equal(tly_get32(o.f + TLY_L2L4_LEN +
						   TLY_HDR_LEN + 4 * i),
					 (uint32_t)want[i]);
	}
	assert_int_equal(delta(TLY_XDP_C_RESULT_RETX), 1);
	/* CONFIRM from two of three: the slot holds */
	send_confirm(tensor, chunk, TLY_F_ACK_REQ, 2, &o);
	check_reply(&o, TLY_T_ACK, tensor, chunk, TLY_F_RELEASED, 2);
	send_confirm(tensor, chunk, 0, 0, &o);
	assert_int_equal(o.ret, XDP_DROP);
	/* a repeated CONFIRM changes nothing */
	send_confirm(tensor, chunk, 0, 0, &o);
	assert_int_equal(delta(TLY_XDP_C_FREED), 0);
	h = data_hdr(tensor, chunk, TLY_F_INT, 0, 0);
	send_data(&h, l[0], &o);
	assert_int_equal(o.ret, XDP_TX);	/* still DONE: RESULT */
	assert_int_equal(delta(TLY_XDP_C_RESULT_RETX), 1);
	/* the last CONFIRM frees it */
	send_confirm(tensor, chunk, TLY_F_ACK_REQ | TLY_F_RETX, 1, &o);
	check_reply(&o, TLY_T_ACK, tensor, chunk, TLY_F_RELEASED, 1);
	assert_int_equal(delta(TLY_XDP_C_FREED), 1);
	assert_int_equal(delta(TLY_XDP_C_CONFIRM_NONE), 0);
	/* a CONFIRM of the freed chunk: ACK if asked, nothing else */
	send_confirm(tensor, chunk, TLY_F_ACK_REQ | TLY_F_RETX, 1, &o);
	check_reply(&o, TLY_T_ACK, tensor, chunk, TLY_F_RELEASED, 1);
	send_confirm(tensor, chunk, 0, 2, &o);
	assert_int_equal(o.ret, XDP_DROP);
	assert_int_equal(delta(TLY_XDP_C_CONFIRM_NONE), 2);
	assert_int_equal(delta(TLY_XDP_C_FREED), 0);
	/* the slot is free: a stray DATA claims it as a partial */
	h = data_hdr(tensor, chunk, TLY_F_INT, 0, 0);
	send_data(&h, l[0], &o);
	assert_int_equal(o.ret, XDP_DROP);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 2);
}

/* two chunks with one slot: the second gets BUSY until the first goes */
static void test_collision_busy(void **state)
{
	int32_t l[TLY_XDP_K_MAX];
	uint32_t tensor = 77;
	uint16_t a = 0, b;
	struct tly_hdr h;
	struct out o;

	(void)state;
	set_job(2, 128, 8);
	b = 1;
	while (tly_slot_of(tensor, b, 0, 8) != tly_slot_of(tensor, a, 0, 8))
		b++;
	fill(l, 5);
	h = data_hdr(tensor, a, 0, 0, 4);
	send_data(&h, l, &o);
	assert_int_equal(o.ret, XDP_DROP);
	h = data_hdr(tensor, b, TLY_F_ACK_REQ, 1, 4);
	send_data(&h, l, &o);
	check_reply(&o, TLY_T_BUSY, tensor, b, 0, 1);
	/* the exponent chunk of the same index is another chunk */
	assert_int_equal(delta(TLY_XDP_C_BUSY), 1);
	/* the first completes: DONE(a) still refuses b */
	h = data_hdr(tensor, a, 0, 1, 4);
	send_data(&h, l, &o);
	assert_int_equal(o.ret, XDP_TX);
	h = data_hdr(tensor, b, 0, 0, 4);
	send_data(&h, l, &o);
	check_reply(&o, TLY_T_BUSY, tensor, b, 0, 0);
	/* both receipts free the slot; b gets in */
	send_confirm(tensor, a, 0, 0, &o);
	send_confirm(tensor, a, 0, 1, &o);
	assert_int_equal(delta(TLY_XDP_C_FREED), 1);
	send_data(&h, l, &o);
	assert_int_equal(o.ret, XDP_DROP);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 2);
	assert_int_equal(delta(TLY_XDP_C_BUSY), 1);
}

/*
 * A job of 2 workers and 512 slots whose chunks 0, 1 and 2 of a tensor
 * (the first from @tensor whose three have their own slots) are DONE;
 * @rl gets the receipts of chunks 1 and 2, as a CONFIRM of chunk 0
 * carries them.  Returns the tensor.
 */
static uint32_t three_done_chunks(uint32_t tensor, int32_t rl[4])
{
	int32_t l[TLY_XDP_K_MAX];
	struct tly_hdr h;
	struct out o;
	uint16_t c, r;

	set_job(2, 64, 512);
	while (tly_slot_of(tensor, 0, 0, 512) == tly_slot_of(tensor, 1, 0, 512) ||
	       tly_slot_of(tensor, 0, 0, 512) == tly_slot_of(tensor, 2, 0, 512) ||
	       tly_slot_of(tensor, 1, 0, 512) == tly_slot_of(tensor, 2, 0, 512))
		tensor++;
	fill(l, 3);
	for (c = 0; c < 3; c++)
		for (r = 0; r < 2; r++) {
			h = data_hdr(tensor, c, 0, r, 0);
			send_data(&h, l, &o);
		}
	assert_int_equal(delta(TLY_XDP_C_COMPLETIONS), 3);
	for (c = 1; c < 3; c++) {
		rl[2 * (c - 1)] = (int32_t)tensor;
		rl[2 * (c - 1) + 1] = c << 16 |
			(int32_t)tly_slot_of(tensor, c, 0, job.n_slots);
	}
	return tensor;
}

/*
 * A CONFIRM of three chunks: each receipt is taken at its slot, the n-th
 * frees it, and the ACK with RELEASED echoes the receipts (aux and the
 * bytes after the header) to the sender alone.
 */
static void test_confirm_receipts(void **state)
{
	int32_t l[TLY_XDP_K_MAX], rl[4];
	uint8_t f[FRAME_MAX];
	struct tly_hdr h;
	struct out o;
	uint32_t tensor;
	uint16_t c, r;

	(void)state;
	tensor = three_done_chunks(90, rl);
	fill(l, 3);
	for (r = 0; r < 2; r++) {
		struct tly_addr w = worker_addr(r);

		h = data_hdr(tensor, 0, TLY_F_ACK_REQ, r, 0);
		h.type = TLY_T_CONFIRM;
		h.aux = 2;
		run(f, build(f, &h, rl, 4), &o);
		h = check_out(&o, w.mac, w.ip, w.port, TLY_HDR_LEN + 16);
		assert_int_equal(h.type, TLY_T_ACK);
		assert_int_equal(h.flags, TLY_F_RELEASED);
		assert_int_equal(h.rank, r);
		assert_int_equal(h.chunk, 0);
		assert_int_equal(h.aux, 2);
		assert_memory_equal(o.f + TLY_L2L4_LEN + TLY_HDR_LEN,
				    f + TLY_L2L4_LEN + TLY_HDR_LEN, 16);
		assert_int_equal(delta(TLY_XDP_C_FREED), r ? 3 : 0);
	}
	assert_int_equal(delta(TLY_XDP_C_CONFIRM), 2);
	assert_int_equal(delta(TLY_XDP_C_CONFIRM_NONE), 0);
	/* freed: the three slots take new chunks */
	for (c = 0; c < 3; c++) {
		h = data_hdr(tensor, c, 0, 0, 0);
		send_data(&h, l, &o);
	}
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 3 + 3);
	assert_int_equal(delta(TLY_XDP_C_BUSY), 0);
}

/*
 * A CONFIRM of 0 to 7 receipts after its header, of chunks no slot
 * holds: each is answered by an ACK echoing them, whose checksum
 * (check_out()) covers each length (calls of 32, 16 and 8 bytes).
 */
static void test_confirm_ack_lengths(void **state)
{
	int32_t rl[2 * (TLY_SWITCH_RECEIPTS - 1)];
	struct tly_addr w = worker_addr(1);
	uint8_t f[FRAME_MAX];
	struct tly_hdr h;
	struct out o;
	uint16_t c;
	uint8_t aux;

	(void)state;
	set_job(2, 64, 512);
	for (c = 0; c + 1 < TLY_SWITCH_RECEIPTS; c++) {
		rl[2 * c] = 91;
		rl[2 * c + 1] = (c + 1) << 16 |
				(int32_t)tly_slot_of(91, c + 1, 0, 512);
	}
	for (aux = 0; aux < TLY_SWITCH_RECEIPTS; aux++) {
		h = data_hdr(91, 0, TLY_F_ACK_REQ, 1, 0);
		h.type = TLY_T_CONFIRM;
		h.aux = aux;
		run(f, build(f, &h, rl, 2u * aux), &o);
		h = check_out(&o, w.mac, w.ip, w.port,
			      TLY_HDR_LEN + TLY_RECEIPT_LEN * aux);
		assert_int_equal(h.type, TLY_T_ACK);
		assert_int_equal(h.flags, TLY_F_RELEASED);
		assert_int_equal(h.aux, aux);
		assert_memory_equal(o.f + TLY_L2L4_LEN + TLY_HDR_LEN,
				    f + TLY_L2L4_LEN + TLY_HDR_LEN,
				    TLY_RECEIPT_LEN * aux);
	}
	/* 1 + 2 + ... + 8 receipts, none held */
	assert_int_equal(delta(TLY_XDP_C_CONFIRM), TLY_SWITCH_RECEIPTS);
	assert_int_equal(delta(TLY_XDP_C_CONFIRM_NONE),
			 TLY_SWITCH_RECEIPTS * (TLY_SWITCH_RECEIPTS + 1) / 2);
	assert_int_equal(delta(TLY_XDP_C_FREED), 0);
}

/* malformed or foreign frames: dropped with their counter, or passed */
static void test_drops(void **state)
{
	int32_t l[TLY_XDP_K_MAX], rl[4];
	uint8_t f[FRAME_MAX];
	struct tly_hdr h, g;
	uint32_t len;
	struct out o;
	static const struct {
		const char *what;
		unsigned int counter;
	} cases[] = {
		{ "cookie", TLY_E_COOKIE }, { "job+cookie", TLY_E_JOB },
		{ "job", TLY_E_JOB }, { "version", TLY_E_VERSION },
		{ "type", TLY_E_TYPE }, { "flags", TLY_E_FLAGS },
		{ "exp+int", TLY_E_FLAGS }, { "lane16", TLY_E_FLAGS },
		{ "lane8", TLY_E_FLAGS }, { "sign", TLY_E_FLAGS },
		{ "length", TLY_E_LEN },
		{ "aux", TLY_E_LEN }, { "rank", TLY_E_RANK },
		{ "slot", TLY_E_SLOT }, { "slot range", TLY_E_SLOT },
		{ "shift", TLY_E_SHIFT }, { "shift exp", TLY_E_SHIFT },
		{ "role", TLY_E_ROLE }, { "confirm aux", TLY_E_CONFIRM },
		{ "receipt slot", TLY_E_SLOT },
		{ "receipt length", TLY_E_LEN },
		{ "ip checksum", TLY_E_L3 }, { "fragment", TLY_E_L3 },
		{ "udp length", TLY_E_L4 }, { "short", TLY_E_SHORT },
	};
	unsigned int c;

	(void)state;
	set_job(4, 64, 512);
	fill(l, 1);
	/* two receipts after a CONFIRM's header: the second not at its
	 * chunk's slot */
	rl[0] = 1234;
	rl[1] = 6 << 16 | (int32_t)tly_slot_of(1234, 6, 0, job.n_slots);
	rl[2] = 1234;
	rl[3] = 7 << 16 |
		(int32_t)((tly_slot_of(1234, 7, 0, job.n_slots) + 1) %
			  job.n_slots);
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const char *w = cases[c].what;
		size_t n_lanes = job.k;
		const int32_t *lanes = l;

		g = data_hdr(1234, 5, 0, 2, 0);
		h = g;
		if (!strcmp(w, "cookie"))
			h.cookie = COOKIE + 1;
		else if (!strcmp(w, "job+cookie"))
			h.job = JOB + 1, h.cookie = 7;
		else if (!strcmp(w, "job"))
			h.job = JOB + 1;
		else if (!strcmp(w, "type"))
			h.type = 9;
		else if (!strcmp(w, "flags"))
			h.flags = TLY_F_FALLBACK;
		else if (!strcmp(w, "exp+int"))
			h.flags = TLY_F_EXP | TLY_F_INT;
		else if (!strcmp(w, "lane16"))	/* narrow lanes: not
						 * carried here yet */
			h.flags = TLY_F_LANE16;
		else if (!strcmp(w, "lane8"))
			h.flags = TLY_F_LANE8 | TLY_F_ACK_REQ;
		else if (!strcmp(w, "sign"))	/* sign_ef: not here */
			h.flags = TLY_F_SIGN;
		else if (!strcmp(w, "length"))
			n_lanes = job.k - 1;
		else if (!strcmp(w, "aux"))
			h.aux = 1;
		else if (!strcmp(w, "rank"))
			h.rank = 4;
		else if (!strcmp(w, "slot"))
			h.slot = (uint16_t)((h.slot + 1) % job.n_slots);
		else if (!strcmp(w, "slot range"))
			h.slot = (uint16_t)job.n_slots;
		else if (!strcmp(w, "shift"))
			h.shift = -128;
		else if (!strcmp(w, "shift exp"))
			h = data_hdr(1234, 5, TLY_F_EXP, 2, 3);
		else if (!strcmp(w, "role"))
			h.type = TLY_T_RESULT;
		else if (!strcmp(w, "confirm aux"))	/* 9 chunks */
			h.type = TLY_T_CONFIRM, h.aux = 8, n_lanes = 16;
		else if (!strcmp(w, "receipt slot") ||
			 !strcmp(w, "receipt length"))
			h.type = TLY_T_CONFIRM, h.aux = 2, lanes = rl,
			n_lanes = !strcmp(w, "receipt slot") ? 4 : 3;
		len = build(f, &h, lanes, n_lanes);
		if (!strcmp(w, "version"))
			f[TLY_L2L4_LEN] = (uint8_t)(3 << 4 | TLY_T_DATA);
		else if (!strcmp(w, "ip checksum"))
			f[TLY_ETH_LEN + 8] = 63;	/* TTL, checksum kept */
		else if (!strcmp(w, "fragment")) {
			tly_put16(f + TLY_ETH_LEN + 6, 0x2000);	/* MF */
			tly_put16(f + TLY_ETH_LEN + 10,
				  tly_ip_checksum(f + TLY_ETH_LEN));
		} else if (!strcmp(w, "udp length")) {
			tly_put16(f + TLY_ETH_LEN + TLY_IP_LEN + 4, 30);
		} else if (!strcmp(w, "short")) {
			len = build(f, &h, NULL, 0) - 4;
			tly_put16(f + TLY_ETH_LEN + 2, TLY_IP_LEN +
				  TLY_UDP_LEN + 16);
			tly_put16(f + TLY_ETH_LEN + 10,
				  tly_ip_checksum(f + TLY_ETH_LEN));
			tly_put16(f + TLY_ETH_LEN + TLY_IP_LEN + 4,
				  TLY_UDP_LEN + 16);
		}
		run(f, len, &o);
		if (o.ret != XDP_DROP || delta(cases[c].counter) != 1)
			fail_msg("case %s: verdict %u, counter %s", w, o.ret,
				 tly_xdp_counter_name(cases[c].counter));
	}
	/* nothing of these reached a slot */
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 0);
	assert_int_equal(delta(TLY_XDP_C_CONFIRM_NONE), 0);
	assert_int_equal(delta(TLY_XDP_C_RX), c);
	/* not ours: another UDP port, not IPv4: to the kernel */
	h = data_hdr(1234, 5, 0, 2, 0);
	len = build(f, &h, l, job.k);
	tly_put16(f + TLY_ETH_LEN + TLY_IP_LEN + 2, PORT + 1);
	run(f, len, &o);
	assert_int_equal(o.ret, XDP_PASS);
	tly_put16(f + 12, 0x0806);
	run(f, len, &o);
	assert_int_equal(o.ret, XDP_PASS);
	assert_int_equal(delta(TLY_XDP_C_PASS), 2);
	assert_int_equal(delta(TLY_XDP_C_RX), 0);
	/* the job's frame with Ethernet padding is still taken */
	len = build(f, &h, l, job.k);
	memset(f + len, 0, 6);
	run(f, len + 6, &o);
	assert_int_equal(o.ret, XDP_DROP);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 1);
}

/* a job of 2 workers, K = 64, 64 slots, with one partial: worker 0's
 * DATA of chunk 1 of tensor 10 */
static void one_partial(void)
{
	int32_t l[TLY_XDP_K_MAX];
	struct tly_hdr h;
	struct out o;

	set_job(2, 64, 64);
	h = data_hdr(10, 1, 0, 0, 0);	/* its slot is the job's */
	fill(l, 3);
	send_data(&h, l, &o);
	assert_int_equal(o.ret, XDP_DROP);
}

/* the sweep frees partials older than evict_ns, nothing else */
static void test_sweep(void **state)
{
	int32_t l[TLY_XDP_K_MAX];
	struct tly_xdp_sweep sw;
	struct tly_hdr h;
	struct out o;

	(void)state;
	one_partial();
	fill(l, 3);
	h = data_hdr(10, 2, 0, 0, 0);
	send_data(&h, l, &o);
	h.rank = 1;
	send_data(&h, l, &o);		/* a DONE slot */
	assert_int_equal(o.ret, XDP_TX);
	assert_int_equal(tly_xdp_sweep(ctl, 3600ull * 1000000000ull, &sw), 0);
	assert_int_equal(sw.freed, 0);
	assert_int_equal(sw.n_agg, 1);
	assert_int_equal(sw.n_done, 1);
	assert_int_equal(tly_xdp_sweep(ctl, 0, &sw), 0);
	assert_int_equal(sw.freed, 1);
	assert_int_equal(sw.n_agg, 0);
	assert_int_equal(sw.n_done, 1);	/* DONE waits for its receipts */
	assert_int_equal(delta(TLY_XDP_C_EVICTIONS), 1);
	/* the evicted partial's worker is not a duplicate any more */
	h = data_hdr(10, 1, TLY_F_ACK_REQ, 0, 0);
	send_data(&h, l, &o);
	check_reply(&o, TLY_T_ACK, 10, 1, 0, 0);
	assert_int_equal(delta(TLY_XDP_C_DUPS), 0);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 3);
}

/*
 * The program's slot hash is the engine's: a CONFIRM at the engine's
 * slot is taken (ACK), one at any other slot is dropped as `slot`.
 */
static void test_slot_hash_matches(void **state)
{
	static const uint32_t pools[] = { 1, 7, 1000, 4096, 65536 };
	unsigned int p, i;
	struct out o;

	(void)state;
	for (p = 0; p < sizeof(pools) / sizeof(pools[0]); p++) {
		set_job(2, 64, pools[p]);
		for (i = 0; i < 400; i++) {
			uint32_t tensor = rnd();
			uint16_t chunk = (uint16_t)rnd();
			uint8_t exp = rnd() & 1;
			struct tly_hdr h = data_hdr(tensor, chunk,
						    exp | TLY_F_ACK_REQ, 1, 0);
			uint8_t f[FRAME_MAX];

			h.type = TLY_T_CONFIRM;
			run(f, build(f, &h, NULL, 0), &o);
			assert_int_equal(o.ret, XDP_TX);
			if (pools[p] == 1)
				continue;
			h.slot = (uint16_t)((h.slot + 1 + rnd() %
					     (pools[p] - 1)) % pools[p]);
			run(f, build(f, &h, NULL, 0), &o);
			assert_int_equal(o.ret, XDP_DROP);
		}
		assert_int_equal(delta(TLY_XDP_C_ACK), 400);
		assert_int_equal(delta(TLY_E_SLOT), pools[p] == 1 ? 0 : 400);
	}
}

/*
 * Both CPUs at once: two threads, each pinned to its own CPU, send the
 * DATA of 16 of the 32 ranks each for the same chunk at the same time.
 * Every chunk completes exactly once with the exact sum, which a lost
 * update between the CPUs (no lock) would break.
 */
#define RACE_CHUNKS	1000
#define RACE_N		32
#define RACE_SLOTS	65536

static uint16_t race_chunk[RACE_CHUNKS];

static int32_t race_val(unsigned int rank, unsigned int c, unsigned int i)
{
	return (int32_t)(c * 2654435761u + rank * 40503u + i * 977u);
}

struct race_arg {
	int cpu;
	uint16_t rank0;
	unsigned int results;
	unsigned int bad;
};

static void *race_thread(void *p)
{
	struct race_arg *a = p;
	static __thread int32_t l[TLY_XDP_K_MAX];
	static __thread uint8_t f[FRAME_MAX];
	static __thread struct out o;
	cpu_set_t set;
	unsigned int c, r, i;

	CPU_ZERO(&set);
	CPU_SET(a->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	for (c = 0; c < RACE_CHUNKS; c++) {
		for (r = a->rank0; r < a->rank0 + RACE_N / 2u; r++) {
			struct tly_hdr h = data_hdr(99, race_chunk[c],
						    TLY_F_INT, (uint16_t)r, 0);

			for (i = 0; i < job.k; i++)
				l[i] = race_val(r, c, i);
			run(f, build(f, &h, l, job.k), &o);
			if (o.ret == XDP_DROP)
				continue;
			if (o.ret != XDP_TX ||
			    (o.f[TLY_L2L4_LEN] & 0x0f) != TLY_T_RESULT) {
				a->bad++;
				continue;
			}
			a->results++;
			for (i = 0; i < job.k; i++) {
				uint32_t want = 0, q;

				for (q = 0; q < RACE_N; q++)
					want += (uint32_t)race_val(q, c, i);
				if (tly_get32(o.f + TLY_L2L4_LEN +
					      TLY_HDR_LEN + 4 * i) != want)
					a->bad++;
			}
		}
	}
	return NULL;
}

static void test_two_cpus(void **state)
{
	static uint8_t seen[RACE_SLOTS];
	struct race_arg a[2] = {
		{ .cpu = 0, .rank0 = 0 },
		{ .cpu = 1, .rank0 = RACE_N / 2 },
	};
	pthread_t t[2];
	uint32_t chunk = 0;
	unsigned int c;

	(void)state;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		a[1].cpu = 0;	/* two threads still, on one CPU */
	set_job(RACE_N, 64, RACE_SLOTS);
	/* chunks with slots of their own: no BUSY in the way */
	memset(seen, 0, sizeof(seen));
	for (c = 0; c < RACE_CHUNKS; chunk++) {
		uint32_t s = tly_slot_of(99, (uint16_t)chunk, 0, RACE_SLOTS);

		if (seen[s])
			continue;
		seen[s] = 1;
		race_chunk[c++] = (uint16_t)chunk;
	}
	assert_int_equal(pthread_create(&t[0], NULL, race_thread, &a[0]), 0);
	assert_int_equal(pthread_create(&t[1], NULL, race_thread, &a[1]), 0);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	assert_int_equal(a[0].bad + a[1].bad, 0);
	assert_int_equal(a[0].results + a[1].results, RACE_CHUNKS);
	assert_int_equal(delta(TLY_XDP_C_COMPLETIONS), RACE_CHUNKS);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), RACE_CHUNKS);
	assert_int_equal(delta(TLY_XDP_C_DUPS), 0);
}

/* the program as the kernel holds it */
static void test_verified(void **state)
{
	struct tly_xdp_prog_info info;

	(void)state;
	assert_int_equal(tly_xdp_info(ctl, &info), 0);
	assert_true(info.xlated_insns > 0);
	if (lock_arg != TLY_XDP_LOCK_AUTO)
		assert_int_equal(info.lock, lock_arg);
	printf("xdp aggregator (%s): %u instructions, %u verified, %u bytes "
	       "jited\n", tly_xdp_lock_name(info.lock), info.xlated_insns,
	       info.verified_insns, info.jited_bytes);
}

/* does the running kernel have the resilient BPF spin lock (6.15+)? */
static int kernel_has_res_lock(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[256];
	int found = 0;

	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, " bpf_res_spin_lock\n") != NULL;
	fclose(f);
	return found;
}

/*
 * Both builds of the program: the spin lock one loads everywhere, the
 * resilient one where the kernel has the lock, and AUTO takes the
 * resilient one exactly there (the others fall back).
 */
static void test_lock_builds(void **state)
{
	struct tly_xdp_prog_info info;
	struct tly_xdp_ctl *c;
	int has = kernel_has_res_lock();

	(void)state;
	assert_int_equal(tly_xdp_open_lock(&c, 1024, TLY_XDP_LOCK_SPIN), 0);
	assert_int_equal(tly_xdp_info(c, &info), 0);
	assert_int_equal(info.lock, TLY_XDP_LOCK_SPIN);
	tly_xdp_close(c);

	if (has) {
		assert_int_equal(tly_xdp_open_lock(&c, 1024, TLY_XDP_LOCK_RES),
				 0);
		assert_int_equal(tly_xdp_info(c, &info), 0);
		assert_int_equal(info.lock, TLY_XDP_LOCK_RES);
		tly_xdp_close(c);
	} else {
		assert_int_not_equal(tly_xdp_open_lock(&c, 1024,
						       TLY_XDP_LOCK_RES), 0);
		assert_null(c);
	}

	assert_int_equal(tly_xdp_open_lock(&c, 1024, TLY_XDP_LOCK_AUTO), 0);
	assert_int_equal(tly_xdp_info(c, &info), 0);
	assert_int_equal(info.lock, has ? TLY_XDP_LOCK_RES : TLY_XDP_LOCK_SPIN);
	tly_xdp_close(c);

	assert_int_equal(tly_xdp_open_lock(&c, 1024, TLY_XDP_LOCK_SPIN + 1),
			 -EINVAL);
	printf("xdp aggregator: this kernel %s bpf_res_spin_lock\n",
	       has ? "has" : "lacks");
}

/* ---- the resilient lock's failure: the fault build (argv[1] "fault") */

/* the tests' build of agg.bpf.c (TLY_XDP_LOCK_FAULT; meson embeds it) */
extern const unsigned char tly_xdp_agg_fault_obj[];
extern const size_t tly_xdp_agg_fault_obj_len;

/* the next @skip slot locks are taken, the @fail after them fail */
static void lock_fail(uint32_t skip, uint32_t fail)
{
	struct tly_xdp_lock_fault f = { .skip = skip, .fail = fail };
	int fd = tly_xdp_map_fd(ctl, "tly_lock_fault");
	uint32_t key = 0;

	assert_true(fd >= 0);
	assert_int_equal(bpf_map_update_elem(fd, &key, &f, BPF_ANY), 0);
}

/* @h's DATA sent with its slot lock failing: dropped unanswered, and
 * counted */
static void send_lock_failed(const struct tly_hdr *h, const int32_t *l)
{
	struct out o;

	lock_fail(0, 1);
	send_data(h, l, &o);
	assert_int_equal(o.ret, XDP_DROP);
	assert_int_equal(delta(TLY_XDP_C_LOCK), 1);
}

/*
 * A DATA whose slot lock fails is dropped unanswered, as a lost one is,
 * and counted: the first of a chunk claims nothing, the last completes
 * nothing.  Sent again, each is taken, and the sum is exact.
 */
static void test_fault_data(void **state)
{
	int32_t l0[TLY_XDP_K_MAX], l1[TLY_XDP_K_MAX], want[TLY_XDP_K_MAX];
	struct tly_hdr h;
	struct out o;
	unsigned int i;

	(void)state;
	set_job(2, 64, 64);
	fill(l0, 3);
	fill(l1, -1000);
	for (i = 0; i < job.k; i++)
		want[i] = l0[i] + l1[i];
	h = data_hdr(20, 1, TLY_F_INT | TLY_F_ACK_REQ, 0, 0);
	send_lock_failed(&h, l0);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 0);
	send_data(&h, l0, &o);
	check_reply(&o, TLY_T_ACK, 20, 1, TLY_F_INT, 0);
	assert_int_equal(delta(TLY_XDP_C_CLAIMS), 1);
	/* the last: not completed, then completed once */
	h = data_hdr(20, 1, TLY_F_INT, 1, 0);
	send_lock_failed(&h, l1);
	assert_int_equal(delta(TLY_XDP_C_COMPLETIONS), 0);
	send_data(&h, l1, &o);
	check_result_all(&o, 20, 1, TLY_F_INT, 0, want);
	assert_int_equal(delta(TLY_XDP_C_COMPLETIONS), 1);
	assert_int_equal(delta(TLY_XDP_C_DUPS), 0);
	assert_int_equal(delta(TLY_XDP_C_LOCK), 0);
}

/*
 * A CONFIRM of three chunks whose second lock fails: no ACK (it would
 * release all three), counted; the receipt taken before it is taken
 * again, not twice, when the worker sends the CONFIRM again, and the
 * slots are freed once every worker's receipts are in.
 */
static void test_fault_confirm(void **state)
{
	struct tly_hdr confirm, ack;
	uint8_t f[FRAME_MAX];
	struct out o;
	int32_t rl[4];
	uint16_t r;

	(void)state;
	confirm = data_hdr(three_done_chunks(95, rl), 0, TLY_F_ACK_REQ, 0, 0);
	confirm.type = TLY_T_CONFIRM;
	confirm.aux = 2;
	lock_fail(1, 1);
	run(f, build(f, &confirm, rl, 4), &o);
	assert_int_equal(o.ret, XDP_DROP);
	assert_int_equal(delta(TLY_XDP_C_LOCK), 1);
	/* sent again by worker 0, then worker 1's */
	for (r = 0; r < 2; r++) {
		struct tly_addr w = worker_addr(r);

		confirm.rank = r;
		run(f, build(f, &confirm, rl, 4), &o);
		ack = check_out(&o, w.mac, w.ip, w.port, TLY_HDR_LEN + 16);
		assert_int_equal(ack.type, TLY_T_ACK);
		assert_int_equal(ack.flags, TLY_F_RELEASED);
		assert_int_equal(delta(TLY_XDP_C_FREED), r ? 3 : 0);
	}
	assert_int_equal(delta(TLY_XDP_C_CONFIRM), 3);
	assert_int_equal(delta(TLY_XDP_C_CONFIRM_NONE), 0);
	assert_int_equal(delta(TLY_XDP_C_LOCK), 0);
}

/* a sweep whose locks fail frees nothing and counts nothing there; the
 * next sweep frees the stale partial */
static void test_fault_sweep(void **state)
{
	struct tly_xdp_sweep sw;

	(void)state;
	one_partial();
	lock_fail(0, job.n_slots);
	assert_int_equal(tly_xdp_sweep(ctl, 0, &sw), 0);
	assert_int_equal(sw.freed, 0);
	assert_int_equal(sw.n_agg, 0);
	assert_int_equal(delta(TLY_XDP_C_EVICTIONS), 0);
	assert_int_equal(tly_xdp_sweep(ctl, 0, &sw), 0);
	assert_int_equal(sw.freed, 1);
	assert_int_equal(delta(TLY_XDP_C_EVICTIONS), 1);
}

static int setup(void **state)
{
	(void)state;
	return tly_xdp_open_lock(&ctl, TLY_MAX_SLOTS, lock_arg) ? -1 : 0;
}

static int setup_fault(void **state)
{
	(void)state;
	return tly_xdp_open_mem(&ctl, TLY_MAX_SLOTS, tly_xdp_agg_fault_obj,
				tly_xdp_agg_fault_obj_len,
				TLY_XDP_LOCK_RES) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	tly_xdp_close(ctl);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verified),
		cmocka_unit_test(test_lock_builds),
		cmocka_unit_test(test_int32_wraps),
		cmocka_unit_test(test_scaled_sum),
		cmocka_unit_test(test_exp_max),
		cmocka_unit_test(test_job_k),
		cmocka_unit_test(test_single_worker),
		cmocka_unit_test(test_chunk_life),
		cmocka_unit_test(test_collision_busy),
		cmocka_unit_test(test_confirm_receipts),
		cmocka_unit_test(test_confirm_ack_lengths),
		cmocka_unit_test(test_drops),
		cmocka_unit_test(test_sweep),
		cmocka_unit_test(test_slot_hash_matches),
		cmocka_unit_test(test_two_cpus),
	};

	const struct CMUnitTest fault_tests[] = {
		cmocka_unit_test(test_fault_data),
		cmocka_unit_test(test_fault_confirm),
		cmocka_unit_test(test_fault_sweep),
	};

	if (argc > 1 && !strcmp(argv[1], "fault"))
		return cmocka_run_group_tests(fault_tests, setup_fault,
					      teardown);
	if (argc > 1) {
		if (!strcmp(argv[1], "res")) {
			lock_arg = TLY_XDP_LOCK_RES;
		} else if (!strcmp(argv[1], "spin")) {
			lock_arg = TLY_XDP_LOCK_SPIN;
		} else if (strcmp(argv[1], "auto")) {
			fprintf(stderr, "usage: %s [auto|res|spin|fault]\n",
				argv[0]);
			return 2;
		}
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
