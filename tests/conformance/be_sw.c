// SPDX-License-Identifier: BSD-3-Clause
/*
 * be_sw.c - backend: tally's software aggregator (dataplane/engine/agg.c)
 * in this process, in the job's profile; in the switch profile the
 * backend is also its control plane and sweeps every evict_ns.
 *
 * cf_be_sw_mutant() is issue 14's aggregator, to show the suite fails
 * it: tally's with INT cleared on every re-sent RESULT (rule 4 broken).
 */
#include <stdlib.h>

#include "conf.h"
#include "dataplane/engine/agg.h"

struct be_sw {
	struct cf_backend be;
	struct tly_agg *a;
	uint64_t next_sweep;
	int strip_int;		/* the mutant: no INT on re-sent RESULTs */
	/* the aggregator allocates a frame per worker before sending */
	uint8_t buf[TLY_MAX_WORKERS + 2][CF_PKT_MAX];
	unsigned int next;
};

static uint8_t *sw_alloc(void *ctx, size_t len)
{
	struct be_sw *s = ctx;

	return len <= CF_PKT_MAX ?
	       s->buf[s->next++ % (TLY_MAX_WORKERS + 2)] : NULL;
}

static void sw_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	struct be_sw *s = ctx;

	if (s->strip_int && (f[0] & 0x0f) == TLY_T_RESULT &&
	    (f[1] & TLY_F_RETX))
		f[1] &= (uint8_t)~TLY_F_INT;
	s->be.reply(s->be.run, dst, f, len);
}

static void sw_rx(struct cf_backend *be, uint16_t rank, const uint8_t *pkt,
		  size_t len, uint64_t now)
{
	struct be_sw *s = (struct be_sw *)be;

	(void)rank;
	tly_agg_rx(s->a, pkt, len, now);
}

static void sw_poll(struct cf_backend *be, uint64_t now, uint64_t wait_ns)
{
	struct be_sw *s = (struct be_sw *)be;
	uint64_t iv = tly_agg_sweep_interval(s->a);

	(void)wait_ns;
	tly_agg_poll(s->a, now);
	if (iv && now >= s->next_sweep) {
		tly_agg_sweep(s->a, now);
		s->next_sweep = now + iv;
	}
}

static void sw_destroy(struct cf_backend *be)
{
	struct be_sw *s = (struct be_sw *)be;

	tly_agg_destroy(s->a);
	free(s);
}

struct cf_backend *cf_be_sw(const struct cf_job *j)
{
	struct be_sw *s = calloc(1, sizeof(*s));
	struct tly_agg_cfg ac = {
		.job = j->job, .cookie = j->cookie, .k = j->k,
		.n_workers = j->n, .self = j->n, .n_slots = j->slots,
		/* the workers' retry ceiling is 1 ms (conf.c) */
		.evict_ns = 25000000, .probe_ns = 250000,
		.profile = j->profile,
	};

	if (!s)
		return NULL;
	ac.ops = (struct tly_tx_ops){ .alloc = sw_alloc, .send = sw_send,
				      .ctx = s };
	s->a = tly_agg_create(&ac);
	if (!s->a) {
		free(s);
		return NULL;
	}
	s->be = (struct cf_backend){
		.name = j->profile ? "sw-switch" : "sw", .rx = sw_rx,
		.poll = sw_poll, .destroy = sw_destroy,
	};
	s->next_sweep = tly_agg_sweep_interval(s->a);
	return &s->be;
}

struct cf_backend *cf_be_sw_mutant(const struct cf_job *j)
{
	struct be_sw *s = (struct be_sw *)cf_be_sw(j);

	if (s) {
		s->strip_int = 1;
		s->be.name = "sw-mutant-int";
	}
	return s ? &s->be : NULL;
}
