// SPDX-License-Identifier: BSD-3-Clause
/*
 * dp_thread.c - a dataplane thread's poll loop, its pause handshake and
 * its published counters (see dp_thread.h).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/dp_ring.h"
#include "dataplane/dp_thread.h"

/* counters are published at least this often */
#define DP_PUBLISH_NS (5 * 1000000ull)
/* idle sleeps: timers of work in flight, a transport without a wait fd
 * (polled), and nothing to do (the control thread wakes us) */
#define DP_BUSY_SLEEP_NS 200000ull
/* busy on a transport without a wait fd (DPDK): nothing wakes us when a
 * frame comes, so the sleep is the added latency of every hop */
#define DP_BUSY_POLL_SLEEP_NS 5000ull
#define DP_POLL_SLEEP_NS 1000000ull
#define DP_IDLE_SLEEP_NS (100 * 1000000ull)
/* an idle turn faults this much of a new aggregator's sums in (64 pages,
 * tens of microseconds) instead of sleeping, until all are in */
#define DP_PREFAULT_BYTES (256 * 1024)

#define STATS_WORDS (sizeof(struct dp_stats) / sizeof(uint64_t))
_Static_assert(sizeof(struct dp_stats) % sizeof(uint64_t) == 0,
	       "dp_stats holds uint64_t only");

/* The control word: (generation << 1) | pause, written by the control
 * thread; the thread acknowledges a pause by storing its generation. */
#define CMD_PAUSE 1u

struct dp_thread {
	/* control -> thread */
	struct dp_ring sq;		/* struct tly_tensor_desc */
	/* thread -> control */
	struct dp_ring cq;		/* struct dp_completion */

	_Alignas(64) _Atomic uint32_t cmd;
	_Atomic bool stop;
	int cmd_fd;			/* eventfd: cmd or stop changed */
	uint32_t gen;			/* control thread's: last pause */
	bool stuck;			/* control thread's: no ack came */
	bool cq_asleep;			/* control thread's */

	_Alignas(64) _Atomic uint32_t ack;	/* thread: acked generation */
	_Atomic int started;		/* thread: 1, or -errno of its bind */
	int ack_fd;			/* eventfd: an ack, the start */

	/* the thread's own (the control thread's while paused) */
	_Alignas(64) struct transport *tp;
	struct tly_tx_ops tp_tx;
	struct tly_worker *worker;
	struct tly_agg *agg;
	uint64_t next_sweep;	/* switch profile: the aggregator's sweep */
	struct tly_net net;
	struct tly_addr addrs[TRANSPORT_MAX_NODES];
	struct dp_stats st;		/* counted here, published below */
	uint64_t published_ns;
	bool dirty;			/* worked since the last publish */
	bool pushed;			/* completions pushed this turn */
	struct dp_thread_cfg cfg;
	pthread_t thread;

	/* the seqlock: odd while the writer copies */
	_Alignas(64) _Atomic uint32_t seq;
	_Atomic uint64_t pub[STATS_WORDS];
};

/* ---- counters ---------------------------------------------------------- */

/*
 * Writer: one thread at a time (the dataplane thread, or the control
 * thread while the other is paused).  Words are stored with release and
 * loaded with acquire, so a reader that sees any word of a newer copy
 * also sees the odd sequence before it and retries.
 */
static void publish(struct dp_thread *t, uint64_t now)
{
	const uint64_t *w = (const uint64_t *)&t->st;
	uint32_t s = atomic_load_explicit(&t->seq, memory_order_relaxed);

	if (t->worker) {
		t->st.worker = *tly_worker_counters(t->worker);
		t->st.worker_active = tly_worker_active(t->worker);
	}
	if (t->agg) {
		t->st.agg = *tly_agg_counters(t->agg);
		t->st.agg_slots_busy = tly_agg_slots_busy(t->agg);
	}
	t->st.tp = t->tp->stats;
	atomic_store_explicit(&t->seq, s + 1, memory_order_relaxed);
	for (size_t i = 0; i < STATS_WORDS; i++)
		atomic_store_explicit(&t->pub[i], w[i], memory_order_release);
	atomic_store_explicit(&t->seq, s + 2, memory_order_release);
	t->published_ns = now;
	t->dirty = false;
}

void dp_thread_stats(struct dp_thread *t, struct dp_stats *out)
{
	uint64_t *w = (uint64_t *)out;
	uint32_t s1, s2;

	do {
		s1 = atomic_load_explicit(&t->seq, memory_order_acquire);
		for (size_t i = 0; i < STATS_WORDS; i++)
			w[i] = atomic_load_explicit(&t->pub[i],
						    memory_order_acquire);
		s2 = atomic_load_explicit(&t->seq, memory_order_relaxed);
	} while ((s1 & 1) || s1 != s2);
}

/* ---- the engine's hooks ------------------------------------------------ */

static uint8_t *tx_alloc_counted(void *ctx, size_t len)
{
	struct dp_thread *t = ctx;

	return t->tp_tx.alloc(t->tp_tx.ctx, len);
}

static void tx_send_counted(void *ctx, uint16_t dst, uint8_t *frame,
			    size_t len)
{
	struct dp_thread *t = ctx;

	if (dst < TRANSPORT_MAX_NODES) {
		t->st.peer_tx_pkts[dst]++;
		t->st.peer_tx_bytes[dst] += len;
	}
	t->tp_tx.send(t->tp_tx.ctx, dst, frame, len);
}

/* one frame for every worker of @mask: counted as sent to each */
static void tx_multicast_counted(void *ctx, uint64_t mask, uint8_t *frame,
				 size_t len)
{
	struct dp_thread *t = ctx;
	uint64_t m;

	for (m = mask; m; m &= m - 1) {
		unsigned int dst = (unsigned int)__builtin_ctzll(m);

		t->st.peer_tx_pkts[dst]++;
		t->st.peer_tx_bytes[dst] += len;
	}
	t->tp_tx.multicast(t->tp_tx.ctx, mask, frame, len);
}

struct tly_tx_ops dp_thread_tx_ops(struct dp_thread *t)
{
	return (struct tly_tx_ops){
		.alloc = tx_alloc_counted, .send = tx_send_counted,
		.multicast = t->tp_tx.multicast ? tx_multicast_counted : NULL,
		.multicast_group = t->tp_tx.multicast_group, .ctx = t,
	};
}

static void complete(struct dp_thread *t, const struct tly_tensor_desc *d,
		     int status)
{
	struct dp_completion c = { .user = (uint64_t)(uintptr_t)d->user,
				   .id = d->id, .status = status };

	if (dp_ring_push(&t->cq, &c))
		t->st.cq_overflow++;
	t->pushed = true;
}

void dp_thread_tensor_done(void *ctx, const struct tly_tensor_desc *d)
{
	complete(ctx, d, 0);
}

/* ---- one turn ---------------------------------------------------------- */

static int take_submissions(struct dp_thread *t, uint64_t now)
{
	struct tly_tensor_desc *d;
	int n = 0;

	while ((d = dp_ring_peek(&t->sq))) {
		int ret = t->worker ? tly_worker_submit(t->worker, d, now) :
				      -ENODEV;

		if (ret == -EBUSY)
			break;		/* the engine is full: next turn */
		if (ret)
			complete(t, d, ret);
		dp_ring_consume(&t->sq);
		n++;
	}
	return n;
}

static int receive(struct dp_thread *t, uint64_t now)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	/* frames passed on to another thread's queue (dpdk) are work too:
	 * more are coming, and the counter must be published */
	uint64_t passed = t->tp->stats.rx_handoff_out;
	int n = transport_rx_burst(t->tp, rx, TRANSPORT_RX_BURST);

	for (int i = 0; i < n; i++) {
		int type = tly_frame_type(&t->net, rx[i].data, rx[i].len);

		if ((type == TLY_T_DATA || type == TLY_T_CONFIRM) && t->agg)
			tly_agg_rx(t->agg, rx[i].data, rx[i].len, now);
		else if (type > 0 && t->worker)
			tly_worker_rx_at(t->worker, rx[i].data, rx[i].len,
					 now, t->tp->rx_stamps ?
					 rx[i].arrival_ns : 0);
	}
	if (n > 0)
		transport_rx_release(t->tp, rx, n);
	return n + (t->tp->stats.rx_handoff_out != passed);
}

static int run_once(struct dp_thread *t, uint64_t now)
{
	int work = take_submissions(t, now);

	work += receive(t, now);
	if (t->worker)
		tly_worker_poll(t->worker, now);
	if (t->agg)
		tly_agg_poll(t->agg, now);
	/* the switch profile's control plane: every evict_ns, off the
	 * per-packet path */
	if (t->agg && tly_agg_sweep_interval(t->agg) && now >= t->next_sweep) {
		tly_agg_sweep(t->agg, now);
		t->next_sweep = now + tly_agg_sweep_interval(t->agg);
	}
	/* a fresh clock: frames the emulator got this turn with a release
	 * already past (no delay, a fast rate) leave now, not next turn */
	work += transport_tx_flush(t->tp, transport_now_ns());
	if (t->pushed) {
		dp_ring_notify(&t->cq);
		t->pushed = false;
		work++;
	}
	return work;
}

/* ---- sleeping ---------------------------------------------------------- */

static void drain_fd(int fd)
{
	uint64_t v;

	(void)!read(fd, &v, sizeof(v));
}

static void write_fd(int fd)
{
	uint64_t one = 1;

	(void)!write(fd, &one, sizeof(one));
}

/* How long the engine's timers and the transport let us sleep. */
static uint64_t sleep_ns(struct dp_thread *t, uint64_t now)
{
	bool busy = (t->worker && (tly_worker_active(t->worker) ||
				   tly_worker_releasing(t->worker))) ||
		    (t->agg && tly_agg_slots_busy(t->agg));
	int fd = t->tp->ops->wait_fd ? t->tp->ops->wait_fd(t->tp) : -1;
	uint64_t ns = busy ? (fd < 0 ? DP_BUSY_POLL_SLEEP_NS :
			      DP_BUSY_SLEEP_NS) :
		      fd < 0 ? DP_POLL_SLEEP_NS : DP_IDLE_SLEEP_NS;

	/* up again the spin margin before the emulator's next release (0: it
	 * is closer, poll on) */
	ns = transport_emu_sleep_ns(t->tp, now, ns);
	if (!ns)
		return 0;
	/* frames the wire refused are retried soon (transport_idle_wait);
	 * not those the emulator holds: their release bounds the sleep */
	if (t->tp->ops->tx_pending && t->tp->ops->tx_pending(t->tp) > 0 &&
	    ns > TRANSPORT_TX_RETRY_NS)
		ns = TRANSPORT_TX_RETRY_NS;
	/* counters that changed are published within DP_PUBLISH_NS */
	if (t->dirty && ns > DP_PUBLISH_NS)
		ns = DP_PUBLISH_NS;
	return ns;
}

/* Sleep until a frame, a submission, a command or the next timer. */
static void idle_wait(struct dp_thread *t, uint64_t now)
{
	uint64_t ns = sleep_ns(t, now);
	struct pollfd pfd[3] = {
		{ .fd = dp_ring_fd(&t->sq), .events = POLLIN },
		{ .fd = t->cmd_fd, .events = POLLIN },
		{ .fd = t->tp->ops->wait_fd ? t->tp->ops->wait_fd(t->tp) :
						-1, .events = POLLIN },
	};
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	if (!ns)
		return;
	if (dp_ring_sleep_prepare(&t->sq) == 0 &&
	    !(atomic_load_explicit(&t->cmd, memory_order_acquire) &
	      CMD_PAUSE) &&
	    !atomic_load_explicit(&t->stop, memory_order_acquire)) {
		uint64_t start = transport_now_ns();

		t->st.sleeps++;
		/* a timeout: how late it ended sets the emulator's margin */
		if (ppoll(pfd, pfd[2].fd >= 0 ? 3 : 2, &ts, NULL) == 0 &&
		    t->tp->emu)
			transport_emu_woke(t->tp, start + ns,
					   transport_now_ns());
		/* a resume that came before paused() slept leaves the
		 * eventfd readable: empty it, or every sleep ends at once
		 * and the thread spins (the loop re-reads cmd and stop) */
		if (pfd[1].revents & POLLIN)
			drain_fd(t->cmd_fd);
	}
	dp_ring_sleep_done(&t->sq);
}

/* ---- pausing ----------------------------------------------------------- */

/* A pause was asked for: acknowledge it and wait for the resume (or the
 * stop).  Returns false when the thread must end. */
static bool paused(struct dp_thread *t, uint32_t cmd)
{
	publish(t, transport_now_ns());
	for (;;) {
		struct pollfd pfd = { .fd = t->cmd_fd, .events = POLLIN };

		if (cmd & CMD_PAUSE) {
			atomic_store_explicit(&t->ack, cmd >> 1,
					      memory_order_release);
			write_fd(t->ack_fd);
		}
		while (atomic_load_explicit(&t->cmd, memory_order_acquire) ==
		       cmd &&
		       !atomic_load_explicit(&t->stop, memory_order_acquire)) {
			poll(&pfd, 1, 100);
			drain_fd(t->cmd_fd);
		}
		if (atomic_load_explicit(&t->stop, memory_order_acquire))
			return false;
		cmd = atomic_load_explicit(&t->cmd, memory_order_acquire);
		if (!(cmd & CMD_PAUSE))
			return true;
	}
}

/* A turn that found no work: poll on, yield or sleep. */
static void idle_turn(struct dp_thread *t, uint64_t now,
		      uint64_t idle_since, uint64_t *yielded)
{
	/* an emulated frame is due within the spin margin */
	bool emu_due = t->tp->emu && !transport_emu_sleep_ns(t->tp, now, 1);

	if (emu_due && now - *yielded < TRANSPORT_EMU_SPIN_MAX_NS) {
		/* poll on without yielding, a yield on a busy core may give
		 * the core away past the release.  (Sleeping instead of the
		 * yielding spin below while frames are held made the 100 us
		 * figure worse: 1.8-1.9 against 1.4-1.7.)  But not for
		 * longer than the margin's cap: a shaped link holds a frame
		 * due every few microseconds, and loops that never yielded
		 * starved the control threads of heartbeats ("another
		 * member of the group was lost", BERT-Large through
		 * tools/experiment). */
		return;
	}
	if (emu_due || now - idle_since < t->cfg.spin_ns)
		sched_yield();	/* a peer may need this core */
	else
		idle_wait(t, now);
	*yielded = transport_now_ns();
}

static void *dp_main(void *arg)
{
	struct dp_thread *t = arg;
	uint64_t idle_since = transport_now_ns(), yielded = idle_since;
	char name[16];
	int ret;

	snprintf(name, sizeof(name), "tally-dp%u", t->cfg.index);
	pthread_setname_np(pthread_self(), name);
	ret = transport_thread_bind(t->tp, true);
	atomic_store_explicit(&t->started, ret ? ret : 1,
			      memory_order_release);
	write_fd(t->ack_fd);
	if (ret)
		return NULL;
	if (t->tp->emu)
		transport_precise_timers();	/* sleeps end on time */
	while (!atomic_load_explicit(&t->stop, memory_order_acquire)) {
		uint32_t cmd = atomic_load_explicit(&t->cmd,
						    memory_order_acquire);
		uint64_t now;

		if ((cmd & CMD_PAUSE) && !paused(t, cmd))
			break;
		now = transport_now_ns();
		t->st.turns++;
		if (run_once(t, now)) {
			idle_since = now;
			t->dirty = true;
		} else if (!t->agg ||
			   !tly_agg_prefault(t->agg, DP_PREFAULT_BYTES)) {
			idle_turn(t, now, idle_since, &yielded);
		}
		if (t->dirty && now - t->published_ns >= DP_PUBLISH_NS)
			publish(t, now);
	}
	publish(t, transport_now_ns());
	transport_thread_bind(t->tp, false);
	return NULL;
}

/* Wait for the new thread's word on its transport. */
static int wait_started(struct dp_thread *t)
{
	int ret;

	while (!(ret = atomic_load_explicit(&t->started,
					    memory_order_acquire))) {
		struct pollfd pfd = { .fd = t->ack_fd, .events = POLLIN };

		poll(&pfd, 1, 100);
	}
	drain_fd(t->ack_fd);
	return ret < 0 ? ret : 0;
}

/* ---- the control thread's side ----------------------------------------- */

int dp_thread_pause(struct dp_thread *t, uint64_t timeout_ns)
{
	uint64_t end = transport_now_ns() + timeout_ns;

	if (t->stuck)
		return -ETIMEDOUT;
	t->gen++;
	atomic_store_explicit(&t->cmd, t->gen << 1 | CMD_PAUSE,
			      memory_order_release);
	write_fd(t->cmd_fd);
	while (atomic_load_explicit(&t->ack, memory_order_acquire) != t->gen) {
		uint64_t now = transport_now_ns();
		struct pollfd pfd = { .fd = t->ack_fd, .events = POLLIN };

		if (now >= end) {
			t->stuck = true;
			return -ETIMEDOUT;
		}
		poll(&pfd, 1, (int)((end - now) / 1000000) + 1);
		drain_fd(t->ack_fd);
	}
	return 0;
}

void dp_thread_resume(struct dp_thread *t)
{
	if (t->stuck)
		return;
	atomic_store_explicit(&t->cmd, t->gen << 1, memory_order_release);
	write_fd(t->cmd_fd);
}

void dp_thread_set_engine(struct dp_thread *t, struct tly_worker *w,
			  struct tly_agg *a, const struct tly_net *net)
{
	t->worker = w;
	t->agg = a;
	t->next_sweep = 0;
	t->net = *net;
	if (net->addrs) {
		uint16_t n = net->n_nodes < TRANSPORT_MAX_NODES ?
			     net->n_nodes : TRANSPORT_MAX_NODES;

		memcpy(t->addrs, net->addrs, n * sizeof(t->addrs[0]));
		t->net.addrs = t->addrs;
	}
	memset(&t->st.worker, 0, sizeof(t->st.worker));
	memset(&t->st.agg, 0, sizeof(t->st.agg));
	t->st.worker_active = t->st.agg_slots_busy = 0;
	publish(t, transport_now_ns());
}

void dp_thread_reset_rings(struct dp_thread *t)
{
	dp_ring_reset(&t->sq);
	dp_ring_reset(&t->cq);
	t->cq_asleep = false;
}

int dp_thread_submit(struct dp_thread *t, const struct tly_tensor_desc *d)
{
	return dp_ring_push(&t->sq, d);
}

void dp_thread_kick(struct dp_thread *t)
{
	dp_ring_notify(&t->sq);
}

int dp_thread_complete(struct dp_thread *t, struct dp_completion *c)
{
	return dp_ring_pop(&t->cq, c);
}

int dp_thread_completion_fd(const struct dp_thread *t)
{
	return dp_ring_fd(&t->cq);
}

uint32_t dp_thread_completion_sleep(struct dp_thread *t)
{
	t->cq_asleep = true;
	return dp_ring_sleep_prepare(&t->cq);
}

void dp_thread_completion_awake(struct dp_thread *t)
{
	if (!t->cq_asleep)
		return;		/* no syscall on the busy path */
	t->cq_asleep = false;
	dp_ring_sleep_done(&t->cq);
}

/* ---- life -------------------------------------------------------------- */

struct dp_thread *dp_thread_start(const struct dp_thread_cfg *cfg,
				  char *err, size_t errlen)
{
	struct dp_thread *t = aligned_alloc(64, (sizeof(*t) + 63) & ~63ul);
	struct tly_net none = { 0 };
	int ret;

	if (!t) {
		snprintf(err, errlen, "dataplane thread: out of memory");
		return NULL;
	}
	memset(t, 0, sizeof(*t));
	t->cfg = *cfg;
	t->tp = cfg->tp;
	t->tp_tx = transport_tx_ops(cfg->tp);
	t->cmd_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	t->ack_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->cmd_fd < 0 || t->ack_fd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail_fds;
	}
	ret = dp_ring_init(&t->sq, DP_MAX_TENSORS, sizeof(struct tly_tensor_desc));
	if (ret) {
		snprintf(err, errlen, "submission ring: %s", strerror(-ret));
		goto fail_fds;
	}
	ret = dp_ring_init(&t->cq, DP_MAX_TENSORS, sizeof(struct dp_completion));
	if (ret) {
		snprintf(err, errlen, "completion ring: %s", strerror(-ret));
		goto fail_sq;
	}
	dp_thread_set_engine(t, NULL, NULL, &none);
	ret = pthread_create(&t->thread, NULL, dp_main, t);
	if (ret) {
		snprintf(err, errlen, "pthread_create: %s", strerror(ret));
		goto fail_cq;
	}
	ret = wait_started(t);
	if (ret) {
		snprintf(err, errlen, "the %s transport cannot be driven from "
			 "a dataplane thread: %s", cfg->tp->ops->name,
			 strerror(-ret));
		pthread_join(t->thread, NULL);
		goto fail_cq;
	}
	if (cfg->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cfg->cpu, &set);
		ret = pthread_setaffinity_np(t->thread, sizeof(set), &set);
		if (ret) {
			snprintf(err, errlen, "pthread_setaffinity_np(CPU %d): "
				 "%s", cfg->cpu, strerror(ret));
			atomic_store(&t->stop, true);
			write_fd(t->cmd_fd);
			pthread_join(t->thread, NULL);
			goto fail_cq;
		}
	}
	return t;

fail_cq:
	dp_ring_fini(&t->cq);
fail_sq:
	dp_ring_fini(&t->sq);
fail_fds:
	if (t->cmd_fd >= 0)
		close(t->cmd_fd);
	if (t->ack_fd >= 0)
		close(t->ack_fd);
	free(t);
	return NULL;
}

void dp_thread_stop(struct dp_thread *t)
{
	if (!t)
		return;
	atomic_store_explicit(&t->stop, true, memory_order_release);
	write_fd(t->cmd_fd);
	if (t->stuck)
		return;		/* it may still run: leak, not free */
	pthread_join(t->thread, NULL);
	dp_ring_fini(&t->cq);
	dp_ring_fini(&t->sq);
	close(t->cmd_fd);
	close(t->ack_fd);
	free(t);
}
