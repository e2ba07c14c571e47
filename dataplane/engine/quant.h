/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * quant.h - block fixed-point: float32/float16/bfloat16 <-> int32 with a
 * shared power-of-two scale per block (one block = one packet of K words).
 *
 * Every worker reports its block exponent E_w (max|x| < 2^E_w); the
 * aggregator combines them by max, so all workers quantize with
 *	shift = min(30 - E - ceil(log2 n), 127),  E = max_w E_w
 * and q = rint(x * 2^shift).  Then |q| < 2^30 / n, so the sum of n
 * contributions stays below 2^30 and cannot overflow int32.
 *
 * Error bound (docs/protocol.md): each q is within 1/2 unit of x * 2^shift,
 * so the integer sum is within n/2 units of the exact scaled sum, and the
 * dequantized result r satisfies
 *	|r - sum x| <= n * 2^(E + L - 31) + 2^-24 * |r|,  L = ceil(log2 n).
 * Non-finite inputs: a block with inf or NaN in any worker's contribution
 * has E = 129 (the exponent round tells every worker), and its shift is
 * TLY_SHIFT_NONFINITE: each worker then sends per element a count code
 * (+inf: 1, -inf: 1 << 8, NaN: 1 << 16, finite: 0) instead of a value, and
 * the sum of the codes (at most 64 workers: no field overflows) decodes
 * to IEEE's answer: NaN for any NaN or for infinities of both signs, else
 * the infinity, and NaN where every contribution was finite (that sum is
 * not carried; the block is non-finite anyway).  Under an ordinary shift
 * (never chosen for such a block) inf and NaN saturate to +-(2^30 - 64).
 *
 * Payloads are big-endian 32-bit words at any alignment.
 */
#ifndef TALLY_DATAPLANE_ENGINE_QUANT_H
#define TALLY_DATAPLANE_ENGINE_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* block exponent of an all-zero block: loses every max */
#define TLY_EXP_NONE	(-1000)
/* block exponent of a block holding inf or NaN: wins every max */
#define TLY_EXP_NONFINITE 129
/* the shift of a block some worker found inf or NaN in (see above) */
#define TLY_SHIFT_NONFINITE (-127)

int32_t tly_block_exp_f32(const float *x, size_t n);
int32_t tly_block_exp_f16(const uint16_t *x, size_t n);
int32_t tly_block_exp_bf16(const uint16_t *x, size_t n);
int tly_quant_shift(int32_t exp, unsigned int n_workers);

/* write n quantized words, then zeros up to k words */
void tly_quantize_f32(uint8_t *out, const float *x, size_t n, size_t k,
		      int shift);
void tly_quantize_f16(uint8_t *out, const uint16_t *x, size_t n, size_t k,
		      int shift);
void tly_quantize_bf16(uint8_t *out, const uint16_t *x, size_t n, size_t k,
		       int shift);
void tly_dequantize_f32(float *out, const uint8_t *in, size_t n, int shift);
void tly_dequantize_f16(uint16_t *out, const uint8_t *in, size_t n,
			int shift);
void tly_dequantize_bf16(uint16_t *out, const uint8_t *in, size_t n,
			 int shift);

/* exact int32 mode and float32 ring payloads: byte order only */
void tly_pack_u32(uint8_t *out, const uint32_t *x, size_t n, size_t k);
void tly_unpack_u32(uint32_t *out, const uint8_t *in, size_t n);

/* 2^s as a float, exact for -149 <= s <= 127 */
float tly_pow2f(int s);

#endif /* TALLY_DATAPLANE_ENGINE_QUANT_H */
