/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sparse.h - block sparsification with error feedback, OmniReduce style
 * (docs/compression.md, "Block sparsification"; its protocol extension is
 * specified there).
 *
 * A tensor is cut into blocks of one chunk (K elements: a block is one
 * DATA packet, its index is the chunk field, so "index + values" costs no
 * byte beyond the int32 path's).  Per round, worker w:
 *	p = g + e				tly_elem_accumulate()
 *	selects blocks of p by L2 norm		tly_sparse_select_topk/_threshold
 *	reports E_w(b) for every block of a group in its exponent round:
 *	the block exponent for a selected block, TLY_EXP_NONE for the rest
 *	(a worker never sends an all-zero block, so NONE <=> not sent)
 * The exponent round combines per lane by max *and* count: every worker
 * learns E(b) and m(b) = number of senders (tly_sparse_exp_*).  A sender
 * quantizes with shift = tly_quant_shift(E(b), m(b)), so the sum of the
 * m(b) contributions cannot overflow int32 (quant.h's argument with m for
 * n), and its residual becomes p - q * 2^-shift for the block (exactly
 * what the aggregator adds), p for blocks it did not send.  A block with
 * inf or NaN is always selected (norm inf or NaN sorts first) so the
 * non-finite result reaches every worker, and its residual is reset.
 *
 * The aggregator sums a block over exactly m(b) distinct senders
 * (tly_sparse_acc_*: bitmap, expected count, verdicts); every worker,
 * sender or not, takes the RESULT.  m(b) = 0: nobody sends, every worker
 * writes zeros without a packet.
 */
#ifndef TALLY_DATAPLANE_COMPRESS_SPARSE_H
#define TALLY_DATAPLANE_COMPRESS_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/worker.h"	/* enum tly_dtype */

/* blocks of @block elements covering @n */
static inline size_t tly_sparse_blocks(size_t n, size_t block)
{
	return (n + block - 1) / block;
}

/*
 * Selection into @idx (ascending block indices); returns how many.  Top-k:
 * the @k_blocks blocks of largest L2 norm (ties: lower index first),
 * never an all-zero block, every non-finite block first (the count
 * exceeds k_blocks only when more blocks than that are non-finite).
 * Threshold: every block with norm >= @thr > 0, and every non-finite one.
 */
size_t tly_sparse_select_topk(uint32_t *idx, const float *p, size_t n,
			      size_t block, size_t k_blocks);
size_t tly_sparse_select_threshold(uint32_t *idx, const float *p, size_t n,
				   size_t block, float thr);

/* E_w for every block: the block exponent if selected, else NONE */
void tly_sparse_exps(int32_t *exps, const float *p, size_t n, size_t block,
		     const uint32_t *idx, size_t n_sel);

/* the exponent round's lane: max of E and count of senders */
struct tly_sparse_exp_lane {
	int32_t exp;
	uint8_t senders;
};

void tly_sparse_exp_init(struct tly_sparse_exp_lane *lane, size_t n);
void tly_sparse_exp_add(struct tly_sparse_exp_lane *lane,
			const int32_t *exps, size_t n);
/* the RESULT word: E * 256 + m; and back */
uint32_t tly_sparse_exp_word(int32_t exp, unsigned int senders);
void tly_sparse_exp_unword(uint32_t w, int32_t *exp, unsigned int *senders);

/*
 * Encode a selected block (its @len elements of p, zeros up to @k words)
 * with @shift: pure (quant.h's tly_quantize_f32), so a retransmission
 * encodes the same bytes.  Once the block is done, feedback makes p's
 * block its residual: p - q * 2^-shift (zero for a non-finite block).
 * tly_sparse_encode_block() does both.
 */
void tly_sparse_feedback_block(float *p_block, const uint8_t *data,
			       size_t len, int shift);
void tly_sparse_encode_block(uint8_t *out, float *p_block, size_t len,
			     size_t k, int shift);

/*
 * Decode block b's RESULT (@len elements) into @out of @dt; a block with
 * no sender (m(b) = 0, no packet) decodes to zeros (@res unused).
 */
void tly_sparse_decode_block(void *out, enum tly_dtype dt,
			     const uint8_t *res, size_t len,
			     unsigned int senders, int shift);

/* the aggregator's partial block */
enum tly_sparse_verdict {
	TLY_SPARSE_ADDED,	/* held, more senders expected */
	TLY_SPARSE_COMPLETE,	/* this contribution completed the block */
	TLY_SPARSE_DUPLICATE,	/* this rank's contribution is in already */
	TLY_SPARSE_DONE,	/* late: the block completed before */
	TLY_SPARSE_MISMATCH,	/* another shift or sender count: dropped */
};

struct tly_sparse_acc {
	uint32_t *lanes;	/* k lanes, caller's memory */
	size_t k;
	uint64_t seen;		/* contributor bitmap */
	uint8_t expect;		/* m(b), from the first contribution */
	int8_t shift;
	bool started;
};

void tly_sparse_acc_init(struct tly_sparse_acc *acc, uint32_t *lanes,
			 size_t k);
enum tly_sparse_verdict tly_sparse_acc_add(struct tly_sparse_acc *acc,
					   unsigned int rank,
					   unsigned int senders, int shift,
					   const uint8_t *payload);

#endif /* TALLY_DATAPLANE_COMPRESS_SPARSE_H */
