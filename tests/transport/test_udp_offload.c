// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_udp_offload.c - the UDP transport's UDP_SEGMENT (GSO) sends and
 * UDP_GRO receives over loopback, and the plain path they fall back to:
 *   - exact delivery of runs of mixed lengths to several peers, for every
 *     pairing of an offloading and a plain sender and receiver;
 *   - how queued frames are grouped into super-datagrams (equal lengths,
 *     a shorter last one, the 64-segment and 64 KB limits);
 *   - a GRO buffer split into its datagrams (sent with GSO by a bare
 *     socket, so the split is checked apart from the transport's send);
 *   - too long datagrams counted as rx_drops, coalesced or not;
 *   - back-pressure (EAGAIN, ENOBUFS, a short sendmmsg) and the fallback
 *     when GSO is refused (EIO, EINVAL), injected through a sendmmsg
 *     wrapper (-Wl,--wrap=sendmmsg) that also records every message;
 *   - a stalled receiver with a tiny SO_RCVBUF: what arrives is whole, in
 *     order and once, and with the kernel's drops accounts for every frame.
 * The mode is TALLY_UDP_OFFLOAD, set around each transport_open().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataplane/transport/transport.h"
#include "udp_frames.h"
#include "tp_nodes.h"

#define MS UF_MS
#define N_NODES 3
#define MTU 1500

/* ---- nodes and frames ---- */

static struct tly_addr addrs[N_NODES];

static int close_all(void **state)
{
	memset(&uf_mmsg, 0, sizeof(uf_mmsg));
	return tp_close_all(state);
}

/* open node @self with TALLY_UDP_OFFLOAD=@mode (NULL: unset) */
static void open_node(struct transport *tp, uint16_t self, const char *mode)
{
	struct transport_config c = {
		.kind = "udp", .self = self, .n_nodes = N_NODES,
		.addrs = addrs, .mtu = MTU,
	};

	if (mode)
		setenv("TALLY_UDP_OFFLOAD", mode, 1);
	else
		unsetenv("TALLY_UDP_OFFLOAD");
	tp_track(tp);
	assert_int_equal(transport_open(tp, &c), 0);
	unsetenv("TALLY_UDP_OFFLOAD");
}

/* ---- exact delivery in every pairing of modes ---- */

/*
 * Node 0 sends to 1 and 2, runs of 1..80 frames of one random length
 * (8..1472), a third of them with a shorter last frame, the two peers'
 * runs interleaved; node 1 answers node 0 with 90 frames of 1000 bytes
 * and 10 longer ones.  Rounds stay small enough for the smallest
 * receive buffer a default host gives.
 */
static void exchange(const char *tx_mode, const char *rx_mode)
{
	static struct transport a, b, c;
	static struct uf_expect eb, ec, ea;
	struct uf_expect *ex[N_NODES] = { &ea, &eb, &ec };
	uint64_t s = 42, sent_bytes = 0;
	uint32_t round, sent_a = 0;

	memset(&ea, 0, sizeof(ea));
	memset(&eb, 0, sizeof(eb));
	memset(&ec, 0, sizeof(ec));
	open_node(&a, 0, tx_mode);
	open_node(&b, 1, rx_mode);
	open_node(&c, 2, rx_mode);
	for (round = 0; round < 12; round++) {
		uint32_t queued = 0;

		while (queued < 200) {
			uint16_t dst = (uint16_t)(1 + uf_rnd(&s) % 2);

			queued += uf_queue_random_runs(&a, dst, ex[dst], 1,
						       MTU - 28, &s,
						       &sent_bytes);
		}
		sent_a += queued;
		for (uint32_t i = 0; i < 100; i++) {
			uint16_t l = (uint16_t)(i < 90 ? 1000 : 100 + i);

			ea.len[ea.n] = l;
			uf_send(&b, 0, ea.n++, l);
		}
		assert_int_equal(transport_tx_flush(&a, transport_now_ns()),
				 (int)queued);
		assert_int_equal(transport_tx_flush(&b, transport_now_ns()),
				 100);
		assert_int_equal(transport_tx_pending(&a), 0);
		uf_recv_expected(&b, &eb);
		uf_recv_expected(&c, &ec);
		uf_recv_expected(&a, &ea);
	}
	assert_int_equal(a.stats.tx_pkts, sent_a);
	assert_int_equal(a.stats.tx_bytes, sent_bytes);
	assert_int_equal(a.stats.tx_drops, 0);
	assert_int_equal(b.stats.rx_pkts + c.stats.rx_pkts, sent_a);
	assert_int_equal(b.stats.rx_bytes + c.stats.rx_bytes, sent_bytes);
	assert_int_equal(b.stats.rx_drops + c.stats.rx_drops, 0);
	assert_int_equal(a.stats.rx_pkts, ea.n);
	/* GSO is used where on, and only there */
	if (!strcmp(tx_mode, "off"))
		assert_int_equal(uf_mmsg.gso_tries, 0);
	else
		assert_true(uf_mmsg.gso_msgs > 0);
	/* GSO into GRO: the runs arrive coalesced and are split in place */
	if (!strcmp(tx_mode, "on") && !strcmp(rx_mode, "on"))
		assert_true(eb.contiguous > eb.n / 2);
	if (!strcmp(rx_mode, "off") || !strcmp(rx_mode, "tx"))
		assert_int_equal(eb.contiguous + ec.contiguous, 0);
}

static void test_exchange_on_on(void **state)
{
	(void)state;
	exchange("on", "on");
}

static void test_exchange_off_off(void **state)
{
	(void)state;
	exchange("off", "off");
}

static void test_exchange_gso_to_plain(void **state)
{
	(void)state;
	exchange("tx", "off");	/* the kernel cuts them for a plain socket */
}

static void test_exchange_plain_to_gro(void **state)
{
	(void)state;
	exchange("off", "rx");
}

/* ---- grouping of queued frames into super-datagrams ---- */

static void test_grouping(void **state)
{
	/* run, length; the expected messages below follow from them */
	static const struct {
		uint32_t n;
		uint16_t len, dst;
	} plan[] = {
		{ 15, 1000, 1 }, { 1, 400, 1 },	/* 16: the short one ends it */
		{ 4, 1200, 1 }, { 1, 800, 1 },	/* 5 */
		{ 2, 1300, 1 }, { 70, 100, 1 },	/* 3 (1300 1300 100), 64, 5 */
		{ 50, 1472, 1 },		/* 44 (64768 bytes), 6 */
		{ 3, 500, 2 }, { 3, 500, 1 },	/* grouped by destination: */
		{ 1, 900, 1 },			/* b's first 500 ends the 6 */
	};		/* (7), then 2, b's 900 alone, then c's 3 */
	static const uint32_t want_segs[] = { 16, 5, 3, 64, 5, 44, 7, 2, 1, 3 };
	static const uint16_t want_size[] = { 1000, 1200, 1300, 100, 100, 1472,
					      1472, 500, 0, 500 };
	static struct transport a, b, c;
	static struct uf_expect eb, ec;
	uint32_t i, j, total = 0;

	(void)state;
	memset(&eb, 0, sizeof(eb));
	memset(&ec, 0, sizeof(ec));
	open_node(&a, 0, "on");
	open_node(&b, 1, "on");
	open_node(&c, 2, "on");
	for (i = 0; i < sizeof(plan) / sizeof(plan[0]); i++) {
		struct uf_expect *e = plan[i].dst == 1 ? &eb : &ec;

		for (j = 0; j < plan[i].n; j++) {
			e->len[e->n] = plan[i].len;
			uf_send(&a, plan[i].dst, e->n++, plan[i].len);
			total++;
		}
	}
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()),
			 (int)total);
	assert_int_equal(uf_mmsg.msgs,
			 sizeof(want_segs) / sizeof(want_segs[0]));
	for (i = 0; i < uf_mmsg.msgs; i++) {
		assert_int_equal(uf_mmsg.segs[i], want_segs[i]);
		assert_int_equal(uf_mmsg.seg_size[i], want_size[i]);
	}
	/* wire datagrams, not super-datagrams */
	assert_int_equal(a.stats.tx_pkts, total);
	uf_recv_expected(&b, &eb);
	uf_recv_expected(&c, &ec);
	assert_int_equal(b.stats.rx_pkts, eb.n);
	assert_int_equal(c.stats.rx_pkts, 3);
}

/* An aggregator's RESULTs go to every worker in turn: queued b, c, b,
 * c..., they leave as one run per destination, each in its order. */
static void test_grouping_interleaved(void **state)
{
	static struct transport a, b, c;
	static struct uf_expect eb, ec;
	uint32_t i;

	(void)state;
	memset(&eb, 0, sizeof(eb));
	memset(&ec, 0, sizeof(ec));
	open_node(&a, 0, "on");
	open_node(&b, 1, "on");
	open_node(&c, 2, "on");
	for (i = 0; i < 40; i++) {
		struct uf_expect *e = i % 2 ? &ec : &eb;

		e->len[e->n] = 1200;
		uf_send(&a, i % 2 ? 2 : 1, e->n++, 1200);
	}
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 40);
	assert_int_equal(uf_mmsg.msgs, 2);
	assert_int_equal(uf_mmsg.segs[0], 20);
	assert_int_equal(uf_mmsg.segs[1], 20);
	uf_recv_expected(&b, &eb);
	uf_recv_expected(&c, &ec);
	assert_int_equal(b.stats.rx_pkts, 20);
	assert_int_equal(c.stats.rx_pkts, 20);
}

/* ---- a GRO buffer split into its datagrams ---- */

/* send @n datagrams of @seg (the last @last long) to node @dst in one
 * sendmsg with UDP_SEGMENT, from a bare socket; frames numbered @first.. */
static void raw_gso_send(uint16_t dst, uint32_t first, uint32_t n,
			 uint16_t seg, uint16_t last)
{
	static uint8_t buf[65536];
	union {
		char b[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl;
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct iovec iov = { buf, 0 };
	struct msghdr h = { .msg_name = &to, .msg_namelen = sizeof(to),
			    .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	uint32_t i;

	assert_true(fd >= 0);
	to.sin_addr.s_addr = htonl(addrs[dst].ip);
	to.sin_port = htons(addrs[dst].port);
	for (i = 0; i < n; i++) {
		uint16_t l = i == n - 1 ? last : seg;

		uf_fill(buf + iov.iov_len, first + i, dst, l);
		iov.iov_len += l;
	}
	if (n > 1) {
		h.msg_control = ctl.b;
		h.msg_controllen = sizeof(ctl.b);
		c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(seg));
		memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	}
	assert_int_equal(sendmsg(fd, &h, 0), (ssize_t)iov.iov_len);
	close(fd);
}

/* one frame per rx_burst call: the split must carry over between calls */
static void recv_one_by_one(struct transport *tp, struct uf_expect *e)
{
	struct transport_rx rx[2];
	uint64_t end = transport_now_ns() + 2000 * MS;
	const uint8_t *prev_end = NULL;

	while (e->got < e->n && transport_now_ns() < end) {
		if (transport_rx_burst(tp, rx, 1) != 1) {
			transport_idle_wait(tp, transport_now_ns(), 1 * MS);
			continue;
		}
		assert_int_equal(uf_check(rx[0].data, rx[0].len,
					     tp->cfg.self), e->got);
		assert_int_equal(rx[0].len, e->len[e->got]);
		if (rx[0].data == prev_end)
			e->contiguous++;
		prev_end = rx[0].data + rx[0].len;
		transport_rx_release(tp, rx, 1);
		e->got++;
	}
	assert_int_equal(e->got, e->n);
}

static void gro_split(const char *rx_mode, bool one_by_one)
{
	static struct transport b;
	static struct uf_expect e;
	uint32_t i;

	memset(&e, 0, sizeof(e));
	open_node(&b, 1, rx_mode);
	/* 10 x 1200 + 700; 41 x 1472 (none shorter); 64 x 8; one 77 */
	raw_gso_send(1, 0, 11, 1200, 700);
	raw_gso_send(1, 11, 41, 1472, 1472);
	raw_gso_send(1, 52, 64, 8, 8);
	raw_gso_send(1, 116, 1, 77, 77);	/* alone, no cmsg */
	for (i = 0; i < 117; i++)
		e.len[i] = i < 10 ? 1200 : i == 10 ? 700 : i < 52 ? 1472 :
			   i < 116 ? 8 : 77;
	e.n = 117;
	if (one_by_one)
		recv_one_by_one(&b, &e);
	else
		uf_recv_expected(&b, &e);
	assert_int_equal(b.stats.rx_pkts, 117);
	assert_int_equal(b.stats.rx_drops, 0);
	/* coalesced: every frame but the first of each send follows the
	 * previous one in memory (bursts of 32 may cut a run) */
	if (!strcmp(rx_mode, "on"))
		assert_true(e.contiguous >= 117 - 4 - 4);
	else
		assert_int_equal(e.contiguous, 0);
	/* the kernel's receives: one GRO buffer a send, else a datagram
	 * each (the daemon's "frames a receive" line) */
	assert_int_equal(b.stats.rx_msgs, !strcmp(rx_mode, "on") ? 4 : 117);
}

static void test_gro_split(void **state)
{
	(void)state;
	gro_split("on", false);
}

static void test_gro_split_one_by_one(void **state)
{
	(void)state;
	gro_split("on", true);
}

static void test_gso_into_plain_receiver(void **state)
{
	(void)state;
	gro_split("off", false);
}

/* ---- too long datagrams ---- */

/*
 * Longer than the MTU (the longest frame we take): one alone, and a run
 * of 5 sent with GSO (coalesced with GRO, cut by the kernel without),
 * each counted in rx_drops; the frames after them come through.
 */
static void oversized(const char *rx_mode)
{
	static struct transport b;
	static struct uf_expect e;

	memset(&e, 0, sizeof(e));
	open_node(&b, 1, rx_mode);
	raw_gso_send(1, 1000, 1, 1600, 1600);
	raw_gso_send(1, 1001, 5, 1501, 1501);
	raw_gso_send(1, 0, 3, 1500, 20);	/* fits: 1500 is the MTU */
	e.len[0] = 1500;
	e.len[1] = 1500;
	e.len[2] = 20;
	e.n = 3;
	uf_recv_expected(&b, &e);
	assert_int_equal(b.stats.rx_drops, 6);
	assert_int_equal(b.stats.rx_pkts, 3);
	assert_int_equal(b.stats.rx_bytes, 1500 + 1500 + 20);
}

static void test_oversized_gro(void **state)
{
	(void)state;
	oversized("on");
}

static void test_oversized_plain(void **state)
{
	(void)state;
	oversized("off");
}

/* ---- frames held across bursts ---- */

/*
 * The consumer holds every frame until the ring is full (rx_burst gives
 * nothing while the socket still has data): no held frame may be
 * overwritten meanwhile.  Then they are released newest burst first,
 * and the rest arrive, all in order.
 */
static void hold_frames(const char *mode)
{
	static struct transport a, b;
	static struct transport_rx held[4096];
	static struct uf_expect e;
	uint32_t n_held = 0, i;
	int bursts = 0, k, empty = 0;
	int burst_start[512];

	memset(&e, 0, sizeof(e));
	open_node(&a, 0, mode);
	open_node(&b, 1, mode);
	for (i = 0; i < 2000; i++) {
		e.len[e.n] = (uint16_t)(60 + (i / 20) % 40);
		uf_send(&a, 1, e.n, e.len[e.n]);
		e.n++;
		if (i % 500 == 499)
			assert_int_equal(transport_tx_flush(&a,
					 transport_now_ns()), 500);
	}
	while (empty < 20 && n_held + TRANSPORT_RX_BURST <= 4096) {
		k = transport_rx_burst(&b, held + n_held, TRANSPORT_RX_BURST);
		if (!k) {
			empty++;
			transport_idle_wait(&b, transport_now_ns(), 1 * MS);
			continue;
		}
		burst_start[bursts++] = (int)n_held;
		n_held += (uint32_t)k;
	}
	/* the ring filled before the socket emptied */
	assert_true(n_held > 0);
	assert_true(n_held < 2000);
	for (i = 0; i < n_held; i++) {
		assert_int_equal(uf_check(held[i].data, held[i].len, 1), i);
		assert_int_equal(held[i].len, e.len[i]);
	}
	e.got = n_held;		/* the rest continue from there */
	while (bursts--) {
		int from = burst_start[bursts];

		transport_rx_release(&b, held + from, (int)n_held - from);
		n_held = (uint32_t)from;
	}
	uf_recv_expected(&b, &e);
	uf_assert_no_more(&b);
	assert_int_equal(b.stats.rx_pkts, 2000);
}

static void test_hold_frames_gro(void **state)
{
	(void)state;
	hold_frames("on");
}

static void test_hold_frames_plain(void **state)
{
	(void)state;
	hold_frames("off");
}

/* ---- back-pressure and fallback, injected ---- */

/*
 * EAGAIN, ENOBUFS and EINTR keep the frames queued; a sendmmsg that
 * takes only part of the batch sends that part once: nothing dropped,
 * nothing sent twice, order kept.
 */
static void backpressure(const char *mode)
{
	static struct transport a, b;
	static struct uf_expect e;
	int per_msg = strcmp(mode, "off") ? 10 : 1;

	memset(&e, 0, sizeof(e));
	open_node(&a, 0, mode);
	open_node(&b, 1, mode);
	uf_queue_runs(&a, 1, &e, 300);
	uf_mmsg.err[0] = EAGAIN;
	uf_mmsg.err[1] = ENOBUFS;
	uf_mmsg.cut[2] = 3;		/* 3 messages go ... */
	uf_mmsg.err[3] = EAGAIN;	/* ... and the next call is refused */
	uf_mmsg.cut[4] = 1;
	uf_mmsg.err[5] = EINTR;
	uf_mmsg.n_script = 6;
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 0);
	assert_int_equal(transport_tx_pending(&a), 300);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 0);
	assert_int_equal(transport_tx_pending(&a), 300);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()),
			 3 * per_msg);
	assert_int_equal(transport_tx_pending(&a), 300 - 3 * per_msg);
	assert_int_equal(a.stats.tx_pkts, 3 * per_msg);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), per_msg);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()),
			 300 - 4 * per_msg);
	assert_int_equal(transport_tx_pending(&a), 0);
	assert_int_equal(a.stats.tx_pkts, 300);
	assert_int_equal(a.stats.tx_drops, 0);
	uf_recv_expected(&b, &e);
	uf_assert_no_more(&b);
	assert_int_equal(b.stats.rx_pkts, 300);
}

static void test_backpressure_gso(void **state)
{
	(void)state;
	backpressure("on");
}

static void test_backpressure_plain(void **state)
{
	(void)state;
	backpressure("off");
}

/*
 * GSO refused before it ever worked (EIO: a device without checksum
 * offload; EINVAL when the frames then go one by one): the refused run
 * goes out frame by frame, GSO is off for the socket from then on, and
 * nothing is lost.
 */
static void fallback(int err)
{
	static struct transport a, b;
	static struct uf_expect e;

	memset(&e, 0, sizeof(e));
	open_node(&a, 0, "on");
	open_node(&b, 1, "on");
	uf_queue_runs(&a, 1, &e, 300);
	uf_mmsg.fail_gso_errno = err;
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 300);
	assert_int_equal(uf_mmsg.gso_tries, 1);
	assert_int_equal(uf_mmsg.gso_msgs, 0);
	assert_int_equal(uf_mmsg.msgs, 300);
	/* off for good: no further try */
	uf_queue_runs(&a, 1, &e, 50);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 50);
	assert_int_equal(uf_mmsg.gso_tries, 1);
	assert_int_equal(a.stats.tx_drops, 0);
	assert_int_equal(a.stats.tx_pkts, 350);
	uf_recv_expected(&b, &e);
	uf_assert_no_more(&b);
}

static void test_fallback_eio(void **state)
{
	(void)state;
	fallback(EIO);
}

static void test_fallback_einval(void **state)
{
	(void)state;
	fallback(EINVAL);
}

/* GSO refused after it worked (a route with a smaller MTU, say): that
 * run goes frame by frame, GSO stays on for the next ones */
static void test_refused_after_proven(void **state)
{
	static struct transport a, b;
	static struct uf_expect e;

	(void)state;
	memset(&e, 0, sizeof(e));
	open_node(&a, 0, "on");
	open_node(&b, 1, "on");
	uf_queue_runs(&a, 1, &e, 20);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 20);
	assert_int_equal(uf_mmsg.gso_msgs, 2);
	uf_mmsg.fail_gso_errno = EINVAL;
	uf_queue_runs(&a, 1, &e, 30);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 30);
	/* each run tried once, or twice when its refusal came after other
	 * messages of a batch (sendmmsg reports an error only first) */
	assert_in_range(uf_mmsg.gso_tries, 2 + 3, 2 + 3 * 2);
	assert_int_equal(uf_mmsg.gso_msgs, 2);
	uf_mmsg.fail_gso_errno = 0;
	uf_queue_runs(&a, 1, &e, 20);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 20);
	assert_int_equal(uf_mmsg.gso_msgs, 4);
	assert_int_equal(a.stats.tx_drops, 0);
	uf_recv_expected(&b, &e);
	uf_assert_no_more(&b);
}

/* a run to an unreachable peer (port 0: EINVAL) is dropped frame by
 * frame; that is not GSO's fault, so GSO stays on */
static void test_bad_peer_keeps_gso(void **state)
{
	struct tly_addr bad[N_NODES];
	static struct transport a, b;
	static struct uf_expect e;
	struct transport_config c = {
		.kind = "udp", .self = 0, .n_nodes = N_NODES, .addrs = bad,
		.mtu = MTU,
	};
	uint32_t i;

	(void)state;
	memset(&e, 0, sizeof(e));
	memcpy(bad, addrs, sizeof(bad));
	bad[2].port = 0;
	tp_track(&a);
	unsetenv("TALLY_UDP_OFFLOAD");
	assert_int_equal(transport_open(&a, &c), 0);
	open_node(&b, 1, "on");
	for (i = 0; i < 5; i++)
		uf_send(&a, 2, 900 + i, 500);
	uf_queue_runs(&a, 1, &e, 20);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 20);
	assert_int_equal(a.stats.tx_drops, 5);
	assert_int_equal(uf_mmsg.gso_msgs, 2);
	uf_recv_expected(&b, &e);
	uf_assert_no_more(&b);
}

/* ---- a stalled receiver with a tiny receive buffer ---- */

static uint32_t kernel_drops(int fd)
{
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mem);

	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len), 0);
	return mem[SK_MEMINFO_DROPS];
}

/* receive until nothing came for 100 ms; seqs in order, no duplicate */
static uint32_t drain(struct transport *tp, uint32_t *seq, uint32_t max)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t quiet = transport_now_ns();
	uint32_t got = 0;
	int i, k;

	while (transport_now_ns() - quiet < 100 * MS) {
		k = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (i = 0; i < k; i++) {
			assert_true(got < max);
			seq[got] = uf_check(rx[i].data, rx[i].len,
					       tp->cfg.self);
			assert_int_equal(rx[i].len, 1000);
			if (got)
				assert_true(seq[got] > seq[got - 1]);
			got++;
		}
		if (k > 0) {
			transport_rx_release(tp, rx, k);
			quiet = transport_now_ns();
		} else {
			transport_idle_wait(tp, transport_now_ns(), 5 * MS);
		}
	}
	return got;
}

/*
 * UDP has no flow control: a full receive buffer drops in the kernel
 * and the sender never knows.  What the transport must keep: every frame
 * that arrives is whole, in order and arrives once; the ones missing are
 * the kernel's drops on the receiving socket; afterwards frames flow
 * again.  SO_MEMINFO's drop count is per datagram without GRO; with it a
 * dropped GRO buffer counts once, so there only "fewer than sent".
 */
static void stalled_receiver(const char *mode)
{
	static struct transport a, b;
	static uint32_t seq[1200];
	int tiny = 4096, big = 4 << 20, fd;
	uint32_t i, got, drops;

	open_node(&a, 0, mode);
	open_node(&b, 1, mode);
	fd = b.ops->wait_fd(&b);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tiny,
				    sizeof(tiny)), 0);
	for (i = 0; i < 1000; i++) {
		uf_send(&a, 1, i, 1000);
		if (i % 200 == 199)
			assert_int_equal(transport_tx_flush(&a,
					 transport_now_ns()), 200);
	}
	assert_int_equal(a.stats.tx_pkts, 1000);
	assert_int_equal(a.stats.tx_drops, 0);
	got = drain(&b, seq, 1000);
	drops = kernel_drops(fd);
	assert_true(got > 0);
	assert_true(got < 1000);
	assert_true(drops > 0);
	if (!strcmp(mode, "off"))
		assert_int_equal(got + drops, 1000);
	assert_int_equal(b.stats.rx_pkts, got);
	assert_int_equal(b.stats.rx_drops, 0);
	/* room again: the next 150 all arrive, once */
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big,
				    sizeof(big)), 0);
	for (i = 0; i < 150; i++)
		uf_send(&a, 1, 1000 + i, 1000);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 150);
	assert_int_equal(drain(&b, seq, 150), 150);
	assert_int_equal(seq[0], 1000);
	assert_int_equal(seq[149], 1149);
}

static void test_stalled_receiver_gso(void **state)
{
	(void)state;
	stalled_receiver("on");
}

static void test_stalled_receiver_plain(void **state)
{
	(void)state;
	stalled_receiver("off");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_exchange_on_on, close_all),
		cmocka_unit_test_teardown(test_exchange_off_off, close_all),
		cmocka_unit_test_teardown(test_exchange_gso_to_plain,
					  close_all),
		cmocka_unit_test_teardown(test_exchange_plain_to_gro,
					  close_all),
		cmocka_unit_test_teardown(test_grouping, close_all),
		cmocka_unit_test_teardown(test_grouping_interleaved, close_all),
		cmocka_unit_test_teardown(test_gro_split, close_all),
		cmocka_unit_test_teardown(test_gro_split_one_by_one,
					  close_all),
		cmocka_unit_test_teardown(test_gso_into_plain_receiver,
					  close_all),
		cmocka_unit_test_teardown(test_oversized_gro, close_all),
		cmocka_unit_test_teardown(test_oversized_plain, close_all),
		cmocka_unit_test_teardown(test_hold_frames_gro, close_all),
		cmocka_unit_test_teardown(test_hold_frames_plain, close_all),
		cmocka_unit_test_teardown(test_backpressure_gso, close_all),
		cmocka_unit_test_teardown(test_backpressure_plain, close_all),
		cmocka_unit_test_teardown(test_fallback_eio, close_all),
		cmocka_unit_test_teardown(test_fallback_einval, close_all),
		cmocka_unit_test_teardown(test_refused_after_proven,
					  close_all),
		cmocka_unit_test_teardown(test_bad_peer_keeps_gso, close_all),
		cmocka_unit_test_teardown(test_stalled_receiver_gso,
					  close_all),
		cmocka_unit_test_teardown(test_stalled_receiver_plain,
					  close_all),
	};

	tp_loopback_addrs(addrs, N_NODES, 8000);  /* not test_udp's */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
