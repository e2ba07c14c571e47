// SPDX-License-Identifier: BSD-3-Clause
/*
 * transport.c - open/close by kind, the engine's tx ops, and the link
 * emulator spliced between the engine and a backend when asked for.
 *
 * With the emulator on, the engine builds frames directly in emulator
 * buffers (no copy on the way in); frames are copied into the backend's
 * buffers when the emulator releases them in transport_tx_flush().  On
 * ingress (only when a rate is set) received frames are copied into the
 * emulator and the backend's buffers are released at once.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "dataplane/dp_log.h"
#include "dataplane/clock.h"
#include "dataplane/transport/link_emu.h"
#include "dataplane/transport/transport.h"

uint64_t transport_now_ns(void)
{
	return tly_now_ns();
}

static const struct transport_ops *transport_find(const char *kind)
{
	if (!kind || !strcmp(kind, "udp"))
		return &transport_udp_ops;
	if (!strcmp(kind, "dpdk"))
		return &transport_dpdk_ops;
	if (!strcmp(kind, "rdma"))
		return &transport_rdma_ops;
	return NULL;
}

static int check_table(uint16_t self, uint16_t n_nodes,
		       const struct tly_addr *addrs)
{
	if (!addrs || self >= n_nodes || n_nodes > TRANSPORT_MAX_NODES) {
		dp_err("transport: bad address table (self %u of %u)",
			self, n_nodes);
		return -EINVAL;
	}
	return 0;
}

/* the result group, when there is one, is a multicast address and port;
 * sending to it needs one and a backend that can */
static int check_group(const struct transport_ops *ops,
		       const struct transport_config *cfg)
{
	if (cfg->group_send && (!cfg->group_ip || !ops->group_tx)) {
		dp_err("transport %s: %s", ops->name, cfg->group_ip ?
		       "cannot send to a result group" :
		       "sending to the result group needs its address");
		return -EINVAL;
	}
	if (!cfg->group_ip || tly_group_ok(cfg->group_ip, cfg->group_port))
		return 0;
	dp_err("transport: the result group %u.%u.%u.%u:%u is not an IPv4 multicast address and port",
	       cfg->group_ip >> 24, (cfg->group_ip >> 16) & 0xff,
	       (cfg->group_ip >> 8) & 0xff, cfg->group_ip & 0xff,
	       cfg->group_port);
	return -EINVAL;
}

int transport_open(struct transport *tp, const struct transport_config *cfg)
{
	const struct transport_ops *ops = transport_find(cfg->kind);
	uint32_t mtu;
	int ret;

	memset(tp, 0, sizeof(*tp));
	if (!ops) {
		dp_err("transport: unknown kind '%s' (udp, dpdk, rdma)",
			cfg->kind);
		return -EINVAL;
	}
	if (check_table(cfg->self, cfg->n_nodes, cfg->addrs) ||
	    check_group(ops, cfg))
		return -EINVAL;
	tp->ops = ops;
	tp->cfg = *cfg;
	if (!tp->cfg.mtu)
		tp->cfg.mtu = TRANSPORT_DEFAULT_MTU;
	mtu = tp->cfg.mtu;
	ret = ops->open(tp, &tp->cfg);
	if (ret) {
		tp->ops = NULL;
		return ret;
	}
	if (link_emu_wanted(&cfg->emu)) {
		/* the rate counts wire bytes: add what the frame lacks */
		uint32_t extra = TLY_WIRE_EXTRA +
				 (tp->full_frames ? 0 : TLY_L2L4_LEN);

		/* a frame stamped on arrival is delayed by the receiver: its
		 * thread, awake since the frame came, sleeps to a known due
		 * time and wakes on time; a sender's delay left the receiver
		 * to wake on the frame, late by a wake-up (docs/transports.md,
		 * "Holding and releasing frames") */
		tp->cfg.emu.delay_on_ingress = tp->rx_stamps &&
					       tp->cfg.emu.delay_ns;
		tp->emu = link_emu_create(&tp->cfg.emu, TRANSPORT_EMU_BUFS,
					  mtu, extra);
		if (!tp->emu) {
			dp_err("transport: no memory for the link emulator");
			ops->close(tp);
			tp->ops = NULL;
			return -ENOMEM;
		}
	}
	return 0;
}

void transport_close(struct transport *tp)
{
	if (!tp->ops)
		return;
	link_emu_destroy(tp->emu);
	tp->emu = NULL;
	tp->ops->close(tp);
	tp->ops = NULL;
}

int transport_set_nodes(struct transport *tp, uint16_t self, uint16_t n_nodes,
			const struct tly_addr *addrs)
{
	struct transport_config old = tp->cfg;
	int ret = check_table(self, n_nodes, addrs);

	if (ret)
		return ret;
	tp->cfg.self = self;
	tp->cfg.n_nodes = n_nodes;
	tp->cfg.addrs = addrs;
	ret = tp->ops->set_nodes ? tp->ops->set_nodes(tp) : 0;
	if (ret)
		tp->cfg = old;
	return ret;
}

static void emu_stats_sync(struct transport *tp)
{
	const struct link_emu_stats *s = link_emu_stats(tp->emu);

	tp->stats.emu_lost = s->lost;
	tp->stats.emu_dup = s->dup;
	tp->stats.emu_reordered = s->reordered;
	tp->stats.emu_pool_drops = s->pool_drops + s->too_long;
}

static uint8_t *tx_alloc_bound(void *ctx, size_t len)
{
	struct transport *tp = ctx;
	uint8_t *f;

	if (tp->emu) {
		f = link_emu_alloc(tp->emu, len);
		if (!f)
			emu_stats_sync(tp);
	} else {
		f = tp->ops->tx_alloc(tp, len);
	}
	if (!f)
		tp->stats.tx_drops++;
	return f;
}

static void tx_send_bound(void *ctx, uint16_t dst, uint8_t *frame,
			  size_t len)
{
	struct transport *tp = ctx;

	if (!tp->emu) {
		tp->ops->tx_send(tp, dst, frame, len);
		return;
	}
	link_emu_egress_buf(tp->emu, transport_now_ns(), dst, frame, len);
	emu_stats_sync(tp);
}

/*
 * One RESULT to every worker of @mask: one datagram to the result group,
 * and our own copy (a co-located worker) as a frame to ourselves, since
 * the group's socket does not loop it back (udp.c).  Under the emulator
 * the group's datagram is one frame of our link: lost, late or doubled
 * for every worker at once, as before a switch's replication.
 */
static void tx_multicast_bound(void *ctx, uint64_t mask, uint8_t *frame,
			       size_t len)
{
	struct transport *tp = ctx;
	uint16_t self = tp->cfg.self;

	if (self < 64 && (mask >> self & 1)) {
		uint8_t *copy = tx_alloc_bound(tp, len);

		if (copy) {
			memcpy(copy, frame, len);
			tx_send_bound(tp, self, copy, len);
		}
	}
	tx_send_bound(tp, TRANSPORT_GROUP_NODE, frame, len);
}

struct tly_tx_ops transport_tx_ops(struct transport *tp)
{
	struct tly_tx_ops ops = {
		.alloc = tx_alloc_bound,
		.send = tx_send_bound,
		/* without a group one frame per worker */
		.multicast = tp->cfg.group_send ? tx_multicast_bound : NULL,
		.multicast_group = tp->cfg.group_send,
		.ctx = tp,
	};

	return ops;
}

/* move the frames the emulator releases at @now into the backend;
 * returns the frames sent by flushes made to make room */
/*
 * The next held frame if it is due at @now_ns, or comes due within
 * TRANSPORT_EMU_GATHER_NS of the clock (read again): a burst released
 * frame by frame (the serializer spaces 1 KiB frames 90 ns apart at
 * 100 Gb/s) stays one burst, one send, instead of ending the turn after
 * its first frames and leaving the rest to a peer's mercy on a busy core.
 */
static const struct link_emu_frame *emu_next(struct transport *tp,
					     uint64_t *now_ns)
{
	const struct link_emu_frame *f = link_emu_peek(tp->emu,
						       LINK_EMU_EGRESS,
						       UINT64_MAX);
	uint64_t now;

	if (!f || f->due_ns <= *now_ns)
		return f;
	now = transport_now_ns();
	if (now < *now_ns)
		return NULL;	/* the caller keeps a time of its own */
	while (now < f->due_ns && f->due_ns - now <= TRANSPORT_EMU_GATHER_NS)
		now = transport_now_ns();
	if (f->due_ns > now)
		return NULL;
	*now_ns = now;
	return f;
}

/* how late a held frame came out (either queue): tp->stats.emu_* */
static void emu_count_release(struct transport *tp,
			      const struct link_emu_frame *t, uint64_t now_ns)
{
	uint64_t late = now_ns > t->due_ns ? now_ns - t->due_ns : 0;

	tp->stats.emu_released++;
	tp->stats.emu_late_ns += late;
	tp->stats.emu_on_time += late <= TRANSPORT_EMU_ON_TIME_NS;
	if (late > tp->stats.emu_late_max_ns)
		tp->stats.emu_late_max_ns = late;
}

static int emu_release(struct transport *tp, uint64_t now_ns)
{
	const struct link_emu_frame *f;
	struct link_emu_frame t;
	uint8_t *buf;
	int sent = 0, r;

	while ((f = emu_next(tp, &now_ns))) {
		buf = tp->ops->tx_alloc(tp, f->len);
		if (!buf) {
			/* backend full: make room, else hold it (back-pressure) */
			r = tp->ops->tx_flush(tp);
			if (r <= 0)
				break;
			sent += r;
			continue;
		}
		t = link_emu_take(tp->emu, LINK_EMU_EGRESS);
		emu_count_release(tp, &t, now_ns);
		memcpy(buf, t.data, t.len);
		tp->ops->tx_send(tp, t.dst, buf, t.len);
		link_emu_free(tp->emu, t.data);
	}
	return sent;
}

int transport_tx_flush(struct transport *tp, uint64_t now_ns)
{
	int sent = tp->emu ? emu_release(tp, now_ns) : 0;

	return sent + tp->ops->tx_flush(tp);
}

static bool emu_ingress_on(const struct transport *tp)
{
	return tp->emu && (tp->cfg.emu.rate_bps ||
			   (tp->cfg.emu.delay_on_ingress &&
			    tp->cfg.emu.delay_ns));
}

int transport_rx_burst(struct transport *tp, struct transport_rx *rx, int n)
{
	struct transport_rx in[TRANSPORT_RX_BURST];
	struct link_emu_frame t;
	uint64_t now;
	int i, k;

	if (!emu_ingress_on(tp))
		return tp->ops->rx_burst(tp, rx, n);

	now = transport_now_ns();
	k = tp->ops->rx_burst(tp, in, n < TRANSPORT_RX_BURST ?
					     n : TRANSPORT_RX_BURST);
	for (i = 0; i < k; i++)
		link_emu_ingress(tp->emu, now,
				 tp->rx_stamps ? in[i].arrival_ns : 0,
				 in[i].data, in[i].len);
	if (k > 0)
		tp->ops->rx_release(tp, in, k);
	emu_stats_sync(tp);
	/* the frames arrived at @now (before the receive call); what is due
	 * is judged after it, or a frame due within the call's own time
	 * would wait for the next turn, or a sleep */
	if (link_emu_held(tp->emu, LINK_EMU_INGRESS))
		now = transport_now_ns();
	for (i = 0; i < n && link_emu_peek(tp->emu, LINK_EMU_INGRESS, now);
	     i++) {
		t = link_emu_take(tp->emu, LINK_EMU_INGRESS);
		if (tp->cfg.emu.delay_on_ingress)	/* delayed here */
			emu_count_release(tp, &t, now);
		rx[i].data = t.data;
		rx[i].len = t.len;
		rx[i].cookie = t.data;
		rx[i].arrival_ns = t.due_ns;	/* the emulated arrival */
	}
	return i;
}

void transport_rx_release(struct transport *tp, struct transport_rx *rx,
			  int n)
{
	int i;

	if (!emu_ingress_on(tp)) {
		tp->ops->rx_release(tp, rx, n);
		return;
	}
	for (i = 0; i < n; i++)
		link_emu_free(tp->emu, rx[i].cookie);
}

int transport_thread_bind(struct transport *tp, bool bind)
{
	return tp->ops->thread_bind ? tp->ops->thread_bind(tp, bind) : 0;
}

int transport_tx_pending(struct transport *tp)
{
	int n = tp->ops->tx_pending ? tp->ops->tx_pending(tp) : 0;

	if (tp->emu)
		n += (int)link_emu_held(tp->emu, LINK_EMU_EGRESS);
	return n;
}

uint64_t transport_emu_next_due(const struct transport *tp)
{
	return tp->emu ? link_emu_next_due(tp->emu) : UINT64_MAX;
}

uint64_t transport_emu_spin_ns(const struct transport *tp)
{
	uint64_t s;

	if (!tp->emu_woke_late_ns)
		return TRANSPORT_EMU_SPIN_NS;	/* no wake-up seen yet */
	s = 2 * tp->emu_woke_late_ns + 10000;
	if (s < TRANSPORT_EMU_SPIN_MIN_NS)
		return TRANSPORT_EMU_SPIN_MIN_NS;
	return s < TRANSPORT_EMU_SPIN_MAX_NS ? s : TRANSPORT_EMU_SPIN_MAX_NS;
}

void transport_emu_woke(struct transport *tp, uint64_t end_ns,
			uint64_t now_ns)
{
	uint64_t late = now_ns > end_ns ? now_ns - end_ns : 0;

	/* a stall of milliseconds (a preempted process) says nothing about
	 * the next wake-up: count it as the cap */
	if (late > TRANSPORT_EMU_SPIN_MAX_NS)
		late = TRANSPORT_EMU_SPIN_MAX_NS;
	/* a running mean over about 8 wake-ups; never 0 once set */
	tp->emu_woke_late_ns = tp->emu_woke_late_ns ?
		(7 * tp->emu_woke_late_ns + late) / 8 + 1 : late + 1;
}

uint64_t transport_emu_sleep_ns(const struct transport *tp, uint64_t now_ns,
				uint64_t max_ns)
{
	uint64_t due = transport_emu_next_due(tp), spin;

	if (due == UINT64_MAX)
		return max_ns;
	spin = transport_emu_spin_ns(tp);
	if (due <= now_ns || due - now_ns <= spin)
		return 0;
	due -= now_ns + spin;
	return due < max_ns ? due : max_ns;
}

void transport_precise_timers(void)
{
	static _Thread_local bool done;

	if (done)
		return;
	done = true;
	/* 1 ns: 0 would mean "back to the default" */
	if (prctl(PR_SET_TIMERSLACK, 1ul, 0ul, 0ul, 0ul))
		dp_warn("transport: cannot set the timer slack: %s",
			strerror(errno));
}

void transport_idle_wait(struct transport *tp, uint64_t now_ns,
			 uint64_t max_ns)
{
	uint64_t t = max_ns;
	struct timespec ts;
	struct pollfd pfd;
	int fd = tp->ops->wait_fd ? tp->ops->wait_fd(tp) : -1;

	if (tp->emu) {
		transport_precise_timers();
		t = transport_emu_sleep_ns(tp, now_ns, max_ns);
		if (!t)
			return;		/* a release is close: poll on */
	}
	/*
	 * Frames refused by the wire (EAGAIN, ENOBUFS, a full NIC ring) are
	 * retried after a short sleep: POLLOUT is no help for ENOBUFS and
	 * would spin.
	 */
	if (tp->ops->tx_pending && tp->ops->tx_pending(tp) > 0 &&
	    t > TRANSPORT_TX_RETRY_NS)
		t = TRANSPORT_TX_RETRY_NS;
	ts.tv_sec = (time_t)(t / 1000000000ull);
	ts.tv_nsec = (long)(t % 1000000000ull);
	now_ns = transport_now_ns();	/* the sleep's start, for _woke() */
	if (fd >= 0) {
		pfd.fd = fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (ppoll(&pfd, 1, &ts, NULL) == 0 && tp->emu)
			transport_emu_woke(tp, now_ns + t, transport_now_ns());
	} else {
		if (nanosleep(&ts, NULL) == 0 && tp->emu)
			transport_emu_woke(tp, now_ns + t, transport_now_ns());
	}
}
