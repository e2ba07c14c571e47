// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_udp_netns.c - the UDP transport's offloads through a real device:
 * a veth pair between two network namespaces (10.97.0.1 and .2).  Needs
 * root (suite 'integration').
 *
 * One process: each transport is opened while the thread is in its
 * namespace (a socket stays in the namespace it was made in), then the
 * thread returns to its own.  Checked:
 *   - runs of mixed lengths both ways arrive exactly (order, length,
 *     every byte), for each pairing of an offloading and a plain side;
 *     with both offloading the runs cross veth as GSO packets and arrive
 *     coalesced;
 *   - a route whose MTU is below the frames (veth MTU 1000, frames of
 *     1200): the kernel refuses GSO (EINVAL), the run goes out one by one
 *     (IP fragments), GSO is turned off for the socket, nothing is lost.
 *   - whole frames only (no_fragments, the switch profile): open refuses
 *     a frame size the route's MTU cannot carry and takes one it can;
 *     set_nodes refuses such a table and keeps the old one; a frame too
 *     long for a route that shrank after open is never sent as
 *     fragments (the sender counts it dropped, the peer gets nothing).
 *   - the result group: a transport opened with a multicast group joins
 *     it on its interface; datagrams a plain socket of the other
 *     namespace sends to the group arrive through rx_burst next to the
 *     unicast ones, and wake its wait fd;
 *   - sending to it (group_send, an aggregator's RESULT to all): the tx
 *     ops' multicast puts each frame once on the wire, in GSO runs, and
 *     the member in the other namespace gets every one whole and in
 *     order; the sender's own copy comes through its self loop, never
 *     twice through the kernel; an aggregator that is no worker
 *     (group_send_only) joins nothing and gets none back.
 * The namespaces are deleted in teardown, at exit and on SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
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

static char ns_name[2][64], if_name[2][16];
static bool ns_made;
static int ns_fd[2] = { -1, -1 }, home_fd = -1;
static struct tly_addr addrs[2] = {
	{ { 0 }, 0x0a610001, 47101 },
	{ { 0 }, 0x0a610002, 47102 },
};

static int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void ns_delete(void)
{
	int i;

	if (!ns_made)
		return;
	for (i = 0; i < 2; i++) {
		if (ns_fd[i] >= 0)
			close(ns_fd[i]);
		ns_fd[i] = -1;
		/* deleting a namespace destroys the veth end inside it */
		sh("ip netns del %s 2>/dev/null", ns_name[i]);
	}
	ns_made = false;
}

/* meson's timeout sends SIGTERM: the namespaces must go anyway */
static void on_signal(int sig)
{
	ns_delete();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int set_mtu(unsigned int mtu)
{
	int i;

	for (i = 0; i < 2; i++)
		if (sh("ip -n %s link set %s mtu %u", ns_name[i], if_name[i],
		       mtu))
			return -1;
	return 0;
}

static int ns_setup(void **state)
{
	static const char *const side = "ab";
	char path[128];
	int i;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "test_udp_netns: needs root (ip netns, veth)\n");
		return -1;
	}
	for (i = 0; i < 2; i++) {
		snprintf(ns_name[i], sizeof(ns_name[i]), "tally-un-%d-%c",
			 (int)getpid(), side[i]);
		snprintf(if_name[i], sizeof(if_name[i]), "un%c%d", side[i],
			 (int)getpid() % 1000000);
	}
	atexit(ns_delete);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	ns_made = true;
	if (sh("ip netns add %s", ns_name[0]) ||
	    sh("ip netns add %s", ns_name[1]) ||
	    sh("ip link add %s type veth peer name %s", if_name[0],
	       if_name[1]))
		goto fail;
	for (i = 0; i < 2; i++) {
		uint32_t ip = addrs[i].ip;

		if (sh("ip link set %s netns %s", if_name[i], ns_name[i]) ||
		    sh("ip -n %s addr add %u.%u.%u.%u/24 dev %s", ns_name[i],
		       ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff,
		       ip & 0xff, if_name[i]) ||
		    sh("ip -n %s link set %s up", ns_name[i], if_name[i]))
			goto fail;
		snprintf(path, sizeof(path), "/var/run/netns/%s", ns_name[i]);
		ns_fd[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (ns_fd[i] < 0)
			goto fail;
	}
	home_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home_fd < 0)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "test_udp_netns: namespace/veth setup failed\n");
	ns_delete();
	return -1;
}

static int ns_teardown(void **state)
{
	(void)state;
	ns_delete();
	if (home_fd >= 0)
		close(home_fd);
	home_fd = -1;
	return 0;
}

static int close_all(void **state)
{
	memset(&uf_mmsg, 0, sizeof(uf_mmsg));
	return tp_close_all(state);
}

/* open node @self inside its namespace with TALLY_UDP_OFFLOAD=@mode */
static void open_node(struct transport *tp, uint16_t self, const char *mode)
{
	struct transport_config c = {
		.kind = "udp", .self = self, .n_nodes = 2, .addrs = addrs,
		.mtu = 1500,
	};
	int ret;

	setenv("TALLY_UDP_OFFLOAD", mode, 1);
	assert_int_equal(setns(ns_fd[self], CLONE_NEWNET), 0);
	ret = transport_open(tp, &c);
	assert_int_equal(setns(home_fd, CLONE_NEWNET), 0);
	unsetenv("TALLY_UDP_OFFLOAD");
	assert_int_equal(ret, 0);
	tp_track(tp);
}

/* both ways, rounds of at least 200 frames in random runs */
static void exchange(const char *mode_a, const char *mode_b)
{
	static struct transport a, b;
	static struct uf_expect ea, eb;
	uint64_t s = 7, bytes_ab = 0, bytes_ba = 0;
	uint32_t round, n_ab = 0, n_ba = 0, q;

	memset(&ea, 0, sizeof(ea));
	memset(&eb, 0, sizeof(eb));
	open_node(&a, 0, mode_a);
	open_node(&b, 1, mode_b);
	for (round = 0; round < 10; round++) {
		q = uf_queue_random_runs(&a, 1, &eb, 200, 1472, &s, &bytes_ab);
		assert_int_equal(transport_tx_flush(&a, transport_now_ns()),
				 (int)q);
		n_ab += q;
		q = uf_queue_random_runs(&b, 0, &ea, 200, 1472, &s, &bytes_ba);
		assert_int_equal(transport_tx_flush(&b, transport_now_ns()),
				 (int)q);
		n_ba += q;
		uf_recv_expected(&b, &eb);
		uf_recv_expected(&a, &ea);
	}
	uf_assert_no_more(&a);
	uf_assert_no_more(&b);
	assert_int_equal(a.stats.tx_pkts, n_ab);
	assert_int_equal(a.stats.tx_bytes, bytes_ab);
	assert_int_equal(b.stats.rx_pkts, n_ab);
	assert_int_equal(b.stats.rx_bytes, bytes_ab);
	assert_int_equal(b.stats.tx_pkts, n_ba);
	assert_int_equal(a.stats.rx_pkts, n_ba);
	assert_int_equal(a.stats.tx_drops + b.stats.tx_drops, 0);
	assert_int_equal(a.stats.rx_drops + b.stats.rx_drops, 0);
	if (!strcmp(mode_a, "on") && !strcmp(mode_b, "on")) {
		assert_true(uf_mmsg.gso_msgs > 0);
		assert_true(eb.contiguous > eb.n / 2);
		assert_true(ea.contiguous > ea.n / 2);
	}
	if (!strcmp(mode_a, "off") && !strcmp(mode_b, "off"))
		assert_int_equal(uf_mmsg.gso_tries, 0);
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

static void test_exchange_on_off(void **state)
{
	(void)state;
	exchange("on", "off");
}

static void test_exchange_off_on(void **state)
{
	(void)state;
	exchange("off", "on");
}

static void test_small_mtu_fallback(void **state)
{
	static struct transport a, b;
	static struct uf_expect e;
	uint32_t i;

	(void)state;
	memset(&e, 0, sizeof(e));
	assert_int_equal(set_mtu(1000), 0);
	open_node(&a, 0, "on");
	open_node(&b, 1, "on");
	for (i = 0; i < 100; i++) {
		e.len[e.n] = 1200;
		uf_send(&a, 1, e.n++, 1200);
	}
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 100);
	assert_int_equal(uf_mmsg.gso_tries, 1);
	assert_int_equal(uf_mmsg.gso_msgs, 0);
	uf_recv_expected(&b, &e);
	/* off for good on this socket */
	for (i = 0; i < 50; i++) {
		e.len[e.n] = 1200;
		uf_send(&a, 1, e.n++, 1200);
	}
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 50);
	assert_int_equal(uf_mmsg.gso_tries, 1);
	uf_recv_expected(&b, &e);
	uf_assert_no_more(&b);
	assert_int_equal(a.stats.tx_drops, 0);
	assert_int_equal(b.stats.rx_pkts, 150);
	assert_int_equal(set_mtu(1500), 0);
}

/* node @self with whole frames only, frames of @mtu bytes, the table
 * @t of @n nodes; transport_open()'s return */
static int open_whole(struct transport *tp, uint16_t self, uint32_t mtu,
		      const struct tly_addr *t, uint16_t n)
{
	struct transport_config c = {
		.kind = "udp", .self = self, .n_nodes = n, .addrs = t,
		.mtu = mtu, .no_fragments = true,
	};
	int ret;

	assert_int_equal(setns(ns_fd[self], CLONE_NEWNET), 0);
	ret = transport_open(tp, &c);
	assert_int_equal(setns(home_fd, CLONE_NEWNET), 0);
	if (!ret)
		tp_track(tp);
	return ret;
}

/* transport_set_nodes() in node @self's namespace, where a daemon calls
 * it (the routes are looked up in the caller's) */
static int set_nodes_in(struct transport *tp, uint16_t self,
			const struct tly_addr *t)
{
	int ret;

	assert_int_equal(setns(ns_fd[self], CLONE_NEWNET), 0);
	ret = transport_set_nodes(tp, self, 2, t);
	assert_int_equal(setns(home_fd, CLONE_NEWNET), 0);
	return ret;
}

static void test_whole_frames(void **state)
{
	static struct transport a, b;
	struct tly_addr half[2] = { addrs[0], { { 0 }, 0, 0 } };
	uint32_t i;

	(void)state;
	assert_int_equal(set_mtu(1000), 0);
	/* a frame's IP packet is its length less Ethernet's 14 bytes */
	assert_int_equal(open_whole(&a, 0, 1015, addrs, 2), -EMSGSIZE);
	assert_int_equal(open_whole(&a, 0, 1014, addrs, 2), 0);
	transport_close(&a);
	/* a node not known yet is not checked; set_nodes checks it */
	assert_int_equal(open_whole(&a, 0, 1200, half, 2), 0);
	assert_int_equal(set_nodes_in(&a, 0, addrs), -EMSGSIZE);
	assert_int_equal(a.cfg.addrs[1].ip, 0);
	transport_close(&a);
	assert_int_equal(set_mtu(1500), 0);
	assert_int_equal(open_whole(&a, 0, 1200, half, 2), 0);
	assert_int_equal(set_nodes_in(&a, 0, addrs), 0);
	assert_int_equal(open_whole(&b, 1, 1200, addrs, 2), 0);
	/* the route shrinks after open: DF, so nothing leaves as fragments */
	assert_int_equal(set_mtu(1000), 0);
	for (i = 0; i < 20; i++)
		uf_send(&a, 1, i, 1200);
	transport_tx_flush(&a, transport_now_ns());
	assert_int_equal(a.stats.tx_drops, 20);
	usleep(20000);
	uf_assert_no_more(&b);
	assert_int_equal(b.stats.rx_pkts, 0);
	assert_int_equal(set_mtu(1500), 0);
}

#define GROUP_IP	0xef610203u	/* 239.97.2.3 */
#define GROUP_PORT	47200

/* a datagram of @len bytes, each byte @tag, from namespace a to the group */
static void group_send(int fd, uint8_t tag, size_t len)
{
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_port = htons(GROUP_PORT),
				  .sin_addr.s_addr = htonl(GROUP_IP) };
	uint8_t buf[256];

	memset(buf, tag, len);
	assert_int_equal(sendto(fd, buf, len, 0, (struct sockaddr *)&to,
				sizeof(to)), (ssize_t)len);
}

static void test_result_group(void **state)
{
	static struct transport a, b;
	struct transport_config c = {
		.kind = "udp", .self = 1, .n_nodes = 2, .addrs = addrs,
		.mtu = 1500, .group_ip = GROUP_IP, .group_port = GROUP_PORT,
	};
	struct in_addr ifa = { .s_addr = htonl(addrs[0].ip) };
	struct transport_rx rx[8];
	unsigned int seen[3] = { 0 }, i;
	struct pollfd pfd;
	uint64_t t0;
	int fd, n, ret;

	(void)state;
	open_node(&a, 0, "off");
	assert_int_equal(setns(ns_fd[1], CLONE_NEWNET), 0);
	ret = transport_open(&b, &c);
	assert_int_equal(setns(ns_fd[0], CLONE_NEWNET), 0);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_int_equal(setns(home_fd, CLONE_NEWNET), 0);
	assert_int_equal(ret, 0);
	tp_track(&b);
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa,
				    sizeof(ifa)), 0);
	/* nothing yet: the wait fd is quiet */
	pfd = (struct pollfd){ .fd = b.ops->wait_fd(&b), .events = POLLIN };
	assert_true(pfd.fd >= 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	group_send(fd, 0xa1, 100);
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	group_send(fd, 0xa2, 120);
	uf_send(&a, 1, 0, 80);		/* and a unicast frame */
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 1);
	t0 = transport_now_ns();
	while (seen[0] + seen[1] + seen[2] < 3 &&
	       transport_now_ns() - t0 < 2000000000ull) {
		n = transport_rx_burst(&b, rx, 8);
		for (i = 0; i < (unsigned int)n; i++) {
			if (rx[i].len == 100 && rx[i].data[0] == 0xa1 &&
			    rx[i].data[99] == 0xa1)
				seen[0]++;
			else if (rx[i].len == 120 && rx[i].data[0] == 0xa2 &&
				 rx[i].data[119] == 0xa2)
				seen[1]++;
			else if (rx[i].len == 80)
				seen[2]++;
			else
				fail_msg("unexpected frame of %u bytes",
					 (unsigned int)rx[i].len);
		}
		transport_rx_release(&b, rx, n);
		if (!n)
			poll(&pfd, 1, 10);
	}
	assert_int_equal(seen[0], 1);
	assert_int_equal(seen[1], 1);
	assert_int_equal(seen[2], 1);
	assert_int_equal(b.stats.rx_pkts, 3);
	close(fd);
}

/* frames to the group carry dst TLY_RANK_ALL: the same bytes for all */
#define GROUP_DST	0xffff

/* @n frames of @len through the multicast of @a's tx ops, to @mask */
static void multicast_frames(struct transport *a, uint64_t mask, uint32_t n,
			     uint16_t len)
{
	struct tly_tx_ops ops = transport_tx_ops(a);
	uint32_t i;

	assert_non_null(ops.multicast);
	assert_int_equal(ops.multicast_group, 1);
	for (i = 0; i < n; i++) {
		uint8_t *f = ops.alloc(ops.ctx, len);

		assert_non_null(f);
		uf_fill(f, i, GROUP_DST, len);
		ops.multicast(ops.ctx, mask, f, len);
	}
}

/* receive @n frames of @len in order (seq 0..n-1) within 2 s */
static void recv_group_frames(struct transport *tp, uint32_t n, uint16_t len)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t t0 = transport_now_ns();
	uint32_t got = 0;
	int i, k;

	while (got < n && transport_now_ns() - t0 < 2000 * UF_MS) {
		k = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (i = 0; i < k; i++) {
			assert_int_equal(rx[i].len, len);
			assert_int_equal(uf_check(rx[i].data, rx[i].len,
						  GROUP_DST), got);
			got++;
		}
		transport_rx_release(tp, rx, k);
		if (!k)
			usleep(1000);
	}
	assert_int_equal(got, n);
}

static void open_group_node(struct transport *tp, uint16_t self, bool send,
			    bool send_only)
{
	struct transport_config c = {
		.kind = "udp", .self = self, .n_nodes = 2, .addrs = addrs,
		.mtu = 1500, .group_ip = GROUP_IP, .group_port = GROUP_PORT,
		.group_send = send, .group_send_only = send_only,
	};
	int ret;

	assert_int_equal(setns(ns_fd[self], CLONE_NEWNET), 0);
	ret = transport_open(tp, &c);
	assert_int_equal(setns(home_fd, CLONE_NEWNET), 0);
	assert_int_equal(ret, 0);
	tp_track(tp);
}

static void test_group_send(void **state)
{
	static struct transport a, b;
	const uint32_t n = 300;

	(void)state;
	memset(&uf_mmsg, 0, sizeof(uf_mmsg));
	open_group_node(&a, 0, true, false);	/* a co-located aggregator */
	open_group_node(&b, 1, false, false);	/* a worker */
	/* without group_send no multicast: one frame a worker */
	assert_null(transport_tx_ops(&b).multicast);
	multicast_frames(&a, 3, n, 1044);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()),
			 (int)(2 * n));
	recv_group_frames(&b, n, 1044);
	recv_group_frames(&a, n, 1044);
	uf_assert_no_more(&a);
	uf_assert_no_more(&b);
	/* once on the wire, in runs; our own copy looped, not the kernel's */
	assert_int_equal(a.stats.group_pkts, n);
	assert_int_equal(a.stats.group_bytes, (uint64_t)n * 1044);
	assert_int_equal(a.stats.tx_pkts, n);
	assert_int_equal(a.stats.loop_pkts, n);
	assert_int_equal(a.stats.rx_pkts, 0);
	assert_int_equal(b.stats.rx_pkts, n);
	assert_true(uf_mmsg.gso_msgs > 0);
	assert_true(uf_mmsg.msgs < n / 4);
	assert_int_equal(a.stats.tx_drops + b.stats.tx_drops, 0);
}

/* an aggregator that is no worker: sends to the group, gets nothing */
static void test_group_send_only(void **state)
{
	static struct transport a, b;

	(void)state;
	open_group_node(&a, 0, true, true);
	open_group_node(&b, 1, false, false);
	multicast_frames(&a, 2, 50, 600);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 50);
	recv_group_frames(&b, 50, 600);
	uf_assert_no_more(&a);
	assert_int_equal(a.stats.loop_pkts + a.stats.rx_pkts, 0);
	assert_int_equal(a.stats.group_pkts, 50);
}

/* group_send needs a group, and a backend that can */
static void test_group_send_refused(void **state)
{
	static struct transport a;
	struct transport_config c = {
		.kind = "udp", .self = 0, .n_nodes = 2, .addrs = addrs,
		.mtu = 1500, .group_send = true,
	};
	int ret;

	(void)state;
	assert_int_equal(setns(ns_fd[0], CLONE_NEWNET), 0);
	ret = transport_open(&a, &c);
	assert_int_equal(setns(home_fd, CLONE_NEWNET), 0);
	assert_int_equal(ret, -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_exchange_on_on, close_all),
		cmocka_unit_test_teardown(test_exchange_off_off, close_all),
		cmocka_unit_test_teardown(test_exchange_on_off, close_all),
		cmocka_unit_test_teardown(test_exchange_off_on, close_all),
		cmocka_unit_test_teardown(test_small_mtu_fallback, close_all),
		cmocka_unit_test_teardown(test_whole_frames, close_all),
		cmocka_unit_test_teardown(test_result_group, close_all),
		cmocka_unit_test_teardown(test_group_send, close_all),
		cmocka_unit_test_teardown(test_group_send_only, close_all),
		cmocka_unit_test_teardown(test_group_send_refused, close_all),
	};

	return cmocka_run_group_tests(tests, ns_setup, ns_teardown);
}
