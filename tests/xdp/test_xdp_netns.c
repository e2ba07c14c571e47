// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_xdp_netns.c - the XDP aggregator on a real interface: a veth pair
 * in a fresh network namespace.  Needs root (suite 'integration').
 *
 * Checked: the kernel's verifier accepts the program (it loads), it
 * attaches in native mode to the veth end (the kernel reports the
 * program's id on the interface), a DATA frame sent from the peer end
 * through an AF_PACKET socket reaches it (its counters move) and, with
 * one worker, its RESULT comes back to the peer (XDP_TX; the peer runs a
 * pass-all XDP program, which veth needs for it) as one frame to the
 * multicast group; detach leaves the interface without a program, and
 * the program unloads.  The namespace is deleted in teardown, at exit
 * and on SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
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

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cmocka.h>

#include "dataplane/xdp/xdp_ctl.h"

#define PORT		47500
#define GROUP_IP	0xef070002u
#define GROUP_PORT	47501

static char ns_name[64];
static int ns_made, home_fd = -1, ns_fd = -1;
/* the peer's pass-all program (tly_xdp_attach_pass: veth's XDP_TX) */
static int pass_fd = -1;

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
	if (!ns_made)
		return;
	if (home_fd >= 0)
		setns(home_fd, CLONE_NEWNET);
	if (ns_fd >= 0)
		close(ns_fd);
	ns_fd = -1;
	sh("ip netns del %s 2>/dev/null", ns_name);
	ns_made = 0;
}

static void on_signal(int sig)
{
	ns_delete();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int setup(void **state)
{
	char path[128];

	(void)state;
	snprintf(ns_name, sizeof(ns_name), "tlyxdp%d", (int)getpid());
	atexit(ns_delete);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (sh("ip netns add %s", ns_name))
		return -1;
	ns_made = 1;
	if (sh("ip -n %s link add xa type veth peer name xb", ns_name) ||
	    sh("ip -n %s link set xa address 02:00:00:00:00:0a", ns_name) ||
	    sh("ip -n %s link set xb address 02:00:00:00:00:0b", ns_name) ||
	    sh("ip -n %s link set xa up", ns_name) ||
	    sh("ip -n %s link set xb up", ns_name))
		return -1;
	home_fd = open("/proc/self/ns/net", O_RDONLY);
	snprintf(path, sizeof(path), "/run/netns/%s", ns_name);
	ns_fd = open(path, O_RDONLY);
	if (home_fd < 0 || ns_fd < 0 || setns(ns_fd, CLONE_NEWNET))
		return -1;
	pass_fd = tly_xdp_attach_pass((int)if_nametoindex("xb"));
	return pass_fd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	ns_delete();
	return 0;
}

static uint32_t attached_id(int ifindex)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	assert_int_equal(bpf_xdp_query(ifindex, 0, &q), 0);
	return q.prog_id ? q.prog_id : (q.drv_prog_id ? q.drv_prog_id :
							q.skb_prog_id);
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	return info.id;
}

/* a DATA frame of the job from worker 0 (MAC of xb) to xa */
static uint32_t data_frame(uint8_t *f, const struct tly_xdp_job *j)
{
	struct tly_addr w = { { 2, 0, 0, 0, 0, 0x0b }, 0x0a630002, 47600 };
	struct tly_addr a = { { 2, 0, 0, 0, 0, 0x0a }, 0x0a630001, PORT };
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = TLY_F_INT, .job = j->job,
		.rank = 0, .tensor = 42, .chunk = 7, .cookie = j->cookie,
	};
	size_t i, tl = TLY_HDR_LEN + 4u * j->k;

	h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, 0, j->n_slots);
	tly_hdr_write(f + TLY_L2L4_LEN, &h);
	for (i = 0; i < j->k; i++)
		tly_put32(f + TLY_L2L4_LEN + TLY_HDR_LEN + 4 * i,
			  (uint32_t)(i * 3 + 1));
	tly_l2l4_write(f, &w, &a, 0, tl);
	return (uint32_t)(TLY_L2L4_LEN + tl);
}

static void test_attach_traffic_detach(void **state)
{
	struct tly_xdp_job j = {
		.cookie = 0x01020304, .job = 0x0777, .n_workers = 1, .k = 64,
		.port = PORT, .n_slots = 256, .group_ip = GROUP_IP,
		.group_port = GROUP_PORT,
	};
	uint8_t f[2048], r[2048];
	uint64_t v[TLY_XDP_C_COUNT];
	struct tly_xdp_prog_info info;
	struct sockaddr_ll sll = { 0 };
	struct tly_xdp_ctl *c;
	int xa, xb, s, id, got = 0, tries;
	uint32_t len;

	(void)state;
	xa = (int)if_nametoindex("xa");
	xb = (int)if_nametoindex("xb");
	assert_true(xa > 0 && xb > 0);
	assert_int_equal(tly_xdp_open(&c, 256), 0);
	assert_int_equal(tly_xdp_info(c, &info), 0);
	printf("verified: %u instructions (%u processed)\n",
	       info.xlated_insns, info.verified_insns);
	tly_group_mac(GROUP_IP, j.group_mac);
	assert_int_equal(tly_xdp_set_job(c, &j), 0);
	assert_int_equal(attached_id(xa), 0);
	assert_int_equal(tly_xdp_attach(c, xa, 0), 0);
	id = (int)prog_id(tly_xdp_prog_fd(c));
	assert_int_equal(attached_id(xa), id);

	/* a DATA from the peer; its RESULT comes back to the group */
	s = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	assert_true(s >= 0);
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = xb;
	assert_int_equal(bind(s, (struct sockaddr *)&sll, sizeof(sll)), 0);
	len = data_frame(f, &j);
	assert_int_equal(send(s, f, len, 0), (ssize_t)len);
	for (tries = 0; tries < 50 && !got; tries++) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		ssize_t n;
		size_t tl;

		if (poll(&p, 1, 20) <= 0)
			continue;
		n = recv(s, r, sizeof(r), 0);
		if (n < (ssize_t)TLY_L2L4_LEN ||
		    tly_l2l4_parse(r, (size_t)n, GROUP_PORT, &tl) != TLY_OK)
			continue;	/* our own frame, or the kernel's */
		assert_int_equal(r[TLY_L2L4_LEN] & 0x0f, TLY_T_RESULT);
		assert_int_equal(tly_get32(r + TLY_ETH_LEN + 16), GROUP_IP);
		assert_memory_equal(r + TLY_L2L4_LEN + TLY_HDR_LEN,
				    f + TLY_L2L4_LEN + TLY_HDR_LEN, 4u * j.k);
		got = 1;
	}
	close(s);
	assert_int_equal(tly_xdp_counters(c, v), 0);
	assert_int_equal(v[TLY_XDP_C_RX], 1);
	assert_int_equal(v[TLY_XDP_C_CLAIMS], 1);
	assert_int_equal(v[TLY_XDP_C_COMPLETIONS], 1);
	assert_true(got);

	assert_int_equal(tly_xdp_detach(c), 0);
	assert_int_equal(attached_id(xa), 0);
	tly_xdp_close(c);
	/* unloaded: nothing holds the program any more (freed after an
	 * RCU grace period) */
	for (tries = 0; tries < 100; tries++) {
		int fd = bpf_prog_get_fd_by_id((__u32)id);

		if (fd < 0)
			break;
		close(fd);
		usleep(10000);
	}
	assert_true(tries < 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attach_traffic_detach),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
