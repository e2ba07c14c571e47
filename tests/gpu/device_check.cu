// SPDX-License-Identifier: BSD-3-Clause
/*
 * device_check.cu - the device tests' fill, compare and checksum kernels
 * (device_check.h).  Every comparison runs on the device: a 256 MiB result
 * is never copied to the host to be checked.
 */
#include "device_check.h"

#include <stdio.h>
#include <string.h>

#include "gpu/kernels/launch.h"

struct dc_counters {
	unsigned long long count;
	unsigned long long first;
};

__global__ void fill_pattern_kernel(float *buf, uint64_t n, int rank,
				    unsigned int salt)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE)
		buf[i] = dc_value(rank, i, salt);
}

__global__ void fill_nan_kernel(float *buf, uint64_t n)
{
	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE)
		buf[i] = __uint_as_float(DC_POISON_BITS);
}

static __device__ float want_at(uint64_t i, int first_rank, int nranks,
				unsigned int salt)
{
	float want = 0.0f;

	for (int r = first_rank; r < first_rank + nranks; r++)
		want += dc_value(r, i, salt);
	return want;
}

__global__ void mismatch_kernel(const float *buf, uint64_t n, int first_rank,
				int nranks, unsigned int salt,
				struct dc_counters *cnt)
{
	unsigned long long bad = 0;

	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE) {
		float want = want_at(i, first_rank, nranks, salt);

		if (__float_as_uint(buf[i]) != __float_as_uint(want)) {
			if (!bad)	/* the thread's indices only grow */
				atomicMin(&cnt->first, (unsigned long long)i);
			bad++;
		}
	}
	if (bad)
		atomicAdd(&cnt->count, bad);
}

__global__ void checksum_kernel(const float *buf, uint64_t n,
				unsigned long long *out)
{
	long long sum = 0;
	unsigned long long bad = 0;

	for (size_t i = TCU_GRID_START; i < n; i += TCU_GRID_STRIDE) {
		float x4 = buf[i] * 4.0f;

		if (!isfinite(x4) || x4 != rintf(x4)) {
			bad++;
			continue;
		}
		sum += (long long)x4 * dc_weight(i);
	}
	/* two's complement: adding as unsigned sums signed values */
	if (sum)
		atomicAdd(&out[0], (unsigned long long)sum);
	if (bad)
		atomicAdd(&out[1], bad);
}

__global__ void spin_kernel(uint64_t ns)
{
	uint64_t start, now;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
	do {
		__nanosleep(1000);
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
	} while (now - start < ns);
}

extern "C" cudaError_t dc_fill_pattern(float *buf, uint64_t n, int rank,
				       unsigned int salt, cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	fill_pattern_kernel<<<tcu_grid(n), TCU_BLOCK, 0, stream>>>(buf, n,
								   rank, salt);
	return cudaGetLastError();
}

extern "C" cudaError_t dc_fill_nan(float *buf, uint64_t n,
				   cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	fill_nan_kernel<<<tcu_grid(n), TCU_BLOCK, 0, stream>>>(buf, n);
	return cudaGetLastError();
}

extern "C" cudaError_t dc_count_mismatches(const float *buf, uint64_t n,
					   int first_rank, int nranks,
					   unsigned int salt,
					   cudaStream_t stream,
					   struct dc_mismatch *out)
{
	struct dc_counters host = { 0, ~0ull }, *dev = NULL;
	cudaError_t e, e2;

	out->count = 0;
	out->first = 0;
	out->got = out->want = 0.0f;
	if (!n)
		return cudaSuccess;
	e = cudaMalloc((void **)&dev, sizeof(*dev));
	if (e != cudaSuccess)
		return e;
	e = cudaMemcpyAsync(dev, &host, sizeof(host), cudaMemcpyHostToDevice,
			    stream);
	if (e == cudaSuccess) {
		mismatch_kernel<<<tcu_grid(n), TCU_BLOCK, 0, stream>>>(buf,
			n, first_rank, nranks, salt, dev);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(&host, dev, sizeof(host),
				    cudaMemcpyDeviceToHost, stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(stream);
	if (e == cudaSuccess && host.count) {
		out->count = host.count;
		out->first = host.first;
		e = cudaMemcpy(&out->got, buf + host.first, sizeof(float),
			       cudaMemcpyDeviceToHost);
		out->want = 0.0f;
		for (int r = first_rank; r < first_rank + nranks; r++)
			out->want += dc_value(r, host.first, salt);
	}
	e2 = cudaFree(dev);
	return e != cudaSuccess ? e : e2;
}

extern "C" cudaError_t dc_checksum(const float *buf, uint64_t n, int64_t *out,
				   cudaStream_t stream)
{
	cudaError_t e = cudaMemsetAsync(out, 0, 2 * sizeof(*out), stream);

	if (e != cudaSuccess || !n)
		return e;
	checksum_kernel<<<tcu_grid(n), TCU_BLOCK, 0, stream>>>(buf, n,
		(unsigned long long *)out);
	return cudaGetLastError();
}

extern "C" cudaError_t dc_spin(uint64_t ns, cudaStream_t stream)
{
	spin_kernel<<<1, 1, 0, stream>>>(ns);
	return cudaGetLastError();
}

extern "C" int dc_cuda_open(struct tally_client *client,
			    struct tally_cuda_opts *opts,
			    struct tally_cuda **out)
{
	int r = tally_cuda_open(client, opts, out);

	if (r && strstr(tally_cuda_open_error(), "mbind") &&
	    opts->numa_node == TALLY_CUDA_NUMA_GPU) {
		fprintf(stderr, "WARNING: tally_cuda_open: %s; again without "
			"NUMA placement\n", tally_cuda_open_error());
		opts->numa_node = TALLY_CUDA_NUMA_NONE;
		r = tally_cuda_open(client, opts, out);
	}
	if (r)
		fprintf(stderr, "tally_cuda_open: %s (%s)\n",
			tally_strerror(r), tally_cuda_open_error());
	return r;
}
