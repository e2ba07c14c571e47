// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_memif.c - the DPDK transport over net_memif, the shared-memory
 * packet interface: a hub with one port per spoke, as a dedicated
 * aggregator has one port per worker (docs/transport-dpdk.md).
 *
 * Three forked processes (the EAL starts once per process): the hub
 * (node 0, two memif server ports on one socket) and two spokes (nodes 1
 * and 2, one client port each), started hub first, then the other way
 * round (the clients wait for the server's socket).
 *   1. each spoke sends N frames to the hub: the hub learns which port
 *      reaches which node from their source MACs;
 *   2. the hub sends N frames to each spoke: learned routes, so no spoke
 *      sees a frame of the other (rx_filtered stays 0);
 *   3. spoke 2 is killed (SIGKILL, as a crashing worker); the hub forgets
 *      its routes (a new roster) and sends M frames to each spoke: each is
 *      flooded to both ports; spoke 1 gets its M and filters exactly M
 *      frames of spoke 2's, the dead port's copies are dropped and
 *      counted, and the hub neither hangs nor crashes;
 *   4. the hub is killed in turn; spoke 1 sends M more frames: they are
 *      dropped and counted (none lost unaccounted), nothing hangs.
 * A port drops what it is given while its link is down, so a spoke first
 * sends hellos until the hub answers one.  Every frame's bytes are
 * checked.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataplane/transport/transport.h"

#define MS 1000000ull
#define N 20000
#define M 3000
#define BATCH 128
#define TALLY_LEN 1040		/* tally header + 256 words */
#define STALL_NS (10000 * MS)
#define NODES 3
#define HELLO UINT32_MAX	/* a link check, not part of any phase */

static struct tly_addr addrs[NODES] = {
	{ { 0x02, 0x00, 0x00, 0x98, 0x00, 0x01 }, 0x0a620001, 47101 },
	{ { 0x02, 0x00, 0x00, 0x98, 0x00, 0x02 }, 0x0a620002, 47102 },
	{ { 0x02, 0x00, 0x00, 0x98, 0x00, 0x03 }, 0x0a620003, 47103 },
};
static char sock_dir[64];
static int run_no;		/* a socket per run: a killed server leaves it */
/* phase 4 ends the hub by its transport_close() and exit, not a kill */
static bool hub_closes;

#define die(...) do { fprintf(stderr, __VA_ARGS__); _exit(1); } while (0)

static void open_node(struct transport *tp, uint16_t self)
{
	struct transport_config c = {
		.kind = "dpdk", .self = self, .n_nodes = NODES, .addrs = addrs,
		.mtu = 2048, .port_id = 0, .mbufs = 8191,
	};
	char eal[768];
	int n;

	n = snprintf(eal, sizeof(eal),
		     "-l %u --no-huge -m 256 --no-shconf --no-telemetry --no-pci --file-prefix=tpmemif%d%u --log-level=lib.eal:error",
		     self % 2, (int)getpid(), self);
	if (self == 0) {
		for (int p = 0; p < NODES - 1; p++)
			n += snprintf(eal + n, sizeof(eal) - (size_t)n,
				      " --vdev=net_memif%d,role=server,id=%d,socket=%s/m%d.sock,socket-abstract=no",
				      p, p, sock_dir, run_no);
	} else {
		snprintf(eal + n, sizeof(eal) - (size_t)n,
			 " --vdev=net_memif0,role=client,id=%u,socket=%s/m%d.sock,socket-abstract=no",
			 self - 1, sock_dir, run_no);
	}
	c.eal_args = eal;
	if (transport_open(tp, &c))
		die("node %u: memif transport open failed\n", self);
}

static uint8_t pattern(uint32_t seq, size_t i, uint16_t from, uint16_t to)
{
	return (uint8_t)(seq * 13 + i + from * 7 + to * 3);
}

static void send_frame(struct transport *tp, uint16_t self, uint16_t to,
		       uint32_t seq)
{
	struct tly_tx_ops ops = transport_tx_ops(tp);
	size_t len = TLY_L2L4_LEN + TALLY_LEN, i;
	uint8_t *f = ops.alloc(ops.ctx, len), *p;

	if (!f)
		die("node %u: tx_alloc failed at %u\n", self, seq);
	tly_l2l4_write(f, &addrs[self], &addrs[to], 0, TALLY_LEN);
	p = f + TLY_L2L4_LEN;
	memcpy(p, &seq, 4);
	p[4] = (uint8_t)self;
	for (i = 5; i < TALLY_LEN; i++)
		p[i] = pattern(seq, i, self, to);
	ops.send(ops.ctx, to, f, len);
}

/* the sender of a frame to @self, after checking every byte */
static uint16_t check_frame(uint16_t self, const uint8_t *f, size_t len,
			    uint32_t *seq)
{
	const uint8_t *p;
	size_t tl, i;
	uint16_t from;

	if (tly_l2l4_parse(f, len, addrs[self].port, &tl) != TLY_OK ||
	    tl != TALLY_LEN)
		die("node %u: bad headers (len %zu)\n", self, len);
	p = f + TLY_L2L4_LEN;
	memcpy(seq, p, 4);
	from = p[4];
	if (from >= NODES || from == self)
		die("node %u: frame from node %u\n", self, from);
	for (i = 5; i < TALLY_LEN; i++)
		if (p[i] != pattern(*seq, i, from, self))
			die("node %u: frame %u from %u: byte %zu differs\n",
			    self, *seq, from, i);
	return from;
}

/* Receive until want[from] frames came from every node, in order. */
static void recv_all(struct transport *tp, uint16_t self,
		     uint32_t *got, const uint32_t *want)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t last = transport_now_ns();

	for (;;) {
		uint64_t now = transport_now_ns();
		bool done = true;
		int n;

		for (int i = 0; i < NODES; i++)
			done &= got[i] >= want[i];
		if (done)
			return;
		transport_tx_flush(tp, now);
		n = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (int i = 0; i < n; i++) {
			uint32_t seq;
			uint16_t from = check_frame(self, rx[i].data,
						    rx[i].len, &seq);

			if (seq == HELLO) {
				if (self == 0)	/* the hub answers */
					send_frame(tp, self, from, HELLO);
				continue;
			}
			if (seq != got[from])
				die("node %u: got frame %u from %u, expected %u\n",
				    self, seq, from, got[from]);
			got[from]++;
		}
		if (n > 0) {
			transport_rx_release(tp, rx, n);
			last = now;
		} else if (now - last > STALL_NS) {
			die("node %u: stalled: %u/%u/%u frames in\n", self,
			    got[0], got[1], got[2]);
		} else {
			transport_idle_wait(tp, now, 20000);
		}
	}
}

/* Queue @count frames to each of @to[0..n), a batch at a time, each batch
 * pushed out before the next: a slow reader is never overrun. */
static void send_all(struct transport *tp, uint16_t self, const uint16_t *to,
		     int n, uint32_t first, uint32_t count)
{
	for (uint32_t s = first; s < first + count; s += BATCH) {
		uint64_t t0 = transport_now_ns();

		for (uint32_t q = s; q < s + BATCH && q < first + count; q++)
			for (int d = 0; d < n; d++)
				send_frame(tp, self, to[d], q);
		while (transport_tx_pending(tp)) {
			uint64_t now = transport_now_ns();

			if (now - t0 > STALL_NS)
				die("node %u: %d frames never left\n", self,
				    transport_tx_pending(tp));
			transport_tx_flush(tp, now);
			if (transport_tx_pending(tp))
				transport_idle_wait(tp, now, 20000);
		}
	}
}

/* Hellos to the hub until one comes back: the link is up both ways. */
static void link_wait(struct transport *tp, uint16_t self)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t t0 = transport_now_ns();

	for (;;) {
		uint64_t now = transport_now_ns();
		int n;

		if (now - t0 > STALL_NS)
			die("node %u: no answer to hellos\n", self);
		send_frame(tp, self, 0, HELLO);
		transport_tx_flush(tp, now);
		transport_idle_wait(tp, now, 10 * MS);
		n = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (int i = 0; i < n; i++) {
			uint32_t seq;

			check_frame(self, rx[i].data, rx[i].len, &seq);
			if (seq != HELLO)
				die("node %u: frame %u before the hello\n",
				    self, seq);
		}
		if (n > 0) {
			transport_rx_release(tp, rx, n);
			return;
		}
	}
}

static void spoke_run(uint16_t self, int ready_fd, int go_fd)
{
	uint64_t pkts, drops;
	struct transport tp;
	uint32_t got[NODES] = { 0 }, want[NODES] = { N, 0, 0 };
	const uint16_t hub = 0;
	char b = 1;

	open_node(&tp, self);
	if (write(ready_fd, &b, 1) != 1)
		die("node %u: ready\n", self);
	link_wait(&tp, self);
	send_all(&tp, self, &hub, 1, 0, N);
	recv_all(&tp, self, got, want);
	if (tp.stats.rx_filtered)
		die("node %u: %llu frames of the other spoke reached us with learned routes\n",
		    self, (unsigned long long)tp.stats.rx_filtered);
	if (write(ready_fd, &b, 1) != 1)
		die("node %u: phase 2\n", self);
	if (self == 2)
		pause();	/* the parent kills us here */
	/* phase 3: flooded frames; ours count, spoke 2's are filtered */
	want[0] = N + M;
	recv_all(&tp, self, got, want);
	for (int i = 0; i < 2000 && tp.stats.rx_filtered < M; i++) {
		struct transport_rx rx[TRANSPORT_RX_BURST];
		int n = transport_rx_burst(&tp, rx, TRANSPORT_RX_BURST);

		if (n > 0)
			die("node %u: %d frames past the end\n", self, n);
		transport_idle_wait(&tp, transport_now_ns(), 1 * MS);
	}
	if (tp.stats.rx_filtered != M)
		die("node %u: %llu frames filtered, %u flooded to node 2\n",
		    self, (unsigned long long)tp.stats.rx_filtered, M);
	/* phase 4: the parent kills the hub, then we send */
	if (write(ready_fd, &b, 1) != 1 || read(go_fd, &b, 1) != 1)
		die("node %u: phase 4\n", self);
	pkts = tp.stats.tx_pkts;
	drops = tp.stats.tx_drops;
	send_all(&tp, self, &hub, 1, N, M);
	pkts = tp.stats.tx_pkts - pkts;
	drops = tp.stats.tx_drops - drops;
	fprintf(stderr, "node %u: hub gone: %llu frames out, %llu dropped\n",
		self, (unsigned long long)pkts, (unsigned long long)drops);
	if (pkts + drops != M || !drops)
		die("node %u: %llu out + %llu dropped of %u\n", self,
		    (unsigned long long)pkts, (unsigned long long)drops, M);
	transport_close(&tp);
	_exit(0);
}

static void hub_run(int ready_fd, int go_fd)
{
	struct transport tp;
	uint32_t got[NODES] = { 0 }, want[NODES] = { 0, N, N };
	const uint16_t spokes[2] = { 1, 2 };
	char b = 1;

	open_node(&tp, 0);
	if (write(ready_fd, &b, 1) != 1)
		die("hub: ready\n");
	recv_all(&tp, 0, got, want);
	send_all(&tp, 0, spokes, 2, 0, N);
	if (tp.stats.tx_drops)
		die("hub: %llu frames dropped with both spokes up\n",
		    (unsigned long long)tp.stats.tx_drops);
	/* the parent killed spoke 2 */
	if (read(go_fd, &b, 1) != 1)
		die("hub: phase 3\n");
	/* a new roster: the routes are learned again */
	if (transport_set_nodes(&tp, 0, NODES, addrs))
		die("hub: set_nodes\n");
	send_all(&tp, 0, spokes, 2, N, M);
	/* every frame went to both ports; the dead one's copies dropped */
	if (tp.stats.tx_drops < M || tp.stats.tx_drops > 2 * M)
		die("hub: %llu drops, expected %u..%u\n",
		    (unsigned long long)tp.stats.tx_drops, M, 2 * M);
	fprintf(stderr, "hub: %llu frames out, %llu dropped on the dead port\n",
		(unsigned long long)tp.stats.tx_pkts,
		(unsigned long long)tp.stats.tx_drops);
	if (write(ready_fd, &b, 1) != 1)
		die("hub: done\n");
	if (!hub_closes)
		pause();	/* the parent kills us (phase 4) */
	if (read(go_fd, &b, 1) != 1)
		die("hub: phase 4\n");
	transport_close(&tp);	/* a spoke still connected */
	_exit(0);
}

static void kill_all(pid_t *pid, int n)
{
	for (int i = 0; i < n; i++)
		if (pid[i] > 0)
			kill(pid[i], SIGKILL);
	while (wait(NULL) > 0)
		;
}

/* one byte on @fd within @ms, or the test fails (children killed) */
static void await(int fd, pid_t *pid, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char b;

	if (poll(&pfd, 1, 60000) != 1 || read(fd, &b, 1) != 1) {
		kill_all(pid, NODES);
		fail_msg("memif: no %s within 60 s (see the messages above)",
			 what);
	}
}

static int exit_status(pid_t p)
{
	int st;

	for (int i = 0; i < 600; i++) {
		if (waitpid(p, &st, WNOHANG) == p)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 +
			       WTERMSIG(st);
		usleep(100000);
	}
	return -1;
}

static void hub_start(pid_t *pid, int *hub_ready, int *hub_go)
{
	pid[0] = fork();
	assert_true(pid[0] >= 0);
	if (pid[0] == 0)
		hub_run(hub_ready[1], hub_go[0]);
	await(hub_ready[0], pid, "hub");
}

/* @hub_first: the server's socket exists before the clients start; else
 * they wait for it (the daemons of a job open their ports at once) */
static void run_hub(bool hub_first)
{
	int hub_ready[2], hub_go[2], spoke_ready[2][2], spoke_go[2];
	pid_t pid[NODES] = { 0 };
	char b = 1;

	run_no++;
	assert_int_equal(pipe(hub_ready), 0);
	assert_int_equal(pipe(hub_go), 0);
	assert_int_equal(pipe(spoke_go), 0);
	if (hub_first)
		hub_start(pid, hub_ready, hub_go);
	for (int i = 1; i < NODES; i++) {
		assert_int_equal(pipe(spoke_ready[i - 1]), 0);
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0)
			spoke_run((uint16_t)i, spoke_ready[i - 1][1],
				  spoke_go[0]);
	}
	for (int i = 1; i < NODES; i++)
		await(spoke_ready[i - 1][0], pid, "spoke start");
	if (!hub_first) {
		usleep(300000);	/* the spokes look for the socket meanwhile */
		hub_start(pid, hub_ready, hub_go);
	}
	/* phases 1 and 2 */
	for (int i = 1; i < NODES; i++)
		await(spoke_ready[i - 1][0], pid, "spoke after phase 2");
	kill(pid[2], SIGKILL);
	assert_int_equal(exit_status(pid[2]), 128 + SIGKILL);
	pid[2] = 0;
	assert_int_equal(write(hub_go[1], &b, 1), 1);
	await(hub_ready[0], pid, "hub after phase 3");
	await(spoke_ready[0][0], pid, "spoke 1 after phase 3");
	if (hub_closes) {
		char path[128];

		/* a clean exit, and the socket file gone with it (or a
		 * server started again on the path could not bind it) */
		assert_int_equal(write(hub_go[1], &b, 1), 1);
		assert_int_equal(exit_status(pid[0]), 0);
		snprintf(path, sizeof(path), "%s/m%d.sock", sock_dir, run_no);
		if (access(path, F_OK) == 0) {
			kill_all(pid, NODES);
			fail_msg("memif: the hub's socket %s outlived it", path);
		}
	} else {
		kill(pid[0], SIGKILL);
		assert_int_equal(exit_status(pid[0]), 128 + SIGKILL);
	}
	pid[0] = 0;
	assert_int_equal(write(spoke_go[1], &b, 1), 1);
	if (exit_status(pid[1]) != 0) {
		kill_all(pid, NODES);
		fail_msg("memif: spoke 1 failed");
	}
	for (int i = 0; i < 2; i++) {
		close(hub_ready[i]);
		close(hub_go[i]);
		close(spoke_go[i]);
		close(spoke_ready[0][i]);
		close(spoke_ready[1][i]);
	}
}

static void test_memif_hub_first(void **state)
{
	(void)state;
	run_hub(true);
}

static void test_memif_spokes_first(void **state)
{
	(void)state;
	run_hub(false);
}

/* the hub closes its transport while spoke 1 is connected: it exits 0
 * (memif ports are left to the exit, docs/transports.md) and its socket
 * file is removed; the spoke sees a hang-up as when the hub is killed */
static void test_memif_hub_closes(void **state)
{
	(void)state;
	hub_closes = true;
	run_hub(true);
	hub_closes = false;
}

static int dir_setup(void **state)
{
	(void)state;
	snprintf(sock_dir, sizeof(sock_dir), "/tmp/tally-memif-XXXXXX");
	return mkdtemp(sock_dir) ? 0 : -1;
}

static int dir_teardown(void **state)
{
	char path[128];

	(void)state;
	for (int i = 1; i <= run_no; i++) {
		snprintf(path, sizeof(path), "%s/m%d.sock", sock_dir, i);
		unlink(path);
	}
	return rmdir(sock_dir) && errno != ENOENT ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memif_hub_first),
		cmocka_unit_test(test_memif_spokes_first),
		cmocka_unit_test(test_memif_hub_closes),
	};

	return cmocka_run_group_tests(tests, dir_setup, dir_teardown);
}
