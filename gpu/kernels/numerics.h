/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * numerics.h - per-element conversion and quantization, written once for
 * the GPU kernels (nvcc: __host__ __device__) and their plain C references
 * (gcc), so that both compute the same bits by construction.  The CPU
 * tests check the references against dataplane/half.h and
 * dataplane/engine/quant.c, which define what the engine puts on the
 * wire: float32 <-> binary16/bfloat16 with round to nearest even, and
 * docs/protocol.md section 2's block exponent and fixed point.
 *
 * Only integer operations and exactly rounded float operations appear
 * here (a product by a power of two, rint, int-to-float), so the device
 * computes what the host computes provided nvcc keeps denormals and
 * IEEE rounding (no --use_fast_math; gpu/meson.build).
 */
#ifndef TALLY_GPU_KERNELS_NUMERICS_H
#define TALLY_GPU_KERNELS_NUMERICS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* nvcc also compiles these for the host: memcpy and rintf there too */
#ifdef __CUDACC__
#define TCU_HD __host__ __device__ __forceinline__
#else
#define TCU_HD static inline
#endif

/* docs/protocol.md: all-zero block, non-finite block, its shift */
#define TCU_EXP_NONE (-1000)
#define TCU_EXP_NONFINITE 129
#define TCU_SHIFT_NONFINITE (-127)
/* count codes of a non-finite block */
#define TCU_NF_POS_INF 1u
#define TCU_NF_NEG_INF (1u << 8)
#define TCU_NF_NAN (1u << 16)

TCU_HD uint32_t tcu_bits(float f)
{
#ifdef __CUDA_ARCH__
	return (uint32_t)__float_as_uint(f);
#else
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
#endif
}

TCU_HD float tcu_float(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
#endif
}

TCU_HD uint32_t tcu_bswap32(uint32_t v)
{
	return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) |
	       (v << 24);
}

/* ---- float32 <-> bfloat16 / binary16, round to nearest even ---- */

TCU_HD float tcu_bf16_to_f32(uint16_t h)
{
	return tcu_float((uint32_t)h << 16);
}

TCU_HD uint16_t tcu_f32_to_bf16(float f)
{
	uint32_t u = tcu_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)	/* NaN: keep it quiet */
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

TCU_HD float tcu_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	uint32_t shift;

	if (exp == 0x1f)			/* inf or NaN */
		return tcu_float(sign | 0x7f800000u | (man << 13) |
				 (man ? 0x00400000u : 0));
	if (exp != 0)				/* normal */
		return tcu_float(sign | ((exp + 112) << 23) | (man << 13));
	if (man == 0)
		return tcu_float(sign);
	/* subnormal man * 2^-24: normalise it with integer operations only */
	shift = 0;
	while (!(man & 0x400u)) {
		man <<= 1;
		shift++;
	}
	return tcu_float(sign | ((113 - shift) << 23) | ((man & 0x3ffu) << 13));
}

TCU_HD uint16_t tcu_f32_to_f16(float f)
{
	uint32_t u = tcu_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t abs = u & 0x7fffffffu;

	if (abs > 0x7f800000u)			/* NaN */
		return sign | 0x7e00u | (uint16_t)((abs >> 13) & 0x3ffu);
	if (abs >= 0x477ff000u)			/* rounds to >= 65520: inf */
		return sign | 0x7c00u;
	if (abs < 0x38800000u) {		/* below 2^-14: subnormal */
		uint32_t exp = abs >> 23;
		uint32_t man = (abs & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - exp;
		uint32_t q, rem, halfway;

		if (exp < 102)			/* < 2^-25: rounds to zero */
			return sign;
		q = man >> shift;
		rem = man & ((1u << shift) - 1);
		halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (q & 1u)))
			q++;
		return sign | (uint16_t)q;
	}
	abs -= 112u << 23;
	abs += 0xfffu + ((abs >> 13) & 1u);
	return sign | (uint16_t)(abs >> 13);
}

/* ---- block fixed point (docs/protocol.md section 2) ---- */

/* E with max|x| < 2^E from the bits of max|x| */
TCU_HD int32_t tcu_exp_of_abs_bits(uint32_t m)
{
	int32_t lz = 0;

	if (m == 0)
		return TCU_EXP_NONE;
	if (m >= 0x7f800000u)
		return TCU_EXP_NONFINITE;
	if (m >> 23)
		return (int32_t)(m >> 23) - 126;
	while (!(m & 0x80000000u)) {		/* subnormal */
		m <<= 1;
		lz++;
	}
	return 32 - lz - 149;
}

TCU_HD int tcu_quant_shift(int32_t exp, unsigned int n_workers)
{
	int l = 0, s;

	while ((1u << l) < n_workers)
		l++;
	if (exp < -149)
		return 127;
	if (exp >= TCU_EXP_NONFINITE)
		return TCU_SHIFT_NONFINITE;
	s = 30 - exp - l;
	return s > 127 ? 127 : s;
}

/* 2^s as a float, exact for -149 <= s <= 127 */
TCU_HD float tcu_pow2f(int s)
{
	if (s >= -126)
		return tcu_float((uint32_t)(s + 127) << 23);
	return tcu_float(1u << (s + 149));
}

TCU_HD uint32_t tcu_nonfinite_code(float x)
{
	uint32_t a = tcu_bits(x) & 0x7fffffffu;

	if (a > 0x7f800000u)
		return TCU_NF_NAN;
	if (a == 0x7f800000u)
		return (tcu_bits(x) >> 31) ? TCU_NF_NEG_INF : TCU_NF_POS_INF;
	return 0;
}

TCU_HD float tcu_nonfinite_value(uint32_t sum)
{
	uint32_t pos = sum & 0xff, neg = (sum >> 8) & 0xff;

	if ((sum >> 16) || (pos && neg) || (!pos && !neg))
		return tcu_float(0x7fc00000u);
	return tcu_float(pos ? 0x7f800000u : 0xff800000u);
}

/* one wire word (big-endian) of x at @shift, as tly_quantize_*() writes */
TCU_HD uint32_t tcu_quantize_one(float x, int shift)
{
	const float lim = 1073741760.0f;	/* largest float < 2^30 */
	uint32_t y;
	float mag;

	if (shift == TCU_SHIFT_NONFINITE)
		return tcu_bswap32(tcu_nonfinite_code(x));
	y = tcu_bits(x * tcu_pow2f(shift));
	mag = tcu_float(y & 0x7fffffffu);
	mag = mag < lim ? mag : lim;		/* NaN compares false: lim */
	/*
	 * The sign from x, not from the product: x86 keeps a NaN's sign
	 * through the multiplication, the GPU returns its canonical NaN
	 * (positive); -NaN must saturate to -lim on both.
	 */
	y = tcu_bits(mag) | (tcu_bits(x) & 0x80000000u);
#ifdef __CUDA_ARCH__
	return tcu_bswap32((uint32_t)__float2int_rn(tcu_float(y)));
#else
	return tcu_bswap32((uint32_t)(int32_t)rintf(tcu_float(y)));
#endif
}

/* the float32 value of one wire word at @shift, as tly_dequantize_f32() */
TCU_HD float tcu_dequantize_one(uint32_t be_word, int shift)
{
	uint32_t w = tcu_bswap32(be_word);

	if (shift == TCU_SHIFT_NONFINITE)
		return tcu_nonfinite_value(w);
	return (float)(int32_t)w * tcu_pow2f(-shift);
}

/*
 * Error feedback (docs/compression.md section 5), per element.  Tensors
 * are float32, binary16 or bfloat16 (TCU_F32 .. TCU_BF16, the values of
 * enum tally_dtype); the residual e is float32.
 */
#define TCU_F32 0
#define TCU_F16 1
#define TCU_BF16 2

TCU_HD float tcu_load(const void *x, int type, size_t i)
{
	if (type == TCU_F16)
		return tcu_f16_to_f32(((const uint16_t *)x)[i]);
	if (type == TCU_BF16)
		return tcu_bf16_to_f32(((const uint16_t *)x)[i]);
	return ((const float *)x)[i];
}

TCU_HD void tcu_store(void *x, int type, size_t i, float v)
{
	if (type == TCU_F16)
		((uint16_t *)x)[i] = tcu_f32_to_f16(v);
	else if (type == TCU_BF16)
		((uint16_t *)x)[i] = tcu_f32_to_bf16(v);
	else
		((float *)x)[i] = v;
}

/* a product and a difference each rounded once: nvcc would otherwise
 * contract e - s * inv into one fused multiply-add */
TCU_HD float tcu_mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fmul_rn(a, b);
#else
	return a * b;
#endif
}

TCU_HD float tcu_add_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fadd_rn(a, b);
#else
	return a + b;
#endif
}

/* e := p - sent / L after the result: 0 where sent is inf or NaN (a
 * chunk some worker found non-finite, or nothing was compressed) */
TCU_HD float tcu_ef_feedback_one(float e, float sent, float inv_l)
{
	if ((tcu_bits(sent) & 0x7f800000u) == 0x7f800000u)
		return 0.0f;
	return tcu_add_rn(e, -tcu_mul_rn(sent, inv_l));
}

#endif /* TALLY_GPU_KERNELS_NUMERICS_H */
