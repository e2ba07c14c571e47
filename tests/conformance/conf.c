// SPDX-License-Identifier: BSD-3-Clause
/*
 * conf.c - the conformance runner: workers, the faulty network between
 * them and the aggregator under test, and the checks on every reply.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "conf.h"
#include "dataplane/clock.h"
#include "dataplane/engine/wire.h"
#include "dataplane/half.h"
#include "../dataplane/expect.h"

#define AGG_DST 0xfffeu
#define TICK_NS 5000ull
#define DELAY_NS 5000ull
#define MAX_KEYS (4 * 2 * 16384)

struct pkt {
	uint64_t due, seq;
	uint16_t dst, len;
	uint8_t d[CF_PKT_MAX];
};

/* what the checks remember of one (tensor, chunk, EXP) */
struct key {
	uint64_t contrib;	/* ranks whose DATA reached the aggregator */
	uint8_t seen, mode;	/* mode: the DATA's INT */
	int8_t shift;
	int32_t *result;	/* the first RESULT's payload */
};

struct wctx {
	struct cf_run *r;
	uint16_t rank;
	uint8_t buf[8][CF_PKT_MAX];
	unsigned int next;
};

struct cf_run {
	struct cf_job job;
	struct cf_backend *be;
	struct cf_faults f;
	uint64_t rng, now, seq;
	struct pkt **heap;
	size_t n_heap, cap_heap;
	struct tly_worker *w[TLY_MAX_WORKERS];
	struct wctx wc[TLY_MAX_WORKERS];
	uint32_t done[TLY_MAX_WORKERS];
	uint32_t tensor_ids[4];
	struct key *keys;
	/* raw mode: replies are captured, not delivered */
	int raw;
	struct cf_reply *cap;
	unsigned int n_cap, max_cap;
	uint64_t replies, results, busy, retx;
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s += 0x9e3779b97f4a7c15ull;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static double rnd01(uint64_t *s)
{
	return (double)(rnd(s) >> 11) / 9007199254740992.0;
}

static uint64_t now_of(struct cf_run *r)
{
	return r->be->realtime ? tly_now_ns() : r->now;
}

/* --- the network: a min-heap on (due, seq) --- */

static int before(const struct pkt *a, const struct pkt *b)
{
	return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_push(struct cf_run *r, struct pkt *p)
{
	size_t i;

	if (r->n_heap == r->cap_heap) {
		r->cap_heap = r->cap_heap ? 2 * r->cap_heap : 1024;
		r->heap = realloc(r->heap, r->cap_heap * sizeof(*r->heap));
		assert_non_null(r->heap);
	}
	i = r->n_heap++;
	while (i && before(p, r->heap[(i - 1) / 2])) {
		r->heap[i] = r->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	r->heap[i] = p;
}

static struct pkt *heap_pop(struct cf_run *r)
{
	struct pkt *top = r->heap[0], *last;
	size_t i = 0;

	last = r->heap[--r->n_heap];
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= r->n_heap)
			break;
		if (c + 1 < r->n_heap && before(r->heap[c + 1], r->heap[c]))
			c++;
		if (!before(r->heap[c], last))
			break;
		r->heap[i] = r->heap[c];
		i = c;
	}
	if (r->n_heap)
		r->heap[i] = last;
	return top;
}

/* one frame into the network, through the faults */
static void net_send(struct cf_run *r, uint16_t dst, const uint8_t *d,
		     size_t len)
{
	int copies = 1, i;

	assert_true(len <= CF_PKT_MAX);
	if (r->f.loss > 0 && rnd01(&r->rng) < r->f.loss)
		return;
	if (r->f.dup > 0 && rnd01(&r->rng) < r->f.dup)
		copies = 2;
	for (i = 0; i < copies; i++) {
		struct pkt *p = malloc(sizeof(*p));

		assert_non_null(p);
		p->due = now_of(r) + DELAY_NS;
		if (r->f.reorder_ns)
			p->due += rnd(&r->rng) % r->f.reorder_ns;
		p->seq = r->seq++;
		p->dst = dst;
		p->len = (uint16_t)len;
		memcpy(p->d, d, len);
		heap_push(r, p);
	}
}

/* --- what the checks remember --- */

static struct key *key_of(struct cf_run *r, uint32_t tensor, uint16_t chunk,
			  int exp)
{
	uint32_t t;

	for (t = 0; t < 4; t++)
		if (r->tensor_ids[t] == tensor)
			break;
	if (t == 4 || !r->keys)
		return NULL;
	return &r->keys[(t * 16384u + chunk) * 2 + (exp ? 1 : 0)];
}

static void note_data(struct cf_run *r, const uint8_t *pkt, size_t len)
{
	struct tly_wire_limits lim = {
		.job = r->job.job, .cookie = r->job.cookie, .k = r->job.k,
		.n_ranks = r->job.n, .n_slots = r->job.slots,
		.profile = r->job.profile,
	};
	struct tly_hdr h;
	struct key *k;

	if (tly_hdr_parse(pkt, len, &lim, &h) != TLY_OK ||
	    h.type != TLY_T_DATA)
		return;
	k = key_of(r, h.tensor, h.chunk, h.flags & TLY_F_EXP);
	if (!k)
		return;
	if (k->seen && (k->mode != !!(h.flags & TLY_F_INT) ||
			k->shift != h.shift)) {
		/* section 13: a worker sends the same mode and shift; only
		 * the raw cases send others, which must not count */
		if (!r->raw)
			fail_msg("worker %u changed chunk %u's mode/shift",
				 h.rank, h.chunk);
		return;
	}
	k->seen = 1;
	k->mode = !!(h.flags & TLY_F_INT);
	k->shift = h.shift;
	k->contrib |= 1ull << h.rank;
}

/* rules 3 and 4 of section 13 on every reply, as it leaves */
static void check_reply(struct cf_run *r, uint16_t rank, const uint8_t *pkt,
			size_t len, struct tly_hdr *out)
{
	struct tly_wire_limits lim = {
		.job = r->job.job, .cookie = r->job.cookie, .k = r->job.k,
		.n_ranks = r->job.n, .n_slots = r->job.slots,
		.profile = r->job.profile,
	};
	uint8_t copy[CF_PKT_MAX];
	uint16_t to = rank == CF_GROUP ? 0 : rank;
	enum tly_drop e;
	struct tly_hdr h;
	struct key *k;
	int exp;

	assert_true(len >= TLY_HDR_LEN && len <= CF_PKT_MAX);
	memcpy(copy, pkt, len);
	tly_frame_readdress_bare(copy, to);
	e = tly_hdr_parse(copy, len, &lim, &h);
	if (e != TLY_OK)
		fail_msg("%s: reply to %u fails the worker's check: %s",
			 r->be->name, rank, tly_drop_name(e));
	if (rank != CF_GROUP && tly_get16(pkt + 4) != rank)
		fail_msg("reply rank %u sent to %u", tly_get16(pkt + 4), rank);
	*out = h;
	r->replies++;
	if (h.type != TLY_T_RESULT && h.type != TLY_T_ACK &&
	    h.type != TLY_T_BUSY)
		fail_msg("%s: reply of type %u", r->be->name, h.type);
	exp = !!(h.flags & TLY_F_EXP);
	if (h.slot != (uint16_t)tly_slot_of(h.tensor, h.chunk, (uint8_t)exp,
					    r->job.slots))
		fail_msg("%s: slot %u, slot_of %u", r->be->name, h.slot,
			 tly_slot_of(h.tensor, h.chunk, (uint8_t)exp,
				     r->job.slots));
	if (h.type != TLY_T_RESULT && h.shift)
		fail_msg("%s: shift %d on type %u", r->be->name, h.shift,
			 h.type);
	k = key_of(r, h.tensor, h.chunk, exp);
	if (!k)
		return;
	if (!k->seen)
		fail_msg("%s: reply (type %u) for chunk %u exp %d never sent",
			 r->be->name, h.type, h.chunk, exp);
	if (h.type == TLY_T_ACK && (h.flags & TLY_F_RELEASED))
		return;		/* answers a CONFIRM: EXP echoed only */
	if (k->mode != !!(h.flags & TLY_F_INT))
		fail_msg("%s: type %u chunk %u: INT %d, the DATA's %d%s",
			 r->be->name, h.type, h.chunk,
			 !!(h.flags & TLY_F_INT), k->mode,
			 h.flags & TLY_F_RETX ? " (re-sent)" : "");
	if (h.type == TLY_T_BUSY)
		r->busy++;
	if (h.type != TLY_T_RESULT)
		return;
	r->results++;
	if (h.flags & TLY_F_RETX)
		r->retx++;
	if (h.shift != k->shift)
		fail_msg("%s: RESULT shift %d, DATA %d", r->be->name, h.shift,
			 k->shift);
	if (k->contrib != (r->job.n == 64 ? ~0ull :
			   (1ull << r->job.n) - 1))
		fail_msg("%s: RESULT of chunk %u exp %d before all %u "
			 "contributions (have %#llx)", r->be->name, h.chunk,
			 exp, r->job.n, (unsigned long long)k->contrib);
	if (!k->result) {
		k->result = malloc(4u * r->job.k);
		assert_non_null(k->result);
		memcpy(k->result, pkt + TLY_HDR_LEN, 4u * r->job.k);
	} else if (memcmp(k->result, pkt + TLY_HDR_LEN, 4u * r->job.k)) {
		fail_msg("%s: chunk %u exp %d: a RESULT with another sum",
			 r->be->name, h.chunk, exp);
	}
}

static void on_reply(struct cf_run *r, uint16_t rank, const uint8_t *pkt,
		     size_t len)
{
	uint8_t copy[CF_PKT_MAX];
	struct tly_hdr h;
	uint16_t i;

	check_reply(r, rank, pkt, len, &h);
	if (r->raw) {
		for (i = 0; i < r->job.n; i++) {
			struct cf_reply *c;
			size_t l;

			if (rank != CF_GROUP && rank != i)
				continue;
			if (r->n_cap == r->max_cap)
				return;
			c = &r->cap[r->n_cap++];
			c->rank = i;
			c->h = h;
			c->h.rank = i;
			for (l = 0; TLY_HDR_LEN + 4 * l < len && l < CF_K_MAX;
			     l++)
				c->lanes[l] = (int32_t)tly_get32(
					pkt + TLY_HDR_LEN + 4 * l);
		}
		return;
	}
	for (i = 0; i < r->job.n; i++) {
		if (rank != CF_GROUP && rank != i)
			continue;
		memcpy(copy, pkt, len);
		tly_frame_readdress_bare(copy, i);
		net_send(r, i, copy, len);
	}
}

/* --- the workers' transport --- */

static uint8_t *w_alloc(void *ctx, size_t len)
{
	struct wctx *c = ctx;

	return len <= CF_PKT_MAX ? c->buf[c->next++ % 8] : NULL;
}

static void w_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	struct wctx *c = ctx;
	struct cf_run *r = c->r;

	assert_int_equal(dst, r->job.n);
	if (r->f.confirm_rank && (f[0] & 0x0f) == TLY_T_CONFIRM &&
	    c->rank == r->f.confirm_rank - 1 && r->f.confirm_drop) {
		r->f.confirm_drop--;
		return;
	}
	net_send(r, AGG_DST, f, len);
}

static void w_done(void *ctx, const struct tly_tensor_desc *d)
{
	struct wctx *c = ctx;

	(void)d;
	c->r->done[c->rank]++;
}

static struct cf_run *run_new(const struct cf_job *j, const struct cf_faults *f)
{
	struct cf_run *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->job = *j;
	if (f)
		r->f = *f;
	r->rng = r->f.seed * 0x2545f4914f6cdd1dull + 1;
	r->be = cf_be_open(j);
	if (!r->be) {
		free(r);
		return NULL;
	}
	r->be->run = r;
	r->be->reply = on_reply;
	r->now = r->be->realtime ? tly_now_ns() : 1000000;
	return r;
}

static void run_free(struct cf_run *r)
{
	size_t i;

	r->be->destroy(r->be);
	while (r->n_heap)
		free(heap_pop(r));
	free(r->heap);
	for (i = 0; r->keys && i < MAX_KEYS; i++)
		free(r->keys[i].result);
	free(r->keys);
	free(r->cap);
	for (i = 0; i < TLY_MAX_WORKERS; i++)
		tly_worker_destroy(r->w[i]);
	free(r);
}

/* one step of the network, the aggregator and the workers */
static void step(struct cf_run *r)
{
	uint64_t now, wait;
	uint16_t i;

	if (r->be->realtime)
		r->now = tly_now_ns();
	else
		r->now += TICK_NS;
	now = r->now;
	while (r->n_heap && r->heap[0]->due <= now) {
		struct pkt *p = heap_pop(r);

		if (p->dst == AGG_DST) {
			note_data(r, p->d, p->len);
			r->be->rx(r->be, tly_get16(p->d + 4), p->d, p->len,
				  now);
		} else if (r->w[p->dst]) {
			tly_worker_rx(r->w[p->dst], p->d, p->len, now);
		}
		free(p);
	}
	wait = 50000;
	if (r->n_heap)
		wait = r->heap[0]->due > now ? r->heap[0]->due - now : 0;
	r->be->poll(r->be, now, wait < 50000 ? wait : 50000);
	for (i = 0; i < r->job.n; i++)
		if (r->w[i])
			tly_worker_poll(r->w[i], now);
}

/* --- a whole all-reduce --- */

static void apply_avg(enum tly_dtype dt, void *out, size_t count, uint16_t n)
{
	float s = 1.0f / (float)n;
	size_t i;

	for (i = 0; i < count; i++) {
		switch (dt) {
		case TLY_DT_F32:
			((float *)out)[i] *= s;
			break;
		case TLY_DT_F16:
			((uint16_t *)out)[i] = float_to_half(
				half_to_float(((uint16_t *)out)[i]) * s);
			break;
		case TLY_DT_BF16:
			((uint16_t *)out)[i] = float_to_bf16(
				bf16_to_float(((uint16_t *)out)[i]) * s);
			break;
		case TLY_DT_I32:
			((int32_t *)out)[i] /= (int32_t)n;
			break;
		}
	}
}

/* avg: out, scaled, against the reference sum scaled the same way */
static void check_avg(enum tly_dtype dt, uint16_t n, const void *const *in,
		      const void *sum, const void *out, size_t count)
{
	size_t i, es = dp_dtype_size(dt);
	uint8_t ref[4];
	uint16_t w;

	for (i = 0; i < count; i++) {
		if (dt == TLY_DT_I32) {
			uint32_t s = 0;
			int32_t a;

			for (w = 0; w < n; w++)
				s += ((const uint32_t *)in[w])[i];
			a = (int32_t)s / (int32_t)n;
			memcpy(ref, &a, 4);
		} else {
			float s = dp_as_float(dt, sum, i) * (1.0f / (float)n);
			uint16_t h = dt == TLY_DT_F16 ? float_to_half(s) :
				     float_to_bf16(s);

			if (dt == TLY_DT_F32)
				memcpy(ref, &s, 4);
			else
				memcpy(ref, &h, 2);
		}
		if (memcmp(ref, (const uint8_t *)out + i * es, es))
			fail_msg("avg element %zu differs", i);
	}
}

void cf_allreduce(const struct cf_case *c)
{
	struct cf_run *r = run_new(&c->job, &c->f);
	struct tly_tensor_desc d[TLY_MAX_WORKERS][4];
	size_t sizes[4];
	struct dp_tensors b;
	uint16_t agg = c->job.n, n = c->job.n, i;
	uint32_t t, submitted[TLY_MAX_WORKERS] = { 0 };
	uint32_t max_t = c->max_tensors ? c->max_tensors : c->n_tensors;
	size_t chunks = (c->count + c->job.k - 1) / c->job.k;
	uint64_t end;
	int all;

	if (!r) {
		skip();
		return;
	}
	assert_true(c->n_tensors >= 1 && c->n_tensors <= 4);
	assert_true(chunks <= 16384);
	r->keys = calloc(MAX_KEYS, sizeof(*r->keys));
	assert_non_null(r->keys);
	for (t = 0; t < c->n_tensors; t++) {
		sizes[t] = c->count;
		r->tensor_ids[t] = 0x51000000u + 0x1009u * (t + 1) +
				   (uint32_t)(c->f.seed << 12);
	}
	dp_tensors_alloc(&b, c->dtype, n, c->n_tensors, sizes,
			 c->f.seed + 77);
	for (i = 0; i < n; i++) {
		struct tly_worker_cfg wc = {
			.job = c->job.job, .cookie = c->job.cookie,
			.k = c->job.k, .n_workers = n, .rank = i,
			.n_slots = c->job.slots, .n_aggs = 1,
			.agg_nodes = &agg,
			.window = c->window ? c->window : 32,
			.max_tensors = max_t,
			.rto_ns = r->be->realtime ? 2000000 : 100000,
			.rto_max_ns = r->be->realtime ? 20000000 : 1000000,
			.acked_ns = r->be->realtime ? 10000000 : 500000,
			.busy_ns = r->be->realtime ? 1000000 : 50000,
			.confirm_ns = 20000, .confirm_batch = 16,
			.cc_off = 1,
			.chunk_rotate = c->orders ?
				(uint32_t)(chunks / n + 1) : 0,
			.profile = c->job.profile,
			.ops = { .alloc = w_alloc, .send = w_send,
				 .ctx = &r->wc[i] },
			.done = w_done, .done_ctx = &r->wc[i],
		};

		r->wc[i].r = r;
		r->wc[i].rank = i;
		r->w[i] = tly_worker_create(&wc);
		assert_non_null(r->w[i]);
		for (t = 0; t < c->n_tensors; t++) {
			/* in its own order: worker i starts at tensor i */
			uint32_t tt = c->orders ? (t + i) % c->n_tensors : t;

			d[i][t] = (struct tly_tensor_desc){
				.id = r->tensor_ids[tt], .dtype = c->dtype,
				.src = b.in[i][tt], .dst = b.out[i][tt],
				.count = c->count,
			};
		}
	}
	end = now_of(r) + c->max_ns;
	for (;;) {
		for (i = 0, all = 1; i < n; i++) {
			while (submitted[i] < c->n_tensors &&
			       submitted[i] - r->done[i] < max_t) {
				assert_int_equal(tly_worker_submit(
					r->w[i], &d[i][submitted[i]], r->now),
					0);
				submitted[i]++;
			}
			if (r->done[i] < c->n_tensors)
				all = 0;
		}
		if (all)
			break;
		if (now_of(r) >= end) {
			for (i = 0; i < n; i++) {
				struct tly_tensor_wait tw;

				if (tly_worker_tensor_wait(r->w[i],
						d[i][submitted[i] - 1].id,
						&tw) == 0)
					print_message("worker %u: %u of %u "
						"chunks done, first %u %s\n",
						i, tw.done, tw.n_chunks,
						tw.first, tly_chunk_state_name(
							tw.first_state));
			}
			fail_msg("%s: not finished in %llu ms", r->be->name,
				 (unsigned long long)(c->max_ns / 1000000));
		}
		step(r);
	}
	for (t = 0; t < c->n_tensors; t++) {
		const void *const *in = dp_tensor_inputs(&b, t);

		for (i = 0; i < n; i++) {
			/* every worker holds the same bits */
			if (memcmp(b.out[i][t], b.out[0][t],
				   c->count * dp_dtype_size(c->dtype)))
				fail_msg("worker %u's tensor %u differs from "
					 "worker 0's", i, t);
		}
		if (c->dtype == TLY_DT_I32)
			dp_check_int(n, in, b.out[0][t], c->count, t);
		else
			dp_check_float(c->dtype, n, c->job.k, false, in,
				       b.out[0][t], c->count, t);
		if (c->op == CF_AVG) {
			size_t bytes = c->count * dp_dtype_size(c->dtype);
			void *avg = malloc(bytes);

			assert_non_null(avg);
			memcpy(avg, b.out[0][t], bytes);
			apply_avg(c->dtype, avg, c->count, n);
			check_avg(c->dtype, n, in, b.out[0][t], avg, c->count);
			free(avg);
		}
	}
	assert_true(r->results > 0);
	print_message("%s: %llu replies, %llu RESULTs (%llu re-sent), "
		      "%llu BUSY\n", r->be->name,
		      (unsigned long long)r->replies,
		      (unsigned long long)r->results,
		      (unsigned long long)r->retx,
		      (unsigned long long)r->busy);
	/* the case did reach what it is about */
	if (c->expect_busy)
		assert_true(r->busy > 0);
	if (c->expect_retx)
		assert_true(r->retx > 0);
	dp_tensors_free(&b);
	run_free(r);
}

/* --- raw packets --- */

struct cf_run *cf_raw_open(const struct cf_job *j)
{
	struct cf_run *r = run_new(j, NULL);

	if (!r)
		return NULL;
	r->raw = 1;
	r->max_cap = 256;
	r->cap = calloc(r->max_cap, sizeof(*r->cap));
	r->keys = calloc(MAX_KEYS, sizeof(*r->keys));
	assert_non_null(r->cap);
	assert_non_null(r->keys);
	return r;
}

void cf_raw_close(struct cf_run *r)
{
	run_free(r);
}

void cf_raw_send(struct cf_run *r, const struct tly_hdr *h,
		 const int32_t *lanes, size_t n_lanes)
{
	uint8_t p[CF_PKT_MAX];
	struct tly_hdr hh = *h;
	size_t i;

	if (!hh.job)
		hh.job = r->job.job;
	if (!hh.cookie)
		hh.cookie = r->job.cookie;
	if (hh.type == TLY_T_DATA) {
		int t;

		/* the checks follow this tensor */
		for (t = 0; t < 4 && r->tensor_ids[t] &&
		     r->tensor_ids[t] != hh.tensor; t++)
			;
		if (t < 4)
			r->tensor_ids[t] = hh.tensor;
	}
	tly_hdr_write(p, &hh);
	for (i = 0; i < n_lanes; i++)
		tly_put32(p + TLY_HDR_LEN + 4 * i, (uint32_t)lanes[i]);
	net_send(r, AGG_DST, p, TLY_HDR_LEN + 4 * n_lanes);
}

unsigned int cf_raw_collect(struct cf_run *r, struct cf_reply *out,
			    unsigned int max, uint64_t wait_ns)
{
	uint64_t end;

	/* on the real clock, at least 250 ms: a loaded host */
	if (r->be->realtime)
		wait_ns = wait_ns * 20 > 250000000 ? wait_ns * 20 : 250000000;
	end = now_of(r) + wait_ns;
	unsigned int n;

	r->n_cap = 0;
	while (now_of(r) < end)
		step(r);
	n = r->n_cap < max ? r->n_cap : max;
	memcpy(out, r->cap, n * sizeof(*out));
	return n;
}
