// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_rdma_transport.c - the verbs transport on a real (soft-RoCE)
 * device: three transports in one process on one rxe port exchange
 * frames both ways and to themselves (order, contents, lengths),
 * back-pressure past the send queue, wait_fd wake-ups, the link emulator's
 * loss on top, and the errors open reports (no such device, a GID that is
 * not the daemon's address, packets larger than the path MTU).
 *
 * Runs inside the QEMU guest of tests/rdma/run-qemu.sh: the device is
 * $TALLY_RDMA_DEVICE (default rxe0) with RoCEv2 GID index 1 mapping
 * $TALLY_RDMA_IP (default 10.0.0.1).
 */
#include <arpa/inet.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>

#include "dataplane/transport/transport.h"
#include "frames.h"

#define MS 1000000ull
#define N_NODES 3
#define MTU 2048

static struct tly_addr addrs[N_NODES];
static const char *dev;
static uint32_t ip;

static struct transport *opened[8];
static int n_opened;

static int close_all(void **state)
{
	(void)state;
	while (n_opened)
		transport_close(opened[--n_opened]);
	return 0;
}

static struct transport_config node_cfg(uint16_t self)
{
	struct transport_config c = {
		.kind = "rdma", .self = self, .n_nodes = N_NODES,
		.addrs = addrs, .mtu = MTU, .rdma_device = dev,
		.rdma_gid_index = 1,
	};

	return c;
}

/* open every node, then give all of them the table with the QPNs */
static void open_nodes(struct transport *tp, int n,
		       const struct link_emu_config *emu)
{
	int i;

	memset(addrs, 0, sizeof(addrs));
	for (i = 0; i < N_NODES; i++)
		addrs[i].ip = ip;
	for (i = 0; i < n; i++) {
		struct transport_config c = node_cfg((uint16_t)i);

		if (emu)
			c.emu = *emu;
		opened[n_opened++] = &tp[i];
		assert_int_equal(transport_open(&tp[i], &c), 0);
		assert_false(tp[i].full_frames);
		assert_true(tp[i].has_local_mac);
		assert_true(tp[i].ops->wait_fd(&tp[i]) >= 0);
		memcpy(addrs[i].mac, tp[i].local_mac, 6);
	}
	for (i = 0; i < n; i++)
		assert_int_equal(transport_set_nodes(&tp[i], (uint16_t)i,
						     N_NODES, addrs), 0);
}

static void test_exchange(void **state)
{
	static struct transport tp[N_NODES];
	static uint32_t s1[1200], s2[1200], s0[1200];
	uint32_t n1 = 0, n2 = 0, n0 = 0;

	(void)state;
	open_nodes(tp, N_NODES, NULL);
	for (uint32_t round = 0; round < 6; round++) {
		uint32_t f = round * 200;

		assert_int_equal(tp_send_frames(&tp[0], 1, f, 200), 200);
		assert_int_equal(tp_send_frames(&tp[0], 2, f, 200), 200);
		assert_int_equal(tp_send_frames(&tp[1], 0, f, 200), 200);
		assert_int_equal(transport_tx_pending(&tp[0]), 400);
		n1 += tp_recv_frames(&tp[1], &tp[0], s1 + n1, 200, 20000 * MS);
		n2 += tp_recv_frames(&tp[2], &tp[0], s2 + n2, 200, 20000 * MS);
		n0 += tp_recv_frames(&tp[0], &tp[1], s0 + n0, 200, 20000 * MS);
	}
	assert_int_equal(n1, 1200);
	assert_int_equal(n2, 1200);
	assert_int_equal(n0, 1200);
	/* one UD queue pair, one path: in order */
	for (uint32_t i = 0; i < 1200; i++) {
		assert_int_equal(s1[i], i);
		assert_int_equal(s2[i], i);
		assert_int_equal(s0[i], i);
	}
	assert_int_equal(tp[0].stats.tx_pkts, 2400);
	assert_int_equal(tp[1].stats.rx_pkts, 1200);
	assert_int_equal(tp[0].stats.tx_drops, 0);
	assert_int_equal(tp[0].stats.rx_drops, 0);
	close_all(NULL);
}

/* frames to ourselves go through the device too (co-located shards) */
static void test_self(void **state)
{
	static struct transport tp[1];
	uint32_t s[100];

	(void)state;
	open_nodes(tp, 1, NULL);
	assert_int_equal(tp_send_frames(&tp[0], 0, 0, 100), 100);
	assert_int_equal(tp_recv_frames(&tp[0], &tp[0], s, 100, 20000 * MS),
			 100);
	close_all(NULL);
}

/* more than the send queue holds: the rest waits, nothing is lost */
static void test_backpressure_and_wakeup(void **state)
{
	static struct transport tp[2];
	static uint32_t s[1024];
	struct pollfd pfd;
	uint32_t queued;

	(void)state;
	open_nodes(tp, 2, NULL);
	/* the pool holds 1024 buffers; past that alloc says no */
	queued = tp_send_frames(&tp[0], 1, 0, 1100);
	assert_int_equal(queued, 1024);
	assert_null(transport_tx_ops(&tp[0]).alloc(tp, MTU + 1));
	/* the send queue takes 256 at a time */
	assert_int_equal(transport_tx_flush(&tp[0], transport_now_ns()), 256);
	assert_true(transport_tx_pending(&tp[0]) == 1024 - 256);
	/* the receiver's fd wakes up once something arrived */
	pfd = (struct pollfd){ .fd = tp[1].ops->wait_fd(&tp[1]),
			       .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 20000), 1);
	assert_int_equal(tp_recv_frames(&tp[1], &tp[0], s, 1024, 60000 * MS),
			 1024);
	assert_int_equal(transport_tx_pending(&tp[0]), 0);
	for (uint32_t i = 0; i < 1024; i++)
		assert_int_equal(s[i], i);
	close_all(NULL);
}

/* the emulator applies over verbs too: 10 % loss is seen */
static void test_emulated_loss(void **state)
{
	static struct transport tp[2];
	static uint32_t s[2000];
	struct link_emu_config emu = { .loss_ppm = 100000, .seed = 7 };
	uint32_t got;

	(void)state;
	open_nodes(tp, 2, &emu);
	for (uint32_t f = 0; f < 2000; f += 250)
		assert_int_equal(tp_send_frames(&tp[0], 1, f, 250), 250);
	got = tp_recv_frames(&tp[1], &tp[0], s, 2000, 5000 * MS);
	print_message("10%% loss: %u of 2000 arrived, %llu lost\n", got,
		      (unsigned long long)tp[0].stats.emu_lost);
	assert_true(got >= 1600 && got <= 1900);
	assert_int_equal(got + tp[0].stats.emu_lost, 2000);
	close_all(NULL);
}

static void test_open_errors(void **state)
{
	static struct transport tp;
	struct transport_config c;

	(void)state;
	memset(addrs, 0, sizeof(addrs));
	addrs[0].ip = ip;
	c = node_cfg(0);
	c.n_nodes = 1;
	c.rdma_device = "no_such_rdma_dev";
	assert_int_equal(transport_open(&tp, &c), -ENODEV);
	/* a GID that is not our address */
	c = node_cfg(0);
	c.n_nodes = 1;
	addrs[0].ip = ip + 1;
	assert_int_equal(transport_open(&tp, &c), -EADDRNOTAVAIL);
	/* packets larger than the path MTU */
	addrs[0].ip = ip;
	c.mtu = 64000;
	assert_int_equal(transport_open(&tp, &c), -EMSGSIZE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_exchange, close_all),
		cmocka_unit_test_teardown(test_self, close_all),
		cmocka_unit_test_teardown(test_backpressure_and_wakeup,
					  close_all),
		cmocka_unit_test_teardown(test_emulated_loss, close_all),
		cmocka_unit_test_teardown(test_open_errors, close_all),
	};
	const char *s = getenv("TALLY_RDMA_IP");
	struct in_addr a;

	dev = getenv("TALLY_RDMA_DEVICE") ? getenv("TALLY_RDMA_DEVICE") :
					    "rxe0";
	if (inet_pton(AF_INET, s ? s : "10.0.0.1", &a) != 1)
		return 1;
	ip = ntohl(a.s_addr);
	tp_frames_init(1900, 5 * MS);	/* lengths within the MTU */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
