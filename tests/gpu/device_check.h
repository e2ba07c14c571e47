/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device_check.h - CUDA helpers of the device tests (tests/gpu/): fill a
 * device buffer with a rank's pattern, count the elements that differ from
 * the ranks' sum, and a checksum kernel that only stream order can feed
 * the right data.
 *
 * The pattern is a multiple of 1/4 in -2.75..2.75 (dc_value()), so float32,
 * float16 and bfloat16 hold every value and every sum of a few ranks
 * exactly: results are compared bit for bit.  @salt changes the pattern
 * from one operation to the next, so stale data left in a staging slot by
 * an earlier operation cannot pass for a result.
 */
#ifndef TALLY_TESTS_GPU_DEVICE_CHECK_H
#define TALLY_TESTS_GPU_DEVICE_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include <tally/tally_cuda.h>

#ifdef __CUDACC__
#define DC_HOST_DEVICE __host__ __device__
#else
#define DC_HOST_DEVICE
#endif

/* a failed CUDA call of a test itself: say which and why, return @code */
#define CHECK_CUDA(call, code)						\
	do {								\
		cudaError_t e_ = (call);				\
		if (e_ != cudaSuccess) {				\
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__,	\
				__LINE__, #call,			\
				cudaGetErrorString(e_));		\
			return (code);					\
		}							\
	} while (0)

#ifdef __cplusplus
extern "C" {
#endif

/* element @i of rank @rank's buffer, times 4 (an integer in -11..11) */
static inline DC_HOST_DEVICE int dc_value_x4(int rank, uint64_t i,
					     unsigned int salt)
{
	return (int)((i * 31 + (uint64_t)rank * 7 + (uint64_t)salt * 5) %
		     23) - 11;
}

static inline DC_HOST_DEVICE float dc_value(int rank, uint64_t i,
					    unsigned int salt)
{
	return (float)dc_value_x4(rank, i, salt) * 0.25f;
}

/* dc_fill_nan()'s quiet NaN, its payload saying "poison" */
#define DC_POISON_BITS 0x7fc0deadu

/*
 * the checksum's weight of element @i: the pattern's periods sum to zero,
 * so a plain (or periodic) weight would let whole wrong chunks cancel out.
 * |sum| <= 22 * n^2 / 2: exact in int64 for n up to 2^29.
 */
static inline DC_HOST_DEVICE int64_t dc_weight(uint64_t i)
{
	return (int64_t)i + 1;
}

/* the first mismatch found, for the failure message */
struct dc_mismatch {
	uint64_t count;		/* elements that differ */
	uint64_t first;		/* the lowest index that differs */
	float got, want;	/* at that index */
};

/* queue: buf[i] = dc_value(rank, i, salt) */
cudaError_t dc_fill_pattern(float *buf, uint64_t n, int rank,
			    unsigned int salt, cudaStream_t stream);
/* queue: every element a quiet NaN with a marker payload */
cudaError_t dc_fill_nan(float *buf, uint64_t n, cudaStream_t stream);
/*
 * Compare buf[i] bit for bit with the sum of dc_value(r, i, salt) over
 * ranks r = first_rank .. first_rank + nranks - 1 (added in float, exact).
 * Runs on @stream and waits for it; fills @out.
 */
cudaError_t dc_count_mismatches(const float *buf, uint64_t n,
				int first_rank, int nranks,
				unsigned int salt, cudaStream_t stream,
				struct dc_mismatch *out);

/*
 * Queue, without waiting: out[0] = sum over i of buf[i] * 4 * dc_weight(i)
 * as a 64-bit integer (exact, order-free), out[1] = elements that are not
 * finite or not multiples of 1/4.  @out is device memory of two int64_t.
 */
cudaError_t dc_checksum(const float *buf, uint64_t n, int64_t *out,
			cudaStream_t stream);

/* queue a kernel that spins about @ns nanoseconds (a slow producer) */
cudaError_t dc_spin(uint64_t ns, cudaStream_t stream);

/*
 * tally_cuda_open() for a test, printing why it failed.  A container's
 * seccomp profile may refuse mbind() (and libnuma): then it warns on
 * stderr ("WARNING: ...", run-device.sh collects these) and opens again
 * with TALLY_CUDA_NUMA_NONE, so the pipeline is still tested.
 */
int dc_cuda_open(struct tally_client *client, struct tally_cuda_opts *opts,
		 struct tally_cuda **out);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_TESTS_GPU_DEVICE_CHECK_H */
