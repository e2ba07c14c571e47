/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * half.h - IEEE binary16 and bfloat16 conversions to and from float32.
 *
 * Narrowing rounds to nearest, ties to even; NaN stays NaN (quiet),
 * infinities and signed zeros are kept, overflow goes to infinity and
 * binary16 subnormals are produced and read exactly.  Inline because the
 * reduction and quantization loops call them per element and rely on the
 * compiler to vectorise them.
 */
#ifndef TALLY_DATAPLANE_HALF_H
#define TALLY_DATAPLANE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float f32_from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline float bf16_to_float(uint16_t h)
{
	return f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t float_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)	/* NaN: keep it quiet */
		return (uint16_t)((u >> 16) | 0x0040u);
	/* add half an ulp, plus one if the kept lsb is odd (ties to even) */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0x1f)			/* inf or NaN */
		return f32_from_bits(sign | 0x7f800000u | (man << 13) |
				     (man ? 0x00400000u : 0));
	if (exp != 0)				/* normal */
		return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
	/* zero or subnormal: man * 2^-24, exact in float */
	return f32_from_bits(sign) + (sign ? -1.0f : 1.0f) *
	       (float)man * 5.9604644775390625e-8f;
}

static inline uint16_t float_to_half(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t abs = u & 0x7fffffffu;

	if (abs > 0x7f800000u)			/* NaN */
		return sign | 0x7e00u | (uint16_t)((abs >> 13) & 0x3ffu);
	if (abs >= 0x477ff000u)			/* rounds to >= 65520: inf */
		return sign | 0x7c00u;
	if (abs < 0x38800000u) {		/* below 2^-14: subnormal */
		/* shift the implicit-one mantissa so its lsb is 2^-24 and
		 * round to nearest even on the bits shifted out */
		uint32_t exp = abs >> 23;
		uint32_t man = (abs & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - exp;	/* 14..; >24 gives 0 */
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
	/* normal: rebias, round the 13 dropped bits to nearest even */
	abs -= 112u << 23;
	abs += 0xfffu + ((abs >> 13) & 1u);
	return sign | (uint16_t)(abs >> 13);
}

#endif /* TALLY_DATAPLANE_HALF_H */
