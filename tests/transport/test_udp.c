// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_udp.c - the kernel UDP transport over loopback (127.0.0.x, several
 * ports) in one process: bursts both ways, order and contents, batches
 * larger than a burst, a full tx queue, send errors, wait_fd wake-ups,
 * and the link emulator's loss and rate on top.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>

#include "dataplane/clock.h"
#include "dataplane/transport/transport.h"
#include "frames.h"
#include "tp_nodes.h"

#define MS 1000000ull
#define N_NODES 3

static struct tly_addr addrs[N_NODES];


static void open_node(struct transport *tp, uint16_t self,
		      const struct link_emu_config *emu)
{
	struct transport_config c = {
		.kind = "udp", .self = self, .n_nodes = N_NODES,
		.addrs = addrs, .mtu = 1500,
	};

	if (emu)
		c.emu = *emu;
	tp_track(tp);
	assert_int_equal(transport_open(tp, &c), 0);
	assert_false(tp->full_frames);
	assert_true(tp->ops->wait_fd(tp) >= 0);
}

static void test_exchange(void **state)
{
	static struct transport a, b, c;
	static uint32_t sb[4000], sc[4000], sa[4000];
	uint32_t round, nb = 0, nc = 0, na = 0;

	(void)state;
	open_node(&a, 0, NULL);
	open_node(&b, 1, NULL);
	open_node(&c, 2, NULL);
	/* rounds of 300: more than a sendmmsg batch and an rx burst */
	for (round = 0; round < 10; round++) {
		uint32_t f = round * 300;

		assert_int_equal(tp_send_frames(&a, 1, f, 300), 300);
		assert_int_equal(tp_send_frames(&a, 2, f, 300), 300);
		assert_int_equal(tp_send_frames(&b, 0, f, 300), 300);
		assert_int_equal(transport_tx_pending(&a), 600);
		assert_int_equal(transport_tx_flush(&a, transport_now_ns()),
				 600);
		assert_int_equal(transport_tx_flush(&b, transport_now_ns()),
				 300);
		assert_int_equal(transport_tx_pending(&a), 0);
		nb += tp_recv_frames(&b, NULL, sb + nb, 300, 2000 * MS);
		nc += tp_recv_frames(&c, NULL, sc + nc, 300, 2000 * MS);
		na += tp_recv_frames(&a, NULL, sa + na, 300, 2000 * MS);
	}
	assert_int_equal(nb, 3000);
	assert_int_equal(nc, 3000);
	assert_int_equal(na, 3000);
	tp_assert_in_order(sb, nb, 0);
	tp_assert_in_order(sc, nc, 0);
	tp_assert_in_order(sa, na, 0);
	assert_int_equal(a.stats.tx_pkts, 6000);
	assert_int_equal(b.stats.rx_pkts, 3000);
	assert_int_equal(a.stats.tx_drops, 0);
	transport_close(&a);
	transport_close(&b);
	transport_close(&c);
}

static void test_queue_full(void **state)
{
	static struct transport a, b;
	struct tly_tx_ops ops;
	static uint32_t sb[2048];
	uint32_t queued;

	(void)state;
	open_node(&a, 0, NULL);
	open_node(&b, 1, NULL);
	ops = transport_tx_ops(&a);
	/* the tx queue holds 1024 frames; past that alloc says no */
	queued = tp_send_frames(&a, 1, 0, 1100);
	assert_int_equal(queued, 1024);
	assert_int_equal(a.stats.tx_drops, 1100 - 1024);
	assert_null(ops.alloc(ops.ctx, 100));
	/* too long for a buffer */
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 1024);
	assert_null(ops.alloc(ops.ctx, 1501));
	/* room again after the flush */
	assert_int_equal(tp_send_frames(&a, 1, 5000, 10), 10);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 10);
	/* first 1024 frames (0..1023 as numbered by send_frames) */
	assert_true(tp_recv_frames(&b, NULL, sb, 1034, 500 * MS) > 0);
	transport_close(&a);
	transport_close(&b);
}

static void test_send_error_drops(void **state)
{
	struct tly_addr bad[N_NODES];
	static struct transport a, b;
	struct transport_config c = {
		.kind = "udp", .self = 0, .n_nodes = N_NODES, .addrs = bad,
		.mtu = 1500,
	};
	uint32_t sb[16];

	(void)state;
	memcpy(bad, addrs, sizeof(bad));
	bad[2].port = 0;	/* sendto port 0: EINVAL, not back-pressure */
	tp_track(&a);
	assert_int_equal(transport_open(&a, &c), 0);
	open_node(&b, 1, NULL);
	tp_send_frames(&a, 1, 0, 3);
	tp_send_frames(&a, 2, 3, 2);
	tp_send_frames(&a, 1, 5, 3);
	/* the bad frames are dropped and counted, the rest go out */
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 6);
	assert_int_equal(a.stats.tx_drops, 2);
	assert_int_equal(transport_tx_pending(&a), 0);
	assert_int_equal(tp_recv_frames(&b, NULL, sb, 6, 1000 * MS), 6);
	assert_int_equal(sb[2], 2);
	assert_int_equal(sb[3], 5);
	transport_close(&a);
	transport_close(&b);
}

struct late_send {
	struct transport *tp;
	uint64_t delay_ns;
};

static void *late_sender(void *arg)
{
	struct late_send *ls = arg;
	struct timespec ts = { 0, (long)ls->delay_ns };

	nanosleep(&ts, NULL);
	tp_send_frames(ls->tp, 1, 0, 1);
	transport_tx_flush(ls->tp, transport_now_ns());
	return NULL;
}

static void test_wait_fd_wakes(void **state)
{
	static struct transport a, b;
	struct late_send ls = { &a, 50 * MS };
	pthread_t th;
	uint64_t t0, dt;
	uint32_t s;

	(void)state;
	open_node(&a, 0, NULL);
	open_node(&b, 1, NULL);
	/* idle: sleeps the full time (no spinning, no early return) */
	t0 = transport_now_ns();
	transport_idle_wait(&b, t0, 30 * MS);
	dt = transport_now_ns() - t0;
	assert_in_range(dt, 29 * MS, 500 * MS);
	/* a frame arriving mid-sleep wakes it */
	assert_int_equal(pthread_create(&th, NULL, late_sender, &ls), 0);
	t0 = transport_now_ns();
	transport_idle_wait(&b, t0, 5000 * MS);
	dt = transport_now_ns() - t0;
	pthread_join(th, NULL);
	assert_in_range(dt, 40 * MS, 2000 * MS);
	assert_int_equal(tp_recv_frames(&b, NULL, &s, 1, 100 * MS), 1);
	transport_close(&a);
	transport_close(&b);
}

static void test_emu_loss(void **state)
{
	struct link_emu_config emu = { .loss_ppm = 100000, .seed = 5 };
	static struct transport a, b;
	static uint32_t sb[2000];
	uint32_t got, i, round, total = 0;

	(void)state;
	open_node(&a, 0, &emu);
	open_node(&b, 1, NULL);
	assert_non_null(a.emu);
	assert_null(b.emu);
	for (round = 0; round < 10; round++) {
		assert_int_equal(tp_send_frames(&a, 1, round * 200, 200), 200);
		transport_tx_flush(&a, transport_now_ns());
		got = tp_recv_frames(&b, &a, sb + total, 200 - 0, 200 * MS);
		total += got;
	}
	/* 10 %: 200 expected, sd ~13 */
	assert_in_range(a.stats.emu_lost, 200 - 70, 200 + 70);
	assert_int_equal(total, 2000 - a.stats.emu_lost);
	assert_int_equal(a.stats.tx_pkts, total);
	assert_int_equal(b.stats.rx_pkts, total);
	for (i = 1; i < total; i++)	/* lost ones missing, order kept */
		assert_true(sb[i] > sb[i - 1]);
	transport_close(&a);
	transport_close(&b);
}

static void test_emu_rate(void **state)
{
	/* 100 Mb/s; 1000-byte packets are 1066 bytes on the wire: 85.28 us */
	struct link_emu_config emu = { .rate_bps = 100000000ull };
	const uint64_t ft = 85280;
	static struct transport a, b;
	static uint32_t sb[200];
	uint64_t t0, t1, dt;
	uint32_t i;

	(void)state;
	open_node(&a, 0, &emu);
	open_node(&b, 1, NULL);
	t0 = transport_now_ns();
	for (i = 0; i < 200; i++) {
		uint8_t *f = transport_tx_ops(&a).alloc(&a, 1000);

		tp_frame_fill(f, 1000 + i, 1, 1000);
		/* tp_frame_len() does not apply here: check by hand below */
		transport_tx_ops(&a).send(&a, 1, f, 1000);
	}
	assert_true(transport_tx_pending(&a) > 150);
	/* idle_wait is cut short by the emulator's next release */
	t1 = transport_now_ns();
	transport_idle_wait(&a, t1, 1000 * MS);
	assert_true(transport_now_ns() - t1 < 50 * MS);
	i = 0;
	while (i < 200 && transport_now_ns() - t0 < 2000 * MS) {
		struct transport_rx rx[TRANSPORT_RX_BURST];
		int n, j;

		transport_tx_flush(&a, transport_now_ns());
		n = transport_rx_burst(&b, rx, TRANSPORT_RX_BURST);
		for (j = 0; j < n; j++) {
			assert_int_equal(rx[j].len, 1000);
			memcpy(&sb[i], rx[j].data, 4);
			assert_int_equal(sb[i], 1000 + i);
			i++;
		}
		transport_rx_release(&b, rx, n);
		if (!n)
			transport_idle_wait(&a, transport_now_ns(), 1 * MS);
	}
	dt = transport_now_ns() - t0;
	assert_int_equal(i, 200);
	/* 200 frames take 17 ms at this rate, however fast we send */
	assert_true(dt >= 199 * ft);
	assert_true(dt < 200 * ft + 500 * MS);
	transport_close(&a);
	transport_close(&b);
}

static void test_emu_ingress_rate(void **state)
{
	struct link_emu_config emu = { .rate_bps = 100000000ull };
	static struct transport a, b;
	static uint32_t sb[100];
	uint64_t t0, dt;

	(void)state;
	open_node(&a, 0, NULL);
	open_node(&b, 1, &emu);
	t0 = transport_now_ns();
	assert_int_equal(tp_send_frames(&a, 1, 0, 100), 100);
	transport_tx_flush(&a, transport_now_ns());
	assert_int_equal(tp_recv_frames(&b, NULL, sb, 100, 2000 * MS), 100);
	dt = transport_now_ns() - t0;
	tp_assert_in_order(sb, 100, 0);
	/* frames average 710 bytes + 66 on the wire: ~6.2 ms at 100 Mb/s */
	assert_true(dt >= 5 * MS);
	transport_close(&a);
	transport_close(&b);
}

/*
 * How far the wall clock stepped against the monotonic one since
 * @mono_minus_real was read: an arrival stamp is CLOCK_REALTIME, moved
 * onto the monotonic clock at the read, so a step in between (this VM's
 * clock is set by its host) moves it by as much.
 */
static uint64_t wall_step_since(int64_t mono_minus_real)
{
	int64_t step = tly_mono_minus_real_ns() - mono_minus_real;

	if (step < 0)
		step = -step;
	if (step > 20000)
		printf("the wall clock moved by %lld ns during the test\n",
		       (long long)step);
	return (uint64_t)step;
}

/*
 * With a delay, the receiver stamps arrivals: a frame read late (the
 * receiving thread was asleep) is still due at its arrival + delay, not
 * at the read + delay.  The sender does not hold it.
 */
static void test_emu_delay_from_arrival(void **state)
{
	/* a delay far longer than a loaded machine's oversleep, so the
	 * late read still comes before the frame is due */
	const uint64_t delay = 200 * MS, read_late = 2 * MS;
	struct link_emu_config emu = { .delay_ns = delay };
	static struct transport a, b;
	struct transport_rx rx[4];
	uint64_t before, after, due, step, t = 0;
	int64_t mono_minus_real;
	uint32_t seq = 0;
	int n = 0;

	(void)state;
	open_node(&a, 0, &emu);
	open_node(&b, 1, &emu);
	assert_true(a.rx_stamps && b.rx_stamps);
	mono_minus_real = tly_mono_minus_real_ns();
	before = transport_now_ns();
	assert_int_equal(tp_send_frames(&a, 1, 7, 1), 1);
	transport_tx_flush(&a, transport_now_ns());
	after = transport_now_ns();
	/* sent at once: nothing held on the sender's side */
	assert_int_equal(transport_tx_pending(&a), 0);
	while (transport_now_ns() < before + read_late)
		usleep(200);
	/* read late: the frame goes into the emulator, not up yet */
	assert_int_equal(transport_rx_burst(&b, rx, 4), 0);
	due = transport_emu_next_due(&b);
	/* a step of the wall clock is not the emulator's error */
	step = wall_step_since(mono_minus_real);
	assert_true(due + step >= before + delay);
	assert_true(due <= after + delay + step);
	/* and comes up once due, not before (a release takes the frames
	 * due within TRANSPORT_EMU_GATHER_NS with it; @t is read after the
	 * call that returned the frame: read before it, a slow call made it
	 * look early) */
	while (!n && transport_now_ns() < before + 10 * delay) {
		n = transport_rx_burst(&b, rx, 4);
		t = transport_now_ns();
		if (!n)
			usleep(100);
	}
	assert_int_equal(n, 1);
	assert_true(t + TRANSPORT_EMU_GATHER_NS >= due);
	/* out of the emulator, the frame arrived when it was due */
	assert_true(rx[0].arrival_ns == due);
	assert_int_equal(tp_frame_check(rx[0].data, rx[0].len, 1, &seq), 0);
	assert_int_equal(seq, 7);
	transport_rx_release(&b, rx, n);
	transport_close(&a);
	transport_close(&b);
}

/*
 * Without an emulator too, every frame carries the kernel's arrival
 * stamp: a frame read late still says when it came (the worker's RTT
 * samples end there, tly_worker_rx_at).
 */
static void test_arrival_stamp(void **state)
{
	const uint64_t read_late = 20 * MS;
	static struct transport a, b;
	struct transport_rx rx[4];
	uint64_t before, after, step, t;
	int64_t mono_minus_real;
	uint32_t seq = 0;
	int n = 0;

	(void)state;
	open_node(&a, 0, NULL);
	open_node(&b, 1, NULL);
	assert_true(b.rx_stamps);
	mono_minus_real = tly_mono_minus_real_ns();
	before = transport_now_ns();
	assert_int_equal(tp_send_frames(&a, 1, 9, 1), 1);
	transport_tx_flush(&a, transport_now_ns());
	after = transport_now_ns();
	while (transport_now_ns() < after + read_late)
		usleep(200);
	while (!n && transport_now_ns() < after + 1000 * MS) {
		n = transport_rx_burst(&b, rx, 4);
		if (!n)
			usleep(100);
	}
	t = transport_now_ns();
	assert_int_equal(n, 1);
	assert_int_equal(tp_frame_check(rx[0].data, rx[0].len, 1, &seq), 0);
	assert_int_equal(seq, 9);
	step = wall_step_since(mono_minus_real);
	assert_true(rx[0].arrival_ns + step >= before);
	/* not the read's time, read_late later (loopback delivers in the
	 * send's softirq, or soon after it in ksoftirqd) */
	assert_true(rx[0].arrival_ns <= after + read_late / 2 + step);
	assert_true(t >= after + read_late);
	transport_rx_release(&b, rx, n);
	transport_close(&a);
	transport_close(&b);
}

/*
 * A rough figure, printed: 1040-byte packets (a tally header and 256
 * words) one way, 64 in flight so a default rmem_max never overflows.
 */
static void test_throughput(void **state)
{
	static struct transport a, b;
	struct tly_tx_ops ops;
	struct transport_rx rx[TRANSPORT_RX_BURST];
	const uint32_t n = 100000, win = 64;
	uint32_t sent = 0, got = 0, seq, i;
	uint64_t t0, dt;
	int k;

	(void)state;
	open_node(&a, 0, NULL);
	open_node(&b, 1, NULL);
	ops = transport_tx_ops(&a);
	t0 = transport_now_ns();
	while (got < n && transport_now_ns() - t0 < 20000 * MS) {
		while (sent < n && sent - got < win) {
			uint8_t *f = ops.alloc(ops.ctx, 1040);

			assert_non_null(f);
			memcpy(f, &sent, 4);
			ops.send(ops.ctx, 1, f, 1040);
			sent++;
		}
		transport_tx_flush(&a, transport_now_ns());
		k = transport_rx_burst(&b, rx, TRANSPORT_RX_BURST);
		for (i = 0; i < (uint32_t)k; i++) {
			assert_int_equal(rx[i].len, 1040);
			memcpy(&seq, rx[i].data, 4);
			assert_int_equal(seq, got);
			got++;
		}
		if (k > 0)
			transport_rx_release(&b, rx, k);
		else
			transport_idle_wait(&b, transport_now_ns(), 1 * MS);
	}
	dt = transport_now_ns() - t0;
	assert_int_equal(got, n);
	printf("udp loopback: %u packets of 1040 bytes in %.3f s: %.0f kpps, %.2f Gb/s\n",
	       n, dt / 1e9, n / (dt / 1e6), n * 1040 * 8.0 / dt);
}

/* a new roster: ids move, a node goes; our own address may not change */
static void test_set_nodes(void **state)
{
	static struct transport a, b, c;
	struct tly_addr t2[N_NODES] = { addrs[0], addrs[2], addrs[1] };
	struct tly_addr moved[N_NODES];
	uint32_t s[4];

	(void)state;
	open_node(&a, 0, NULL);
	open_node(&b, 1, NULL);
	open_node(&c, 2, NULL);
	assert_int_equal(transport_set_nodes(&a, 0, N_NODES, t2), 0);
	tp_send_frames(&a, 1, 0, 2);	/* node 1 is now c */
	tp_send_frames(&a, 2, 2, 2);	/* node 2 is now b */
	transport_tx_flush(&a, transport_now_ns());
	/* frames carry their old dst in byte 4: check by hand */
	c.cfg.self = 1;
	b.cfg.self = 2;
	assert_int_equal(tp_recv_frames(&c, NULL, s, 2, 1000 * MS), 2);
	assert_int_equal(tp_recv_frames(&b, NULL, s + 2, 2, 1000 * MS), 2);
	assert_int_equal(s[1], 1);
	assert_int_equal(s[2], 2);
	c.cfg.self = 2;
	b.cfg.self = 1;
	/* shrink to two nodes: a frame queued for node 2 is dropped */
	tp_send_frames(&a, 2, 10, 1);
	assert_int_equal(transport_set_nodes(&a, 0, 2, addrs), 0);
	assert_int_equal(transport_tx_flush(&a, transport_now_ns()), 0);
	assert_int_equal(a.stats.tx_drops, 1);
	/* our own address moved: refused, the old table stays */
	memcpy(moved, addrs, sizeof(moved));
	moved[0].port++;
	assert_int_equal(transport_set_nodes(&a, 0, N_NODES, moved),
			 -EADDRNOTAVAIL);
	assert_ptr_equal(a.cfg.addrs, addrs);
	assert_int_equal(a.cfg.n_nodes, 2);
	assert_int_equal(transport_set_nodes(&a, 3, N_NODES, addrs), -EINVAL);
}

static void test_open_errors(void **state)
{
	static struct transport a, b;
	struct transport_config c = {
		.kind = "carrier-pigeon", .self = 0, .n_nodes = N_NODES,
		.addrs = addrs,
	};

	(void)state;
	tp_track(&a);
	assert_int_equal(transport_open(&a, &c), -EINVAL);
	c.kind = "udp";
	c.self = N_NODES;
	assert_int_equal(transport_open(&a, &c), -EINVAL);
	c.self = 0;
	c.bind_ip = "not-an-ip";
	assert_int_equal(transport_open(&a, &c), -EINVAL);
	c.bind_ip = NULL;
	/* a result group that is no multicast address, or has no port */
	c.group_ip = 0x0a000001;
	c.group_port = 7000;
	assert_int_equal(transport_open(&a, &c), -EINVAL);
	c.group_ip = 0xef000001;
	c.group_port = 0;
	assert_int_equal(transport_open(&a, &c), -EINVAL);
	c.group_ip = 0;
	/* the port is taken */
	open_node(&b, 0, NULL);
	assert_true(transport_open(&a, &c) < 0);
	transport_close(&b);
	transport_close(&a);	/* closing a failed open is harmless */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_exchange, tp_close_all),
		cmocka_unit_test_teardown(test_queue_full, tp_close_all),
		cmocka_unit_test_teardown(test_send_error_drops, tp_close_all),
		cmocka_unit_test_teardown(test_wait_fd_wakes, tp_close_all),
		cmocka_unit_test_teardown(test_emu_loss, tp_close_all),
		cmocka_unit_test_teardown(test_emu_rate, tp_close_all),
		cmocka_unit_test_teardown(test_emu_ingress_rate, tp_close_all),
		cmocka_unit_test_teardown(test_emu_delay_from_arrival,
					  tp_close_all),
		cmocka_unit_test_teardown(test_arrival_stamp, tp_close_all),
		cmocka_unit_test_teardown(test_throughput, tp_close_all),
		cmocka_unit_test_teardown(test_set_nodes, tp_close_all),
		cmocka_unit_test_teardown(test_open_errors, tp_close_all),
	};

	tp_loopback_addrs(addrs, N_NODES, 20000);
	tp_frames_init(1380, 1 * MS);	/* lengths within the MTU */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
