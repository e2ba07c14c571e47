// SPDX-License-Identifier: BSD-3-Clause
/*
 * sparse.c - block selection, the exponent round's max-and-count lane,
 * block encoding with error feedback and the aggregator's partial block
 * (see sparse.h).
 */
#include "dataplane/compress/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/compress/elem.h"
#include "dataplane/engine/dtype.h"
#include "dataplane/engine/quant.h"
#include "dataplane/engine/wire.h"

struct ranked {
	double norm;		/* inf for a non-finite block */
	uint32_t idx;
};

static double block_norm2(const float *p, size_t len)
{
	double s = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!isfinite(p[i]))
			return INFINITY;
		s += (double)p[i] * p[i];
	}
	return s;
}

static size_t block_len(size_t n, size_t block, size_t b)
{
	size_t start = b * block;

	return n - start < block ? n - start : block;
}

static int by_norm_desc(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->norm != y->norm)
		return x->norm > y->norm ? -1 : 1;
	return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static int by_index(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : (x > y);
}

size_t tly_sparse_select_topk(uint32_t *idx, const float *p, size_t n,
			      size_t block, size_t k_blocks)
{
	size_t nb = tly_sparse_blocks(n, block), b, sel = 0;
	struct ranked *r = malloc(nb * sizeof(*r));

	if (!r)
		return 0;
	for (b = 0; b < nb; b++) {
		r[b].norm = block_norm2(p + b * block, block_len(n, block, b));
		r[b].idx = (uint32_t)b;
	}
	qsort(r, nb, sizeof(*r), by_norm_desc);
	for (b = 0; b < nb; b++) {
		if (r[b].norm == 0)
			break;
		if (sel >= k_blocks && r[b].norm != INFINITY)
			break;
		idx[sel++] = r[b].idx;
	}
	free(r);
	qsort(idx, sel, sizeof(*idx), by_index);
	return sel;
}

size_t tly_sparse_select_threshold(uint32_t *idx, const float *p, size_t n,
				   size_t block, float thr)
{
	size_t nb = tly_sparse_blocks(n, block), b, sel = 0;
	double t2 = (double)thr * thr;

	for (b = 0; b < nb; b++) {
		double s = block_norm2(p + b * block, block_len(n, block, b));

		if (s > 0 && s >= t2)
			idx[sel++] = (uint32_t)b;
	}
	return sel;
}

void tly_sparse_exps(int32_t *exps, const float *p, size_t n, size_t block,
		     const uint32_t *idx, size_t n_sel)
{
	size_t nb = tly_sparse_blocks(n, block), i;

	for (i = 0; i < nb; i++)
		exps[i] = TLY_EXP_NONE;
	for (i = 0; i < n_sel; i++) {
		size_t b = idx[i];

		exps[b] = tly_block_exp_f32(p + b * block,
					    block_len(n, block, b));
	}
}

void tly_sparse_exp_init(struct tly_sparse_exp_lane *lane, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		lane[i].exp = TLY_EXP_NONE;
		lane[i].senders = 0;
	}
}

void tly_sparse_exp_add(struct tly_sparse_exp_lane *lane,
			const int32_t *exps, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (exps[i] > lane[i].exp)
			lane[i].exp = exps[i];
		lane[i].senders += exps[i] != TLY_EXP_NONE;
	}
}

uint32_t tly_sparse_exp_word(int32_t exp, unsigned int senders)
{
	return (uint32_t)exp * 256u + (senders & 0xffu);
}

void tly_sparse_exp_unword(uint32_t w, int32_t *exp, unsigned int *senders)
{
	*senders = w & 0xffu;
	/* arithmetic: E may be negative (TLY_EXP_NONE is -1000) */
	*exp = (int32_t)(w - (w & 0xffu)) / 256;
}

void tly_sparse_feedback_block(float *p_block, const uint8_t *data,
			       size_t len, int shift)
{
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		memset(p_block, 0, len * sizeof(*p_block));
		return;
	}
	for (i = 0; i < len; i++) {
		float sent;

		tly_dequantize_f32(&sent, data + 4 * i, 1, shift);
		p_block[i] -= sent;
	}
}

void tly_sparse_encode_block(uint8_t *out, float *p_block, size_t len,
			     size_t k, int shift)
{
	tly_quantize_f32(out, p_block, len, k, shift);
	tly_sparse_feedback_block(p_block, out, len, shift);
}

void tly_sparse_decode_block(void *out, enum tly_dtype dt,
			     const uint8_t *res, size_t len,
			     unsigned int senders, int shift)
{
	size_t i;

	if (senders == 0) {
		for (i = 0; i < len; i++)
			tly_elem_store(out, dt, i, 0.0f);
		return;
	}
	tly_dtype(dt)->dequantize(out, res, len, shift);
}

void tly_sparse_acc_init(struct tly_sparse_acc *acc, uint32_t *lanes,
			 size_t k)
{
	acc->lanes = lanes;
	acc->k = k;
	acc->seen = 0;
	acc->expect = 0;
	acc->shift = 0;
	acc->started = false;
	memset(lanes, 0, k * sizeof(*lanes));
}

enum tly_sparse_verdict tly_sparse_acc_add(struct tly_sparse_acc *acc,
					   unsigned int rank,
					   unsigned int senders, int shift,
					   const uint8_t *payload)
{
	uint64_t bit = 1ull << rank;
	size_t i;

	if (senders == 0 || senders > TLY_MAX_WORKERS ||
	    rank >= TLY_MAX_WORKERS)
		return TLY_SPARSE_MISMATCH;
	if (acc->started && (senders != acc->expect || shift != acc->shift))
		return TLY_SPARSE_MISMATCH;
	if (acc->seen & bit)
		return (unsigned int)__builtin_popcountll(acc->seen) ==
		       acc->expect ? TLY_SPARSE_DONE : TLY_SPARSE_DUPLICATE;
	if (acc->started &&
	    (unsigned int)__builtin_popcountll(acc->seen) == acc->expect)
		return TLY_SPARSE_MISMATCH;	/* a sender beyond m(b) */
	acc->started = true;
	acc->expect = (uint8_t)senders;
	acc->shift = (int8_t)shift;
	acc->seen |= bit;
	for (i = 0; i < acc->k; i++)
		acc->lanes[i] += tly_get32(payload + 4 * i);
	return (unsigned int)__builtin_popcountll(acc->seen) == senders ?
	       TLY_SPARSE_COMPLETE : TLY_SPARSE_ADDED;
}
