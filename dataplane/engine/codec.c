// SPDX-License-Identifier: BSD-3-Clause
/*
 * codec.c - the codec ops tables (codec.h): int32 over dtype.h as before,
 * int16 and int8 over dataplane/compress/narrow.c.
 */
#include "dataplane/engine/codec.h"

#include <string.h>

#include "dataplane/compress/narrow.h"
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

static const struct tly_codec_ops codecs[] = {
	[TLY_CODEC_NONE] = {
		.name = "none", .lanes = 0, .lane_bytes = 4,
		.chunk_elems = int32_elems, .shift = int32_shift,
		.pack = int32_pack, .decode = int32_decode,
	},
	[TLY_CODEC_INT16] = {
		.name = "int16", .lanes = TLY_F_LANE16, .lane_bytes = 2,
		.chunk_elems = int16_elems, .shift = int16_shift,
		.pack = int16_pack, .decode = int16_decode,
	},
	[TLY_CODEC_INT8] = {
		.name = "int8", .lanes = TLY_F_LANE8, .lane_bytes = 1,
		.chunk_elems = int8_elems, .shift = int8_shift,
		.pack = int8_pack, .decode = int8_decode,
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
