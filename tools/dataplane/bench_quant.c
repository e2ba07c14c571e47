// SPDX-License-Identifier: BSD-3-Clause
/*
 * bench_quant.c - quantize and dequantize throughput on one core, in
 * packets of K words as the worker does it (one block scale per packet,
 * big-endian words written at the tally payload's offset of a frame).
 * GB/s counts float32 bytes in (quantize) or out (dequantize).  Two
 * working sets: one that stays in L2 (the worker's hot path: a chunk's
 * floats were just reduced, the frame buffer is hot) and one far larger
 * than the caches (streaming from memory).  Best of the repetitions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataplane/engine/quant.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double run(int dequant, float *x, uint8_t *frames, size_t n,
		  size_t k, int passes)
{
	size_t stride = 58 + 4 * k, blocks = n / k, b;
	double t0 = now_s();
	int p;

	for (p = 0; p < passes; p++)
		for (b = 0; b < blocks; b++) {
			uint8_t *pl = frames + b * stride + 58;

			if (dequant)
				tly_dequantize_f32(x + b * k, pl, k, 20);
			else
				tly_quantize_f32(pl, x + b * k, k, k, 20);
		}
	return (double)passes * blocks * k * 4 / (now_s() - t0) / 1e9;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 5;
	size_t k = 256, sizes[2] = { 64 * 1024, 32 * 1024 * 1024 };
	double best[2][2] = { { 0 } };
	int s, r, d;

	for (s = 0; s < 2; s++) {
		size_t n = sizes[s], i;
		float *x = malloc(n * 4);
		uint8_t *f = malloc(n / k * (58 + 4 * k));
		int passes = (int)(256 * 1024 * 1024 / n);

		if (!x || !f)
			return 1;
		for (i = 0; i < n; i++)
			x[i] = (float)((int)(i * 2654435761u % 2001) - 1000) *
			       1e-3f;
		memset(f, 0, n / k * (58 + 4 * k));
		for (r = 0; r < reps; r++)
			for (d = 0; d < 2; d++) {
				double g = run(d, x, f, n, k, passes);

				best[s][d] = g > best[s][d] ? g : best[s][d];
			}
		free(x);
		free(f);
	}
	printf("%-28s %12s %12s\n", "K=256, one core", "quantize",
	       "dequantize");
	printf("%-28s %9.2f GB/s %9.2f GB/s\n", "256 KiB of floats (L2)",
	       best[0][0], best[0][1]);
	printf("%-28s %9.2f GB/s %9.2f GB/s\n", "128 MiB of floats (memory)",
	       best[1][0], best[1][1]);
	printf("figure-line quantize_gbps %.2f\n", best[0][0]);
	printf("figure-line dequantize_gbps %.2f\n", best[0][1]);
	printf("figure-line quantize_gbps_mem %.2f\n", best[1][0]);
	printf("figure-line dequantize_gbps_mem %.2f\n", best[1][1]);
	return 0;
}
