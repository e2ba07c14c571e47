// SPDX-License-Identifier: BSD-3-Clause
/*
 * narrow.c - int16 and int8 block fixed point (see narrow.h for the scheme,
 * its no-overflow argument and its error bound).
 */
#include "dataplane/compress/narrow.h"

#include <math.h>

#include "dataplane/compress/elem.h"
#include "dataplane/engine/dtype.h"
#include "dataplane/engine/quant.h"
#include "dataplane/engine/wire.h"

#define NF16_POS	1
#define NF16_NEG	(1 << 7)
#define NF16_NAN	(NF16_POS | NF16_NEG)

static int ceil_log2(unsigned int n)
{
	int l = 0;

	while ((1u << l) < n)
		l++;
	return l;
}

int32_t tly_narrow_limit(unsigned int n_workers, unsigned int lane_bytes)
{
	return ((int32_t)1 << (8 * lane_bytes - 1 - ceil_log2(n_workers))) - 1;
}

int tly_narrow_shift(int32_t exp, unsigned int n_workers,
		     unsigned int lane_bytes)
{
	int s;

	if (exp < -149)			/* all zero (TLY_EXP_NONE) */
		return TLY_SHIFT_MAX;
	if (exp >= TLY_EXP_NONFINITE)
		return TLY_SHIFT_NONFINITE;
	s = (int)(8 * lane_bytes) - 1 - exp - ceil_log2(n_workers);
	if (s > TLY_SHIFT_MAX)
		return TLY_SHIFT_MAX;
	return s < TLY_NARROW_SHIFT_MIN ? TLY_NARROW_SHIFT_MIN : s;
}

int32_t tly_narrow_block_exp(const void *x, enum tly_dtype dt, size_t n)
{
	return tly_dtype(dt)->block_exp(x, n);
}

static void put_lane(uint8_t *out, size_t i, int32_t q,
		     unsigned int lane_bytes)
{
	if (lane_bytes == 2)
		tly_put16(out + 2 * i, (uint16_t)q);
	else
		out[i] = (uint8_t)q;
}

static int32_t get_lane(const uint8_t *in, size_t i, unsigned int lane_bytes)
{
	if (lane_bytes == 2)
		return (int16_t)tly_get16(in + 2 * i);
	return (int8_t)in[i];
}

static int32_t nonfinite_code(float x, unsigned int lane_bytes)
{
	if (isfinite(x))
		return 0;
	if (lane_bytes == 1)
		return 1;
	if (isnan(x))
		return NF16_NAN;
	return x > 0 ? NF16_POS : NF16_NEG;
}

static float nonfinite_value(int32_t sum, unsigned int lane_bytes)
{
	int32_t pos = sum & 0x7f, neg = (sum >> 7) & 0x7f;

	if (lane_bytes == 1 || (pos && neg) || (!pos && !neg))
		return NAN;
	return pos ? INFINITY : -INFINITY;
}

void tly_narrow_quantize(uint8_t *out, const void *x, enum tly_dtype dt,
			 size_t n, size_t lanes, int shift,
			 unsigned int n_workers, unsigned int lane_bytes)
{
	float lim = (float)tly_narrow_limit(n_workers, lane_bytes);
	float scale = tly_pow2f(shift);
	size_t i;

	for (i = 0; i < n; i++) {
		float v = tly_elem_load(x, dt, i), mag;
		int32_t q;

		if (shift == TLY_SHIFT_NONFINITE) {
			put_lane(out, i, nonfinite_code(v, lane_bytes),
				 lane_bytes);
			continue;
		}
		/* on the magnitude, so NaN (never under an ordinary
		 * shift: the exponent round says so) lands on the limit */
		mag = fabsf(v * scale);
		mag = mag < lim ? rintf(mag) : lim;
		q = (int32_t)mag;
		put_lane(out, i, signbit(v) ? -q : q, lane_bytes);
	}
	for (; i < lanes; i++)
		put_lane(out, i, 0, lane_bytes);
}

void tly_narrow_add(uint8_t *acc, const uint8_t *in, size_t lanes,
		    unsigned int lane_bytes)
{
	size_t i;

	for (i = 0; i < lanes; i++)
		put_lane(acc, i, get_lane(acc, i, lane_bytes) +
			 get_lane(in, i, lane_bytes), lane_bytes);
}

void tly_narrow_dequantize(void *out, enum tly_dtype dt, const uint8_t *in,
			   size_t n, int shift, unsigned int lane_bytes)
{
	float scale = tly_pow2f(-shift);
	size_t i;

	for (i = 0; i < n; i++) {
		int32_t s = get_lane(in, i, lane_bytes);

		if (shift == TLY_SHIFT_NONFINITE)
			tly_elem_store(out, dt, i,
				       nonfinite_value(s, lane_bytes));
		else
			tly_elem_store(out, dt, i, (float)s * scale);
	}
}
