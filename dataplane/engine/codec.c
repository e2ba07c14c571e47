// SPDX-License-Identifier: BSD-3-Clause
/*
 * codec.c - the codec ops tables (codec.h): int32 over dtype.h as before,
 * int16 and int8 over dataplane/compress/narrow.c, sign_ef over
 * dataplane/compress/sign_ef.c, block_topk<p>_ef over
 * dataplane/compress/sparse.c.
 */
#include <errno.h>
#include <stdlib.h>
#include "dataplane/engine/codec.h"

#include <math.h>
#include <string.h>

#include "dataplane/compress/elem.h"
#include "dataplane/compress/narrow.h"
#include "dataplane/compress/sign_ef.h"
#include "dataplane/compress/sparse.h"
#include "dataplane/engine/dtype.h"
#include "dataplane/engine/quant.h"
#include "dataplane/engine/wire.h"

static size_t int32_elems(size_t k)
{
	return k;
}

static int int32_shift(int32_t exp, unsigned int n_workers)
{
	return tly_quant_shift(exp, n_workers);
}

static void int32_pack(uint8_t *out, const void *x, enum tly_dtype dt,
		       size_t n, size_t k, int shift, unsigned int n_workers)
{
	(void)n_workers;
	tly_dtype(dt)->quantize(out, x, n, k, shift);
}

static int32_t block_exp(const void *x, enum tly_dtype dt, size_t n)
{
	return tly_dtype(dt)->block_exp(x, n);
}

static void int32_decode(void *dst, enum tly_dtype dt, const uint8_t *res,
			 size_t n, int shift)
{
	tly_dtype(dt)->dequantize(dst, res, n, shift);
}

static size_t int16_elems(size_t k)
{
	return tly_narrow_lanes(k, 2);
}

static size_t int8_elems(size_t k)
{
	return tly_narrow_lanes(k, 1);
}

static int int16_shift(int32_t exp, unsigned int n_workers)
{
	return tly_narrow_shift(exp, n_workers, 2);
}

static int int8_shift(int32_t exp, unsigned int n_workers)
{
	return tly_narrow_shift(exp, n_workers, 1);
}

static void int16_pack(uint8_t *out, const void *x, enum tly_dtype dt,
		       size_t n, size_t k, int shift, unsigned int n_workers)
{
	tly_narrow_quantize(out, x, dt, n, tly_narrow_lanes(k, 2), shift,
			    n_workers, 2);
}

static void int8_pack(uint8_t *out, const void *x, enum tly_dtype dt,
		      size_t n, size_t k, int shift, unsigned int n_workers)
{
	tly_narrow_quantize(out, x, dt, n, tly_narrow_lanes(k, 1), shift,
			    n_workers, 1);
}

static void int16_decode(void *dst, enum tly_dtype dt, const uint8_t *res,
			 size_t n, int shift)
{
	tly_narrow_dequantize(dst, dt, res, n, shift, 2);
}

static void int8_decode(void *dst, enum tly_dtype dt, const uint8_t *res,
			size_t n, int shift)
{
	tly_narrow_dequantize(dst, dt, res, n, shift, 1);
}

/*
 * sign_ef (sign_ef.h) over any float dtype: the scale a = mean |x|, its
 * word q = rint(a 2^shift), one bit per element (x >= 0).
 */
static float sign_scale(const void *x, enum tly_dtype dt, size_t n)
{
	double s = 0;
	size_t i;

	if (dt == TLY_DT_F32)
		return tly_sign_scale(x, n);
	for (i = 0; i < n; i++)
		s += fabs((double)tly_elem_load(x, dt, i));
	return n ? (float)(s / (double)n) : 0.0f;
}

static int32_t sign_exp(const void *x, enum tly_dtype dt, size_t n)
{
	float a = sign_scale(x, dt, n);

	return tly_block_exp_f32(&a, 1);
}

static void sign_pack(uint8_t *out, const void *x, enum tly_dtype dt,
		      size_t n, size_t k, int shift, unsigned int n_workers)
{
	float a = sign_scale(x, dt, n);
	uint8_t *bits = out + 4;
	size_t i;

	(void)n_workers;
	memset(out, 0, 4 * k);
	tly_quantize_f32(out, &a, 1, 1, shift);
	if (shift == TLY_SHIFT_NONFINITE)
		return;		/* non-finite everywhere: signs carry nothing */
	for (i = 0; i < n; i++)
		if (tly_elem_load(x, dt, i) >= 0)
			bits[i / 8] |= (uint8_t)(0x80u >> (i % 8));
}

static void sign_sent(void *out, const void *x, enum tly_dtype dt, size_t n,
		      int shift)
{
	float a = sign_scale(x, dt, n), ahat;
	uint8_t q[4];
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		for (i = 0; i < n; i++)
			tly_elem_store(out, dt, i, NAN);
		return;
	}
	/* exactly the aggregator's addend: the word, dequantized */
	tly_quantize_f32(q, &a, 1, 1, shift);
	tly_dequantize_f32(&ahat, q, 1, shift);
	for (i = 0; i < n; i++)
		tly_elem_store(out, dt, i, tly_elem_load(x, dt, i) >= 0 ?
				   ahat : -ahat);
}

/*
 * block_topk<p>_ef (sparse.h): int32 lanes, a chunk is a block; the
 * selection is the tensor's (top p of its blocks by L2 norm on any float
 * dtype, widened), so the round words come all at once.
 */
static int topk_exps(int32_t *exp, const void *x, enum tly_dtype dt,
		     size_t n, size_t ck, unsigned int permille)
{
	size_t nb = tly_sparse_blocks(n, ck), sel, i;
	size_t kb = (nb * permille + 999) / 1000;
	uint32_t *idx = malloc(nb * sizeof(*idx));
	float *p = NULL;
	const float *f = x;

	if (!idx)
		return -ENOMEM;
	if (dt != TLY_DT_F32) {
		p = malloc(n * sizeof(*p));
		if (!p) {
			free(idx);
			return -ENOMEM;
		}
		for (i = 0; i < n; i++)
			p[i] = tly_elem_load(x, dt, i);
		f = p;
	}
	sel = tly_sparse_select_topk(idx, f, n, ck, kb);
	tly_sparse_exps(exp, f, n, ck, idx, sel);
	free(p);
	free(idx);
	return 0;
}

/* exactly what the aggregator adds for this worker: q 2^-shift */
static void topk_sent(void *out, const void *x, enum tly_dtype dt, size_t n,
		      int shift)
{
	uint8_t q[4 * TLY_K_MAX];
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		for (i = 0; i < n; i++)
			tly_elem_store(out, dt, i, NAN);
		return;
	}
	tly_dtype(dt)->quantize(q, x, n, n, shift);
	tly_dtype(dt)->dequantize(out, q, n, shift);
}

static const struct tly_codec_ops codecs[] = {
	[TLY_CODEC_NONE] = {
		.name = "none", .lanes = 0, .lane_bytes = 4,
		.chunk_elems = int32_elems, .exp = block_exp,
		.shift = int32_shift,
		.pack = int32_pack, .decode = int32_decode,
	},
	[TLY_CODEC_INT16] = {
		.name = "int16", .lanes = TLY_F_LANE16, .lane_bytes = 2,
		.chunk_elems = int16_elems, .exp = block_exp,
		.shift = int16_shift,
		.pack = int16_pack, .decode = int16_decode,
	},
	[TLY_CODEC_INT8] = {
		.name = "int8", .lanes = TLY_F_LANE8, .lane_bytes = 1,
		.chunk_elems = int8_elems, .exp = block_exp,
		.shift = int8_shift,
		.pack = int8_pack, .decode = int8_decode,
	},
	[TLY_CODEC_SIGN_EF] = {
		.name = "sign_ef", .lanes = TLY_F_SIGN, .lane_bytes = 1,
		.chunk_elems = tly_sign_chunk_elems,
		.exp = sign_exp, .shift = int32_shift,
		.pack = sign_pack, .decode = tly_sign_decode, .sent = sign_sent,
	},
	[TLY_CODEC_TOPK10_EF] = {
		.name = "block_topk10_ef", .lanes = 0, .lane_bytes = 4,
		.chunk_elems = int32_elems, .exp = block_exp,
		.shift = int32_shift, .pack = int32_pack,
		.decode = int32_decode, .sent = topk_sent,
		.topk_permille = 100, .exps = topk_exps,
	},
	[TLY_CODEC_TOPK1_EF] = {
		.name = "block_topk1_ef", .lanes = 0, .lane_bytes = 4,
		.chunk_elems = int32_elems, .exp = block_exp,
		.shift = int32_shift, .pack = int32_pack,
		.decode = int32_decode, .sent = topk_sent,
		.topk_permille = 10, .exps = topk_exps,
	},
};

const struct tly_codec_ops *tly_codec(unsigned int c)
{
	return c < sizeof(codecs) / sizeof(codecs[0]) ? &codecs[c] : NULL;
}

int tly_codec_from_name(const char *name)
{
	unsigned int c;

	for (c = 0; c < sizeof(codecs) / sizeof(codecs[0]); c++)
		if (!strcmp(name, codecs[c].name))
			return (int)c;
	return -1;
}
