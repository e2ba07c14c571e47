// SPDX-License-Identifier: BSD-3-Clause
/*
 * udp-bench - the kernel UDP transport's one-way throughput over
 * loopback, with its offloads (UDP_SEGMENT on send, UDP_GRO on receive)
 * and without (TALLY_UDP_OFFLOAD=off: one datagram per message of
 * sendmmsg/recvmmsg).
 *
 * Two transports in one process, node 0 sending to node 1 on
 * 127.0.0.1, each driven by its own thread the way a dataplane thread
 * drives it: tx_alloc/tx_send frames of --size bytes (default 1472, a
 * full Ethernet MTU's UDP payload; the first 8 bytes a sequence number),
 * transport_tx_flush; rx_burst/rx_release, idle_wait when nothing came.
 * The sender keeps at most --window frames ahead of what the receiver
 * got, so the receive buffer never overflows and the figure is what
 * crosses, not what is offered.  A run sends for --seconds; its
 * throughput is the frames received (each checked for its sequence
 * number) times the size over the time from the first send to the last
 * receive.  --runs runs per mode, alternating modes; the figure is the
 * median:
 *	figure udp_transport_gbps_gso <median> Gbit/s
 *	figure udp_transport_gbps_plain <median> Gbit/s
 * (payload bits, tally packets, no headers).  On a shared machine the
 * numbers move with the load: the two threads want two cores.
 *
 * --one-thread drives both ends from one thread (send a window, receive
 * what came), which suffers less from a loaded machine's scheduling.
 *
 * usage: udp-bench [--size BYTES] [--seconds S] [--runs N] [--window F]
 *                  [--one-thread]
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataplane/transport/transport.h"
#include "bench_stats.h"

struct run {
	struct transport tx, rx;
	uint32_t size, window;
	uint64_t seconds_ns;
	_Atomic uint64_t sent, got;
	_Atomic int tx_done;
	uint64_t t0, t_last;
	uint64_t out_of_order;
};

static void pause_us(long us)
{
	struct timespec ts = { 0, us * 1000 };

	nanosleep(&ts, NULL);
}

/* queue what the window allows and flush; returns the frames queued */
static int send_step(struct run *r, uint64_t *seq)
{
	struct tly_tx_ops ops = transport_tx_ops(&r->tx);
	uint64_t got = atomic_load(&r->got);
	int queued = 0;

	while (*seq - got < r->window) {
		uint8_t *f = ops.alloc(ops.ctx, r->size);

		if (!f)
			break;	/* tx queue full: flush first */
		memcpy(f, seq, sizeof(*seq));
		ops.send(ops.ctx, 1, f, r->size);
		(*seq)++;
		queued++;
	}
	atomic_store(&r->sent, *seq);
	transport_tx_flush(&r->tx, transport_now_ns());
	return queued;
}

/* one rx burst, each frame's sequence number checked; returns frames */
static int recv_step(struct run *r, uint64_t *got)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t seq;
	int i, k;

	k = transport_rx_burst(&r->rx, rx, TRANSPORT_RX_BURST);
	for (i = 0; i < k; i++) {
		memcpy(&seq, rx[i].data, sizeof(seq));
		if (seq != *got || rx[i].len != r->size)
			r->out_of_order++;
		(*got)++;
	}
	if (k > 0) {
		transport_rx_release(&r->rx, rx, k);
		atomic_store(&r->got, *got);
		r->t_last = transport_now_ns();
	}
	return k;
}

static void *sender(void *arg)
{
	struct run *r = arg;
	uint64_t seq = 0, end;

	r->t0 = transport_now_ns();
	end = r->t0 + r->seconds_ns;
	while (transport_now_ns() < end) {
		if (!send_step(r, &seq))
			pause_us(10);	/* window full: let the receiver run */
		else if (transport_tx_pending(&r->tx))
			transport_idle_wait(&r->tx, transport_now_ns(),
					    TRANSPORT_TX_RETRY_NS);
	}
	while (transport_tx_pending(&r->tx)) {
		transport_tx_flush(&r->tx, transport_now_ns());
		pause_us(10);
	}
	atomic_store(&r->tx_done, 1);
	return NULL;
}

static void *receiver(void *arg)
{
	struct run *r = arg;
	uint64_t got = 0, quiet = 0;

	for (;;) {
		if (recv_step(r, &got) > 0) {
			quiet = 0;
			continue;
		}
		if (atomic_load(&r->tx_done)) {
			if (got >= atomic_load(&r->sent) || ++quiet > 200)
				break;	/* all in, or lost: 200 ms quiet */
		}
		transport_idle_wait(&r->rx, transport_now_ns(), 1000000);
	}
	return NULL;
}

/* both ends in one thread: send a window, receive what came, repeat */
static void one_thread(struct run *r)
{
	uint64_t seq = 0, got = 0, end, quiet = 0;

	r->t0 = transport_now_ns();
	end = r->t0 + r->seconds_ns;
	while (transport_now_ns() < end) {
		send_step(r, &seq);
		while (recv_step(r, &got) > 0)
			;
		if (seq - got >= r->window)
			transport_idle_wait(&r->rx, transport_now_ns(),
					    1000000);
	}
	while ((got < seq || transport_tx_pending(&r->tx)) && quiet < 200) {
		transport_tx_flush(&r->tx, transport_now_ns());
		if (recv_step(r, &got) > 0)
			quiet = 0;
		else if (++quiet)
			transport_idle_wait(&r->rx, transport_now_ns(),
					    1000000);
	}
}

static int open_pair(struct run *r, struct tly_addr *addrs)
{
	struct transport_config c = {
		.kind = "udp", .n_nodes = 2, .addrs = addrs,
		.mtu = r->size,
	};

	addrs[0].ip = addrs[1].ip = 0x7f000001u;
	addrs[0].port = addrs[1].port = 0;	/* the kernel picks */
	c.self = 1;
	if (transport_open(&r->rx, &c))
		return -1;
	addrs[1].port = r->rx.local_port;
	c.self = 0;
	if (transport_open(&r->tx, &c)) {
		transport_close(&r->rx);
		return -1;
	}
	return 0;
}

/* one run in @mode (TALLY_UDP_OFFLOAD); Gbit/s of payload, or -1 */
static double run_once(const char *mode, uint32_t size, double seconds,
		       uint32_t window, bool threads)
{
	static struct run r;
	struct tly_addr addrs[2];
	pthread_t ts, tr;
	double dt, gbps;
	uint64_t got, sent;

	memset(&r, 0, sizeof(r));
	r.size = size;
	r.window = window;
	r.seconds_ns = (uint64_t)(seconds * 1e9);
	setenv("TALLY_UDP_OFFLOAD", mode, 1);
	if (open_pair(&r, addrs))
		return -1;
	if (!threads) {
		one_thread(&r);
	} else if (pthread_create(&tr, NULL, receiver, &r) ||
		   pthread_create(&ts, NULL, sender, &r)) {
		fprintf(stderr, "udp-bench: no threads\n");
		exit(1);
	} else {
		pthread_join(ts, NULL);
		pthread_join(tr, NULL);
	}
	got = atomic_load(&r.got);
	sent = atomic_load(&r.sent);
	dt = (double)(r.t_last - r.t0) / 1e9;
	gbps = dt > 0 ? got * (double)size * 8 / dt / 1e9 : 0;
	printf("%-5s %u B: %llu frames in %.3f s: %.3f Mframes/s, %.2f Gbit/s; lost %llu, out of order %llu; tx %llu pkts, rx %llu pkts\n",
	       mode, size, (unsigned long long)got, dt, got / dt / 1e6, gbps,
	       (unsigned long long)(sent - got),
	       (unsigned long long)r.out_of_order,
	       (unsigned long long)r.tx.stats.tx_pkts,
	       (unsigned long long)r.rx.stats.rx_pkts);
	transport_close(&r.tx);
	transport_close(&r.rx);
	unsetenv("TALLY_UDP_OFFLOAD");
	return gbps;
}

int main(int argc, char **argv)
{
	uint32_t size = 1472, window = 1024;
	double seconds = 2, gso[16], plain[16];
	bool threads = true;
	int runs = 3, i;

	for (i = 1; i < argc; i += 2) {
		if (!strcmp(argv[i], "--one-thread")) {
			threads = false;
			i--;
		} else if (i + 1 == argc) {
			break;
		} else if (!strcmp(argv[i], "--size"))
			size = (uint32_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--runs"))
			runs = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--window"))
			window = (uint32_t)atoi(argv[i + 1]);
		else
			break;
	}
	if (i < argc || size < 8 || size > 65507 || runs < 1 || runs > 16 ||
	    seconds <= 0 || !window) {
		fprintf(stderr, "usage: udp-bench [--size BYTES] [--seconds S] [--runs N<=16] [--window FRAMES] [--one-thread]\n");
		return 2;
	}
	for (i = 0; i < runs; i++) {
		gso[i] = run_once("on", size, seconds, window, threads);
		plain[i] = run_once("off", size, seconds, window, threads);
		if (gso[i] < 0 || plain[i] < 0) {
			fprintf(stderr, "udp-bench: could not open the transports\n");
			return 1;
		}
	}
	printf("figure udp_transport_gbps_gso %.2f Gbit/s\n",
	       bench_median(gso, runs));
	printf("figure udp_transport_gbps_plain %.2f Gbit/s\n",
	       bench_median(plain, runs));
	return 0;
}
