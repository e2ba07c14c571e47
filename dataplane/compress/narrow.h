/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * narrow.h - block fixed point in int16 and int8 lanes (docs/compression.md,
 * "Narrow fixed point"): the int32 scheme of quant.h with b-bit lanes.
 *
 * A packet keeps its 4K payload bytes and carries 2K int16 or 4K int8
 * lanes, one element each; one block (one shared scale) is one packet.
 * The exponent round is the int32 path's: every worker learns
 * E = max_w E_w (max|x| < 2^E) for the block.  With L = ceil(log2 n):
 *	shift = clamp(b - 1 - E - L, -126, 127)
 *	lim   = 2^(b - 1 - L) - 1
 *	q     = clamp(rint(x * 2^shift), -lim, lim)
 * so the sum of n lanes is at most n * lim <= 2^(b-1) - 2^L < 2^(b-1):
 * **no lane overflow, whatever the data**: the clamp, not the data, bounds
 * every lane.  (int8 keeps at least one magnitude bit: lim >= 1 for n <= 64.)
 *
 * Error bound, for a block whose shift was not clamped at -126 (only int8
 * with n > 32 and |x| >= 2^127 is): each q is within one unit 2^-shift of
 * x * 2^shift (1/2 from rounding, below 1 where the clamp at lim cuts),
 * the lane sum is exact, and converting it to float32 is exact, so
 *	|result - sum_w x_w| < n * 2^-shift
 * plus the narrowing to float16/bfloat16 for those outputs.
 *
 * Non-finite blocks (E = TLY_EXP_NONFINITE) use TLY_SHIFT_NONFINITE, never
 * an ordinary shift (those are >= -126), and send a per-element code:
 *	int16: +inf 1, -inf 2^7, NaN 2^7 + 1, finite 0 (<= 64 workers: each
 *	       7-bit count field holds up to 127; the sum is below 2^14)
 *	       decoded as IEEE would add them: +inf, -inf, or NaN (both signs,
 *	       any NaN, or an element finite everywhere)
 *	int8:  1 for inf or NaN, 0 finite; the whole block decodes to NaN
 *	       (an 8-bit lane cannot hold two 7-bit counts: the sign of an
 *	       infinity is lost, the block is still non-finite everywhere)
 *
 * Lanes are big-endian (int16) at any alignment.
 */
#ifndef TALLY_DATAPLANE_COMPRESS_NARROW_H
#define TALLY_DATAPLANE_COMPRESS_NARROW_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/worker.h"	/* enum tly_dtype */

/* the lowest ordinary narrow shift (TLY_SHIFT_NONFINITE is -127) */
#define TLY_NARROW_SHIFT_MIN	(-126)

/* lanes of @lane_bytes (1 or 2) in a payload of @k 32-bit words */
static inline size_t tly_narrow_lanes(size_t k, unsigned int lane_bytes)
{
	return k * 4 / lane_bytes;
}

int tly_narrow_shift(int32_t exp, unsigned int n_workers,
		     unsigned int lane_bytes);
int32_t tly_narrow_limit(unsigned int n_workers, unsigned int lane_bytes);

/* block exponent of @n elements of @dt (quant.h's, through dtype.h) */
int32_t tly_narrow_block_exp(const void *x, enum tly_dtype dt, size_t n);

/* @n elements to lanes, zeros up to @lanes */
void tly_narrow_quantize(uint8_t *out, const void *x, enum tly_dtype dt,
			 size_t n, size_t lanes, int shift,
			 unsigned int n_workers, unsigned int lane_bytes);
/* what the aggregator does: acc += in, lane by lane, wrapping at the width */
void tly_narrow_add(uint8_t *acc, const uint8_t *in, size_t lanes,
		    unsigned int lane_bytes);
void tly_narrow_dequantize(void *out, enum tly_dtype dt, const uint8_t *in,
			   size_t n, int shift, unsigned int lane_bytes);

#endif /* TALLY_DATAPLANE_COMPRESS_NARROW_H */
