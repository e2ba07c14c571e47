/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * elem.h - one element of a gradient buffer as float32 and back, for the
 * codecs of dataplane/compress/ (float32, float16 and bfloat16 through
 * half.h; int32 tensors are never compressed).
 */
#ifndef TALLY_DATAPLANE_COMPRESS_ELEM_H
#define TALLY_DATAPLANE_COMPRESS_ELEM_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/worker.h"	/* enum tly_dtype */
#include "dataplane/half.h"

static inline float tly_elem_load(const void *x, enum tly_dtype dt,
				  size_t i)
{
	switch (dt) {
	case TLY_DT_F16:
		return half_to_float(((const uint16_t *)x)[i]);
	case TLY_DT_BF16:
		return bf16_to_float(((const uint16_t *)x)[i]);
	default:
		return ((const float *)x)[i];
	}
}

static inline void tly_elem_store(void *x, enum tly_dtype dt, size_t i,
				  float v)
{
	switch (dt) {
	case TLY_DT_F16:
		((uint16_t *)x)[i] = float_to_half(v);
		break;
	case TLY_DT_BF16:
		((uint16_t *)x)[i] = float_to_bf16(v);
		break;
	default:
		((float *)x)[i] = v;
	}
}

/* r[i] += g[i] in float32: the error-feedback step p = g + e */
void tly_elem_accumulate(float *r, const void *g, enum tly_dtype dt,
			 size_t n);

#endif /* TALLY_DATAPLANE_COMPRESS_ELEM_H */
