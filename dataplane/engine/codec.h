/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * codec.h - how a float tensor's chunks travel through aggregators
 * (docs/compression.md, section 9): one ops table per method, chosen once
 * per tensor at submit.  TLY_CODEC_NONE is the int32 block fixed point of
 * quant.h (and the exact int32 mode: dtype.h's byte order), unchanged;
 * int16 and int8 are the narrow lanes of dataplane/compress/narrow.h:
 * the same payload bytes carry 2K or 4K elements, the exponent round is
 * the int32 path's (one word per chunk), the shift is the narrow one.
 */
#ifndef TALLY_DATAPLANE_ENGINE_CODEC_H
#define TALLY_DATAPLANE_ENGINE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/worker.h"

struct tly_codec_ops {
	const char *name;		/* as in [compression] method */
	uint8_t lanes;			/* the DATA/RESULT lane code flags */
	uint8_t lane_bytes;		/* 4, 2, 1 (sign: its count lanes) */
	/* elements per chunk for @k payload words */
	size_t (*chunk_elems)(size_t k);
	/* the chunk's word in the exponent round: the block exponent of
	 * its elements (sign: of its scale, mean |x|) */
	int32_t (*exp)(const void *x, enum tly_dtype dt, size_t n);
	/* the block shift of an agreed exponent @exp for @n workers */
	int (*shift)(int32_t exp, unsigned int n_workers);
	/* @n elements of @dt to a payload of @k words (zeros after);
	 * pure: the same bytes every time (retransmissions rebuild it) */
	void (*pack)(uint8_t *out, const void *x, enum tly_dtype dt,
		     size_t n, size_t k, int shift, unsigned int n_workers);
	/* a RESULT's payload into the chunk of @n elements of @dt at @dst */
	void (*decode)(void *dst, enum tly_dtype dt, const uint8_t *res,
		       size_t n, int shift);
	/* what this worker's DATA of @x contributed, decoded, into @out
	 * (the error feedback's "sent"; NaN for a non-finite chunk); NULL
	 * for a codec without error feedback */
	void (*sent)(void *out, const void *x, enum tly_dtype dt, size_t n,
		     int shift);
	/* block_topk (docs/compression.md section 4): the permille of a
	 * tensor's chunks each worker sends (100: top 10 %); 0 for a dense
	 * codec.  Its exponent round is a max-and-count (EXP aux
	 * TLY_AUX_COUNT), its RESULT word E * 256 + m, and a chunk nobody
	 * selected travels in no packet */
	uint16_t topk_permille;
	/* the whole tensor's round words (chunks of @ck elements) when
	 * they depend on each other: the block exponent of a selected
	 * chunk, TLY_EXP_NONE for the rest; 0 or -ENOMEM.  NULL: exp() per
	 * chunk */
	int (*exps)(int32_t *exp, const void *x, enum tly_dtype dt, size_t n,
		    size_t ck, unsigned int permille);
};

/* the table of @c; NULL for a code this engine does not know */
const struct tly_codec_ops *tly_codec(unsigned int c);
/* the codec named @name (none, int16, int8, sign_ef, block_topk10_ef,
 * block_topk1_ef); -1 if none */
int tly_codec_from_name(const char *name);

#endif /* TALLY_DATAPLANE_ENGINE_CODEC_H */
