/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dtype.h - the engine's one table of element types: how an element of
 * each dtype is sized, named, quantized to the wire's int32 lanes and back
 * (docs/protocol.md, section 2), and seen by the ring as a 32-bit word.
 * The worker's aggregation and ring paths look a dtype up here once per
 * chunk instead of switching on it, and the daemon maps the client API's
 * dtype (enum tally_dtype) through it.
 */
#ifndef TALLY_DATAPLANE_ENGINE_DTYPE_H
#define TALLY_DATAPLANE_ENGINE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/worker.h"

struct tly_dtype_info {
	const char *name;
	uint8_t size;			/* bytes per element */
	uint8_t tally;			/* the client API's enum tally_dtype */
	bool exact;			/* int32: added modulo 2^32, no exponent */
	/* block exponent of n elements (floating types only) */
	int32_t (*block_exp)(const void *x, size_t n);
	/* n elements to wire words (then zeros up to k), and back */
	void (*quantize)(uint8_t *out, const void *x, size_t n, size_t k,
			 int shift);
	void (*dequantize)(void *out, const uint8_t *in, size_t n, int shift);
	/* the ring's sum type: float32 bits, or the int32 itself */
	uint32_t (*word)(const void *x, size_t i);
	void (*from_words)(void *out, const uint32_t *w, size_t n);
};

extern const struct tly_dtype_info tly_dtypes[TLY_DT_I32 + 1];

static inline const struct tly_dtype_info *tly_dtype(enum tly_dtype dt)
{
	return &tly_dtypes[dt];
}

/* the engine's dtype of the client API's @tally_dtype; -1 if none */
int tly_dtype_from_tally(int tally_dtype);

#endif /* TALLY_DATAPLANE_ENGINE_DTYPE_H */
