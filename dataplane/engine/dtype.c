// SPDX-License-Identifier: BSD-3-Clause
/*
 * dtype.c - the table of element types (dtype.h): thin adapters over
 * quant.c's typed loops and half.h's conversions.
 */
#include <string.h>

#include <tally/tally.h>
#include "dataplane/engine/dtype.h"
#include "dataplane/engine/quant.h"
#include "dataplane/half.h"

static int32_t exp_f32(const void *x, size_t n)
{
	return tly_block_exp_f32(x, n);
}

static int32_t exp_f16(const void *x, size_t n)
{
	return tly_block_exp_f16(x, n);
}

static int32_t exp_bf16(const void *x, size_t n)
{
	return tly_block_exp_bf16(x, n);
}

static void q_f32(uint8_t *out, const void *x, size_t n, size_t k, int s)
{
	tly_quantize_f32(out, x, n, k, s);
}

static void q_f16(uint8_t *out, const void *x, size_t n, size_t k, int s)
{
	tly_quantize_f16(out, x, n, k, s);
}

static void q_bf16(uint8_t *out, const void *x, size_t n, size_t k, int s)
{
	tly_quantize_bf16(out, x, n, k, s);
}

static void q_i32(uint8_t *out, const void *x, size_t n, size_t k, int s)
{
	(void)s;
	tly_pack_u32(out, x, n, k);
}

static void dq_f32(void *out, const uint8_t *in, size_t n, int s)
{
	tly_dequantize_f32(out, in, n, s);
}

static void dq_f16(void *out, const uint8_t *in, size_t n, int s)
{
	tly_dequantize_f16(out, in, n, s);
}

static void dq_bf16(void *out, const uint8_t *in, size_t n, int s)
{
	tly_dequantize_bf16(out, in, n, s);
}

static void dq_i32(void *out, const uint8_t *in, size_t n, int s)
{
	(void)s;
	tly_unpack_u32(out, in, n);
}

static uint32_t w_f32(const void *x, size_t i)
{
	return f32_bits(((const float *)x)[i]);
}

static uint32_t w_f16(const void *x, size_t i)
{
	return f32_bits(half_to_float(((const uint16_t *)x)[i]));
}

static uint32_t w_bf16(const void *x, size_t i)
{
	return f32_bits(bf16_to_float(((const uint16_t *)x)[i]));
}

static uint32_t w_u32(const void *x, size_t i)
{
	return ((const uint32_t *)x)[i];
}

static void fw_u32(void *out, const uint32_t *w, size_t n)
{
	memcpy(out, w, n * 4);
}

static void fw_f16(void *out, const uint32_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((uint16_t *)out)[i] = float_to_half(f32_from_bits(w[i]));
}

static void fw_bf16(void *out, const uint32_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((uint16_t *)out)[i] = float_to_bf16(f32_from_bits(w[i]));
}

const struct tly_dtype_info tly_dtypes[TLY_DT_I32 + 1] = {
	[TLY_DT_F32] = { "float32", 4, TALLY_FLOAT32, false, exp_f32, q_f32,
			 dq_f32, w_f32, fw_u32 },
	[TLY_DT_F16] = { "float16", 2, TALLY_FLOAT16, false, exp_f16, q_f16,
			 dq_f16, w_f16, fw_f16 },
	[TLY_DT_BF16] = { "bfloat16", 2, TALLY_BFLOAT16, false, exp_bf16,
			  q_bf16, dq_bf16, w_bf16, fw_bf16 },
	[TLY_DT_I32] = { "int32", 4, TALLY_INT32, true, NULL, q_i32, dq_i32,
			 w_u32, fw_u32 },
};

int tly_dtype_from_tally(int tally_dtype)
{
	for (int i = 0; i <= TLY_DT_I32; i++)
		if (tly_dtypes[i].tally == tally_dtype)
			return i;
	return -1;
}
