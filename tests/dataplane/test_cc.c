// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cc.c - the congestion window (dataplane/engine/cc.c) as pure
 * logic: slow start and additive growth on clean ACKs, halving on loss,
 * at most one decrease per RTT, the delay signal against the windowed
 * base RTT, the bounds, recovery after a decrease, and the retransmission
 * timeout the samples give.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dataplane/engine/cc.h"

#define US 1000ull
#define BASE (20 * US)		/* a clean round trip */

static struct tly_cc_params params(uint32_t max)
{
	struct tly_cc_params p = { .max_window = max };

	tly_cc_params_fill(&p);
	return p;
}

/* @n clean ACKs (RTT = BASE), 1 us apart from *now */
static void clean_acks(struct tly_cc *cc, const struct tly_cc_params *p,
		       uint32_t n, uint64_t *now)
{
	while (n--) {
		*now += US;
		tly_cc_on_ack(cc, p, BASE, *now);
	}
}

static void test_defaults(void **state)
{
	struct tly_cc_params p = params(1024), q = { .max_window = 8 };

	(void)state;
	assert_int_equal(p.min_window, TLY_CC_MIN_WINDOW);
	assert_int_equal(p.init_window, TLY_CC_INIT_WINDOW);
	assert_int_equal(p.target_ns, TLY_CC_TARGET_NS);
	assert_int_equal(p.beta, TLY_CC_BETA);
	assert_int_equal(p.max_mdf, TLY_CC_MAX_MDF);
	tly_cc_params_fill(&q);		/* init is capped at the maximum */
	assert_int_equal(q.init_window, 8);
	q = (struct tly_cc_params){ .max_window = 1 };
	tly_cc_params_fill(&q);		/* and so is the minimum */
	assert_int_equal(q.min_window, 1);
	assert_int_equal(q.init_window, 1);
}

static void test_slow_start_then_additive(void **state)
{
	struct tly_cc_params p = params(1024);
	struct tly_cc cc;
	uint64_t now = 0;

	(void)state;
	tly_cc_init(&cc, &p, now);
	assert_int_equal(tly_cc_window(&cc, &p), 16);
	clean_acks(&cc, &p, 16, &now);		/* one window: doubles */
	assert_int_equal(tly_cc_window(&cc, &p), 32);
	clean_acks(&cc, &p, 32, &now);
	assert_int_equal(tly_cc_window(&cc, &p), 64);
	/* a loss ends slow start: 32, then one packet per window of ACKs */
	tly_cc_on_loss(&cc, &p, now);
	assert_int_equal(tly_cc_window(&cc, &p), 32);
	/* w ACKs add 1/w each: just under one packet (rounding down) */
	clean_acks(&cc, &p, 32, &now);
	assert_true(cc.cwnd > 32 * TLY_CC_ONE + TLY_CC_ONE * 95 / 100);
	assert_true(cc.cwnd <= 33 * TLY_CC_ONE);
	clean_acks(&cc, &p, 33, &now);
	assert_int_equal(tly_cc_window(&cc, &p), 33);
	assert_true(cc.cwnd > 33 * TLY_CC_ONE + TLY_CC_ONE * 90 / 100);
	assert_int_equal(cc.n_loss_dec, 1);
	assert_int_equal(cc.n_delay_dec, 0);
}

static void test_loss_halves_once_per_rtt(void **state)
{
	struct tly_cc_params p = params(1024);
	struct tly_cc cc;
	uint64_t now = 0;

	(void)state;
	tly_cc_init(&cc, &p, now);
	clean_acks(&cc, &p, 16 + 32 + 64, &now);	/* 128 */
	assert_int_equal(tly_cc_window(&cc, &p), 128);
	tly_cc_on_loss(&cc, &p, now);
	assert_int_equal(tly_cc_window(&cc, &p), 64);
	/* more losses of the same window within one RTT: no more cuts */
	tly_cc_on_loss(&cc, &p, now + 1);
	tly_cc_on_loss(&cc, &p, now + BASE - 1);
	assert_int_equal(tly_cc_window(&cc, &p), 64);
	assert_int_equal(cc.n_loss_dec, 1);
	/* one RTT later a loss is news again */
	tly_cc_on_loss(&cc, &p, now + BASE);
	assert_int_equal(tly_cc_window(&cc, &p), 32);
	assert_int_equal(cc.n_loss_dec, 2);
}

/* @n ACKs of @rtt, @gap apart */
static void acks(struct tly_cc *cc, const struct tly_cc_params *p,
		 uint32_t n, uint64_t rtt, uint64_t gap, uint64_t *now)
{
	while (n--) {
		*now += gap;
		tly_cc_on_ack(cc, p, rtt, *now);
	}
}

static void test_delay_signal(void **state)
{
	struct tly_cc_params p = params(1024);
	uint64_t target = BASE + p.target_ns, rtt, now = 0;
	struct tly_cc cc;
	uint32_t w0;

	(void)state;
	tly_cc_init(&cc, &p, now);
	clean_acks(&cc, &p, 16 + 32, &now);		/* 64, base BASE */
	assert_int_equal(tly_cc_base_rtt(&cc), BASE);
	assert_int_equal(tly_cc_window(&cc, &p), 64);
	/* at the target: still growing */
	acks(&cc, &p, 1, target, US, &now);
	assert_int_equal(tly_cc_window(&cc, &p), 65);
	/* a late one: no growth, and no cut before its round ends */
	w0 = (uint32_t)cc.cwnd;
	acks(&cc, &p, 1, target + 30 * US, US, &now);
	assert_int_equal(cc.cwnd, w0);
	assert_int_equal(cc.n_delay_dec, 0);
	/* jitter: late samples for rounds, but one per round on time */
	for (int r = 0; r < 5; r++) {
		acks(&cc, &p, 1, BASE, US, &now);
		acks(&cc, &p, 40, target + 30 * US, cc.srtt / 40 + 1, &now);
	}
	assert_int_equal(cc.n_delay_dec, 0);
	assert_true(tly_cc_window(&cc, &p) >= 65);
	/* a queue that lasts a whole round: cut by beta * (m - target) / m,
	 * m the round's smallest RTT */
	w0 = tly_cc_window(&cc, &p);
	rtt = target + 30 * US;
	acks(&cc, &p, 100, rtt, US, &now);
	assert_int_equal(cc.n_delay_dec, 1);
	{
		double f = 1.0 - (double)p.beta / 1024 *
				 (double)(rtt - target) / (double)rtt;
		double want = (double)w0 * f;
		uint32_t got = tly_cc_window(&cc, &p);

		assert_true(got + 1 >= (uint32_t)want && got <= (uint32_t)want + 1);
	}
	/* at most one cut per RTT however long the queue lasts */
	{
		uint64_t t0 = now, n0 = cc.n_delay_dec;

		acks(&cc, &p, 1000, rtt, US, &now);
		assert_true(cc.n_delay_dec - n0 <= (now - t0) / cc.srtt + 1);
		assert_true(cc.n_delay_dec - n0 >= 2);
	}
	/* a huge delay cuts at most max_mdf: it halves */
	tly_cc_init(&cc, &p, now);
	clean_acks(&cc, &p, 16 + 32, &now);		/* 64 */
	/* late samples 10 ms apart: the round of clean ones ends without a
	 * cut (growth held), the next, all late, ends with one */
	for (int n = 0; n < 3 && !cc.n_delay_dec; n++) {
		assert_int_equal(tly_cc_window(&cc, &p), 64);
		now += 100 * rtt;
		tly_cc_on_ack(&cc, &p, 100 * rtt, now);
	}
	assert_int_equal(cc.n_delay_dec, 1);
	assert_int_equal(tly_cc_window(&cc, &p), 32);
}

static void test_bounds(void **state)
{
	struct tly_cc_params p = { .max_window = 40, .min_window = 4 };
	struct tly_cc cc;
	uint64_t now = 0;
	int i;

	(void)state;
	tly_cc_params_fill(&p);
	tly_cc_init(&cc, &p, now);
	clean_acks(&cc, &p, 1000, &now);
	assert_int_equal(tly_cc_window(&cc, &p), 40);
	assert_true(cc.cwnd <= (uint64_t)40 * TLY_CC_ONE);
	for (i = 0; i < 20; i++) {
		now += 10 * BASE;
		tly_cc_on_loss(&cc, &p, now);
	}
	assert_int_equal(tly_cc_window(&cc, &p), 4);
	assert_true(cc.cwnd >= (uint64_t)4 * TLY_CC_ONE);
}

static void test_recovery(void **state)
{
	struct tly_cc_params p = params(256);
	struct tly_cc cc;
	uint64_t now = 0;
	uint32_t w, rounds = 0;

	(void)state;
	tly_cc_init(&cc, &p, now);
	clean_acks(&cc, &p, 16 + 32 + 64, &now);	/* 128 */
	tly_cc_on_loss(&cc, &p, now);
	assert_int_equal(tly_cc_window(&cc, &p), 64);
	/* back to the maximum one packet per round, no faster */
	while ((w = tly_cc_window(&cc, &p)) < 256) {
		clean_acks(&cc, &p, w, &now);
		assert_true(tly_cc_window(&cc, &p) <= w + 1);
		rounds++;
		assert_true(rounds < 1000);
	}
	/* rounding down makes it a little slower than one per round */
	assert_true(rounds >= 256 - 64);
	assert_true(rounds <= (256 - 64) * 11 / 10);
}

static void test_karn_and_base_window(void **state)
{
	struct tly_cc_params p = { .max_window = 64, .base_win_ns = 1000 * US };
	struct tly_cc cc;
	uint64_t now = 0;

	(void)state;
	tly_cc_params_fill(&p);
	tly_cc_init(&cc, &p, now);
	/* answers without a sample (retransmitted) change nothing: an
	 * aggregator ACKs what it holds for the other workers */
	now += US;
	tly_cc_on_ack(&cc, &p, 0, now);
	assert_int_equal(tly_cc_base_rtt(&cc), UINT64_MAX);
	assert_int_equal(cc.srtt, 0);
	assert_int_equal(tly_cc_window(&cc, &p), 16);
	/* the base is the min over the window ... */
	tly_cc_on_ack(&cc, &p, BASE, now);
	tly_cc_on_ack(&cc, &p, 3 * BASE, now);
	assert_int_equal(tly_cc_base_rtt(&cc), BASE);
	/* ... and a longer path is learnt within base_win_ns */
	now += p.base_win_ns / 2;
	tly_cc_on_ack(&cc, &p, 3 * BASE, now);
	assert_int_equal(tly_cc_base_rtt(&cc), BASE);
	now += p.base_win_ns / 2;
	tly_cc_on_ack(&cc, &p, 3 * BASE, now);
	assert_int_equal(tly_cc_base_rtt(&cc), 3 * BASE);
}

/* @rounds rounds of ACKs with RTT @rtt (a window's worth each) */
static void rounds_of(struct tly_cc *cc, const struct tly_cc_params *p,
		      uint64_t rtt, uint32_t rounds, uint64_t *now)
{
	while (rounds--) {
		uint32_t w = tly_cc_window(cc, p);
		uint64_t step = rtt / w + 1;

		for (uint32_t i = 0; i < w; i++) {
			*now += step;
			tly_cc_on_ack(cc, p, rtt, *now);
		}
	}
}

/* srtt + 4 rttvar (RFC 6298): 3 RTT after the first sample, falling
 * towards the RTT while samples agree, rising with a queue that varies */
static void test_rto(void **state)
{
	struct tly_cc_params p = params(1024);
	struct tly_cc cc;
	uint64_t now = 0;

	(void)state;
	tly_cc_init(&cc, &p, now);
	assert_true(tly_cc_rto(&cc) == 0);
	tly_cc_on_ack(&cc, &p, BASE, ++now);
	assert_true(tly_cc_rto(&cc) == 3 * BASE);
	rounds_of(&cc, &p, BASE, 20, &now);
	assert_true(tly_cc_rto(&cc) < BASE + BASE / 4);
	assert_true(tly_cc_rto(&cc) >= BASE);
	/* a queue of 0..10 ms that comes and goes: the timeout covers it */
	for (int i = 0; i < 200; i++) {
		now += 100 * US;
		tly_cc_on_ack(&cc, &p, BASE + (i % 2) * 10000 * US, now);
	}
	assert_true(tly_cc_rto(&cc) > 10000 * US);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_slow_start_then_additive),
		cmocka_unit_test(test_loss_halves_once_per_rtt),
		cmocka_unit_test(test_delay_signal),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_recovery),
		cmocka_unit_test(test_karn_and_base_window),
		cmocka_unit_test(test_rto),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
