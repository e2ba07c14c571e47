/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reduce.h - element-wise reduction of several buffers in one pass.
 *
 * The local reduce of a host's clients: read every input once, write the
 * result once into every output, block by block so the running sum stays in
 * L1 and no intermediate buffer ever reaches memory.
 *
 * Numerics (stated and tested in tests/dataplane/test_reduce.c):
 * - float32: summed in float32 in input order (in[0] + in[1] + ...).
 * - float16, bfloat16: widened to float32, summed in float32 in input order,
 *   rounded once to the narrow type (nearest, ties to even).  So the result
 *   is at least as accurate as pairwise narrow sums, and deterministic.
 * - int32: SUM wraps modulo 2^32 (two's complement); AVG sums exactly in
 *   64 bits, then divides truncating toward zero.
 * - AVG of floating types multiplies the float32 sum by 1/divisor.
 */
#ifndef TALLY_DATAPLANE_REDUCE_H
#define TALLY_DATAPLANE_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <tally/tally.h>

/* Elements per block: the float32 accumulator (16 KiB) stays in L1. */
#define REDUCE_BLOCK_ELEMS 4096

/* Out-of-place outputs at least this large are written with non-temporal
 * stores (measured: a loss below, where buffers still fit the L3). */
#define REDUCE_STREAM_MIN_BYTES (8u << 20)

/* One reduction, prepared once and run in ranges (possibly by several
 * threads over disjoint ranges). */
struct reduce_args {
	enum tally_dtype dtype;
	enum tally_op op;
	const void *const *in;
	unsigned int n_in;
	void *const *out;
	unsigned int n_out;
	size_t count;
	unsigned int divisor;
	float scale;
	bool stream;
};

/*
 * reduce_buffers - out[j][i] = op(in[0][i], ..., in[n_in - 1][i]) for all j.
 * @divisor: number of contributors for TALLY_AVG (>= 1), ignored for SUM.
 * An output may be identical to an input (in place); partial overlaps are
 * not allowed.  Returns 0, or -TALLY_EINVAL for a bad dtype, op or
 * divisor.  The caller bounds count (count * element size fits memory).
 */
int reduce_buffers(enum tally_dtype dtype, enum tally_op op,
		   const void *const *in, unsigned int n_in,
		   void *const *out, unsigned int n_out,
		   size_t count, unsigned int divisor);

/* Check and fill @a; 0 or -TALLY_EINVAL. */
int reduce_prepare(struct reduce_args *a, enum tally_dtype dtype,
		   enum tally_op op, const void *const *in, unsigned int n_in,
		   void *const *out, unsigned int n_out, size_t count,
		   unsigned int divisor);

/* Reduce elements [begin, end).  Ranges of one job may run concurrently;
 * split them at multiples of REDUCE_BLOCK_ELEMS to keep blocks whole. */
void reduce_range(const struct reduce_args *a, size_t begin, size_t end);

#endif /* TALLY_DATAPLANE_REDUCE_H */
