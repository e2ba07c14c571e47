// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_worker_mem.c - a tensor slot's arrays serve the slot's next tensors
 * (dataplane/engine/worker_mem.c).  Operations one after another, as a
 * training loop runs them: after the first no array is allocated again
 * unless a larger tensor needs it; results stay exact when the arrays
 * held a larger tensor's state before (chunks past the new end, timers,
 * ring flags), and the worker does exactly what it does with nothing kept;
 * and once its tensors finish a worker keeps no more than cfg.keep_bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cluster.h"
#include "expect.h"

#define ROUNDS 5

struct mem_case {
	const char *name;
	enum cl_role role;
	enum tly_dtype dtype;
	uint8_t profile;
	double loss;
	uint32_t kinds;		/* arrays a tensor of this case uses */
};

/* the first round is the largest: every later one fits its arrays; the
 * second is one element, the third as large again */
static const size_t sizes[ROUNDS] = {
	64 * 40 + 13, 1, 64 * 40 + 13, 64 * 17, 64 * 3 + 1,
};

static void run_round(struct cluster *cl, const struct mem_case *mc,
		      uint32_t round)
{
	uint16_t n = cl->cfg.n_workers, w;
	struct dp_tensors b;
	size_t size = sizes[round];

	dp_tensors_alloc(&b, mc->dtype, n, 1, &size, 77 + round);
	for (w = 0; w < n; w++) {
		struct tly_tensor_desc d = {
			.id = tly_tensor_id(0x500 + round, 7, 0),
			.dtype = mc->dtype,
			.algo = mc->role == CL_RING ? TLY_ALGO_RING :
						      TLY_ALGO_AGG,
			.src = b.in[w][0], .dst = b.out[w][0],
			.count = size,
		};

		assert_int_equal(tly_worker_submit(cl->w[w], &d, 0), 0);
	}
	assert_int_equal(cl_run(cl, round + 1, 2000000000ull), 0);
	for (w = 1; w < n; w++)
		assert_memory_equal(b.out[0][0], b.out[w][0],
				    size * dp_dtype_size(mc->dtype));
	if (mc->dtype == TLY_DT_I32)
		dp_check_int(n, dp_tensor_inputs(&b, 0), b.out[0][0], size,
			     round);
	else
		dp_check_float(mc->dtype, n, cl->cfg.k, mc->role == CL_RING,
			       dp_tensor_inputs(&b, 0), b.out[0][0], size,
			       round);
	dp_tensors_free(&b);
}

/* the rounds through a fresh cluster keeping @keep bytes (0: the
 * default); each worker's counters at the end into @c */
static void run_rounds(const struct mem_case *mc, size_t keep,
		       struct tly_counters *c)
{
	struct cl_cfg cfg = {
		.n_workers = 3, .k = 64, .role = mc->role, .n_slots = 512,
		.n_fallback = 16, .window = 8, .chunk_rotate = 5,
		.profile = mc->profile, .keep_bytes = keep,
		.fab = { .seed = 31, .loss = mc->loss, .delay_ns = 2000,
			 .reorder_ns = mc->loss > 0 ? 4000 : 0 },
	};
	struct cluster *cl = cl_create(&cfg);
	struct tly_worker_mem m;
	uint16_t w;

	assert_non_null(cl);
	for (uint32_t r = 0; r < ROUNDS; r++) {
		run_round(cl, mc, r);
		for (w = 0; w < cfg.n_workers; w++) {
			tly_worker_mem(cl->w[w], &m);
			if (keep == 1) {
				/* nothing kept: allocated every time */
				assert_int_equal(m.kept_bytes, 0);
				assert_int_equal(m.allocs,
						 (r + 1) * mc->kinds);
				assert_int_equal(m.reuses, 0);
			} else {
				/* the first round's arrays, every time */
				assert_true(m.kept_bytes > 0);
				assert_int_equal(m.allocs, mc->kinds);
				assert_int_equal(m.reuses, r * mc->kinds);
			}
		}
	}
	assert_null(cl_run_end_fault(cl, &cfg));
	for (w = 0; w < cfg.n_workers; w++)
		c[w] = *tly_worker_counters(cl->w[w]);
	cl_destroy(cl);
}

/*
 * Kept arrays change nothing a worker does: the fabric is seeded and the
 * clock virtual, so the same rounds with nothing kept send and receive
 * the same packets, retransmissions included (a stale timer, flag or
 * receipt would add or move some).
 */
static void test_case(void **state)
{
	const struct mem_case *mc = *state;
	struct tly_counters kept[3], fresh[3];

	run_rounds(mc, 0, kept);
	run_rounds(mc, 1, fresh);
	for (int w = 0; w < 3; w++) {
		assert_true(kept[w].tx_pkts > 0);
		assert_memory_equal(&kept[w], &fresh[w], sizeof(kept[w]));
	}
}

static const struct mem_case cases[] = {
	{ "ring i32", CL_RING, TLY_DT_I32, 0, 0, 3 },
	{ "ring f32 loss", CL_RING, TLY_DT_F32, 0, 0.02, 3 },
	{ "agg i32", CL_DEDICATED, TLY_DT_I32, 0, 0, 1 },
	/* float aggregation: the block exponents too */
	{ "agg f32 loss", CL_DEDICATED, TLY_DT_F32, 0, 0.02, 2 },
	{ "agg switch i32", CL_DEDICATED, TLY_DT_I32, TLY_PROFILE_SWITCH, 0, 1 },
	{ "colo f16 loss", CL_COLOCATED, TLY_DT_F16, 0, 0.02, 2 },
};

int main(void)
{
	struct CMUnitTest t[sizeof(cases) / sizeof(cases[0])];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		t[i] = (struct CMUnitTest){
			.name = cases[i].name, .test_func = test_case,
			.initial_state = (void *)&cases[i],
		};
	return cmocka_run_group_tests(t, NULL, NULL);
}
