// SPDX-License-Identifier: BSD-3-Clause
/*
 * cc.c - one destination's congestion window: slow start until the first
 * congestion signal, then additive increase (one packet per RTT) and
 * multiplicative decrease on loss (halve) and on delay (Swift: by
 * beta * (rtt - target) / rtt, at most max_mdf), once per RTT at most.
 * The delay decrease looks at the smallest RTT of each round, so only a
 * queue that persists for a round cuts; a single late sample only holds
 * growth back.
 */
#include "dataplane/engine/cc.h"

void tly_cc_params_fill(struct tly_cc_params *p)
{
	if (!p->max_window)
		p->max_window = 1;
	if (!p->min_window)
		p->min_window = TLY_CC_MIN_WINDOW;
	if (p->min_window > p->max_window)
		p->min_window = p->max_window;
	if (!p->init_window)
		p->init_window = TLY_CC_INIT_WINDOW;
	if (p->init_window > p->max_window)
		p->init_window = p->max_window;
	if (p->init_window < p->min_window)
		p->init_window = p->min_window;
	if (!p->target_ns)
		p->target_ns = TLY_CC_TARGET_NS;
	if (!p->base_win_ns)
		p->base_win_ns = TLY_CC_BASE_WIN_NS;
	if (!p->beta)
		p->beta = TLY_CC_BETA;
	if (!p->max_mdf || p->max_mdf >= TLY_CC_ONE)
		p->max_mdf = TLY_CC_MAX_MDF;
}

void tly_cc_init(struct tly_cc *cc, const struct tly_cc_params *p,
		 uint64_t now)
{
	*cc = (struct tly_cc){
		.cwnd = (uint64_t)p->init_window << TLY_CC_SHIFT,
		.ssthresh = (uint64_t)p->max_window << TLY_CC_SHIFT,
		.min_cur = UINT64_MAX, .min_prev = UINT64_MAX,
		.epoch = now, .round_start = now, .round_min = UINT64_MAX,
	};
}

static void clamp(struct tly_cc *cc, const struct tly_cc_params *p)
{
	uint64_t lo = (uint64_t)p->min_window << TLY_CC_SHIFT;
	uint64_t hi = (uint64_t)p->max_window << TLY_CC_SHIFT;

	if (cc->cwnd < lo)
		cc->cwnd = lo;
	if (cc->cwnd > hi)
		cc->cwnd = hi;
}

uint64_t tly_cc_base_rtt(const struct tly_cc *cc)
{
	return cc->min_cur < cc->min_prev ? cc->min_cur : cc->min_prev;
}

/* the packets in flight at the last decrease have come back by now */
static int may_decrease(const struct tly_cc *cc, uint64_t now)
{
	return !cc->decreased || now - cc->last_dec >= cc->srtt;
}

/* multiply the window by (1024 - @cut) / 1024 and leave slow start */
static void decrease(struct tly_cc *cc, const struct tly_cc_params *p,
		     uint64_t cut, uint64_t now)
{
	if (cut > p->max_mdf)
		cut = p->max_mdf;
	cc->cwnd = cc->cwnd * (TLY_CC_ONE - cut) >> TLY_CC_SHIFT;
	clamp(cc, p);
	cc->ssthresh = cc->cwnd;
	cc->last_dec = now;
	cc->decreased = 1;
}

static void rtt_sample(struct tly_cc *cc, const struct tly_cc_params *p,
		       uint64_t rtt, uint64_t now)
{
	uint64_t dev;

	/* windowed min over two halves: a minimum is forgotten after one
	 * to two halves, so a longer path is learnt within base_win_ns */
	if (now - cc->epoch >= p->base_win_ns / 2) {
		cc->min_prev = cc->min_cur;
		cc->min_cur = rtt;
		cc->epoch = now;
	} else if (rtt < cc->min_cur) {
		cc->min_cur = rtt;
	}
	if (!cc->srtt) {
		cc->srtt = rtt;
		cc->rttvar = rtt / 2;
		return;
	}
	dev = rtt > cc->srtt ? rtt - cc->srtt : cc->srtt - rtt;
	cc->rttvar = cc->rttvar - cc->rttvar / 4 + dev / 4;
	if (rtt > cc->srtt)
		cc->srtt += (rtt - cc->srtt) / 8;
	else
		cc->srtt -= (cc->srtt - rtt) / 8;
}

void tly_cc_on_ack(struct tly_cc *cc, const struct tly_cc_params *p,
		   uint64_t rtt, uint64_t now)
{
	uint64_t target, m;

	/* an answer to a packet sent twice may be an aggregator's ACK for
	 * a chunk it holds until the other workers send theirs: it says
	 * nothing about the path, so neither grows nor shrinks the window */
	if (!rtt)
		return;
	rtt_sample(cc, p, rtt, now);
	target = tly_cc_base_rtt(cc) + p->target_ns;
	if (rtt < cc->round_min)
		cc->round_min = rtt;
	if (now - cc->round_start >= cc->srtt) {
		m = cc->round_min;
		cc->round_min = UINT64_MAX;
		cc->round_start = now;
		if (m > target && may_decrease(cc, now)) {
			decrease(cc, p, (uint64_t)p->beta * (m - target) / m,
				 now);
			cc->n_delay_dec++;
			return;
		}
	}
	if (rtt > target)
		return;			/* hold: no growth on a late one */
	if (cc->cwnd < cc->ssthresh)
		cc->cwnd += TLY_CC_ONE;		/* doubles per RTT */
	else
		cc->cwnd += ((uint64_t)TLY_CC_ONE << TLY_CC_SHIFT) / cc->cwnd;
	clamp(cc, p);
}

void tly_cc_on_loss(struct tly_cc *cc, const struct tly_cc_params *p,
		    uint64_t now)
{
	if (!may_decrease(cc, now))
		return;
	decrease(cc, p, p->max_mdf, now);
	cc->n_loss_dec++;
}

uint64_t tly_cc_rto(const struct tly_cc *cc)
{
	return cc->srtt ? cc->srtt + 4 * cc->rttvar : 0;
}

uint32_t tly_cc_window(const struct tly_cc *cc,
		       const struct tly_cc_params *p)
{
	uint64_t w = cc->cwnd >> TLY_CC_SHIFT;

	if (w < p->min_window)
		w = p->min_window;
	if (w > p->max_window)
		w = p->max_window;
	return (uint32_t)w;
}
