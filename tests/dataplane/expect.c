// SPDX-License-Identifier: BSD-3-Clause
/*
 * expect.c - inputs and result checks shared by the engine's end-to-end
 * tests (see expect.h).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/half.h"
#include "expect.h"
#include "fabric.h"

void dp_fill(enum tly_dtype dt, void *buf, size_t n, uint64_t *rng)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t r = fab_rand(rng);
		int e = (int)((i / 50) % 24) - 12;
		float x = ldexpf((float)((int64_t)(r >> 40) - (1 << 23)) /
				 (float)(1 << 23), e);

		if (r % 17 == 0)
			x = 0;
		switch (dt) {
		case TLY_DT_F32:
			((float *)buf)[i] = x;
			break;
		case TLY_DT_F16:
			((uint16_t *)buf)[i] = float_to_half(x);
			break;
		case TLY_DT_BF16:
			((uint16_t *)buf)[i] = float_to_bf16(x);
			break;
		case TLY_DT_I32:
			((uint32_t *)buf)[i] = (uint32_t)r;
			break;
		}
	}
}

float dp_as_float(enum tly_dtype dt, const void *buf, size_t i)
{
	switch (dt) {
	case TLY_DT_F16:
		return half_to_float(((const uint16_t *)buf)[i]);
	case TLY_DT_BF16:
		return bf16_to_float(((const uint16_t *)buf)[i]);
	default:
		return ((const float *)buf)[i];
	}
}

int dp_ceil_log2(unsigned int n)
{
	int l = 0;

	while ((1u << l) < n)
		l++;
	return l;
}

float dp_store_as(enum tly_dtype dt, float v)
{
	if (dt == TLY_DT_F16)
		return half_to_float(float_to_half(v));
	if (dt == TLY_DT_BF16)
		return bf16_to_float(float_to_bf16(v));
	return v;
}

bool dp_same_float(float got, float want)
{
	return got == want || (isnan(got) && isnan(want));
}

void dp_check_float(enum tly_dtype dt, uint16_t n, uint16_t k, bool ring,
		    const void *const *in, const void *out, size_t count,
		    uint32_t t)
{
	double out_rel = dt == TLY_DT_F16 ? 0x1p-11 :
			 dt == TLY_DT_BF16 ? 0x1p-8 : 0;
	int l = dp_ceil_log2(n);
	uint16_t w;
	size_t i;

	for (i = 0; i < count; i++) {
		double ref = 0, mag = 0, got, bound;
		size_t b0 = i / k * k, b1 = b0 + k < count ? b0 + k : count, j;
		int e = -1000;

		for (w = 0; w < n; w++) {
			double x = dp_as_float(dt, in[w], i);

			ref += x;
			mag += fabs(x);
		}
		got = dp_as_float(dt, out, i);
		if (ring) {
			bound = (n - 1) * 0x1p-24 * mag;
		} else {
			for (w = 0; w < n; w++)
				for (j = b0; j < b1; j++) {
					int ex;
					float v = dp_as_float(dt, in[w], j);

					if (v != 0) {
						frexpf(v, &ex);
						e = ex > e ? ex : e;
					}
				}
			bound = e == -1000 ? 0 : n * ldexp(1, e + l - 31);
		}
		bound += 0x1p-24 * fabs(ref) * 2 + out_rel * fabs(ref) +
			 0x1p-24 + (dt == TLY_DT_F16 ? 0x1p-24 : 0);
		if (fabs(got - ref) > bound)
			fail_msg("tensor %u elem %zu: got %.9g want %.9g "
				 "bound %.3g", t, i, got, ref, bound);
	}
}

void dp_check_int(uint16_t n, const void *const *in, const void *out,
		  size_t count, uint32_t t)
{
	size_t i;
	uint16_t w;

	for (i = 0; i < count; i++) {
		uint32_t ref = 0;

		for (w = 0; w < n; w++)
			ref += ((const uint32_t *)in[w])[i];
		if (((const uint32_t *)out)[i] != ref)
			fail_msg("tensor %u elem %zu: %u != %u", t, i,
				 ((const uint32_t *)out)[i], ref);
	}
}

size_t dp_dtype_size(enum tly_dtype dt)
{
	return dt == TLY_DT_F16 || dt == TLY_DT_BF16 ? 2 : 4;
}

void dp_tensors_alloc(struct dp_tensors *b, enum tly_dtype dt, uint16_t n,
		      uint32_t n_tensors, const size_t *sizes,
		      uint64_t rng_seed)
{
	uint64_t rng = rng_seed;
	uint16_t w;
	uint32_t t;

	assert_true(n_tensors <= DP_MAX_TENSORS);
	memset(b, 0, sizeof(*b));
	b->n_workers = n;
	b->n_tensors = n_tensors;
	for (w = 0; w < n; w++)
		for (t = 0; t < n_tensors; t++) {
			size_t bytes = sizes[t] * dp_dtype_size(dt);

			b->in[w][t] = malloc(bytes);
			b->out[w][t] = malloc(bytes);
			assert_non_null(b->in[w][t]);
			assert_non_null(b->out[w][t]);
			dp_fill(dt, b->in[w][t], sizes[t], &rng);
			memset(b->out[w][t], 0xa5, bytes);
		}
}

void dp_tensors_free(struct dp_tensors *b)
{
	for (uint16_t w = 0; w < b->n_workers; w++)
		for (uint32_t t = 0; t < b->n_tensors; t++) {
			free(b->in[w][t]);
			free(b->out[w][t]);
		}
}

const void *const *dp_tensor_inputs(struct dp_tensors *b, uint32_t t)
{
	for (uint16_t w = 0; w < b->n_workers; w++)
		b->col[w] = b->in[w][t];
	return b->col;
}
