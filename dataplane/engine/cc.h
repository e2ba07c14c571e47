/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cc.h - congestion control for one destination: a window of packets in
 * flight that grows additively per RTT and shrinks multiplicatively on
 * loss and on queueing delay, at most once per RTT (Swift-style delay
 * target over a windowed minimum RTT; docs/protocol.md, "Congestion
 * control").  The delay signal is the smallest RTT of a round (one
 * smoothed RTT): a queue that stays shows in every sample of the round,
 * the jitter of a software stack does not.
 *
 * Pure logic: time comes in as now_ns, nothing here reads a clock or
 * sends anything.  The window is kept in fixed point (1/1024 packet) so
 * runs are bit-for-bit deterministic.
 */
#ifndef TALLY_DATAPLANE_ENGINE_CC_H
#define TALLY_DATAPLANE_ENGINE_CC_H

#include <stdint.h>

#define TLY_CC_SHIFT		10
#define TLY_CC_ONE		(1u << TLY_CC_SHIFT)	/* one packet */

/* defaults, taken by tly_cc_params_fill() for fields left at zero */
#define TLY_CC_MIN_WINDOW	8		/* packets (see docs/protocol.md) */
#define TLY_CC_INIT_WINDOW	16		/* packets, capped at max */
#define TLY_CC_TARGET_NS	50000ull	/* 50 us of queueing */
#define TLY_CC_BASE_WIN_NS	100000000ull	/* min RTT over 100 ms */
#define TLY_CC_BETA		819		/* 0.8 in 1/1024 */
#define TLY_CC_MAX_MDF		512		/* at most halve per RTT */

struct tly_cc_params {
	uint32_t min_window;	/* packets, >= 1 */
	uint32_t max_window;	/* packets (the configured window) */
	uint32_t init_window;	/* packets at start (slow start from it) */
	uint64_t target_ns;	/* queueing delay allowed above base RTT */
	uint64_t base_win_ns;	/* base RTT = min RTT over this long */
	uint32_t beta;		/* delay decrease gain, 1/1024 */
	uint32_t max_mdf;	/* largest decrease at once, 1/1024 */
};

struct tly_cc {
	uint64_t cwnd;		/* packets, fixed point (TLY_CC_ONE) */
	uint64_t ssthresh;	/* slow start below, additive above */
	uint64_t min_cur;	/* min RTT of the current half window */
	uint64_t min_prev;	/* ... and of the previous one */
	uint64_t epoch;		/* when the current half began */
	uint64_t srtt;		/* smoothed RTT (gain 1/8); 0: no sample */
	uint64_t rttvar;	/* its mean deviation (gain 1/4), RFC 6298 */
	uint64_t round_start;	/* the current round began */
	uint64_t round_min;	/* its smallest RTT sample */
	uint64_t last_dec;	/* time of the last decrease */
	uint8_t decreased;	/* last_dec is valid */
	uint64_t n_delay_dec;	/* decreases on delay */
	uint64_t n_loss_dec;	/* decreases on loss */
};

/* fill the fields of @p left at zero with the defaults above; max_window
 * must be set; min and init are clamped to it */
void tly_cc_params_fill(struct tly_cc_params *p);
void tly_cc_init(struct tly_cc *cc, const struct tly_cc_params *p,
		 uint64_t now_ns);
/*
 * A packet was answered.  @rtt_ns is its round trip, or 0 when it gives
 * no sample (it was sent more than once: Karn's rule), which changes
 * nothing.  Increases the window unless the RTT is above base + target;
 * when a round ends with even its smallest RTT above that, decreases it.
 */
void tly_cc_on_ack(struct tly_cc *cc, const struct tly_cc_params *p,
		   uint64_t rtt_ns, uint64_t now_ns);
/* a packet was lost: halve (max_mdf), unless decreased within an RTT */
void tly_cc_on_loss(struct tly_cc *cc, const struct tly_cc_params *p,
		    uint64_t now_ns);
/* the window in whole packets, within [min_window, max_window] */
uint32_t tly_cc_window(const struct tly_cc *cc,
		       const struct tly_cc_params *p);
/* srtt + 4 rttvar (RFC 6298): a retransmission timeout shorter than
 * this fires on a queue, not a loss; 0 before the first sample */
uint64_t tly_cc_rto(const struct tly_cc *cc);
/* the base RTT (windowed min), UINT64_MAX before the first sample */
uint64_t tly_cc_base_rtt(const struct tly_cc *cc);

#endif /* TALLY_DATAPLANE_ENGINE_CC_H */
