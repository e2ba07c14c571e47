// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_xdp_mcast.c - the XDP aggregator's RESULT delivery through the
 * kernel's own UDP sockets: an aggregator namespace and two worker
 * namespaces on a bridge (in a fourth, the "switch"), each worker with one
 * UDP socket on the group port that joined the job's group.  Needs root
 * (suite 'integration').
 *
 *   agg (ea 10.101.0.1, XDP) --- pa ]
 *   w0  (e0 10.101.0.10)     --- p0 ] br0 in sw (multicast snooping off)
 *   w1  (e1 10.101.0.11)     --- p1 ]
 *
 * Checked, with bare tally packets sent by the workers' sockets (the
 * kernel builds Ethernet/IPv4/UDP and resolves the aggregator by ARP,
 * which the program passes to the aggregator's kernel): w0's DATA with
 * ACK_REQ comes back as an ACK to w0's socket alone; w1's DATA completes
 * the chunk and one RESULT (rank 0xffff) reaches both sockets with the
 * exact sum; both CONFIRMs with ACK_REQ are ACKed and free the slot.
 * Then, with GRO on the aggregator's switch port and UDP_GRO on the
 * sockets, a run of RESULTs reaches each socket in fewer receives than
 * RESULTs (the program's UDP checksum and fixed IP ID let GRO merge them).
 * The namespaces are deleted in teardown, at exit and on SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
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

#define PORT		47520
#define GROUP_IP	0xef070003u	/* 239.7.0.3 */
#define GROUP_PORT	47521
#define AGG_IP		0x0a650001u	/* 10.101.0.1 */
#define K		256

enum { NS_SW, NS_AGG, NS_W0, NS_W1, NS_N };
static const char *const ns_role[NS_N] = { "sw", "agg", "w0", "w1" };
static char ns_name[NS_N][64];
static int ns_fd[NS_N] = { -1, -1, -1, -1 }, home_fd = -1, ns_made;
static int pass_fd = -1;
static struct tly_xdp_ctl *ctl;
static int sock[2] = { -1, -1 };
static struct sockaddr_in agg_sa;	/* set in setup() */

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
	if (home_fd >= 0)
		setns(home_fd, CLONE_NEWNET);
	for (i = 0; i < NS_N; i++) {
		if (ns_fd[i] >= 0)
			close(ns_fd[i]);
		ns_fd[i] = -1;
		sh("ip netns del %s 2>/dev/null", ns_name[i]);
	}
	ns_made = 0;
}

static void on_signal(int sig)
{
	ns_delete();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int enter(int ns)
{
	return setns(ns_fd[ns], CLONE_NEWNET);
}

/* a worker's socket: the group port, joined, in its namespace */
static int worker_socket(int w)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(GROUP_PORT) };
	struct ip_mreq m = { 0 };
	int s, one = 1;

	if (enter(NS_W0 + w))
		return -1;
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	m.imr_multiaddr.s_addr = htonl(GROUP_IP);
	m.imr_interface.s_addr = htonl((AGG_IP & ~0xffu) + 10 + (uint32_t)w);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) ||
	    setsockopt(s, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m))) {
		close(s);
		return -1;
	}
	return s;
}

/* a set-up step that failed, named */
#define STEP(x)								\
	do {								\
		if (x) {						\
			fprintf(stderr, "set-up failed: %s\n", #x);	\
			return -1;					\
		}							\
	} while (0)

static int setup(void **state)
{
	struct tly_xdp_job j = {
		.cookie = 0x0badcafe, .job = 0x0321, .n_workers = 2, .k = K,
		.port = PORT, .n_slots = 1024, .group_ip = GROUP_IP,
		.group_port = GROUP_PORT,
	};
	char path[sizeof(ns_name[0]) + 16];
	int i, w;

	(void)state;
	agg_sa.sin_family = AF_INET;
	agg_sa.sin_port = htons(PORT);
	agg_sa.sin_addr.s_addr = htonl(AGG_IP);
	atexit(ns_delete);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	home_fd = open("/proc/self/ns/net", O_RDONLY);
	for (i = 0; i < NS_N; i++) {
		snprintf(ns_name[i], sizeof(ns_name[i]), "tlyxm%s%d",
			 ns_role[i], (int)getpid());
		if (sh("ip netns add %s", ns_name[i]))
			return -1;
		ns_made = 1;
		if (snprintf(path, sizeof(path), "/run/netns/%s",
			     ns_name[i]) >= (int)sizeof(path))
			return -1;
		ns_fd[i] = open(path, O_RDONLY);
		if (ns_fd[i] < 0)
			return -1;
	}
	if (sh("ip -n %s link add br0 type bridge mcast_snooping 0",
	       ns_name[NS_SW]) ||
	    sh("ip -n %s link set br0 up", ns_name[NS_SW]))
		return -1;
	{
		static const char *const port[3] = { "pa", "p0", "p1" };
		static const char *const end[3] = { "ea", "e0", "e1" };
		static const unsigned int host[3] = { 1, 10, 11 };

		for (i = 0; i < 3; i++) {
			const char *ns = ns_name[NS_AGG + i], *sw =
				ns_name[NS_SW];

			if (sh("ip -n %s link add %s type veth peer name %s "
			       "netns %s", sw, port[i], end[i], ns) ||
			    sh("ip -n %s link set %s master br0 up", sw,
			       port[i]) ||
			    sh("ip -n %s addr add 10.101.0.%u/24 dev %s", ns,
			       host[i], end[i]) ||
			    sh("ip -n %s link set %s up", ns, end[i]))
				return -1;
		}
	}
	/* the aggregator's end: the program; its peer: pass-all */
	STEP(enter(NS_SW));
	pass_fd = tly_xdp_attach_pass((int)if_nametoindex("pa"));
	STEP(pass_fd < 0);
	STEP(enter(NS_AGG));
	STEP(tly_xdp_open(&ctl, 1024));
	tly_group_mac(GROUP_IP, j.group_mac);
	STEP(tly_xdp_set_job(ctl, &j));
	STEP(tly_xdp_attach(ctl, (int)if_nametoindex("ea"), 0));
	for (w = 0; w < 2; w++) {
		sock[w] = worker_socket(w);
		STEP(sock[w] < 0);
	}
	return setns(home_fd, CLONE_NEWNET);
}

static int teardown(void **state)
{
	int w;

	(void)state;
	for (w = 0; w < 2; w++)
		if (sock[w] >= 0)
			close(sock[w]);
	if (ns_fd[NS_AGG] >= 0)
		enter(NS_AGG);	/* the ifindex is the namespace's */
	tly_xdp_close(ctl);	/* detaches */
	if (pass_fd >= 0)
		close(pass_fd);
	ns_delete();
	return 0;
}

/* worker @w's packet about @tensor's @chunk into @p; its length */
static size_t build_pkt(uint8_t *p, int w, uint8_t type, uint8_t flags,
			uint32_t tensor, uint16_t chunk, const int32_t *v)
{
	struct tly_hdr h = {
		.type = type, .flags = flags, .job = 0x0321,
		.rank = (uint16_t)w, .tensor = tensor, .chunk = chunk,
		.cookie = 0x0badcafe,
	};
	size_t i;

	h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, 0, 1024);
	tly_hdr_write(p, &h);
	for (i = 0; v && i < K; i++)
		tly_put32(p + TLY_HDR_LEN + 4 * i, (uint32_t)v[i]);
	return TLY_HDR_LEN + (type == TLY_T_DATA ? 4u * K : 0);
}

static void send_pkt(int w, uint8_t type, uint8_t flags, const int32_t *v)
{
	uint8_t p[TLY_HDR_LEN + 4 * K];
	size_t len = build_pkt(p, w, type, flags, 0xabcdef01, 3, v);

	assert_int_equal(sendto(sock[w], p, len, 0,
				(const struct sockaddr *)&agg_sa,
				sizeof(agg_sa)), (ssize_t)len);
}

/* the next packet on worker @w's socket (2 s at most); its length */
static ssize_t recv_pkt(int w, uint8_t *p, size_t cap)
{
	struct pollfd pf = { .fd = sock[w], .events = POLLIN };

	if (poll(&pf, 1, 2000) != 1)
		return -1;
	return recv(sock[w], p, cap, 0);
}

static int quiet(int w)
{
	struct pollfd pf = { .fd = sock[w], .events = POLLIN };

	return poll(&pf, 1, 100) == 0;
}

static void test_result_to_every_worker(void **state)
{
	int32_t v[2][K];
	uint8_t p[TLY_HDR_LEN + 4 * K + 16];
	uint64_t c[TLY_XDP_C_COUNT];
	ssize_t n;
	int w, i;

	(void)state;
	for (w = 0; w < 2; w++)
		for (i = 0; i < K; i++)
			v[w][i] = (int32_t)(0x7fff0000u + (uint32_t)i * 977u *
					    (uint32_t)(w + 1));
	/* w0: held, ACK to w0 alone */
	send_pkt(0, TLY_T_DATA, TLY_F_INT | TLY_F_ACK_REQ, v[0]);
	n = recv_pkt(0, p, sizeof(p));
	assert_int_equal(n, TLY_HDR_LEN);
	assert_int_equal(p[0] & 0x0f, TLY_T_ACK);
	assert_int_equal(tly_get16(p + 4), 0);
	assert_true(quiet(1));
	/* w1 completes: one RESULT, on both sockets */
	send_pkt(1, TLY_T_DATA, TLY_F_INT, v[1]);
	for (w = 0; w < 2; w++) {
		n = recv_pkt(w, p, sizeof(p));
		assert_int_equal(n, TLY_HDR_LEN + 4 * K);
		assert_int_equal(p[0] & 0x0f, TLY_T_RESULT);
		assert_int_equal(p[1], TLY_F_INT);
		assert_int_equal(tly_get16(p + 4), TLY_XDP_RANK_ALL);
		assert_int_equal(tly_get32(p + 8), 0xabcdef01);
		for (i = 0; i < K; i++)
			assert_int_equal(tly_get32(p + TLY_HDR_LEN + 4 * i),
					 (uint32_t)v[0][i] + (uint32_t)v[1][i]);
	}
	/* receipts: each ACKed to its sender; the slot is freed */
	for (w = 0; w < 2; w++) {
		send_pkt(w, TLY_T_CONFIRM, TLY_F_ACK_REQ, NULL);
		n = recv_pkt(w, p, sizeof(p));
		assert_int_equal(n, TLY_HDR_LEN);
		assert_int_equal(p[0] & 0x0f, TLY_T_ACK);
		assert_int_equal(p[1], TLY_F_RELEASED);
		assert_int_equal(tly_get16(p + 4), w);
	}
	assert_int_equal(tly_xdp_counters(ctl, c), 0);
	assert_int_equal(c[TLY_XDP_C_COMPLETIONS], 1);
	assert_int_equal(c[TLY_XDP_C_FREED], 1);
	assert_int_equal(c[TLY_XDP_C_ACK], 3);
	assert_true(c[TLY_XDP_C_PASS] >= 1);	/* ARP at least */
}

#define RUN		16	/* chunks in the run */
#define DATA_LEN	(TLY_HDR_LEN + 4 * K)
#define GRO_TENSOR	0x5eed0001u

static int32_t gro_val(int w, unsigned int c, unsigned int i)
{
	return (int32_t)((uint32_t)w * 0x01000193u + c * 7919u + i * 31u);
}

/* w1's DATA of the run in one send, cut by the kernel (UDP_SEGMENT) */
static void send_run(const uint16_t *chunk)
{
	static uint8_t buf[RUN * DATA_LEN];
	char ctl[CMSG_SPACE(sizeof(uint16_t))] = { 0 };
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr m = {
		.msg_name = (void *)&agg_sa, .msg_namelen = sizeof(agg_sa),
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl, .msg_controllen = sizeof(ctl),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	uint16_t seg = DATA_LEN;
	int32_t v[K];
	unsigned int r, i;

	for (r = 0; r < RUN; r++) {
		for (i = 0; i < K; i++)
			v[i] = gro_val(1, chunk[r], i);
		build_pkt(buf + r * DATA_LEN, 1, TLY_T_DATA, TLY_F_INT,
			  GRO_TENSOR, chunk[r], v);
	}
	c->cmsg_level = SOL_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	assert_int_equal(sendmsg(sock[1], &m, 0), (ssize_t)sizeof(buf));
}

/* the run's RESULTs on worker @w's socket, each exact; the receives */
static unsigned int recv_run(int w, const uint16_t *chunk)
{
	static uint8_t buf[RUN * DATA_LEN];
	unsigned int got = 0, receives = 0, seen = 0;

	while (got < RUN) {
		char ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr m = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl, .msg_controllen = sizeof(ctl),
		};
		struct pollfd pf = { .fd = sock[w], .events = POLLIN };
		struct cmsghdr *c;
		ssize_t n;
		size_t seg, off;

		assert_int_equal(poll(&pf, 1, 2000), 1);
		n = recvmsg(sock[w], &m, 0);
		assert_true(n > 0);
		receives++;
		seg = (size_t)n;
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_UDP &&
			    c->cmsg_type == UDP_GRO) {
				int g;

				memcpy(&g, CMSG_DATA(c), sizeof(g));
				seg = (size_t)g;
			}
		assert_int_equal(seg, DATA_LEN);
		assert_int_equal((size_t)n % seg, 0);
		for (off = 0; off < (size_t)n; off += seg) {
			const uint8_t *p = buf + off;
			unsigned int r, i;

			assert_int_equal(p[0] & 0x0f, TLY_T_RESULT);
			assert_int_equal(tly_get32(p + 8), GRO_TENSOR);
			for (r = 0; r < RUN; r++)
				if (chunk[r] == tly_get16(p + 12))
					break;
			assert_true(r < RUN);
			assert_false(seen & 1u << r);	/* once each */
			seen |= 1u << r;
			for (i = 0; i < K; i++)
				assert_int_equal(
					tly_get32(p + TLY_HDR_LEN + 4 * i),
					(uint32_t)gro_val(0, chunk[r], i) +
					(uint32_t)gro_val(1, chunk[r], i));
			got++;
		}
	}
	return receives;
}

/*
 * A run of RESULTs merged by GRO: w0's DATA of 16 chunks wait in their
 * slots; w1's arrive in one burst, so the program's 16 RESULTs leave in
 * one batch and the switch port's GRO merges them (only if each carries a
 * UDP checksum and the same IP ID): each socket gets them in fewer
 * receives than RESULTs, each sum exact.
 */
static void test_results_merged_by_gro(void **state)
{
	uint16_t chunk[RUN];
	uint8_t p[DATA_LEN];
	uint32_t used[1024 / 32] = { 0 };
	unsigned int r, i, w, n, receives;
	int32_t v[K];
	int one = 1;

	(void)state;
	assert_int_equal(sh("ip netns exec %s ethtool -K pa gro on "
			    "rx-udp-gro-forwarding on >/dev/null",
			    ns_name[NS_SW]), 0);
	for (w = 0; w < 2; w++)
		assert_int_equal(setsockopt(sock[w], SOL_UDP, UDP_GRO, &one,
					    sizeof(one)), 0);
	/* 16 chunks at 16 distinct slots */
	for (r = 0, n = 0; r < RUN; n++) {
		uint32_t s = tly_slot_of(GRO_TENSOR, (uint16_t)n, 0, 1024);

		if (used[s / 32] & 1u << (s % 32))
			continue;
		used[s / 32] |= 1u << (s % 32);
		chunk[r++] = (uint16_t)n;
	}
	for (r = 0; r < RUN; r++) {
		size_t len;

		for (i = 0; i < K; i++)
			v[i] = gro_val(0, chunk[r], i);
		len = build_pkt(p, 0, TLY_T_DATA, TLY_F_INT, GRO_TENSOR,
				chunk[r], v);
		assert_int_equal(sendto(sock[0], p, len, 0,
					(const struct sockaddr *)&agg_sa,
					sizeof(agg_sa)), (ssize_t)len);
	}
	assert_true(quiet(0));
	send_run(chunk);
	for (w = 0; w < 2; w++) {
		receives = recv_run((int)w, chunk);
		printf("worker %u: %d RESULTs in %u receives\n", w, RUN,
		       receives);
		assert_true(receives < RUN);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_result_to_every_worker),
		cmocka_unit_test(test_results_merged_by_gro),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
