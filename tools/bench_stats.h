/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_stats.h - order statistics of a benchmark's samples, shared by
 * the tools that time one operation many times.
 */
#ifndef TALLY_TOOLS_BENCH_STATS_H
#define TALLY_TOOLS_BENCH_STATS_H

#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* sort @v (@n > 0 samples) in place */
static inline void bench_sort(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
}

/* the median of @v, sorted in place; the mean of the two middle ones
 * when @n is even */
static inline double bench_median(double *v, int n)
{
	bench_sort(v, n);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* TALLY_TOOLS_BENCH_STATS_H */
