// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_dpdk.c - the DPDK transport over a veth pair between two network
 * namespaces, once with net_af_packet and once with net_af_xdp.  Needs
 * root (suite 'integration').
 *
 * The EAL can start once per process, so each side is a forked child that
 * enters its namespace (setns) and opens its own transport.  The children
 * exchange tally frames both ways in lock step (batch k goes out once the
 * peer's batch k-1 is in, so no ring overflows) and check every byte; a
 * frame to another UDP port and one to another MAC go first and must be
 * filtered; then each sends frames to itself, which come back through
 * the loop queue, counted as looped and not as the wire's.  The
 * namespaces are deleted in teardown, and at exit.
 *
 * Two queue pairs (net_af_packet qpairs=2, then net_memif, as tallyd with
 * dataplane.threads = 2): each side opens a transport per queue, driven
 * by its own thread.  Then two threads on net_af_xdp, whose port has one
 * queue pair on a veth: the second thread receives only through the
 * split and shares the first's transmit queue.
 * Frames go to the peer's UDP port base + shard, from 16 source ports, so
 * the kernel's fanout hash puts some on the other queue than their shard;
 * every frame must reach its shard's thread exactly once, and both queues
 * must have received from the wire, sent, and passed frames on.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
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
#define N_FRAMES 20000
#define BATCH 128
#define TALLY_LEN 1040		/* tally header + 256 words */
#define STALL_NS (5000 * MS)

static char ns_name[2][64], if_name[2][16];
static char memif_dir[64];	/* the memif test's socket directory */
static bool ns_made;
static struct tly_addr addrs[2] = {
	{ { 0x02, 0x00, 0x00, 0x99, 0x00, 0x01 }, 0x0a630001, 47001 },
	{ { 0x02, 0x00, 0x00, 0x99, 0x00, 0x02 }, 0x0a630002, 47002 },
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
	/* deleting a namespace destroys the veth end inside it */
	for (i = 0; i < 2; i++)
		sh("ip netns del %s 2>/dev/null", ns_name[i]);
	ns_made = false;
}

/* meson's timeout sends SIGTERM: the namespaces must go anyway */
static void on_signal(int sig)
{
	ns_delete();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int ns_setup(void **state)
{
	static const char *const side = "ab";
	int i;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "test_dpdk: needs root (ip netns, veth, DPDK)\n");
		return -1;
	}
	for (i = 0; i < 2; i++) {
		snprintf(ns_name[i], sizeof(ns_name[i]), "tally-tp-%d-%c",
			 (int)getpid(), side[i]);
		snprintf(if_name[i], sizeof(if_name[i]), "tp%c%d", side[i],
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
		const uint8_t *m = addrs[i].mac;

		if (sh("ip link set %s netns %s", if_name[i], ns_name[i]) ||
		    sh("ip -n %s link set %s address %02x:%02x:%02x:%02x:%02x:%02x",
		       ns_name[i], if_name[i], m[0], m[1], m[2], m[3], m[4],
		       m[5]) ||
		    sh("ip -n %s link set %s up", ns_name[i], if_name[i]))
			goto fail;
		/* less kernel chatter on the link (best effort) */
		sh("ip netns exec %s sysctl -qw net.ipv6.conf.%s.disable_ipv6=1",
		   ns_name[i], if_name[i]);
	}
	return 0;
fail:
	fprintf(stderr, "test_dpdk: namespace/veth setup failed\n");
	ns_delete();
	return -1;
}

static int ns_teardown(void **state)
{
	(void)state;
	ns_delete();
	return 0;
}

#define die(...) do { fprintf(stderr, __VA_ARGS__); _exit(1); } while (0)

/* frame @seq from node @self to node @to (to @dst_override's address if
 * given) */
static void build(struct transport *tp, uint16_t self, uint16_t to,
		  uint32_t seq, const struct tly_addr *dst_override)
{
	struct tly_tx_ops ops = transport_tx_ops(tp);
	const struct tly_addr *dst = dst_override ? dst_override : &addrs[to];
	size_t len = TLY_L2L4_LEN + TALLY_LEN, i;
	uint8_t *f = ops.alloc(ops.ctx, len), *p;

	if (!f)
		die("side %u: tx_alloc failed at %u\n", self, seq);
	tly_l2l4_write(f, &addrs[self], dst, 0, TALLY_LEN);
	p = f + TLY_L2L4_LEN;
	memcpy(p, &seq, 4);
	for (i = 4; i < TALLY_LEN; i++)
		p[i] = (uint8_t)(seq * 13 + i + self);
	ops.send(ops.ctx, to, f, len);
}

static void check(uint16_t self, uint16_t from, const uint8_t *f,
		  size_t len, uint32_t want)
{
	size_t tl, i;
	uint32_t seq;
	const uint8_t *p;

	if (tly_l2l4_parse(f, len, addrs[self].port, &tl) != TLY_OK ||
	    tl != TALLY_LEN)
		die("side %u: frame %u: bad headers (len %zu)\n", self, want,
		    len);
	p = f + TLY_L2L4_LEN;
	memcpy(&seq, p, 4);
	if (seq != want)
		die("side %u: got frame %u, expected %u\n", self, seq, want);
	for (i = 4; i < TALLY_LEN; i++)
		if (p[i] != (uint8_t)(seq * 13 + i + from))
			die("side %u: frame %u: byte %zu differs\n", self, seq,
			    i);
}

/*
 * Frames to ourselves (a co-located aggregator shard's) come back from
 * the loop queue, not the wire: counted in loop_pkts and loop_bytes, not
 * in tx_pkts or rx_pkts, as over udp.  Run once the peer sends no more.
 */
static void self_loop(struct transport *tp, uint16_t self)
{
	struct transport_stats before = tp->stats;
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t end = transport_now_ns() + STALL_NS;
	uint32_t got = 0;
	int n;

	for (uint32_t seq = 0; seq < BATCH; seq++)
		build(tp, self, self, seq, NULL);
	transport_tx_flush(tp, transport_now_ns());
	while (got < BATCH && transport_now_ns() < end) {
		n = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (int i = 0; i < n; i++)
			check(self, self, rx[i].data, rx[i].len, got++);
		if (n > 0)
			transport_rx_release(tp, rx, n);
	}
	if (got != BATCH)
		die("side %u: %u of %u frames to itself came back\n", self,
		    got, BATCH);
	if (tp->stats.loop_pkts - before.loop_pkts != BATCH ||
	    tp->stats.loop_bytes - before.loop_bytes !=
	    BATCH * (uint64_t)(TLY_L2L4_LEN + TALLY_LEN) ||
	    tp->stats.rx_pkts != before.rx_pkts ||
	    tp->stats.tx_pkts != before.tx_pkts)
		die("side %u: frames to itself: loop %llu, rx %llu, tx %llu "
		    "more (want %u, 0, 0)\n", self,
		    (unsigned long long)(tp->stats.loop_pkts -
					 before.loop_pkts),
		    (unsigned long long)(tp->stats.rx_pkts - before.rx_pkts),
		    (unsigned long long)(tp->stats.tx_pkts - before.tx_pkts),
		    BATCH);
}

static void side_run(uint16_t self, const char *vdev,
		     const struct link_emu_config *emu, int ready_fd,
		     int go_fd)
{
	struct transport tp;
	struct transport_config c = {
		.kind = "dpdk", .self = self, .n_nodes = 2, .addrs = addrs,
		.mtu = 2048, .port_id = 0, .mbufs = 4095,
	};
	struct tly_addr wrong_port = addrs[!self], wrong_mac = addrs[!self];
	struct transport_rx rx[TRANSPORT_RX_BURST];
	char eal[512], path[128], b = 1;
	uint32_t sent = 0, got = 0, i;
	uint64_t t0, last = 0, dt;
	int fd, n;

	snprintf(path, sizeof(path), "/var/run/netns/%s", ns_name[self]);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET))
		die("side %u: cannot enter %s\n", self, path);
	close(fd);
	/*
	 * One core each: the EAL pins its main thread.  --no-huge implies
	 * --legacy-mem, which --in-memory refuses: --no-shconf instead.
	 */
	snprintf(eal, sizeof(eal),
		 "-l %u --no-huge -m 256 --no-shconf --no-telemetry --no-pci --file-prefix=tptest%d%u --log-level=lib.eal:error --vdev=%s,iface=%s",
		 self % 2, (int)getpid(), self, vdev, if_name[self]);
	c.eal_args = eal;
	if (emu)
		c.emu = *emu;
	if (transport_open(&tp, &c))
		die("side %u: dpdk transport open failed (%s)\n", self, vdev);
	if (!tp.full_frames)
		die("side %u: dpdk must carry full frames\n", self);
	/* a second DPDK transport in one process must be refused */
	{
		struct transport tp2;

		if (transport_open(&tp2, &c) != -EBUSY)
			die("side %u: second open not refused\n", self);
	}
	if (write(ready_fd, &b, 1) != 1 || read(go_fd, &b, 1) != 1)
		die("side %u: barrier\n", self);

	wrong_port.port++;
	wrong_mac.mac[5] ^= 0x40;
	build(&tp, self, !self, UINT32_MAX, &wrong_port);
	build(&tp, self, !self, UINT32_MAX - 1, &wrong_mac);
	t0 = transport_now_ns();
	while (got < N_FRAMES) {
		uint64_t now = transport_now_ns();

		/* lock step: batch k goes once the peer's batch k-1 is in */
		if (sent < N_FRAMES && got >= sent) {
			for (i = 0; i < BATCH && sent < N_FRAMES; i++)
				build(&tp, self, !self, sent++, NULL);
		}
		transport_tx_flush(&tp, now);
		n = transport_rx_burst(&tp, rx, TRANSPORT_RX_BURST);
		for (i = 0; i < (uint32_t)n; i++)
			check(self, !self, rx[i].data, rx[i].len, got++);
		if (n > 0) {
			transport_rx_release(&tp, rx, n);
			last = now;
		} else if (last && now - last > STALL_NS) {
			die("side %u (%s): stalled: %u of %u frames in, %u sent, tx_drops %llu\n",
			    self, vdev, got, N_FRAMES, sent,
			    (unsigned long long)tp.stats.tx_drops);
		} else if (!last && now - t0 > STALL_NS) {
			die("side %u (%s): nothing received in %llu ms\n",
			    self, vdev, (unsigned long long)(STALL_NS / MS));
		} else {
			/* short: cut shorter when frames wait to go */
			transport_idle_wait(&tp, now, 20000);
		}
	}
	/* let our last batch reach the peer before we go: bounded by time,
	 * not by turns (an idle wait ends at the emulator's next release, a
	 * frame's time on a slow emulated link, not after a whole 1 ms) */
	for (uint64_t end = transport_now_ns() + STALL_NS;
	     transport_tx_pending(&tp) && transport_now_ns() < end;) {
		transport_tx_flush(&tp, transport_now_ns());
		transport_idle_wait(&tp, transport_now_ns(), 1 * MS);
	}
	dt = transport_now_ns() - t0;
	fprintf(stderr, "side %u (%s): %u frames of %u bytes each way in %.3f s: %.0f kpps, %.2f Gb/s per direction; rx_filtered %llu\n",
		self, vdev, N_FRAMES, TLY_L2L4_LEN + TALLY_LEN, dt / 1e9,
		N_FRAMES / (dt / 1e6),
		N_FRAMES * (TLY_L2L4_LEN + TALLY_LEN) * 8.0 / dt,
		(unsigned long long)tp.stats.rx_filtered);
	if (tp.stats.rx_filtered < 2)
		die("side %u: the two stray frames were not filtered\n", self);
	if (!emu)
		self_loop(&tp, self);
	/* the emulated line rate bounds the run (full frames + 24 bytes) */
	if (emu && emu->rate_bps &&
	    dt < (uint64_t)(0.95 * N_FRAMES * (TLY_L2L4_LEN + TALLY_LEN +
					      TLY_WIRE_EXTRA) * 8 * 1e9 /
			   emu->rate_bps))
		die("side %u: %.3f s is faster than the emulated %llu b/s\n",
		    self, dt / 1e9, (unsigned long long)emu->rate_bps);
	/* keep polling a little so that the peer finishes too */
	for (i = 0; i < 200; i++) {
		n = transport_rx_burst(&tp, rx, TRANSPORT_RX_BURST);
		if (n > 0)
			transport_rx_release(&tp, rx, n);
		transport_idle_wait(&tp, transport_now_ns(), 1 * MS);
	}
	transport_close(&tp);
	/* and the EAL cannot come back in this process */
	if (transport_open(&tp, &c) != -EALREADY)
		die("side %u: reopen after close not refused\n", self);
	_exit(0);
}

static void mq_side_run(uint16_t self, const char *vdev, int ready_fd,
			int go_fd);

static void run_pair(const char *vdev, const struct link_emu_config *emu,
		     bool mq)
{
	int ready[2], go[2][2], st, i, done = 0;
	pid_t pid[2];
	char b = 1;
	uint64_t t0;

	assert_int_equal(pipe(ready), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(pipe(go[i]), 0);
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0 && mq)
			mq_side_run((uint16_t)i, vdev, ready[1], go[i][0]);
		if (pid[i] == 0)
			side_run((uint16_t)i, vdev, emu, ready[1], go[i][0]);
	}
	/* both ports up before anyone sends: a veth drops what nobody reads */
	t0 = transport_now_ns();
	for (i = 0; i < 2;) {
		struct pollfd pfd = { .fd = ready[0], .events = POLLIN };

		if (poll(&pfd, 1, 100) == 1 && read(ready[0], &b, 1) == 1) {
			i++;
			continue;
		}
		if (waitpid(-1, &st, WNOHANG) > 0 ||
		    transport_now_ns() - t0 > 60000 * MS) {
			kill(pid[0], SIGKILL);
			kill(pid[1], SIGKILL);
			while (wait(NULL) > 0)
				;
			fail_msg("%s: a side did not come up (see its message above)",
				 vdev);
		}
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(write(go[i][1], &b, 1), 1);
	t0 = transport_now_ns();
	while (done < 2) {
		pid_t p = waitpid(-1, &st, WNOHANG);

		if (p == pid[0] || p == pid[1]) {
			if (!WIFEXITED(st) || WEXITSTATUS(st)) {
				kill(pid[0], SIGKILL);
				kill(pid[1], SIGKILL);
				while (wait(NULL) > 0)
					;
				fail_msg("%s: a side failed (status %d)", vdev,
					 st);
			}
			done++;
			continue;
		}
		if (transport_now_ns() - t0 > 120000 * MS) {
			kill(pid[0], SIGKILL);
			kill(pid[1], SIGKILL);
			while (wait(NULL) > 0)
				;
			fail_msg("%s: timed out", vdev);
		}
		usleep(10000);
	}
	close(ready[0]);
	close(ready[1]);
	for (i = 0; i < 2; i++) {
		close(go[i][0]);
		close(go[i][1]);
	}
}

/* ---- two queue pairs per port ------------------------------------------ */

#define MQ 2
/* the queue pairs each port has: MQ, or 1 (net_af_xdp on a veth), when
 * thread 1 receives only through the split and sends on queue 0 */
static uint16_t mq_hw = MQ;
#define MQ_FRAMES 20000
#define MQ_WINDOW 256		/* our frames ahead of the peer's */
#define MQ_SRC_PORTS 16

/* the shard (queue) frame @seq is for: mixed, so it is not seq's parity */
static uint16_t mq_shard(uint32_t seq)
{
	return (uint16_t)((seq ^ (seq >> 3) ^ (seq >> 7)) % MQ);
}

struct mq_side {
	uint16_t self;
	struct transport tp[MQ];
	_Atomic uint32_t next_seq, sent, got;
	_Atomic uint8_t seen[MQ_FRAMES];
	uint32_t got_by[MQ];		/* each thread's own */
};

struct mq_thread {
	struct mq_side *s;
	uint16_t q;
};

/* frame @seq to the peer's port base + shard, from one of 16 ports */
static void mq_build(struct transport *tp, uint16_t self, uint32_t seq,
		     uint16_t dport)
{
	struct tly_tx_ops ops = transport_tx_ops(tp);
	struct tly_addr src = addrs[self], dst = addrs[!self];
	size_t len = TLY_L2L4_LEN + TALLY_LEN, i;
	uint8_t *f = ops.alloc(ops.ctx, len), *p;

	if (!f)
		die("side %u: tx_alloc failed at %u\n", self, seq);
	src.port = (uint16_t)(40000 + seq % MQ_SRC_PORTS);
	dst.port = dport;
	tly_l2l4_write(f, &src, &dst, 0, TALLY_LEN);
	p = f + TLY_L2L4_LEN;
	memcpy(p, &seq, 4);
	for (i = 4; i < TALLY_LEN; i++)
		p[i] = (uint8_t)(seq * 7 + i + self);
	ops.send(ops.ctx, !self, f, len);
}

static void mq_check(struct mq_side *s, uint16_t q, const uint8_t *f,
		     size_t len)
{
	uint16_t from = !s->self;
	const uint8_t *p = f + TLY_L2L4_LEN;
	size_t tl, i;
	uint32_t seq;

	/* parse checks the destination port: our queue's, base + q */
	if (tly_l2l4_parse(f, len, (uint16_t)(addrs[s->self].port + q),
			   &tl) != TLY_OK || tl != TALLY_LEN)
		die("side %u queue %u: bad headers (len %zu)\n", s->self, q,
		    len);
	memcpy(&seq, p, 4);
	if (seq >= MQ_FRAMES || mq_shard(seq) != q)
		die("side %u queue %u: frame %u is not this queue's\n",
		    s->self, q, seq);
	for (i = 4; i < TALLY_LEN; i++)
		if (p[i] != (uint8_t)(seq * 7 + i + from))
			die("side %u: frame %u: byte %zu differs\n", s->self,
			    seq, i);
	if (atomic_exchange(&s->seen[seq], 1))
		die("side %u queue %u: frame %u received twice\n", s->self, q,
		    seq);
	s->got_by[q]++;
	atomic_fetch_add(&s->got, 1);
}

static void *mq_thread_main(void *arg)
{
	struct mq_thread *t = arg;
	struct mq_side *s = t->s;
	struct transport *tp = &s->tp[t->q];
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t t0 = transport_now_ns(), last = t0;
	int n;

	if (transport_thread_bind(tp, true))
		die("side %u queue %u: thread bind\n", s->self, t->q);
	/* one frame to a port no queue has: filtered wherever it lands */
	if (t->q == 0)
		mq_build(tp, s->self, MQ_FRAMES,
			 (uint16_t)(addrs[!s->self].port + MQ));
	while (atomic_load(&s->got) < MQ_FRAMES) {
		uint64_t now = transport_now_ns();

		while (atomic_load(&s->sent) <
		       atomic_load(&s->got) + MQ_WINDOW) {
			uint32_t seq = atomic_fetch_add(&s->next_seq, 1);

			if (seq >= MQ_FRAMES)
				break;
			mq_build(tp, s->self, seq,
				 (uint16_t)(addrs[!s->self].port +
					    mq_shard(seq)));
			atomic_fetch_add(&s->sent, 1);
		}
		transport_tx_flush(tp, now);
		n = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (int i = 0; i < n; i++)
			mq_check(s, t->q, rx[i].data, rx[i].len);
		if (n > 0) {
			transport_rx_release(tp, rx, n);
			last = now;
		} else if (now - last > STALL_NS) {
			die("side %u queue %u: stalled: %u of %u frames in, %u sent (this queue: tx %llu, tx drops %llu, rx %llu, rx drops %llu, passed on %llu, taken %llu)\n",
			    s->self, t->q, atomic_load(&s->got), MQ_FRAMES,
			    atomic_load(&s->sent),
			    (unsigned long long)tp->stats.tx_pkts,
			    (unsigned long long)tp->stats.tx_drops,
			    (unsigned long long)tp->stats.rx_pkts,
			    (unsigned long long)tp->stats.rx_drops,
			    (unsigned long long)tp->stats.rx_handoff_out,
			    (unsigned long long)tp->stats.rx_handoff_in);
		} else {
			transport_idle_wait(tp, now, 20000);
		}
	}
	for (uint64_t end = transport_now_ns() + STALL_NS;
	     transport_tx_pending(tp) && transport_now_ns() < end;) {
		transport_tx_flush(tp, transport_now_ns());
		transport_idle_wait(tp, transport_now_ns(), 1 * MS);
	}
	/* frames passed to a queue whose thread has finished: none may
	 * come (all are in), but poll a while for the peer's stragglers */
	for (int i = 0; i < 100; i++) {
		n = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (int j = 0; j < n; j++)
			mq_check(s, t->q, rx[j].data, rx[j].len);
		if (n > 0)
			transport_rx_release(tp, rx, n);
		transport_idle_wait(tp, transport_now_ns(), 1 * MS);
	}
	transport_thread_bind(tp, false);
	return NULL;
}

/* @vdev: the device and its queue count option ("net_af_packet0,qpairs=2");
 * net_af_xdp only with one queue pair (mq_hw = 1): in DPDK 22.11 it takes
 * the queue count from the interface's combined channels, which a veth
 * does not report ("Specified queue count 2 is larger than combined queue
 * count 1") */
static void mq_side_run(uint16_t self, const char *vdev, int ready_fd,
			int go_fd)
{
	static struct mq_side s;
	struct transport_config c = {
		.kind = "dpdk", .self = self, .n_nodes = 2, .addrs = addrs,
		.mtu = 2048, .port_id = 0, .mbufs = 4095, .queues = MQ,
	};
	struct tly_addr mine[2] = { addrs[0], addrs[1] };
	struct mq_thread th[MQ];
	pthread_t pt[MQ];
	uint64_t hw_rx[MQ], out = 0, want[MQ] = { 0 }, filtered = 0;
	char eal[512], path[128], b = 1;
	struct transport extra;
	int fd;

	s.self = self;
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns_name[self]);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET))
		die("side %u: cannot enter %s\n", self, path);
	close(fd);
	if (memif_dir[0])	/* side 0 the server, side 1 the client */
		snprintf(eal, sizeof(eal),
			 "-l %u --no-huge -m 256 --no-shconf --no-telemetry --no-pci --file-prefix=tpmq%d%u --log-level=lib.eal:error --vdev=%s,role=%s,id=0,socket=%s/m.sock,socket-abstract=no",
			 self % 2, (int)getpid(), self, vdev,
			 self ? "client" : "server", memif_dir);
	else
		snprintf(eal, sizeof(eal),
			 "-l %u --no-huge -m 256 --no-shconf --no-telemetry --no-pci --file-prefix=tpmq%d%u --log-level=lib.eal:error --vdev=%s,iface=%s",
			 self % 2, (int)getpid(), self, vdev, if_name[self]);
	c.eal_args = eal;
	/* queue 1 before queue 0: nothing to attach to */
	c.queue = 1;
	if (transport_open(&extra, &c) != -ENODEV)
		die("side %u: queue 1 opened before queue 0\n", self);
	/* a result group needs one queue (the split goes by port): refused
	 * before the EAL starts, which it does once a process */
	c.queue = 0;
	c.group_ip = 0xef630001;
	c.group_port = 47100;
	if (transport_open(&extra, &c) != -EINVAL)
		die("side %u: a result group with %u queues not refused\n",
		    self, MQ);
	c.group_ip = 0;
	c.group_port = 0;
	for (uint16_t q = 0; q < MQ; q++) {
		/* queue q's address table: our port is base + q */
		mine[self].port = (uint16_t)(addrs[self].port + q);
		c.addrs = mine;
		c.queue = q;
		if (transport_open(&s.tp[q], &c))
			die("side %u: queue %u does not open\n", self, q);
	}
	c.queue = 1;
	if (transport_open(&extra, &c) != -EBUSY)
		die("side %u: queue 1 opened twice\n", self);
	/* memif connects on its own time (queue 0's rx supervises the
	 * client): until a frame leaves, the port drops what it is given.
	 * The frames go to no queue's port: the peer filters them. */
	for (int i = 0; memif_dir[0] && !s.tp[0].stats.tx_pkts; i++) {
		struct transport_rx rx[TRANSPORT_RX_BURST];
		int n;

		if (i == 2000)
			die("side %u: the memif link does not come up\n",
			    self);
		mq_build(&s.tp[0], self, MQ_FRAMES + 1,
			 (uint16_t)(addrs[!self].port + MQ));
		transport_tx_flush(&s.tp[0], transport_now_ns());
		n = transport_rx_burst(&s.tp[0], rx, TRANSPORT_RX_BURST);
		if (n > 0)
			transport_rx_release(&s.tp[0], rx, n);
		transport_idle_wait(&s.tp[0], transport_now_ns(), 5 * MS);
	}
	if (write(ready_fd, &b, 1) != 1 || read(go_fd, &b, 1) != 1)
		die("side %u: barrier\n", self);
	for (uint16_t q = 0; q < MQ; q++) {
		th[q] = (struct mq_thread){ .s = &s, .q = q };
		if (pthread_create(&pt[q], NULL, mq_thread_main, &th[q]))
			die("side %u: pthread_create\n", self);
	}
	for (uint16_t q = 0; q < MQ; q++)
		pthread_join(pt[q], NULL);
	for (uint32_t seq = 0; seq < MQ_FRAMES; seq++) {
		if (!atomic_load(&s.seen[seq]))
			die("side %u: frame %u never came\n", self, seq);
		want[mq_shard(seq)]++;
	}
	for (uint16_t q = 0; q < MQ; q++) {
		const struct transport_stats *st = &s.tp[q].stats;

		/* what came off the wire on queue q, whoever took it */
		hw_rx[q] = st->rx_pkts - st->rx_handoff_in +
			   st->rx_handoff_out;
		out += st->rx_handoff_out;
		filtered += st->rx_filtered;
		fprintf(stderr, "side %u queue %u: wire rx %llu, own %u (want %llu), tx %llu, passed on %llu, taken %llu, filtered %llu\n",
			self, q, (unsigned long long)hw_rx[q], s.got_by[q],
			(unsigned long long)want[q],
			(unsigned long long)st->tx_pkts,
			(unsigned long long)st->rx_handoff_out,
			(unsigned long long)st->rx_handoff_in,
			(unsigned long long)st->rx_filtered);
		if (s.got_by[q] != want[q] || st->rx_pkts != want[q])
			die("side %u queue %u: %u frames, its shard has %llu\n",
			    self, q, s.got_by[q], (unsigned long long)want[q]);
		if (!st->tx_pkts || !hw_rx[q] != (q >= mq_hw))
			die("side %u queue %u: %llu frames off the wire (a queue pair of its own: %s), %llu sent\n",
			    self, q, (unsigned long long)hw_rx[q],
			    q < mq_hw ? "yes" : "no",
			    (unsigned long long)st->tx_pkts);
	}
	if (!out)
		die("side %u: no frame needed the software split\n", self);
	if (s.tp[0].stats.rx_handoff_out != s.tp[1].stats.rx_handoff_in ||
	    s.tp[1].stats.rx_handoff_out != s.tp[0].stats.rx_handoff_in)
		die("side %u: frames passed on and taken differ\n", self);
	if (!filtered)
		die("side %u: the frame to no queue's port was not filtered\n",
		    self);
	/* queue 1 first: the ports stay until the last queue closes */
	transport_close(&s.tp[1]);
	transport_close(&s.tp[0]);
	c.queue = 0;
	if (transport_open(&extra, &c) != -EALREADY)
		die("side %u: reopen after close not refused\n", self);
	_exit(0);
}

static void test_af_packet(void **state)
{
	(void)state;
	run_pair("net_af_packet0", NULL, false);
}

/* the emulator under DPDK: 200 Mb/s and 200 us each way, no faults */
static void test_af_packet_emu(void **state)
{
	struct link_emu_config emu = {
		.rate_bps = 200000000ull, .delay_ns = 200000,
	};

	(void)state;
	run_pair("net_af_packet0", &emu, false);
}

static void test_af_xdp(void **state)
{
	(void)state;
	run_pair("net_af_xdp0", NULL, false);
}

/* net_memif: 2 queue pairs a side (the client's count is negotiated with
 * the server's) */
static void test_memif_2queues(void **state)
{
	char path[128];

	(void)state;
	snprintf(memif_dir, sizeof(memif_dir), "/tmp/tally-tpmq-XXXXXX");
	assert_non_null(mkdtemp(memif_dir));
	run_pair("net_memif0", NULL, true);
	snprintf(path, sizeof(path), "%s/m.sock", memif_dir);
	unlink(path);
	assert_int_equal(rmdir(memif_dir), 0);
	memif_dir[0] = '\0';
}

static void test_af_packet_2queues(void **state)
{
	(void)state;
	run_pair("net_af_packet0,qpairs=2", NULL, true);
}

/* two threads on net_af_xdp's one queue pair: thread 1 takes its frames
 * from the split and sends on queue 0 in turn with thread 0 */
static void test_af_xdp_2threads_1queue(void **state)
{
	(void)state;
	mq_hw = 1;
	run_pair("net_af_xdp0", NULL, true);
	mq_hw = MQ;
}

static void test_af_packet_2threads_1queue(void **state)
{
	(void)state;
	mq_hw = 1;
	run_pair("net_af_packet0", NULL, true);
	mq_hw = MQ;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_af_packet),
		cmocka_unit_test(test_af_xdp),
		cmocka_unit_test(test_af_packet_emu),
		cmocka_unit_test(test_af_packet_2queues),
		cmocka_unit_test(test_memif_2queues),
		cmocka_unit_test(test_af_xdp_2threads_1queue),
		cmocka_unit_test(test_af_packet_2threads_1queue),
	};

	/* TALLY_TEST_FILTER=pattern runs only the matching tests */
	if (getenv("TALLY_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TALLY_TEST_FILTER"));
	return cmocka_run_group_tests(tests, ns_setup, ns_teardown);
}
