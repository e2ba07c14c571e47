// SPDX-License-Identifier: BSD-3-Clause
/*
 * reduce.c - one-pass local reduction kernels (see reduce.h for numerics).
 *
 * Each kernel accumulates one block of every input into a float32 (or
 * integer) accumulator on the stack, then stores the block to every output.
 * The inner loops are plain restrict-qualified loops that gcc -O3
 * vectorises.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "dataplane/half.h"
#include "dataplane/reduce.h"

static void add_f32(float *restrict acc, const float *restrict in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		acc[i] += in[i];
}

static void sum2_f32(float *restrict acc, const float *restrict a,
		     const float *restrict b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		acc[i] = a[i] + b[i];
}

static void scale_f32(float *restrict acc, float s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		acc[i] *= s;
}

static void widen_f16(float *restrict acc, const uint16_t *restrict in,
		      size_t n, int add)
{
	if (add)
		for (size_t i = 0; i < n; i++)
			acc[i] += half_to_float(in[i]);
	else
		for (size_t i = 0; i < n; i++)
			acc[i] = half_to_float(in[i]);
}

static void widen_bf16(float *restrict acc, const uint16_t *restrict in,
		       size_t n, int add)
{
	if (add)
		for (size_t i = 0; i < n; i++)
			acc[i] += bf16_to_float(in[i]);
	else
		for (size_t i = 0; i < n; i++)
			acc[i] = bf16_to_float(in[i]);
}

static void narrow_f16(uint16_t *restrict o, const float *restrict acc,
		       size_t n)
{
	for (size_t i = 0; i < n; i++)
		o[i] = float_to_half(acc[i]);
}

static void narrow_bf16(uint16_t *restrict o, const float *restrict acc,
			size_t n)
{
	for (size_t i = 0; i < n; i++)
		o[i] = float_to_bf16(acc[i]);
}

/* Copy a block to memory with non-temporal stores: a large result is not
 * read again by us, and streaming it skips the read-for-ownership that a
 * normal store pays (a third of the traffic of a 4-way reduce). */
static void stream_copy(void *dst, const void *src, size_t bytes)
{
#ifdef __SSE2__
	if (((uintptr_t)dst & 15) == 0) {
		__m128i *d = dst;
		const __m128i *s = src;
		size_t n = bytes / 16;

		for (size_t i = 0; i < n; i++)
			_mm_stream_si128(d + i, _mm_load_si128(s + i));
		memcpy((char *)dst + n * 16, (const char *)src + n * 16,
		       bytes - n * 16);
		return;
	}
#endif
	memcpy(dst, src, bytes);
}

/* Store one finished block into every output (skipping none: an in-place
 * output is just one of them). */
static void store_block(const struct reduce_args *a, size_t off,
			const void *blk, size_t bytes)
{
	for (unsigned int j = 0; j < a->n_out; j++) {
		/* an in-place output's lines were just read: keep them */
		if (a->stream && (j >= a->n_in || a->out[j] != a->in[j]))
			stream_copy((char *)a->out[j] + off, blk, bytes);
		else
			memcpy((char *)a->out[j] + off, blk, bytes);
	}
}

static void reduce_f32(const struct reduce_args *a, size_t begin,
		       size_t end)
{
	float acc[REDUCE_BLOCK_ELEMS] __attribute__((aligned(64)));

	for (size_t base = begin; base < end; base += REDUCE_BLOCK_ELEMS) {
		size_t n = end - base < REDUCE_BLOCK_ELEMS ?
			   end - base : REDUCE_BLOCK_ELEMS;
		unsigned int k = 1;

		if (a->n_in >= 2) {
			sum2_f32(acc, (const float *)a->in[0] + base,
				 (const float *)a->in[1] + base, n);
			k = 2;
		} else {
			memcpy(acc, (const float *)a->in[0] + base, n * 4);
		}
		for (; k < a->n_in; k++)
			add_f32(acc, (const float *)a->in[k] + base, n);
		if (a->scale != 1.0f)
			scale_f32(acc, a->scale, n);
		store_block(a, base * 4, acc, n * 4);
	}
}

static void reduce_narrow(const struct reduce_args *a, size_t begin,
			  size_t end)
{
	float acc[REDUCE_BLOCK_ELEMS] __attribute__((aligned(64)));
	uint16_t blk[REDUCE_BLOCK_ELEMS] __attribute__((aligned(64)));
	bool f16 = a->dtype == TALLY_FLOAT16;

	for (size_t base = begin; base < end; base += REDUCE_BLOCK_ELEMS) {
		size_t n = end - base < REDUCE_BLOCK_ELEMS ?
			   end - base : REDUCE_BLOCK_ELEMS;

		for (unsigned int k = 0; k < a->n_in; k++) {
			const uint16_t *src = (const uint16_t *)a->in[k] + base;

			if (f16)
				widen_f16(acc, src, n, k > 0);
			else
				widen_bf16(acc, src, n, k > 0);
		}
		if (a->scale != 1.0f)
			scale_f32(acc, a->scale, n);
		if (f16)
			narrow_f16(blk, acc, n);
		else
			narrow_bf16(blk, acc, n);
		store_block(a, base * 2, blk, n * 2);
	}
}

static void add_i32_wrap(uint32_t *restrict acc, const uint32_t *restrict in,
			 size_t n)
{
	for (size_t i = 0; i < n; i++)
		acc[i] += in[i];
}

static void add_i32_wide(int64_t *restrict acc, const int32_t *restrict in,
			 size_t n)
{
	for (size_t i = 0; i < n; i++)
		acc[i] += in[i];
}

static void reduce_i32(const struct reduce_args *a, size_t begin,
		       size_t end)
{
	uint32_t acc[REDUCE_BLOCK_ELEMS] __attribute__((aligned(64)));
	int64_t wide[REDUCE_BLOCK_ELEMS] __attribute__((aligned(64)));

	for (size_t base = begin; base < end; base += REDUCE_BLOCK_ELEMS) {
		size_t n = end - base < REDUCE_BLOCK_ELEMS ?
			   end - base : REDUCE_BLOCK_ELEMS;

		if (a->op == TALLY_SUM) {
			memcpy(acc, (const uint32_t *)a->in[0] + base, n * 4);
			for (unsigned int k = 1; k < a->n_in; k++)
				add_i32_wrap(acc,
					     (const uint32_t *)a->in[k] + base,
					     n);
		} else {
			memset(wide, 0, n * sizeof(wide[0]));
			for (unsigned int k = 0; k < a->n_in; k++)
				add_i32_wide(wide,
					     (const int32_t *)a->in[k] + base,
					     n);
			for (size_t i = 0; i < n; i++)
				acc[i] = (uint32_t)(int32_t)
					 (wide[i] / (int64_t)a->divisor);
		}
		store_block(a, base * 4, acc, n * 4);
	}
}

int reduce_prepare(struct reduce_args *a, enum tally_dtype dtype,
		   enum tally_op op, const void *const *in, unsigned int n_in,
		   void *const *out, unsigned int n_out, size_t count,
		   unsigned int divisor)
{
	size_t esz = tally_dtype_size(dtype);

	if (esz == 0 || (unsigned int)op >= TALLY_OP_MAX || n_in == 0 ||
	    (op == TALLY_AVG && divisor == 0))
		return -TALLY_EINVAL;
	*a = (struct reduce_args){
		.dtype = dtype, .op = op, .in = in, .n_in = n_in, .out = out,
		.n_out = n_out, .count = count, .divisor = divisor,
		.scale = op == TALLY_AVG ? 1.0f / (float)divisor : 1.0f,
		.stream = count * esz >= REDUCE_STREAM_MIN_BYTES,
	};
	return 0;
}

/*
 * One input and no scaling: the result is the input, bit for bit.  An
 * output that is the input (a host of one member, in place) is left
 * alone; another gets one copy, not two through the block accumulator.
 */
static bool reduce_identity(const struct reduce_args *a, size_t begin,
			    size_t end)
{
	size_t esz = tally_dtype_size(a->dtype);

	if (a->n_in != 1 || (a->op == TALLY_AVG && a->divisor != 1))
		return false;
	for (unsigned int j = 0; j < a->n_out; j++)
		if (a->out[j] != a->in[0])
			memcpy((char *)a->out[j] + begin * esz,
			       (const char *)a->in[0] + begin * esz,
			       (end - begin) * esz);
	return true;
}

void reduce_range(const struct reduce_args *a, size_t begin, size_t end)
{
	if (end > a->count)
		end = a->count;
	if (begin >= end || reduce_identity(a, begin, end))
		return;
	switch (a->dtype) {
	case TALLY_FLOAT32:
		reduce_f32(a, begin, end);
		break;
	case TALLY_FLOAT16:
	case TALLY_BFLOAT16:
		reduce_narrow(a, begin, end);
		break;
	default:
		reduce_i32(a, begin, end);
		break;
	}
#ifdef __SSE2__
	if (a->stream)
		_mm_sfence();	/* streamed stores visible before completion */
#endif
}

int reduce_buffers(enum tally_dtype dtype, enum tally_op op,
		   const void *const *in, unsigned int n_in,
		   void *const *out, unsigned int n_out,
		   size_t count, unsigned int divisor)
{
	struct reduce_args a;
	int ret = reduce_prepare(&a, dtype, op, in, n_in, out, n_out, count,
				 divisor);

	if (!ret)
		reduce_range(&a, 0, count);
	return ret;
}
