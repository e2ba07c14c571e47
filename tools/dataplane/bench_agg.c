// SPDX-License-Identifier: BSD-3-Clause
/*
 * bench_agg.c - aggregator packet rate on one core.
 *
 * Pre-built DATA frames (Ethernet/IPv4/UDP/tally, K words each, as they
 * would sit in a DPDK rx burst) from W workers go through tly_agg_rx():
 * envelope and header validation, slot lookup, byte swap and add.  Every
 * completed slot builds its RESULT frame (headers and byte-swapped sum)
 * into a transmit buffer and hands it to a multicast callback, the way a
 * switch replicates one frame to W ports; the callback only counts.
 * Receipts (CONFIRM, one per worker per 256 chunks) free the slots.
 * Every pass uses fresh tensor ids (rewritten between passes, not timed).
 * Counted: DATA packets in per second.  Best of the repetitions.
 *
 * Also the naive ceiling: a loop that only byte-swaps and adds the same
 * frames' payloads into slots, with no parsing and no results.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataplane/engine/agg.h"
#include "dataplane/engine/simd.h"

#define JOB 0x7a11
#define ROUNDS 8
#define BURST 32

static uint8_t txring[64][8192];
static unsigned int tx_next;
static uint64_t tx_frames, tx_replicas;

static uint8_t *b_alloc(void *ctx, size_t len)
{
	(void)ctx;
	(void)len;
	return txring[tx_next++ & 63];
}

static void b_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	(void)ctx;
	(void)dst;
	(void)f;
	(void)len;
	tx_frames++;
}

static void b_multicast(void *ctx, uint64_t mask, uint8_t *f, size_t len)
{
	(void)ctx;
	(void)f;
	(void)len;
	tx_frames++;
	tx_replicas += (uint64_t)__builtin_popcountll(mask);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct frames {
	size_t len;		/* one DATA frame */
	uint8_t *data;		/* [round][chunk][worker] */
	uint8_t *confirm;	/* [round][worker] */
	size_t clen;
};

static void build(struct frames *fr, struct tly_addr *addrs, uint16_t w,
		  uint16_t k, uint32_t chunks, uint32_t n_slots)
{
	size_t tl = TLY_HDR_LEN + 4u * k;
	uint32_t r, c, i;
	uint16_t x;

	fr->len = TLY_L2L4_LEN + tl;
	fr->clen = TLY_L2L4_LEN + TLY_HDR_LEN + 8;
	fr->data = aligned_alloc(64, (size_t)ROUNDS * chunks * w * fr->len);
	fr->confirm = calloc((size_t)ROUNDS * w, fr->clen);
	if (!fr->data || !fr->confirm)
		exit(1);
	for (r = 0; r < ROUNDS; r++) {
		for (c = 0; c < chunks; c++)
			for (x = 0; x < w; x++) {
				uint8_t *f = fr->data + (((size_t)r * chunks +
					     c) * w + x) * fr->len;
				struct tly_hdr h = {
					.type = TLY_T_DATA, .job = JOB,
					.rank = x, .tensor = 1000 + r,
					.chunk = (uint16_t)c, .shift = 20,
				};

				h.slot = (uint16_t)tly_slot_of(h.tensor,
						h.chunk, 0, n_slots);
				tly_l2l4_write(f, &addrs[x], &addrs[w], 40, tl);
				tly_hdr_write(f + TLY_L2L4_LEN, &h);
				for (i = 0; i < 4u * k; i++)
					f[TLY_L2L4_LEN + TLY_HDR_LEN + i] =
						(uint8_t)(i * 7 + x);
			}
		for (x = 0; x < w; x++) {
			uint8_t *f = fr->confirm + ((size_t)r * w + x) *
				     fr->clen;
			uint8_t *p = f + TLY_L2L4_LEN + TLY_HDR_LEN;
			struct tly_hdr h = {
				.type = TLY_T_CONFIRM, .job = JOB, .rank = x,
				.aux = 1,
			};
			uint32_t t = 1000 + r;

			tly_l2l4_write(f, &addrs[x], &addrs[w], 0,
				       TLY_HDR_LEN + 8);
			tly_hdr_write(f + TLY_L2L4_LEN, &h);
			p[0] = (uint8_t)(t >> 24);
			p[1] = (uint8_t)(t >> 16);
			p[2] = (uint8_t)(t >> 8);
			p[3] = (uint8_t)t;
			p[4] = 0;
			p[5] = 0;
			p[6] = 0;
			p[7] = (uint8_t)(chunks - 1);
		}
	}
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/*
 * Give every frame of the set fresh tensor ids (and their slots): tensor
 * ids are unique per iteration, and the aggregator drops a chunk it has
 * already completed and freed as a stray.  Not timed.
 */
static void retag(struct frames *fr, uint16_t w, uint32_t chunks,
		  uint32_t n_slots, uint32_t pass)
{
	uint32_t r, c, x;

	for (r = 0; r < ROUNDS; r++) {
		uint32_t t = 1000 + r + pass * ROUNDS;

		for (c = 0; c < chunks; c++) {
			uint16_t slot = (uint16_t)tly_slot_of(t, (uint16_t)c, 0,
							      n_slots);

			for (x = 0; x < w; x++) {
				uint8_t *h = fr->data + (((size_t)r * chunks +
					     c) * w + x) * fr->len +
					     TLY_L2L4_LEN;

				h[6] = (uint8_t)(slot >> 8);
				h[7] = (uint8_t)slot;
				put32(h + 8, t);
			}
		}
		for (x = 0; x < w; x++)
			put32(fr->confirm + ((size_t)r * w + x) * fr->clen +
			      TLY_L2L4_LEN + TLY_HDR_LEN, t);
	}
}

static double run_engine(struct tly_agg *a, struct frames *fr, uint16_t w,
			 uint32_t chunks, uint32_t n_slots, int passes)
{
	static uint32_t pass_id;
	size_t per_round = (size_t)chunks * w;
	double busy = 0;
	int p;
	uint32_t r, x;
	size_t i;

	for (p = 0; p < passes; p++) {
		double t0;

		retag(fr, w, chunks, n_slots, ++pass_id);
		t0 = now_s();
		for (r = 0; r < ROUNDS; r++) {
			const uint8_t *f = fr->data + r * per_round * fr->len;
			const uint8_t *burst[BURST];
			uint16_t lens[BURST];

			/* rx bursts of 32, as a DPDK poll loop hands them */
			for (i = 0; i < per_round; i++, f += fr->len) {
				burst[i % BURST] = f;
				lens[i % BURST] = (uint16_t)fr->len;
				if (i % BURST == BURST - 1 ||
				    i + 1 == per_round)
					tly_agg_rx_burst(a, burst, lens,
							 i % BURST + 1, 0);
			}
			for (x = 0; x < w; x++)
				tly_agg_rx(a, fr->confirm +
					   ((size_t)r * w + x) * fr->clen,
					   fr->clen, 0);
		}
		busy += now_s() - t0;
	}
	return (double)passes * ROUNDS * per_round / busy;
}

static __attribute__((noinline)) TLY_HOT void naive_add(uint32_t *restrict s,
						 const uint8_t *p, size_t k)
{
	size_t i;

	for (i = 0; i < k; i++) {
		uint32_t v;

		memcpy(&v, p + 4 * i, 4);
		s[i] += __builtin_bswap32(v);
	}
}

static double run_naive(uint32_t *slots, const struct frames *fr,
			uint16_t w, uint16_t k, uint32_t chunks, int passes)
{
	size_t per_round = (size_t)chunks * w;
	double t0 = now_s();
	int p;
	uint32_t r;
	size_t i;

	for (p = 0; p < passes; p++)
		for (r = 0; r < ROUNDS; r++) {
			const uint8_t *f = fr->data + r * per_round * fr->len;

			for (i = 0; i < per_round; i++, f += fr->len)
				naive_add(slots + (size_t)(i / w) * k,
					  f + TLY_L2L4_LEN + TLY_HDR_LEN, k);
		}
	return (double)passes * ROUNDS * per_round / (now_s() - t0);
}

int main(int argc, char **argv)
{
	uint16_t w = argc > 1 ? (uint16_t)atoi(argv[1]) : 4;
	uint16_t k = argc > 2 ? (uint16_t)atoi(argv[2]) : 256;
	int reps = argc > 3 ? atoi(argv[3]) : 5;
	uint32_t chunks = argc > 4 ? (uint32_t)atoi(argv[4]) : 256;
	uint32_t n_slots = argc > 5 ? (uint32_t)atoi(argv[5]) : 1024;
	struct tly_addr addrs[65];
	struct frames fr;
	double best = 0, best_naive = 0;
	uint32_t *slots;
	int i;

	for (i = 0; i <= w; i++) {
		memset(&addrs[i], 0, sizeof(addrs[i]));
		addrs[i].mac[0] = 2;
		addrs[i].mac[5] = (uint8_t)i;
		addrs[i].ip = 0x0a000001u + i;
		addrs[i].port = 9191;
	}
	build(&fr, addrs, w, k, chunks, n_slots);
	struct tly_agg_cfg c = {
		.job = JOB, .k = k, .n_workers = w, .self = w,
		.n_slots = n_slots, .n_fallback = 256,
		.evict_ns = 1000000000, .probe_ns = 1000000000,
		.net = { .addrs = addrs, .n_nodes = w + 1, .port = 9191 },
		.ops = { .alloc = b_alloc, .send = b_send,
			 .multicast = b_multicast },
	};
	struct tly_agg *a = tly_agg_create(&c);

	slots = aligned_alloc(64, (size_t)chunks * k * 4);
	if (!a || !slots)
		return 1;
	memset(slots, 0, (size_t)chunks * k * 4);
	run_engine(a, &fr, w, chunks, n_slots, 2);		/* warm up */
	for (i = 0; i < reps; i++) {
		double m = run_engine(a, &fr, w, chunks, n_slots, 20);
		double n = run_naive(slots, &fr, w, k, chunks, 20);

		best = m > best ? m : best;
		best_naive = n > best_naive ? n : best_naive;
	}
	const struct tly_counters *ct = tly_agg_counters(a);

	/*
	 * Every chunk completes once per pass and receipts free its slot.  A
	 * chunk whose primary slot and fallback probes were all taken gets
	 * BUSY (a real worker would retry; the benchmark does not): allow a
	 * few, and say how many.
	 */
	uint64_t want = (uint64_t)chunks * ROUNDS * (2 + 20 * reps);

	if (ct->completions + ct->busy < want || ct->busy * 100 > want ||
	    tly_agg_slots_busy(a) > ct->busy || tx_frames != ct->completions +
	    ct->busy) {
		fprintf(stderr, "bench_agg: %llu completions, %llu busy, %u "
			"slots held\n", (unsigned long long)ct->completions,
			(unsigned long long)ct->busy, tly_agg_slots_busy(a));
		return 1;
	}
	printf("agg W=%u K=%u slots=%u: %.2f Mpps (%.1f Gb/s of frames), "
	       "naive swap+add %.2f Mpps; results built %llu, BUSY %llu\n",
	       w, k, n_slots, best / 1e6, best * (fr.len + 24) * 8 / 1e9,
	       best_naive / 1e6, (unsigned long long)ct->completions,
	       (unsigned long long)ct->busy);
	printf("figure-line agg_mpps_w%u_k%u %.2f\n", w, k, best / 1e6);
	tly_agg_destroy(a);
	free(slots);
	free(fr.data);
	free(fr.confirm);
	return 0;
}
