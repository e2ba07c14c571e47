/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * expect.h - inputs and result checks shared by the engine's end-to-end
 * tests (test_allreduce*.c, test_ring_stagger.c, test_quant.c).
 */
#ifndef TALLY_TESTS_DATAPLANE_EXPECT_H
#define TALLY_TESTS_DATAPLANE_EXPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/worker.h"

#define DP_MAX_TENSORS 4

/* Every worker's input and output buffer of each tensor of a run. */
struct dp_tensors {
	uint16_t n_workers;
	uint32_t n_tensors;
	void *in[TLY_MAX_WORKERS][DP_MAX_TENSORS];
	void *out[TLY_MAX_WORKERS][DP_MAX_TENSORS];
	const void *col[TLY_MAX_WORKERS];	/* one tensor's inputs */
};

size_t dp_dtype_size(enum tly_dtype dt);

/* the smallest l with 2^l >= @n (the lanes the sum of n values needs) */
int dp_ceil_log2(unsigned int n);
/* @v as a buffer of @dt holds it (float16 and bfloat16 round) */
float dp_store_as(enum tly_dtype dt, float v);
/* @got is @want, NaN included */
bool dp_same_float(float got, float want);

/* Allocate them: inputs filled from @rng_seed (dp_fill), outputs
 * poisoned, so a result never written shows. */
void dp_tensors_alloc(struct dp_tensors *b, enum tly_dtype dt, uint16_t n,
		      uint32_t n_tensors, const size_t *sizes,
		      uint64_t rng_seed);
void dp_tensors_free(struct dp_tensors *b);
/* The n workers' inputs of tensor @t, as the checks below take them. */
const void *const *dp_tensor_inputs(struct dp_tensors *b, uint32_t t);

/* Values whose magnitude changes from block to block (some zeros). */
void dp_fill(enum tly_dtype dt, void *buf, size_t n, uint64_t *rng);
float dp_as_float(enum tly_dtype dt, const void *buf, size_t i);

/*
 * Worker 0's result @out of tensor @t against the exact sum of the n
 * workers' inputs in[0..n-1], within the documented bound: docs/protocol.md
 * for the ring, quant.h's per-block bound for aggregation, plus the output
 * type's rounding.  int32: bit-exact (wrapping).  Fails the test if not.
 */
void dp_check_float(enum tly_dtype dt, uint16_t n, uint16_t k, bool ring,
		    const void *const *in, const void *out, size_t count,
		    uint32_t t);
void dp_check_int(uint16_t n, const void *const *in, const void *out,
		  size_t count, uint32_t t);

#endif /* TALLY_TESTS_DATAPLANE_EXPECT_H */
