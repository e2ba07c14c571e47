// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_udp_self_loop.c - frames a UDP transport sends to its own node (a
 * co-located aggregator shard and the worker beside it) skip the kernel:
 *   - they arrive whole, once and in order, beside frames from a peer,
 *     counted in loop_pkts and not in the wire's tx_pkts and rx_pkts
 *     (sendmmsg, wrapped, never sees them);
 *   - tx_flush reports them as sent, once, so a poll loop does not
 *     sleep while they wait for its next rx_burst;
 *   - their tx buffers come back on rx_release: many times the pool
 *     goes round, and a receiver that holds them runs the pool dry
 *     (tx_drops) rather than overwriting them;
 *   - TALLY_UDP_SELF_LOOP=off, and the link emulator, send them through
 *     the kernel as before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dataplane/transport/transport.h"
#include "udp_frames.h"
#include "tp_nodes.h"

#define N_NODES 2
#define MTU 1500
#define FROM_PEER 0x10000u	/* seq bit: sent by node 1, not node 0 */
/* the UDP transport's tx buffers (dataplane/transport/udp.h) */
#define TX_BUFS 1024

static struct tly_addr addrs[N_NODES];

/* open node @self with TALLY_UDP_SELF_LOOP=@loop (NULL: unset) */
static void open_node(struct transport *tp, uint16_t self, const char *loop,
		      uint64_t emu_rate_bps)
{
	struct transport_config c = {
		.kind = "udp", .self = self, .n_nodes = N_NODES,
		.addrs = addrs, .mtu = MTU,
		.emu = { .rate_bps = emu_rate_bps },
	};

	if (loop)
		setenv("TALLY_UDP_SELF_LOOP", loop, 1);
	tp_track(tp);
	assert_int_equal(transport_open(tp, &c), 0);
	unsetenv("TALLY_UDP_SELF_LOOP");
}

static int close_all(void **state)
{
	memset(&uf_mmsg, 0, sizeof(uf_mmsg));
	return tp_close_all(state);
}

static uint16_t frame_len(uint32_t seq)
{
	return (uint16_t)(8 + (seq * 97) % (MTU - 28 - 8));
}

/* receive until @n_self frames from node 0 itself and @n_peer from node 1
 * came, each stream in order and whole; nothing more */
static void recv_both(struct transport *tp, uint32_t n_self, uint32_t n_peer)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t end = transport_now_ns() + 2000 * UF_MS;
	uint32_t got_self = 0, got_peer = 0;

	while ((got_self < n_self || got_peer < n_peer) &&
	       transport_now_ns() < end) {
		int k = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);

		for (int i = 0; i < k; i++) {
			uint32_t seq = uf_check(rx[i].data, rx[i].len, 0);

			assert_int_equal(rx[i].len, frame_len(seq));
			if (seq & FROM_PEER)
				assert_int_equal(seq, FROM_PEER | got_peer++);
			else
				assert_int_equal(seq, got_self++);
		}
		if (k > 0)
			transport_rx_release(tp, rx, k);
		else
			transport_idle_wait(tp, transport_now_ns(), UF_MS);
	}
	assert_int_equal(got_self, n_self);
	assert_int_equal(got_peer, n_peer);
	uf_assert_no_more(tp);
}

/*
 * Node 0 sends @n frames to itself and @n to node 1, interleaved; node 1
 * sends @n / 3 to node 0.  Returns what node 0's first flush reported.
 */
static int exchange(struct transport *a, struct transport *b, uint32_t n,
		    struct uf_expect *eb)
{
	int flushed;

	for (uint32_t i = 0; i < n; i++) {
		uf_send(a, 0, i, frame_len(i));
		eb->len[eb->n] = frame_len(eb->n);
		uf_send(a, 1, eb->n, frame_len(eb->n));
		eb->n++;
	}
	for (uint32_t i = 0; i < n / 3; i++)
		uf_send(b, 0, FROM_PEER | i, frame_len(FROM_PEER | i));
	flushed = transport_tx_flush(a, transport_now_ns());
	assert_int_equal(transport_tx_flush(b, transport_now_ns()),
			 (int)(n / 3));
	return flushed;
}

static void test_self_frames_skip_the_kernel(void **state)
{
	static struct transport a, b;
	static struct uf_expect eb;
	const uint32_t n = 300;
	uint32_t segs = 0;

	(void)state;
	memset(&eb, 0, sizeof(eb));
	open_node(&a, 0, NULL, 0);
	open_node(&b, 1, NULL, 0);
	memset(&uf_mmsg, 0, sizeof(uf_mmsg));
	/* both kinds count as sent: the looped ones once */
	assert_int_equal(exchange(&a, &b, n, &eb), (int)(2 * n));
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 0);
	recv_both(&a, n, n / 3);
	uf_recv_expected(&b, &eb);
	assert_int_equal(a.stats.loop_pkts, n);
	assert_int_equal(a.stats.tx_pkts, n);
	assert_int_equal(a.stats.rx_pkts, n / 3);
	assert_int_equal(a.stats.tx_drops, 0);
	assert_int_equal(b.stats.loop_pkts, 0);
	/* the kernel saw node 0's frames to node 1 and node 1's only */
	for (uint32_t m = 0; m < uf_mmsg.msgs && m < 1024; m++)
		segs += uf_mmsg.segs[m];
	assert_int_equal(segs, n + n / 3);
}

static void test_self_loop_off(void **state)
{
	static struct transport a, b;
	static struct uf_expect eb;
	const uint32_t n = 300;

	(void)state;
	memset(&eb, 0, sizeof(eb));
	open_node(&a, 0, "off", 0);
	open_node(&b, 1, NULL, 0);
	assert_int_equal(exchange(&a, &b, n, &eb), (int)(2 * n));
	recv_both(&a, n, n / 3);
	uf_recv_expected(&b, &eb);
	assert_int_equal(a.stats.loop_pkts, 0);
	assert_int_equal(a.stats.tx_pkts, 2 * n);
	assert_int_equal(a.stats.rx_pkts, n + n / 3);
}

/* the emulator models the node's port: every frame crosses it */
static void test_no_self_loop_under_the_emulator(void **state)
{
	static struct transport a, b;
	static struct uf_expect eb;
	const uint32_t n = 60;
	uint64_t end;

	(void)state;
	memset(&eb, 0, sizeof(eb));
	open_node(&a, 0, NULL, 10000000000ull);
	open_node(&b, 1, NULL, 0);
	exchange(&a, &b, n, &eb);
	/* the emulated port lets them out at its rate */
	end = transport_now_ns() + 2000 * UF_MS;
	while (transport_emu_next_due(&a) != UINT64_MAX &&
	       transport_now_ns() < end)
		transport_tx_flush(&a, transport_now_ns());
	assert_int_equal(transport_emu_next_due(&a), UINT64_MAX);
	recv_both(&a, n, n / 3);
	uf_recv_expected(&b, &eb);
	assert_int_equal(a.stats.loop_pkts, 0);
	assert_int_equal(a.stats.tx_pkts, 2 * n);
}

/* many rounds through the pool: every looped buffer comes back */
static void test_self_loop_buffers_come_back(void **state)
{
	static struct transport a;
	const uint32_t round = 700, rounds = 8;
	uint32_t seq = 0;

	(void)state;
	open_node(&a, 0, NULL, 0);
	for (uint32_t r = 0; r < rounds; r++) {
		struct transport_rx rx[TRANSPORT_RX_BURST];
		uint32_t first = seq, got = 0;

		for (uint32_t i = 0; i < round; i++, seq++)
			uf_send(&a, 0, seq, frame_len(seq));
		assert_int_equal(transport_tx_flush(&a, transport_now_ns()),
				 (int)round);
		while (got < round) {
			int k = transport_rx_burst(&a, rx, TRANSPORT_RX_BURST);

			assert_true(k > 0);
			for (int i = 0; i < k; i++)
				assert_int_equal(uf_check(rx[i].data,
							  rx[i].len, 0),
						 first + got++);
			transport_rx_release(&a, rx, k);
		}
	}
	assert_int_equal(a.stats.loop_pkts, round * rounds);
	assert_int_equal(a.stats.tx_drops, 0);
	assert_int_equal(a.stats.tx_pkts, 0);
}

/* a receiver that holds its looped frames runs the tx pool dry: the
 * next alloc fails (counted), nothing held is overwritten, and the
 * release gives every buffer back */
static void test_held_self_frames_hold_their_buffers(void **state)
{
	static struct transport a;
	static struct transport_rx held[TX_BUFS];
	struct tly_tx_ops ops;
	uint32_t n_held = 0;

	(void)state;
	open_node(&a, 0, NULL, 0);
	ops = transport_tx_ops(&a);
	for (uint32_t i = 0; i < TX_BUFS; i++)
		uf_send(&a, 0, i, frame_len(i));
	transport_tx_flush(&a, transport_now_ns());
	while (n_held < TX_BUFS) {
		int k = transport_rx_burst(&a, held + n_held,
					   TRANSPORT_RX_BURST);

		assert_true(k > 0);
		n_held += (uint32_t)k;
	}
	assert_null(ops.alloc(ops.ctx, 64));
	assert_int_equal(a.stats.tx_drops, 1);
	for (uint32_t i = 0; i < TX_BUFS; i++)
		assert_int_equal(uf_check(held[i].data, held[i].len, 0), i);
	transport_rx_release(&a, held, (int)n_held);
	for (uint32_t i = 0; i < TX_BUFS; i++)
		assert_non_null(ops.alloc(ops.ctx, 64));
	assert_null(ops.alloc(ops.ctx, 64));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_self_frames_skip_the_kernel,
					  close_all),
		cmocka_unit_test_teardown(test_self_loop_off, close_all),
		cmocka_unit_test_teardown(test_no_self_loop_under_the_emulator,
					  close_all),
		cmocka_unit_test_teardown(test_self_loop_buffers_come_back,
					  close_all),
		cmocka_unit_test_teardown(
			test_held_self_frames_hold_their_buffers, close_all),
	};

	/* addresses no other transport test binds (127.0.0.2-5 are
	 * theirs), so the suites may run side by side */
	tp_loopback_addrs(addrs, N_NODES, 9000);
	for (int i = 0; i < N_NODES; i++)
		addrs[i].ip = 0x7f000020u + (uint32_t)i;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
