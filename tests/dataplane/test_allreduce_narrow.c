// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_allreduce_narrow.c - the int16 and int8 lanes (docs/compression.md,
 * sections 2 and 7) end to end over the faulty fabric: dedicated and
 * co-located aggregators, loss, duplication, reordering, small pools
 * (BUSY, fallback, eviction), different send orders per worker, sizes that
 * are not multiples of the chunk, float32/float16/bfloat16, 2..8 and 33
 * workers, the switch profile, and a seeded sweep.
 *
 * The expectation is computed here, independently of narrow.c: per chunk
 * of 2K (int16) or 4K (int8) elements, E from the largest magnitude over
 * all workers (frexp), the shift and limit of section 2, every worker's
 * lane by rint and clamp in double, the exact integer lane sum, times
 * 2^-shift.  The result must be exactly that (the lane sum is exact under
 * every fault), identical on every worker, and within the documented bound
 * n * 2^-shift of the exact float sum.  Plus: what submit refuses, and the
 * bytes a worker sends (half and a quarter of the int32 path's).
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

#define MAX_T 4

struct scenario {
	const char *name;
	struct cl_cfg cl;
	enum tly_dtype dtype;
	uint8_t codec;
	uint32_t n_tensors;
	size_t sizes[MAX_T];
};

static unsigned int lane_bits(uint8_t codec)
{
	return codec == TLY_CODEC_INT16 ? 16 : 8;
}

/* worker 0's output of one tensor against the model of section 2 */
static void check_narrow(const struct scenario *sc, const void *const *in,
			 const void *out, size_t count)
{
	unsigned int n = sc->cl.n_workers, b = lane_bits(sc->codec);
	size_t ck = (size_t)sc->cl.k * 32 / b, c0, i;
	int L = dp_ceil_log2(n);
	double lim = ldexp(1, (int)b - 1 - L) - 1;

	for (c0 = 0; c0 < count; c0 += ck) {
		size_t end = c0 + ck < count ? c0 + ck : count;
		float m = 0;
		int e, shift;
		unsigned int w;

		for (w = 0; w < n; w++)
			for (i = c0; i < end; i++) {
				float a = fabsf(dp_as_float(sc->dtype, in[w],
							    i));
				m = a > m ? a : m;
			}
		if (m == 0) {
			for (i = c0; i < end; i++)
				assert_true(dp_as_float(sc->dtype, out, i) ==
					    0);
			continue;
		}
		frexpf(m, &e);			/* m < 2^e */
		shift = (int)b - 1 - e - L;
		shift = shift > 127 ? 127 : shift < -126 ? -126 : shift;
		for (i = c0; i < end; i++) {
			double s = 0, exact = 0, want, got;

			for (w = 0; w < n; w++) {
				double x = dp_as_float(sc->dtype, in[w], i);
				double q = rint(ldexp(x, shift));

				q = q > lim ? lim : q < -lim ? -lim : q;
				s += q;
				exact += x;
			}
			/* the lane sum never reaches the lane's width */
			assert_true(fabs(s) < ldexp(1, (int)b - 1));
			want = ldexp(s, -shift);
			/* the documented bound, on the model itself */
			if (fabs(want - exact) >= n * ldexp(1, -shift))
				fail_msg("bound: elem %zu want %g exact %g", i,
					 want, exact);
			got = dp_as_float(sc->dtype, out, i);
			if (got != dp_store_as(sc->dtype, (float)want))
				fail_msg("elem %zu: got %.9g want %.9g "
					 "(shift %d, lane sum %.0f)", i, got,
					 want, shift, s);
		}
	}
}

static void test_scenario(void **state)
{
	const char *why;
	const struct scenario *sc = *state;
	struct cluster *cl = cl_create(&sc->cl);
	struct dp_tensors bufs;
	uint16_t w;
	uint32_t i, t;

	assert_non_null(cl);
	dp_tensors_alloc(&bufs, sc->dtype, sc->cl.n_workers, sc->n_tensors,
			 sc->sizes, sc->cl.fab.seed * 7919 + 1);
	for (w = 0; w < sc->cl.n_workers; w++)
		for (i = 0; i < sc->n_tensors; i++) {
			struct tly_tensor_desc d = { 0 };

			t = (i + w) % sc->n_tensors;
			d.id = tly_tensor_id(0x2000 + t, 3, 0);
			d.dtype = sc->dtype;
			d.algo = TLY_ALGO_AGG;
			d.codec = sc->codec;
			d.src = bufs.in[w][t];
			d.dst = bufs.out[w][t];
			d.count = sc->sizes[t];
			d.prio = (uint8_t)((t * 3 + w) % 4);
			assert_int_equal(tly_worker_submit(cl->w[w], &d, 0),
					 0);
		}
	assert_int_equal(cl_run(cl, sc->n_tensors, 2000000000ull), 0);
	for (t = 0; t < sc->n_tensors; t++) {
		for (w = 1; w < sc->cl.n_workers; w++)
			assert_memory_equal(bufs.out[0][t], bufs.out[w][t],
					    sc->sizes[t] *
					    dp_dtype_size(sc->dtype));
		check_narrow(sc, dp_tensor_inputs(&bufs, t), bufs.out[0][t],
			     sc->sizes[t]);
	}
	why = cl_run_end_fault(cl, &sc->cl);
	if (why)
		fail_msg("%s", why);
	dp_tensors_free(&bufs);
	cl_destroy(cl);
}

/* what submit refuses: lossy lanes for int32 tensors or the ring, and an
 * unknown codec */
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
		.src = x, .dst = x, .count = 64, .codec = TLY_CODEC_INT8,
	};

	(void)state;
	assert_non_null(cl);
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	d.algo = TLY_ALGO_AGG;
	d.dtype = TLY_DT_I32;
	d.src = d.dst = xi;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	d.codec = TLY_CODEC_INT16;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	d.codec = TLY_CODEC_TOPK1_EF + 1;
	d.dtype = TLY_DT_F32;
	d.src = d.dst = x;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	/* the largest tensor: 65536 chunks of 4K elements */
	d.codec = TLY_CODEC_INT8;
	d.count = (size_t)65536 * 256 + 1;
	assert_int_equal(tly_worker_submit(cl->w[0], &d, 0), -EINVAL);
	cl_destroy(cl);
}

/* bytes a worker's DATA take for one float32 tensor, per codec */
static uint64_t tx_bytes(uint8_t codec, size_t count)
{
	float *x[2], *y[2];
	uint64_t bytes, rx;

	for (uint16_t w = 0; w < 2; w++) {
		x[w] = malloc(count * sizeof(float));
		y[w] = malloc(count * sizeof(float));
		assert_non_null(x[w]);
		assert_non_null(y[w]);
		for (size_t i = 0; i < count; i++)
			x[w][i] = (float)((i * 37 + w) % 101) - 50;
	}
	assert_int_equal(cl_codec_bytes(2, codec, count, x, y, &bytes, &rx),
			 0);
	/* small integers: every codec carries them exactly */
	for (size_t i = 0; i < count; i++)
		assert_true(y[0][i] == x[0][i] + x[1][i]);
	for (uint16_t w = 0; w < 2; w++) {
		free(x[w]);
		free(y[w]);
	}
	return bytes;
}

static void test_bytes(void **state)
{
	size_t count = 64 * 1024;
	uint64_t b32 = tx_bytes(TLY_CODEC_NONE, count);
	uint64_t b16 = tx_bytes(TLY_CODEC_INT16, count);
	uint64_t b8 = tx_bytes(TLY_CODEC_INT8, count);

	(void)state;
	/* DATA and the exponent round (the round shrinks too), plus a few
	 * receipts: a half and a quarter, within a few percent */
	assert_true(b16 * 100 <= b32 * 52);
	assert_true(b16 * 100 >= b32 * 48);
	assert_true(b8 * 100 <= b32 * 27);
	assert_true(b8 * 100 >= b32 * 23);
}

#pragma GCC diagnostic ignored "-Woverride-init"

#define FAB(s, l, d, ro) { .seed = (s), .loss = (l), .dup = (d), \
			   .delay_ns = 2000, .reorder_ns = (ro) }
#define SC(nm, nw, role_, dt, cod, fabc, ...) { \
	.name = nm, \
	.cl = { .n_workers = nw, .k = 64, .role = role_, .n_slots = 512, \
		.n_fallback = 64, .window = 8, .chunk_rotate = 5, \
		.fab = fabc, __VA_ARGS__ }, \
	.dtype = dt, .codec = cod, .n_tensors = 3, \
	.sizes = { 256 * 12 + 13, 5, 256 * 7 } }
#define I16 TLY_CODEC_INT16
#define I8 TLY_CODEC_INT8

static struct scenario scenarios[] = {
	SC("ded n2 f32 int16 clean", 2, CL_DEDICATED, TLY_DT_F32, I16,
	   FAB(1, 0, 0, 0)),
	SC("ded n2 f32 int8 clean", 2, CL_DEDICATED, TLY_DT_F32, I8,
	   FAB(2, 0, 0, 0)),
	SC("ded n3 f32 int16 loss1 dup", 3, CL_DEDICATED, TLY_DT_F32, I16,
	   FAB(3, 0.01, 0.02, 3000)),
	SC("ded n4 f32 int8 loss10 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_F32, I8, FAB(4, 0.10, 0.05, 8000)),
	SC("ded n8 f32 int16 loss10 l2l4 multicast", 8, CL_DEDICATED,
	   TLY_DT_F32, I16, FAB(5, 0.10, 0.05, 8000), .l2l4 = 1,
	   .multicast = 1),
	SC("ded n8 f16 int8 loss1", 8, CL_DEDICATED, TLY_DT_F16, I8,
	   FAB(6, 0.01, 0.01, 2000)),
	SC("ded n3 bf16 int16 loss1", 3, CL_DEDICATED, TLY_DT_BF16, I16,
	   FAB(7, 0.01, 0.01, 2000)),
	SC("ded n4 f32 int16 k256 two aggs", 4, CL_DEDICATED, TLY_DT_F32,
	   I16, FAB(8, 0.01, 0.01, 2000), .k = 256, .n_dedicated = 2),
	SC("ded n4 f32 int8 tiny pool fallback busy", 4, CL_DEDICATED,
	   TLY_DT_F32, I8, FAB(9, 0.01, 0.01, 4000), .n_slots = 3,
	   .n_fallback = 2),
	SC("ded n4 f32 int16 no fallback busy", 4, CL_DEDICATED, TLY_DT_F32,
	   I16, FAB(10, 0, 0, 0), .n_slots = 2, .n_fallback = 0,
	   .window = 4),
	SC("colo n4 f32 int8 tiny pools loss10", 4, CL_COLOCATED, TLY_DT_F32,
	   I8, FAB(11, 0.10, 0.03, 5000), .n_slots = 3, .n_fallback = 1),
	SC("colo n3 f32 int16 loss1", 3, CL_COLOCATED, TLY_DT_F32, I16,
	   FAB(12, 0.01, 0.01, 2000)),
	SC("colo n8 f32 int8 loss10 l2l4", 8, CL_COLOCATED, TLY_DT_F32, I8,
	   FAB(13, 0.10, 0.05, 8000), .l2l4 = 1),
	SC("ded n33 f32 int8 loss1 (lim 1)", 33, CL_DEDICATED, TLY_DT_F32, I8,
	   FAB(14, 0.01, 0.01, 2000)),
	SC("ded n33 f32 int16 loss1", 33, CL_DEDICATED, TLY_DT_F32, I16,
	   FAB(15, 0.01, 0.01, 2000)),
	/* the switch profile (docs/switch-profile.md): 16/8-bit register
	 * lanes, same bytes per slot (docs/compression.md section 7) */
	SC("switch ded n4 f32 int16 loss1 dup reorder", 4, CL_DEDICATED,
	   TLY_DT_F32, I16, FAB(16, 0.01, 0.02, 4000),
	   .profile = TLY_PROFILE_SWITCH, .n_fallback = 0),
	SC("switch colo n8 f32 int8 loss10 small pool", 8, CL_COLOCATED,
	   TLY_DT_F32, I8, FAB(17, 0.10, 0.05, 8000),
	   .profile = TLY_PROFILE_SWITCH, .n_fallback = 0, .n_slots = 16),
	/* the switch profile's default K: 640 int16 lanes a packet */
	SC("switch ded n4 f32 int16 k320 loss10", 4, CL_DEDICATED,
	   TLY_DT_F32, I16, FAB(18, 0.10, 0.02, 4000), .k = 320,
	   .profile = TLY_PROFILE_SWITCH, .n_fallback = 0),
};

#define N_RANDOM 24

static struct scenario random_sc[N_RANDOM];
static char random_names[N_RANDOM][112];

static void make_random(void)
{
	static const enum tly_dtype dts[] = { TLY_DT_F32, TLY_DT_F16,
					      TLY_DT_BF16 };
	uint64_t rng = 0x1a2e;
	unsigned int i, t;

	for (i = 0; i < N_RANDOM; i++) {
		struct scenario *sc = &random_sc[i];
		struct cl_cfg *c = &sc->cl;

		cl_cfg_random(c, &rng, 2, 3000u + i);
		sc->dtype = dts[fab_rand(&rng) % 3];
		sc->codec = fab_rand(&rng) % 2 ? I16 : I8;
		sc->n_tensors = (uint32_t)(1 + fab_rand(&rng) % MAX_T);
		for (t = 0; t < sc->n_tensors; t++)
			sc->sizes[t] = 1 + fab_rand(&rng) % (c->k * 4 * 30);
		snprintf(random_names[i], sizeof(random_names[i]),
			 "random %u: %s %s n%u k%u slots%u fb%u win%u "
			 "loss%.2f dup%.2f", i,
			 sc->codec == I16 ? "int16" : "int8",
			 c->role == CL_COLOCATED ? "colo" : "ded",
			 c->n_workers, c->k, c->n_slots, c->n_fallback,
			 c->window, c->fab.loss, c->fab.dup);
		sc->name = random_names[i];
	}
}

int main(void)
{
	size_t n_fixed = sizeof(scenarios) / sizeof(scenarios[0]), i, n = 0;
	struct CMUnitTest tests[sizeof(scenarios) / sizeof(scenarios[0]) +
				N_RANDOM + 2];

	make_random();
	tests[n++] = (struct CMUnitTest){ .name = "submit refusals",
					  .test_func = test_refused };
	tests[n++] = (struct CMUnitTest){ .name = "bytes: half, quarter",
					  .test_func = test_bytes };
	for (i = 0; i < n_fixed + N_RANDOM; i++) {
		const struct scenario *sc = i < n_fixed ? &scenarios[i] :
					    &random_sc[i - n_fixed];

		tests[n++] = (struct CMUnitTest){
			.name = sc->name,
			.test_func = test_scenario,
			.initial_state = (void *)sc,
		};
	}
	return _cmocka_run_group_tests("allreduce_narrow", tests, n, NULL,
				       NULL);
}
