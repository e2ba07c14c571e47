/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sign_ef.h - 1-bit sign with error feedback and majority vote
 * (docs/compression.md, "Sign with error feedback").
 *
 * Worker w, chunk c of m elements, residual e (float32, the client's):
 *	p   = g + e				tly_elem_accumulate()
 *	a_w = mean |p|				tly_sign_scale()
 * The scale travels as one int32 word with the int32 block fixed point of
 * quant.h: an exponent round over the chunks' scales (E_a = max_w of the
 * block exponent of a_w) gives shift = tly_quant_shift(E_a, n), and
 *	word 0 = q_w = rint(a_w * 2^shift),   bits = [p_i >= 0] (MSB first)
 *	e     <- p - â_w * sign(p),  â_w = q_w * 2^-shift, sign(p) in {-1, +1}
 * so what was sent, â_w * sign(p), plus the new residual is p, up to one
 * float32 rounding per element (tests/compress/test_sign_ef.c states and
 * checks the bound over many rounds).
 *
 * The aggregator adds, per element, the worker's bit into an 8-bit count
 * lane: c_i = number of workers with p_i >= 0.  Each worker's bit enters
 * at most once (the slot's contributor bitmap), so c_i <= n <= 64 < 2^8:
 * no lane overflow (7 bits would do; 8 keeps lanes byte-addressed).  The
 * scale words are added as int32: their sum is below 2^30 by quant.h.
 *
 * The result is the vote v_i = sign(2 c_i - n) in {-1, +1}, one bit per
 * element; a tie (2 c_i = n, even n only) is a fair coin the aggregator
 * flips, the same for every worker and every re-send of the chunk:
 *	v_i = +1 iff bit 63 of H(seed + i) is 1, seed = H(tensor, chunk, 0)
 * (H: the chunk hash of docs/protocol.md section 11), so E[v_i] is the
 * three-valued vote's 0 and the downlink costs one bit, not two.  With
 * S = sum of the scale words it decodes to
 *	result_i = v_i * S * 2^-shift = v_i * n * mean_w(â_w)
 * an estimate of the SUM of the workers' gradients like every other tally
 * all-reduce (the DDP hook divides by n as usual).  A RESULT is
 *	[S: int32][vote plane: m bits, 1 = v_i > 0]
 * of 4K bytes like the DATA [q_w][m bits], m = 32 (K - 1).
 *
 * Non-finite: a chunk whose p holds inf or NaN has a non-finite a_w, the
 * exponent round says E_a = 129 and the scale word carries quant.h's
 * non-finite code; S decodes to inf or NaN and the whole chunk comes back
 * non-finite on every worker.  The worker's residual for such a chunk is
 * reset to zero (it would otherwise carry inf into every later round).
 */
#ifndef TALLY_DATAPLANE_COMPRESS_SIGN_EF_H
#define TALLY_DATAPLANE_COMPRESS_SIGN_EF_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/wire.h"	/* tly_chunk_hash() */
#include "dataplane/engine/worker.h"	/* enum tly_dtype */

/* elements of one sign chunk in a DATA payload of @k words */
static inline size_t tly_sign_chunk_elems(size_t k)
{
	return 32 * (k - 1);
}

/* bytes of an encoded chunk of @m elements, DATA and RESULT alike */
static inline size_t tly_sign_data_len(size_t m)
{
	return 4 + (m + 7) / 8;
}

/* the tie coins of chunk @chunk of tensor @tensor */
static inline uint64_t tly_sign_tie_seed(uint32_t tensor, uint16_t chunk)
{
	return tly_chunk_hash(tensor, chunk, 0);
}

/* element @i's vote in a tie: 1 (+1) or 0 (-1) */
static inline unsigned int tly_sign_tie(uint64_t seed, size_t i)
{
	return (unsigned int)(tly_key_hash(seed + i) >> 63);
}

/* mean |p| over @m elements (inf or NaN if any element is) */
float tly_sign_scale(const float *p, size_t m);

/*
 * Pack @m elements of p (the residual buffer after accumulation) into
 * @out (tly_sign_data_len(m) bytes) with the scale @a and the shift of
 * the scales' exponent round.  Pure: a retransmission packs the same
 * bytes again.
 */
void tly_sign_pack(uint8_t *out, const float *p, size_t m, float a,
		   int shift);
/* once the chunk is done: p -= what @data sent (p becomes the residual) */
void tly_sign_feedback(float *p, const uint8_t *data, size_t m, int shift);
/* both at once */
void tly_sign_encode(uint8_t *out, float *p, size_t m, float a, int shift);

/* the aggregator's slot for one chunk: count lanes and the scale sum */
struct tly_sign_acc {
	uint32_t scale_sum;
	uint8_t *count;		/* m lanes, caller's memory */
	size_t m;
};

void tly_sign_acc_init(struct tly_sign_acc *acc, uint8_t *count, size_t m);
/* add one worker's DATA (once per worker: the caller's bitmap) */
void tly_sign_acc_add(struct tly_sign_acc *acc, const uint8_t *data);
/* the RESULT (tly_sign_data_len(acc->m) bytes) for @n_workers, ties
 * broken by the coins of @seed (tly_sign_tie_seed()) */
void tly_sign_result(uint8_t *out, const struct tly_sign_acc *acc,
		     unsigned int n_workers, uint64_t seed);

/* decode a RESULT of @len elements into @out of @dt */
void tly_sign_decode(void *out, enum tly_dtype dt, const uint8_t *res,
		     size_t len, int shift);

#endif /* TALLY_DATAPLANE_COMPRESS_SIGN_EF_H */
