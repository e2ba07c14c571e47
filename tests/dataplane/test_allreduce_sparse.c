// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_allreduce_sparse.c - block_topk<p>_ef (docs/compression.md,
 * sections 4 and 7) end to end over the faulty fabric: loss, duplication,
 * reordering, small pools (BUSY, fallback, eviction), 2, 3, 5 and 33
 * workers, float32 and bfloat16, sizes that are not multiples of K.
 *
 * The expectation is computed here from the inputs, not with sparse.c or
 * the aggregator: per worker the blocks (chunks of K elements) ranked by
 * their L2 norm (double), the ceil(p * blocks) largest that are not all
 * zero, plus every block holding inf or NaN; per block the senders' max
 * frexp exponent E and their number m; shift = min(30 - E - ceil(log2 m),
 * 127); the result sum_senders rint(x 2^shift) * 2^-shift on EVERY
 * worker, sender or not, and zeros where m = 0.  "sent": the worker's own
 * rint(x 2^shift) 2^-shift for a block it sent, 0 for one it did not, NaN
 * for a non-finite block it sent.  A PULL run drops the first RESULTs of
 * the blocks worker 0 did not send until worker 0 PULLed them.  And the
 * bytes of top-10 % on a gradient whose large blocks are shared.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cluster.h"
#include "expect.h"
#include "dataplane/half.h"
#include "dataplane/engine/wire.h"

#define MAX_T 3
#define MAX_BLOCKS 512

struct scenario {
	const char *name;
	struct cl_cfg cl;
	enum tly_dtype dtype;
	uint8_t codec;
	int inf;		/* put +inf into worker 1's tensor 0 */
	int pull;		/* drop RESULTs to worker 0 until it PULLs */
	uint32_t n_tensors;
	size_t sizes[MAX_T];
};

static unsigned int permille(uint8_t codec)
{
	return codec == TLY_CODEC_TOPK1_EF ? 10 : 100;
}

/* the model's selection: sel[b] = 1 for a block worker @x sends */
static void model_select(enum tly_dtype dt, const void *x, size_t count,
			 size_t k, unsigned int pm, uint8_t *sel)
{
	size_t nb = (count + k - 1) / k, kb = (nb * pm + 999) / 1000, b, i;
	double norm[MAX_BLOCKS];
	size_t taken = 0;

	assert_true(nb <= MAX_BLOCKS);
	for (b = 0; b < nb; b++) {
		double s = 0;

		for (i = b * k; i < count && i < (b + 1) * k; i++) {
			double v = dp_as_float(dt, x, i);

			s = isfinite(v) ? s + v * v : INFINITY;
			if (!isfinite(v))
				break;
		}
		norm[b] = s;
		sel[b] = isinf(s);	/* non-finite: always, first */
		taken += sel[b];
	}
	/* then the largest finite nonzero norms (ties: lower index) up to
	 * kb blocks in all */
	while (taken < kb) {
		size_t best = nb;

		for (b = 0; b < nb; b++)
			if (!sel[b] && norm[b] > 0 &&
			    (best == nb || norm[b] > norm[best]))
				best = b;
		if (best == nb)
			break;
		sel[best] = 1;
		taken++;
	}
}

static int frexp_e(float v)
{
	int e;

	frexpf(v, &e);
	return e;
}

/* every worker's output and "sent" of one tensor against the model */
static void check_sparse(const struct scenario *sc, const void *const *in,
			 void *const *out, void *const *sent, size_t count,
			 uint8_t sel[][MAX_BLOCKS], uint64_t *senders_hist)
{
	unsigned int n = sc->cl.n_workers, w;
	size_t k = sc->cl.k, nb = (count + k - 1) / k, b, i;

	for (b = 0; b < nb; b++) {
		size_t end = (b + 1) * k < count ? (b + 1) * k : count;
		unsigned int m = 0;
		int emax = -1000, nonfinite = 0, shift;

		for (w = 0; w < n; w++) {
			if (!sel[w][b])
				continue;
			m++;
			for (i = b * k; i < end; i++) {
				float v = dp_as_float(sc->dtype, in[w], i);

				if (!isfinite(v))
					nonfinite = 1;
				else if (v != 0 && frexp_e(v) > emax)
					emax = frexp_e(v);
			}
		}
		senders_hist[m < 3 ? m : 3]++;
		if (m == 0) {
			for (w = 0; w < n; w++)
				for (i = b * k; i < end; i++) {
					assert_true(dp_as_float(sc->dtype,
						    out[w], i) == 0);
					assert_true(dp_as_float(sc->dtype,
						    sent[w], i) == 0);
				}
			continue;
		}
		if (nonfinite) {
			for (w = 0; w < n; w++)
				for (i = b * k; i < end; i++) {
					float s = dp_as_float(sc->dtype,
							      sent[w], i);

					assert_false(isfinite(dp_as_float(
						sc->dtype, out[w], i)));
					if (sel[w][b])
						assert_true(isnan(s));
					else
						assert_true(s == 0);
				}
			continue;
		}
		shift = 30 - emax - dp_ceil_log2(m);
		shift = shift > 127 ? 127 : shift;
		for (i = b * k; i < end; i++) {
			double S = 0;
			float want;

			for (w = 0; w < n; w++)
				if (sel[w][b])
					S += rint(ldexp(dp_as_float(sc->dtype,
								    in[w], i),
							shift));
			assert_true(fabs(S) < ldexp(1, 30));
			want = dp_store_as(sc->dtype, (float)ldexp(S, -shift));
			for (w = 0; w < n; w++) {
				float x = dp_as_float(sc->dtype, in[w], i);
				float q = sel[w][b] ? dp_store_as(sc->dtype,
					(float)ldexp(rint(ldexp(x, shift)),
						     -shift)) : 0.0f;
				float got = dp_as_float(sc->dtype, out[w], i);

				if (!dp_same_float(got, want))
					fail_msg("worker %u block %zu elem %zu:"
						 " got %.9g want %.9g (m %u)",
						 w, b, i, got, want, m);
				got = dp_as_float(sc->dtype, sent[w], i);
				if (!dp_same_float(got, q))
					fail_msg("worker %u elem %zu: sent %.9g"
						 " want %.9g", w, i, got, q);
			}
		}
	}
}

/* the PULL run: RESULTs of worker 0's non-sent blocks of tensor 0 are
 * dropped until worker 0 PULLed the block */
struct pull_ctx {
	uint32_t tensor;
	const uint8_t *listen;	/* worker 0 sends no DATA of these */
	uint8_t pulled[MAX_BLOCKS];
	uint64_t pulls, dropped;
};

static int pull_drop(void *ctx, uint16_t src, uint16_t dst,
		     const uint8_t *f, size_t len)
{
	struct pull_ctx *p = ctx;
	uint8_t type = f[0] & 0x0f, flags = f[1], aux = f[15];
	uint32_t tensor = tly_get32(f + 8);
	uint16_t chunk = tly_get16(f + 12);

	(void)len;
	if (tensor != p->tensor || (flags & TLY_F_EXP) || chunk >= MAX_BLOCKS)
		return 0;
	if (type == TLY_T_DATA && src == 0 && (aux & TLY_AUX_PULL)) {
		assert_true(p->listen[chunk]);
		p->pulls++;
		p->pulled[chunk] = 1;
		return 0;
	}
	if (type == TLY_T_DATA && (aux & TLY_AUX_PULL))
		return 0;
	if (type == TLY_T_RESULT && dst == 0 && p->listen[chunk] &&
	    !p->pulled[chunk]) {
		p->dropped++;
		return 1;
	}
	return 0;
}

static void test_scenario(void **state)
{
	const char *why;
	const struct scenario *sc = *state;
	struct cl_cfg cc = sc->cl;
	struct pull_ctx pc = { 0 };
	void *sent[TLY_MAX_WORKERS][MAX_T];
	static uint8_t sel[MAX_T][TLY_MAX_WORKERS][MAX_BLOCKS];
	uint64_t hist[4] = { 0 };
	struct dp_tensors bufs;
	struct cluster *cl;
	size_t esz = dp_dtype_size(sc->dtype);
	uint16_t w;
	uint32_t i, t;

	dp_tensors_alloc(&bufs, sc->dtype, sc->cl.n_workers, sc->n_tensors,
			 sc->sizes, sc->cl.fab.seed * 7919 + 1);
	/* workers disagree on some blocks: a few of each worker's are
	 * scaled up, so blocks get 0, 1, some or all n senders */
	for (t = 0; t < sc->n_tensors; t++)
		for (w = 0; w < sc->cl.n_workers; w++) {
			size_t j;

			for (j = 0; j < sc->sizes[t]; j++) {
				uint32_t b = (uint32_t)(j / sc->cl.k);
				float v = dp_as_float(sc->dtype,
						      bufs.in[w][t], j);

				if (((b * 2654435761u + w * 40503u) >> 9) %
				    9 != 0)
					continue;
				v = dp_store_as(sc->dtype, v * 16);
				if (sc->dtype == TLY_DT_F32)
					((float *)bufs.in[w][t])[j] = v;
				else
					((uint16_t *)bufs.in[w][t])[j] =
						float_to_bf16(v);
			}
		}
	if (sc->inf) {
		float inf = INFINITY;

		if (sc->dtype == TLY_DT_F32)
			memcpy((char *)bufs.in[1][0] + 7 * esz, &inf, 4);
		else
			((uint16_t *)bufs.in[1][0])[7] =
				sc->dtype == TLY_DT_F16 ? float_to_half(inf) :
				float_to_bf16(inf);
	}
	/* the model's selections, before the results overwrite nothing
	 * (src and dst differ) */
	for (t = 0; t < sc->n_tensors; t++)
		for (w = 0; w < sc->cl.n_workers; w++)
			model_select(sc->dtype, bufs.in[w][t], sc->sizes[t],
				     sc->cl.k, permille(sc->codec),
				     sel[t][w]);
	if (sc->pull) {
		static uint8_t listen[MAX_BLOCKS];
		size_t b, nb = (sc->sizes[0] + sc->cl.k - 1) / sc->cl.k;

		for (b = 0; b < nb; b++) {
			listen[b] = 0;
			if (sel[0][0][b])
				continue;
			for (w = 1; w < sc->cl.n_workers; w++)
				listen[b] |= sel[0][w][b];
		}
		pc.listen = listen;
		pc.tensor = tly_tensor_id(0x5000, 4, 0);
		cc.fab.drop = pull_drop;
		cc.fab.drop_ctx = &pc;
	}
	cl = cl_create(&cc);
	assert_non_null(cl);
	for (w = 0; w < sc->cl.n_workers; w++)
		for (i = 0; i < sc->n_tensors; i++) {
			struct tly_tensor_desc d = { 0 };

			t = (i + w) % sc->n_tensors;
			sent[w][t] = malloc(sc->sizes[t] * esz);
			assert_non_null(sent[w][t]);
			memset(sent[w][t], 0x5a, sc->sizes[t] * esz);
			d.id = tly_tensor_id(0x5000 + t, 4, 0);
			d.dtype = sc->dtype;
			d.algo = TLY_ALGO_AGG;
			d.codec = sc->codec;
			d.src = bufs.in[w][t];
			d.dst = bufs.out[w][t];
			d.sent = sent[w][t];
			d.count = sc->sizes[t];
			d.prio = (uint8_t)((t * 3 + w) % 4);
			assert_int_equal(tly_worker_submit(cl->w[w], &d, 0),
					 0);
		}
	assert_int_equal(cl_run(cl, sc->n_tensors, 4000000000ull), 0);
	for (t = 0; t < sc->n_tensors; t++) {
		void *out[TLY_MAX_WORKERS], *st[TLY_MAX_WORKERS];

		for (w = 0; w < sc->cl.n_workers; w++) {
			out[w] = bufs.out[w][t];
			st[w] = sent[w][t];
		}
		check_sparse(sc, dp_tensor_inputs(&bufs, t), out, st,
			     sc->sizes[t], sel[t], hist);
	}
	print_message("blocks by senders: m=0 %llu, 1 %llu, 2 %llu, >2 %llu\n",
		      (unsigned long long)hist[0], (unsigned long long)hist[1],
		      (unsigned long long)hist[2], (unsigned long long)hist[3]);
	/* the scenarios cover blocks nobody sent and partial blocks */
	assert_true(hist[0] > 0);
	if (sc->cl.n_workers < 33)
		assert_true(hist[1] > 0);
	if (sc->pull) {
		print_message("PULLs %llu, RESULTs dropped %llu\n",
			      (unsigned long long)pc.pulls,
			      (unsigned long long)pc.dropped);
		assert_true(pc.pulls > 0);
		assert_true(pc.dropped > 0);
	}
	why = cl_run_end_fault(cl, &sc->cl);
	if (why)
		fail_msg("%s", why);
	for (w = 0; w < sc->cl.n_workers; w++)
		for (t = 0; t < sc->n_tensors; t++)
			free(sent[w][t]);
	dp_tensors_free(&bufs);
	cl_destroy(cl);
}

/* block_topk for an int32 tensor, the ring or the switch profile */
static void test_refused(void **state)
{
	struct cl_cfg c = { .n_workers = 2, .k = 64, .role = CL_DEDICATED,
			    .n_slots = 64, .window = 8,
			    .fab = { .seed = 5, .delay_ns = 1000 } };
	struct cluster *cl = cl_create(&c);
	float x[64] = { 0 };
	int32_t xi[64] = { 0 };
	struct tly_tensor_desc d = {
		.id = 1, .dtype = TLY_DT_F32, .algo = TLY_ALGO_RING,
		.src = x, .dst = x, .count = 64,
		.codec = TLY_CODEC_TOPK10_EF,
	};

	(void)state;
	assert_non_null(cl);
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	d.algo = TLY_ALGO_AGG;
	d.dtype = TLY_DT_I32;
	d.src = d.dst = xi;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	cl_destroy(cl);
	c.profile = TLY_PROFILE_SWITCH;
	cl = cl_create(&c);
	assert_non_null(cl);
	d.dtype = TLY_DT_F32;
	d.src = d.dst = x;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	d.codec = TLY_CODEC_TOPK1_EF;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	d.codec = TLY_CODEC_NONE;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), 0);
	cl_destroy(cl);
}

/*
 * Bytes a worker sends and receives for one float32 tensor of 4 workers:
 * per block a scale shared by the workers (10^-3 .. 1, as layers differ)
 * times the worker's own noise, so the workers' largest blocks are
 * mostly the same ones (section 4: OmniReduce's premise).
 */
static void wire_bytes(uint8_t codec, size_t count, uint64_t *tx,
		       uint64_t *rx)
{
	float *x[4], *y[4];
	uint64_t rng = 12345;
	uint16_t w;
	size_t i;

	for (w = 0; w < 4; w++) {
		x[w] = malloc(count * sizeof(float));
		y[w] = malloc(count * sizeof(float));
		assert_non_null(x[w]);
		assert_non_null(y[w]);
	}
	for (i = 0; i < count; i += 64) {
		double scale = pow(10, -3.0 * (double)(fab_rand(&rng) % 1000) /
				   1000);
		size_t j;

		for (w = 0; w < 4; w++)
			for (j = i; j < i + 64 && j < count; j++)
				x[w][j] = (float)(scale *
					(((double)(fab_rand(&rng) % 2001) -
					  1000) / 1000));
	}
	assert_int_equal(cl_codec_bytes(4, codec, count, x, y, tx, rx), 0);
	for (w = 0; w < 4; w++) {
		free(x[w]);
		free(y[w]);
	}
}

static void test_bytes(void **state)
{
	size_t count = 64 * 4000;
	uint64_t t32, r32, ts, rs;
	double up, down;

	(void)state;
	wire_bytes(TLY_CODEC_NONE, count, &t32, &r32);
	wire_bytes(TLY_CODEC_TOPK10_EF, count, &ts, &rs);
	up = (double)ts / (double)t32;
	down = (double)rs / (double)r32;
	print_message("block_topk10_ef/int32 bytes (n = 4): up %.4f down "
		      "%.4f both %.4f\n", up, down,
		      (double)(ts + rs) / (double)(t32 + r32));
	/* up: 10 % of the blocks, the round (1/K of the chunks) and the
	 * receipts; down: the union of the four selections */
	assert_true(up >= 0.09 && up <= 0.14);
	assert_true(down >= 0.09 && down <= 0.30);
}

#define FAB(s, l, d, ro) { .seed = (s), .loss = (l), .dup = (d), \
			   .delay_ns = 2000, .reorder_ns = (ro) }
#define SC(nm, nw, role_, dt, fabc, ...) { \
	.name = nm, \
	.cl = { .n_workers = nw, .k = 64, .role = role_, .n_slots = 512, \
		.n_fallback = 64, .window = 8, .chunk_rotate = 5, \
		.fab = fabc, __VA_ARGS__ }, \
	.dtype = dt, .codec = TLY_CODEC_TOPK10_EF, .n_tensors = 3, \
	.sizes = { 64 * 60 + 13, 5, 64 * 30 } }

#pragma GCC diagnostic ignored "-Woverride-init"

static struct scenario scenarios[] = {
	SC("ded n2 f32 clean", 2, CL_DEDICATED, TLY_DT_F32, FAB(1, 0, 0, 0)),
	SC("ded n2 f32 loss10 dup reorder", 2, CL_DEDICATED, TLY_DT_F32,
	   FAB(2, 0.10, 0.05, 8000)),
	SC("ded n5 f32 loss1 dup", 5, CL_DEDICATED, TLY_DT_F32,
	   FAB(3, 0.01, 0.02, 3000)),
	SC("ded n5 f32 loss10 dup reorder l2l4 multicast", 5, CL_DEDICATED,
	   TLY_DT_F32, FAB(4, 0.10, 0.05, 8000), .l2l4 = 1, .multicast = 1),
	SC("ded n3 bf16 loss1", 3, CL_DEDICATED, TLY_DT_BF16,
	   FAB(5, 0.01, 0.01, 2000)),
	SC("ded n4 f32 k256 two aggs", 4, CL_DEDICATED, TLY_DT_F32,
	   FAB(7, 0.01, 0.01, 2000), .k = 256, .n_dedicated = 2),
	SC("ded n5 f32 tiny pool fallback busy", 5, CL_DEDICATED, TLY_DT_F32,
	   FAB(8, 0.01, 0.01, 4000), .n_slots = 3, .n_fallback = 2),
	SC("colo n5 f32 tiny pools loss10", 5, CL_COLOCATED, TLY_DT_F32,
	   FAB(9, 0.10, 0.03, 5000), .n_slots = 3, .n_fallback = 1),
	SC("colo n2 f32 loss1", 2, CL_COLOCATED, TLY_DT_F32,
	   FAB(10, 0.01, 0.01, 2000)),
	SC("ded n33 f32 loss1", 33, CL_DEDICATED, TLY_DT_F32,
	   FAB(11, 0.01, 0.01, 2000)),
	SC("ded n5 f32 top1 loss1", 5, CL_DEDICATED, TLY_DT_F32,
	   FAB(14, 0.01, 0.01, 2000)),
	SC("ded n5 f32 PULL: RESULTs to a non-sender dropped", 5,
	   CL_DEDICATED, TLY_DT_F32, FAB(15, 0, 0, 2000)),
	SC("ded n5 f32 inf (non-finite block) loss1", 5, CL_DEDICATED,
	   TLY_DT_F32, FAB(12, 0.01, 0.01, 2000)),
	SC("ded n2 bf16 inf (non-finite block) dup", 2, CL_DEDICATED,
	   TLY_DT_BF16, FAB(13, 0, 0.05, 2000)),
};

int main(void)
{
	size_t n_fixed = sizeof(scenarios) / sizeof(scenarios[0]), i, n = 0;
	struct CMUnitTest tests[sizeof(scenarios) / sizeof(scenarios[0]) + 2];

	/* the two "inf" scenarios are the last, PULL and top1 before */
	scenarios[n_fixed - 1].inf = 1;
	scenarios[n_fixed - 2].inf = 1;
	scenarios[n_fixed - 3].pull = 1;
	scenarios[n_fixed - 4].codec = TLY_CODEC_TOPK1_EF;
	tests[n++] = (struct CMUnitTest){ .name = "submit refusals",
					  .test_func = test_refused };
	tests[n++] = (struct CMUnitTest){ .name = "bytes: top 10 % of int32",
					  .test_func = test_bytes };
	for (i = 0; i < n_fixed; i++)
		tests[n++] = (struct CMUnitTest){
			.name = scenarios[i].name,
			.test_func = test_scenario,
			.initial_state = (void *)&scenarios[i],
		};
	return _cmocka_run_group_tests("allreduce_sparse", tests, n, NULL,
				       NULL);
}
