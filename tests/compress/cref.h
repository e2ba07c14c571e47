/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cref.h - what the compression tests share: a seeded generator and the
 * plain definitions (written from docs/compression.md, not from the code
 * under test) of the block exponent and ceil(log2 n).
 */
#ifndef TALLY_TESTS_COMPRESS_CREF_H
#define TALLY_TESTS_COMPRESS_CREF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

static inline uint64_t cref_rand(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in (-2^e, 2^e), both signs */
static inline float cref_float(uint64_t *s, int e)
{
	uint64_t r = cref_rand(s);
	float m = (float)(r >> 40) / (float)(1 << 24);

	return ldexpf(r & 1 ? -m : m, e);
}

/* the smallest E with max |x| < 2^E; -1000 all zero; 129 inf or NaN */
static inline int cref_exp(const float *x, size_t n)
{
	int e = -1000, ex;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!isfinite(x[i]))
			return 129;
		if (x[i] != 0) {
			frexpf(x[i], &ex);
			e = ex > e ? ex : e;
		}
	}
	return e;
}

static inline int cref_log2_ceil(unsigned int n)
{
	return (int)ceil(log2((double)n));
}

/* q = rint(x 2^s) in double, clamped to +-lim (the int32 scheme: 2^30-64) */
static inline int64_t cref_quant(double x, int s, int64_t lim)
{
	double y = nearbyint(x * ldexp(1, s));

	if (!(fabs(y) <= (double)lim))
		y = signbit(x) ? -(double)lim : (double)lim;
	return (int64_t)y;
}

#endif /* TALLY_TESTS_COMPRESS_CREF_H */
