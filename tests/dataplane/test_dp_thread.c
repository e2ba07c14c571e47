// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_dp_thread.c - a dataplane thread over a UDP transport on the
 * loopback, without an engine: tensors submitted to it come back through
 * the completion ring (status -ENODEV: no worker) and wake a control side
 * sleeping on the completion eventfd; pause and resume are acknowledged
 * every time while the thread polls, sleeps and receives frames; the
 * published counters only grow; stop joins it.  Every wait is bounded.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/dp_thread.h"

#define WAIT_MS 10000
#define PAUSE_NS (5000 * 1000000ull)

static struct tly_addr addrs[2];

static void open_udp(struct transport *tp)
{
	struct transport_config c = {
		.kind = "udp", .self = 0, .n_nodes = 1, .addrs = addrs,
		.mtu = 1500,
	};

	addrs[0].ip = 0x7f000001;
	addrs[0].port = 0;
	assert_int_equal(transport_open(tp, &c), 0);
}

/* Sleep as the control thread does, until a completion (bounded). */
static int wait_completion(struct dp_thread *t, struct dp_completion *c)
{
	for (;;) {
		struct pollfd pfd = { .fd = dp_thread_completion_fd(t),
				      .events = POLLIN };

		dp_thread_completion_awake(t);
		if (dp_thread_complete(t, c))
			return 0;
		if (dp_thread_completion_sleep(t))
			continue;
		if (poll(&pfd, 1, WAIT_MS) == 0)
			return -ETIMEDOUT;	/* a lost wake-up */
	}
}

static void test_completions_without_engine(void **state)
{
	struct transport tp;
	struct dp_thread_cfg cfg = { .tp = &tp, .cpu = -1, .spin_ns = 0 };
	struct dp_thread *t;
	char err[160];

	(void)state;
	open_udp(&tp);
	t = dp_thread_start(&cfg, err, sizeof(err));
	assert_non_null(t);
	for (uint32_t i = 0; i < 2000; i++) {
		struct tly_tensor_desc d = { .id = i, .count = 1,
					     .user = (void *)(uintptr_t)(i + 7) };
		struct dp_completion c;

		assert_int_equal(dp_thread_submit(t, &d), 0);
		dp_thread_kick(t);
		assert_int_equal(wait_completion(t, &c), 0);
		assert_int_equal(c.id, i);
		assert_int_equal(c.user, i + 7);
		assert_int_equal(c.status, -ENODEV);
	}
	dp_thread_stop(t);
	transport_close(&tp);
}

static void test_pause_resume(void **state)
{
	struct transport tp, peer;
	struct dp_thread_cfg cfg = { .tp = &tp, .cpu = -1, .spin_ns = 20000 };
	struct dp_stats a, b;
	struct dp_thread *t;
	struct tly_addr to[2];
	char err[160];

	(void)state;
	open_udp(&tp);
	open_udp(&peer);
	to[0] = (struct tly_addr){ .ip = 0x7f000001, .port = peer.local_port };
	to[1] = (struct tly_addr){ .ip = 0x7f000001, .port = tp.local_port };
	assert_int_equal(transport_set_nodes(&peer, 0, 2, to), 0);
	t = dp_thread_start(&cfg, err, sizeof(err));
	assert_non_null(t);
	dp_thread_stats(t, &a);
	for (int i = 0; i < 500; i++) {
		uint8_t *f = transport_tx_ops(&peer).alloc(&peer, 64);

		/* frames keep the thread busy part of the time */
		if (f) {
			memset(f, 0, 64);
			transport_tx_ops(&peer).send(&peer, 1, f, 64);
			transport_tx_flush(&peer, transport_now_ns());
		}
		assert_int_equal(dp_thread_pause(t, PAUSE_NS), 0);
		/* paused: the transport is ours */
		assert_int_equal(transport_tx_pending(&tp), 0);
		dp_thread_resume(t);
		dp_thread_stats(t, &b);
		assert_true(b.turns >= a.turns);
		assert_true(b.tp.rx_pkts >= a.tp.rx_pkts);
		a = b;
	}
	assert_int_equal(dp_thread_pause(t, PAUSE_NS), 0);
	dp_thread_stats(t, &b);
	assert_true(b.turns > 0);
	assert_true(b.tp.rx_pkts > 0);
	dp_thread_resume(t);
	dp_thread_stop(t);
	transport_close(&peer);
	transport_close(&tp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_completions_without_engine),
		cmocka_unit_test(test_pause_resume),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
