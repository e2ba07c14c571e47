// SPDX-License-Identifier: BSD-3-Clause
/*
 * compress-bench - bytes on the wire of each compression method over the
 * int32 path's for the same tensor (docs/compression.md, "Bytes on the
 * wire"), counted from the packets the codecs really produce:
 *
 *	compress-bench [--elems N] [--workers n] [--k K] [--rounds R]
 *
 * Per worker, with a dedicated aggregator: DATA and exponent-round
 * packets sent, RESULT packets received; every packet costs the 20-byte
 * tally header, 42 bytes of Ethernet/IPv4/UDP and 24 bytes of preamble,
 * FCS and gap on top of its 4K payload bytes.  Receipts (CONFIRM: 8
 * bytes per range of up to 256 chunks) are left out of every method.
 * Block top-10 % runs n workers with error feedback for R rounds over a
 * synthetic gradient (layers of 64 blocks with scales 10^-3 .. 1, each
 * element half a component shared by the workers, half the worker's own
 * noise) and counts what each worker sends and receives: its own blocks,
 * and the RESULT of every block some worker sent.
 *
 * Prints `figure compress_codec_<m>_wire_bytes_frac <v> frac` for int16,
 * int8, sign_ef and block_topk10_ef: the codecs' model of the bytes.  The
 * issue's `compress_<m>_wire_bytes_frac` and `_accuracy_delta_pp` are
 * measured through the engine by tools/compress-study.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/compress/elem.h"
#include "dataplane/compress/narrow.h"
#include "dataplane/compress/sign_ef.h"
#include "dataplane/compress/sparse.h"
#include "dataplane/engine/quant.h"
#include "dataplane/engine/wire.h"

struct bench {
	size_t elems;
	unsigned int workers;
	size_t k;
	unsigned int rounds;
	uint64_t rng;
};

static double pkt_bytes(const struct bench *b)
{
	return TLY_HDR_LEN + TLY_L2L4_LEN + TLY_WIRE_EXTRA + 4.0 * b->k;
}

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float noise(uint64_t *s)
{
	return (float)((double)(next(s) >> 11) / 9007199254740992.0 - 0.5);
}

static void gradient(float *g, const float *shared, const struct bench *b,
		     uint64_t *s)
{
	size_t i, per_layer = 64 * b->k;

	for (i = 0; i < b->elems; i++) {
		size_t layer = i / per_layer;
		float scale = powf(10.0f, -3.0f * (float)((layer * 7919) % 13)
				   / 12.0f);

		g[i] = scale * (0.5f * shared[i] + 0.5f * noise(s));
	}
}

static size_t groups(size_t chunks, size_t k)
{
	return (chunks + k - 1) / k;
}

/* the int32 path: one DATA and one RESULT per K elements, plus EXP */
static double int32_packets(const struct bench *b)
{
	size_t c = (b->elems + b->k - 1) / b->k;

	return 2.0 * (double)(c + groups(c, b->k));
}

static double narrow_packets(const struct bench *b, const float *x,
			     unsigned int lane_bytes)
{
	size_t lanes = tly_narrow_lanes(b->k, lane_bytes), off, c = 0;
	uint8_t *pkt = malloc(4 * b->k);

	for (off = 0; off < b->elems; off += lanes, c++) {
		size_t n = b->elems - off < lanes ? b->elems - off : lanes;
		int s = tly_narrow_shift(tly_narrow_block_exp(x + off,
					 TLY_DT_F32, n), b->workers,
					 lane_bytes);

		tly_narrow_quantize(pkt, x + off, TLY_DT_F32, n, lanes, s,
				    b->workers, lane_bytes);
	}
	free(pkt);
	return 2.0 * (double)(c + groups(c, b->k));
}

static double sign_packets(const struct bench *b, const float *x)
{
	size_t m = tly_sign_chunk_elems(b->k), off, c = 0;
	uint8_t *pkt = malloc(tly_sign_data_len(m));
	float *p = malloc(m * sizeof(*p));

	for (off = 0; off < b->elems; off += m, c++) {
		size_t n = b->elems - off < m ? b->elems - off : m;
		float a;

		memcpy(p, x + off, n * sizeof(*p));
		a = tly_sign_scale(p, n);
		tly_sign_encode(pkt, p, n, a,
				tly_quant_shift(tly_block_exp_f32(&a, 1),
						b->workers));
	}
	free(p);
	free(pkt);
	/* a DATA and a RESULT a chunk, and the exponent rounds */
	return (double)(2 * c + 2 * groups(c, b->k));
}

static double topk_packets(struct bench *b, double frac)
{
	size_t nb = tly_sparse_blocks(b->elems, b->k), kb, w, r, i;
	float *shared = malloc(b->elems * sizeof(float));
	float *g = malloc(b->elems * sizeof(float));
	float **e = calloc(b->workers, sizeof(*e));
	uint32_t *idx = malloc(nb * sizeof(*idx));
	uint8_t *any = malloc(nb), *pkt = malloc(4 * b->k);
	double total = 0;

	kb = (size_t)ceil(frac * (double)nb);
	for (w = 0; w < b->workers; w++)
		e[w] = calloc(b->elems, sizeof(float));
	for (r = 0; r < b->rounds; r++) {
		size_t sent = 0, uni = 0;

		for (i = 0; i < b->elems; i++)
			shared[i] = noise(&b->rng) * 2.0f;
		memset(any, 0, nb);
		for (w = 0; w < b->workers; w++) {
			size_t n_sel, j;

			gradient(g, shared, b, &b->rng);
			tly_elem_accumulate(e[w], g, TLY_DT_F32, b->elems);
			n_sel = tly_sparse_select_topk(idx, e[w], b->elems,
						       b->k, kb);
			for (j = 0; j < n_sel; j++) {
				size_t off = idx[j] * b->k;
				size_t len = b->elems - off < b->k ?
					     b->elems - off : b->k;
				/* one sender's shift stands in for m(b)'s:
				 * the bytes do not depend on it */
				int s = tly_quant_shift(tly_block_exp_f32(
						e[w] + off, len), b->workers);

				tly_sparse_encode_block(pkt, e[w] + off, len,
							b->k, s);
				any[idx[j]] = 1;
			}
			sent += n_sel;
		}
		for (i = 0; i < nb; i++)
			uni += any[i];
		/* per worker: its DATA, every RESULT, the exponent round */
		total += (double)sent / b->workers + (double)uni +
			 2.0 * (double)groups(nb, b->k);
		printf("  round %zu: blocks sent per worker %.1f of %zu, "
		       "union %zu\n", r, (double)sent / b->workers, nb, uni);
	}
	for (w = 0; w < b->workers; w++)
		free(e[w]);
	free(e);
	free(idx);
	free(any);
	free(pkt);
	free(g);
	free(shared);
	return total / b->rounds;
}

static int parse(struct bench *b, int argc, char **argv)
{
	int i;

	for (i = 1; i + 1 < argc; i += 2) {
		unsigned long v = strtoul(argv[i + 1], NULL, 0);

		if (!strcmp(argv[i], "--elems") && v > 0)
			b->elems = v;
		else if (!strcmp(argv[i], "--workers") && v >= 1 &&
			 v <= TLY_MAX_WORKERS)
			b->workers = (unsigned int)v;
		else if (!strcmp(argv[i], "--k") && v >= TLY_K_MIN &&
			 v <= TLY_K_MAX)
			b->k = v;
		else if (!strcmp(argv[i], "--rounds") && v >= 1)
			b->rounds = (unsigned int)v;
		else
			return -1;
	}
	return i == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct bench b = { .elems = 1u << 22, .workers = 4, .k = 256,
			   .rounds = 5, .rng = 42 };
	double base, f16, f8, fs, ft;
	float *x;
	size_t i;

	if (parse(&b, argc, argv)) {
		fprintf(stderr, "usage: %s [--elems N] [--workers n] [--k K] "
			"[--rounds R]\n", argv[0]);
		return 2;
	}
	x = malloc(b.elems * sizeof(*x));
	if (!x)
		return 1;
	for (i = 0; i < b.elems; i++)
		x[i] = noise(&b.rng);
	printf("compress-bench: %zu float32 elements, %u workers, K = %zu, "
	       "%.0f wire bytes per packet\n", b.elems, b.workers, b.k,
	       pkt_bytes(&b));
	base = int32_packets(&b);
	f16 = narrow_packets(&b, x, 2) / base;
	f8 = narrow_packets(&b, x, 1) / base;
	fs = sign_packets(&b, x) / base;
	ft = topk_packets(&b, 0.10) / base;
	printf("%-18s %14s %8s\n", "method", "wire bytes", "frac");
	printf("%-18s %14.0f %8.4f\n", "int32", base * pkt_bytes(&b), 1.0);
	printf("%-18s %14.0f %8.4f\n", "int16", f16 * base * pkt_bytes(&b),
	       f16);
	printf("%-18s %14.0f %8.4f\n", "int8", f8 * base * pkt_bytes(&b), f8);
	printf("%-18s %14.0f %8.4f\n", "sign_ef", fs * base * pkt_bytes(&b),
	       fs);
	printf("%-18s %14.0f %8.4f\n", "block_topk10_ef",
	       ft * base * pkt_bytes(&b), ft);
	printf("figure compress_codec_int16_wire_bytes_frac %.4f frac\n", f16);
	printf("figure compress_codec_int8_wire_bytes_frac %.4f frac\n", f8);
	printf("figure compress_codec_sign_ef_wire_bytes_frac %.4f frac\n", fs);
	printf("figure compress_codec_block_topk10_ef_wire_bytes_frac "
	       "%.4f frac\n", ft);
	free(x);
	return 0;
}
