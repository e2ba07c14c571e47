// SPDX-License-Identifier: BSD-3-Clause
/*
 * quantize.cu - docs/protocol.md section 2 on the GPU: the block exponent
 * (max |x| of each block of k elements), quantization to big-endian int32
 * words at each block's shift and dequantization, element by element
 * through numerics.h, so the bits are those of dataplane/engine/quant.c.
 *
 * The exponent is a max reduction per block over the magnitude's bits
 * (as integers: the order of non-negative floats, NaN above inf, as the
 * CPU engine compares them).  Blocks of up to 32 elements are reduced by
 * a group of lanes of one warp with shuffles, larger ones by a whole
 * thread block (warp shuffles, then one word per warp in shared memory).
 */
#include "gpu/kernels/kernels.h"
#include "gpu/kernels/launch.h"
#include "gpu/kernels/numerics.h"

/* grid cap of the per-block reduction (it walks the blocks in strides) */
#define EXP_GRID_MAX 65535u
#define WARP 32u

/* the smallest power of two >= k, at most @cap (a power of two) */
static unsigned int pow2_at_least(size_t k, unsigned int cap)
{
	unsigned int p = 1;

	while (p < k && p < cap)
		p <<= 1;
	return p;
}

static __device__ uint32_t abs_bits_max(const float *__restrict__ x,
					size_t from, size_t len,
					unsigned int lane, unsigned int step)
{
	uint32_t m = 0;

	for (size_t i = lane; i < len; i += step) {
		uint32_t a = tcu_bits(x[from + i]) & 0x7fffffffu;

		m = a > m ? a : m;
	}
	return m;
}

/* max over aligned groups of @width lanes (a power of two <= 32) */
static __device__ uint32_t group_max(uint32_t m, unsigned int width)
{
	for (unsigned int off = width / 2; off; off /= 2) {
		uint32_t o = __shfl_xor_sync(0xffffffffu, m, off, width);

		m = o > m ? o : m;
	}
	return m;
}

/*
 * k <= 32: groups of @width lanes (width >= k, a power of two), one block
 * of k per group.  The loop runs over warps, not groups, so that every
 * lane of a warp takes each shuffle (a group past the end reduces zeros).
 */
__global__ void block_exp_small_kernel(int32_t *__restrict__ exp,
				       const float *__restrict__ x, size_t n,
				       size_t k, size_t nblocks,
				       unsigned int width)
{
	unsigned int lane = threadIdx.x % width;
	/* groups before this one in its warp */
	unsigned int in_warp = (threadIdx.x % WARP) / width;
	size_t groups = TCU_GRID_STRIDE / width;

	for (size_t b = TCU_GRID_START / width; b - in_warp < nblocks;
	     b += groups) {
		uint32_t m = 0;

		if (b < nblocks) {
			size_t from = b * k;
			size_t len = n - from < k ? n - from : k;

			m = abs_bits_max(x, from, len, lane, width);
		}
		m = group_max(m, width);
		if (b < nblocks && lane == 0)
			exp[b] = tcu_exp_of_abs_bits(m);
	}
}

/* k > 32: one thread block per block of k, walking blocks by the grid */
__global__ void block_exp_large_kernel(int32_t *__restrict__ exp,
				       const float *__restrict__ x, size_t n,
				       size_t k, size_t nblocks)
{
	__shared__ uint32_t warp_max[TCU_BLOCK / WARP];
	unsigned int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;

	for (size_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
		size_t from = b * k;
		size_t len = n - from < k ? n - from : k;
		uint32_t m = abs_bits_max(x, from, len, threadIdx.x,
					  blockDim.x);

		m = group_max(m, WARP);
		if (lane == 0)
			warp_max[warp] = m;
		__syncthreads();
		if (warp == 0) {
			m = lane < blockDim.x / WARP ? warp_max[lane] : 0;
			m = group_max(m, WARP);
			if (lane == 0)
				exp[b] = tcu_exp_of_abs_bits(m);
		}
		__syncthreads();	/* warp_max is rewritten next round */
	}
}

extern "C" cudaError_t tcu_block_exp_f32(int32_t *exp, const float *x,
					 size_t n, size_t k,
					 cudaStream_t stream)
{
	size_t nblocks;

	if (!n)
		return cudaSuccess;
	if (!k)
		return cudaErrorInvalidValue;
	nblocks = (n + k - 1) / k;
	if (k <= WARP) {
		unsigned int width = pow2_at_least(k, WARP);

		return tcu_launch(block_exp_small_kernel,
				  tcu_grid(nblocks * width), TCU_BLOCK, stream,
				  exp, x, n, k, nblocks, width);
	} else {
		unsigned int threads = pow2_at_least(k, TCU_BLOCK);
		unsigned int grid = nblocks < EXP_GRID_MAX ?
				    (unsigned int)nblocks : EXP_GRID_MAX;

		return tcu_launch(block_exp_large_kernel, grid, threads,
				  stream, exp, x, n, k, nblocks);
	}
}

/*
 * Element j of the padded array lies in block j / k.  A grid-stride loop
 * divides once and then steps block and offset by the stride's quotient
 * and remainder (64-bit division is slow on the device).
 */
struct block_walk {
	size_t b, r;		/* block of the current element, offset in it */
	size_t step_b, step_r;	/* the grid stride in blocks and elements */
};

static __device__ struct block_walk block_walk_start(size_t j, size_t k)
{
	struct block_walk w;

	w.b = j / k;
	w.r = j % k;
	w.step_b = TCU_GRID_STRIDE / k;
	w.step_r = TCU_GRID_STRIDE % k;
	return w;
}

static __device__ void block_walk_next(struct block_walk *w, size_t k)
{
	w->b += w->step_b;
	w->r += w->step_r;
	if (w->r >= k) {
		w->r -= k;
		w->b++;
	}
}

/* out[j] for j < ceil(n / k) * k: x[j]'s word, zero past n */
__global__ void quantize_kernel(uint32_t *__restrict__ out,
				const float *__restrict__ x, size_t n,
				size_t k, size_t padded,
				const int32_t *__restrict__ shift)
{
	struct block_walk w = block_walk_start(TCU_GRID_START, k);

	for (size_t j = TCU_GRID_START; j < padded; j += TCU_GRID_STRIDE) {
		out[j] = j < n ? tcu_quantize_one(x[j], shift[w.b]) : 0;
		block_walk_next(&w, k);
	}
}

__global__ void dequantize_kernel(float *__restrict__ x,
				  const uint32_t *__restrict__ in, size_t n,
				  size_t k, const int32_t *__restrict__ shift)
{
	struct block_walk w = block_walk_start(TCU_GRID_START, k);

	for (size_t j = TCU_GRID_START; j < n; j += TCU_GRID_STRIDE) {
		x[j] = tcu_dequantize_one(in[j], shift[w.b]);
		block_walk_next(&w, k);
	}
}

extern "C" cudaError_t tcu_quantize_f32(uint32_t *out, const float *x,
					size_t n, size_t k,
					const int32_t *shift,
					cudaStream_t stream)
{
	size_t padded;

	if (!n)
		return cudaSuccess;
	if (!k)
		return cudaErrorInvalidValue;
	padded = (n + k - 1) / k * k;
	return tcu_launch(quantize_kernel, tcu_grid(padded), TCU_BLOCK, stream,
			  out, x, n, k, padded, shift);
}

extern "C" cudaError_t tcu_dequantize_f32(float *x, const uint32_t *in,
					  size_t n, size_t k,
					  const int32_t *shift,
					  cudaStream_t stream)
{
	if (!n)
		return cudaSuccess;
	if (!k)
		return cudaErrorInvalidValue;
	return tcu_launch(dequantize_kernel, tcu_grid(n), TCU_BLOCK, stream,
			  x, in, n, k, shift);
}
