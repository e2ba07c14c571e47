// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_allreduce_sign.c - sign_ef (docs/compression.md, sections 3 and 7)
 * end to end over the faulty fabric: loss, duplication, reordering, small
 * pools (BUSY, fallback, eviction), 2, 3, 5 and 33 workers, float32,
 * float16 and bfloat16, sizes that are not multiples of the chunk.
 *
 * The expectation is computed here from the inputs, not with sign_ef.c
 * or the aggregator: per chunk of m = 32 (K - 1) elements, each worker's
 * scale a_w = mean |x| (double sum), E = the largest frexp exponent of
 * the a_w, shift = min(30 - E - ceil(log2 n), 127), q_w = rint(a_w 2^shift),
 * S = sum q_w; per element the number c of workers with x >= 0 and the
 * vote v = sign(2c - n), a tie (2c = n) the coin of the spec: +1 iff bit
 * 63 of splitmix64(H(tensor, chunk, 0) + element); the result is
 * v * S * 2^-shift on every worker.  Every element of a chunk is checked,
 * and the "sent" output each worker gets for its error feedback:
 * +-q_w 2^-shift by its own sign.  A chunk holding inf is non-finite on
 * every worker, its "sent" NaN.  And the bytes: about 1/32 of the int32
 * path's up and 1/32 down.
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

#define MAX_T 3

struct scenario {
	const char *name;
	struct cl_cfg cl;
	enum tly_dtype dtype;
	int inf;		/* put +inf into worker 1's tensor 0 */
	uint32_t n_tensors;
	size_t sizes[MAX_T];
};

/* every worker's output and "sent" of one tensor against the model */
static void check_sign(const struct scenario *sc, uint32_t id,
		       const void *const *in, void *const *out,
		       void *const *sent, size_t count)
{
	unsigned int n = sc->cl.n_workers, w;
	size_t m = 32 * ((size_t)sc->cl.k - 1), c0, i;
	int L = dp_ceil_log2(n);

	for (c0 = 0; c0 < count; c0 += m) {
		size_t end = c0 + m < count ? c0 + m : count;
		float a[TLY_MAX_WORKERS], amax = 0;
		double S = 0;
		int e, shift, nonfinite = 0;

		for (w = 0; w < n; w++) {
			double s = 0;

			for (i = c0; i < end; i++)
				s += fabs((double)dp_as_float(sc->dtype,
							      in[w], i));
			a[w] = (float)(s / (double)(end - c0));
			if (!isfinite(a[w]))
				nonfinite = 1;
			else if (a[w] > amax)
				amax = a[w];
		}
		if (nonfinite) {
			for (w = 0; w < n; w++)
				for (i = c0; i < end; i++) {
					assert_false(isfinite(dp_as_float(
						sc->dtype, out[w], i)));
					assert_true(isnan(dp_as_float(
						sc->dtype, sent[w], i)));
				}
			continue;
		}
		if (amax == 0) {
			shift = 127;
		} else {
			frexpf(amax, &e);	/* amax < 2^e */
			shift = 30 - e - L;
			shift = shift > 127 ? 127 : shift;
		}
		for (w = 0; w < n; w++)
			S += rint(ldexp(a[w], shift));
		assert_true(S < ldexp(1, 30));
		for (i = c0; i < end; i++) {
			uint64_t coins = tly_chunk_hash(id, (uint16_t)(c0 / m),
							0);
			unsigned int c = 0, up;
			float want, got;

			for (w = 0; w < n; w++)
				c += dp_as_float(sc->dtype, in[w], i) >= 0;
			up = 2 * c == n ?
			     (unsigned int)(tly_key_hash(coins + i - c0) >> 63) :
			     2 * c > n;
			want = (float)ldexp(S, -shift);
			want = up ? want : -want;
			want = dp_store_as(sc->dtype, want);
			for (w = 0; w < n; w++) {
				float q = (float)ldexp(rint(ldexp(a[w], shift)),
						       -shift);
				float x = dp_as_float(sc->dtype, in[w], i);

				got = dp_as_float(sc->dtype, out[w], i);
				if (!dp_same_float(got, want))
					fail_msg("worker %u elem %zu: got %.9g "
						 "want %.9g (c %u of %u)", w, i,
						 got, want, c, n);
				q = dp_store_as(sc->dtype, x >= 0 ? q : -q);
				got = dp_as_float(sc->dtype, sent[w], i);
				if (!dp_same_float(got, q))
					fail_msg("worker %u elem %zu: sent %.9g "
						 "want %.9g", w, i, got, q);
			}
		}
	}
}

static void test_scenario(void **state)
{
	const char *why;
	const struct scenario *sc = *state;
	struct cluster *cl = cl_create(&sc->cl);
	void *sent[TLY_MAX_WORKERS][MAX_T];
	struct dp_tensors bufs;
	size_t esz = dp_dtype_size(sc->dtype);
	uint16_t w;
	uint32_t i, t;

	assert_non_null(cl);
	dp_tensors_alloc(&bufs, sc->dtype, sc->cl.n_workers, sc->n_tensors,
			 sc->sizes, sc->cl.fab.seed * 7919 + 1);
	if (sc->inf) {
		float inf = INFINITY;

		if (sc->dtype == TLY_DT_F32)
			memcpy((char *)bufs.in[1][0] + 7 * esz, &inf, 4);
		else
			((uint16_t *)bufs.in[1][0])[7] =
				sc->dtype == TLY_DT_F16 ? float_to_half(inf) :
				float_to_bf16(inf);
	}
	for (w = 0; w < sc->cl.n_workers; w++)
		for (i = 0; i < sc->n_tensors; i++) {
			struct tly_tensor_desc d = { 0 };

			t = (i + w) % sc->n_tensors;
			sent[w][t] = malloc(sc->sizes[t] * esz);
			assert_non_null(sent[w][t]);
			memset(sent[w][t], 0x5a, sc->sizes[t] * esz);
			d.id = tly_tensor_id(0x3000 + t, 4, 0);
			d.dtype = sc->dtype;
			d.algo = TLY_ALGO_AGG;
			d.codec = TLY_CODEC_SIGN_EF;
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
		check_sign(sc, tly_tensor_id(0x3000 + t, 4, 0),
			   dp_tensor_inputs(&bufs, t), out, st, sc->sizes[t]);
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

/* sign_ef for an int32 tensor, the ring or the switch profile: refused */
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
		.src = x, .dst = x, .count = 64, .codec = TLY_CODEC_SIGN_EF,
	};

	(void)state;
	assert_non_null(cl);
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	d.algo = TLY_ALGO_AGG;
	d.dtype = TLY_DT_I32;
	d.src = d.dst = xi;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	/* the largest tensor: 65536 chunks of 32 (K - 1) elements */
	d.dtype = TLY_DT_F32;
	d.src = d.dst = x;
	d.count = (size_t)65536 * 32 * 63 + 1;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	cl_destroy(cl);
	c.profile = TLY_PROFILE_SWITCH;
	cl = cl_create(&c);
	assert_non_null(cl);
	d.count = 64;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	d.codec = TLY_CODEC_INT8;	/* the switch carries narrow lanes */
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), 0);
	cl_destroy(cl);
}

/* bytes a worker sends and receives for one float32 tensor */
static void wire_bytes(uint8_t codec, size_t count, uint64_t *tx,
		       uint64_t *rx)
{
	float *x[2], *y[2];

	for (uint16_t w = 0; w < 2; w++) {
		x[w] = malloc(count * sizeof(float));
		y[w] = malloc(count * sizeof(float));
		assert_non_null(x[w]);
		assert_non_null(y[w]);
		for (size_t i = 0; i < count; i++)
			x[w][i] = (float)((i * 37 + w) % 101) - 50;
	}
	assert_int_equal(cl_codec_bytes(2, codec, count, x, y, tx, rx), 0);
	for (uint16_t w = 0; w < 2; w++) {
		free(x[w]);
		free(y[w]);
	}
}

static void test_bytes(void **state)
{
	size_t count = 256 * 1024;
	uint64_t t32, r32, ts, rs;

	(void)state;
	wire_bytes(TLY_CODEC_NONE, count, &t32, &r32);
	wire_bytes(TLY_CODEC_SIGN_EF, count, &ts, &rs);
	print_message("sign_ef/int32 bytes: up %.4f down %.4f\n",
		      (double)ts / (double)t32, (double)rs / (double)r32);
	/* K = 64: 32 (K - 1) = 2016 elements per DATA against 64, so
	 * 1/31.5 up (the exponent round and receipts shrink alike) and
	 * one RESULT of the same size, 1/31.5 down */
	assert_true(ts * 1000 >= t32 * 28);
	assert_true(ts * 1000 <= t32 * 36);
	assert_true(rs * 1000 >= r32 * 28);
	assert_true(rs * 1000 <= r32 * 36);
}

#define FAB(s, l, d, ro) { .seed = (s), .loss = (l), .dup = (d), \
			   .delay_ns = 2000, .reorder_ns = (ro) }
#define SC(nm, nw, role_, dt, fabc, ...) { \
	.name = nm, \
	.cl = { .n_workers = nw, .k = 64, .role = role_, .n_slots = 512, \
		.n_fallback = 64, .window = 8, .chunk_rotate = 5, \
		.fab = fabc, __VA_ARGS__ }, \
	.dtype = dt, .n_tensors = 3, \
	.sizes = { 2016 * 6 + 13, 5, 2016 * 3 } }

#pragma GCC diagnostic ignored "-Woverride-init"

static struct scenario scenarios[] = {
	SC("ded n2 f32 clean", 2, CL_DEDICATED, TLY_DT_F32, FAB(1, 0, 0, 0)),
	SC("ded n2 f32 loss10 dup reorder", 2, CL_DEDICATED, TLY_DT_F32,
	   FAB(2, 0.10, 0.05, 8000)),
	SC("ded n5 f32 loss1 dup", 5, CL_DEDICATED, TLY_DT_F32,
	   FAB(3, 0.01, 0.02, 3000)),
	SC("ded n5 f32 loss10 dup reorder l2l4 multicast", 5, CL_DEDICATED,
	   TLY_DT_F32, FAB(4, 0.10, 0.05, 8000), .l2l4 = 1, .multicast = 1),
	SC("ded n3 f16 loss1", 3, CL_DEDICATED, TLY_DT_F16,
	   FAB(5, 0.01, 0.01, 2000)),
	SC("ded n4 bf16 loss1", 4, CL_DEDICATED, TLY_DT_BF16,
	   FAB(6, 0.01, 0.01, 2000)),
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
	SC("ded n5 f32 inf (non-finite chunk) loss1", 5, CL_DEDICATED,
	   TLY_DT_F32, FAB(12, 0.01, 0.01, 2000)),
	SC("ded n2 f16 inf (non-finite chunk) dup", 2, CL_DEDICATED,
	   TLY_DT_F16, FAB(13, 0, 0.05, 2000)),
};

int main(void)
{
	size_t n_fixed = sizeof(scenarios) / sizeof(scenarios[0]), i, n = 0;
	struct CMUnitTest tests[sizeof(scenarios) / sizeof(scenarios[0]) + 2];

	/* the two "inf" scenarios are the last */
	scenarios[n_fixed - 1].inf = 1;
	scenarios[n_fixed - 2].inf = 1;
	tests[n++] = (struct CMUnitTest){ .name = "submit refusals",
					  .test_func = test_refused };
	tests[n++] = (struct CMUnitTest){ .name = "bytes: 1/32 up, 1/32 down",
					  .test_func = test_bytes };
	for (i = 0; i < n_fixed; i++)
		tests[n++] = (struct CMUnitTest){
			.name = scenarios[i].name,
			.test_func = test_scenario,
			.initial_state = (void *)&scenarios[i],
		};
	return _cmocka_run_group_tests("allreduce_sign", tests, n, NULL,
				       NULL);
}
