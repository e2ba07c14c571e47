// SPDX-License-Identifier: BSD-3-Clause
/*
 * bench_agg.c - aggregator packet rate, on one core and on several.
 *
 * Pre-built DATA frames (Ethernet/IPv4/UDP/tally, K words each, as they
 * would sit in a DPDK rx burst) from W workers go through
 * tly_agg_rx_burst(): envelope and header validation, slot lookup, byte
 * swap and add.  Every completed slot builds its RESULT frame (headers and
 * byte-swapped sum) into a transmit buffer and hands it to a multicast
 * callback, the way a switch replicates one frame to W ports; the callback
 * only counts.  Receipts (CONFIRM, one per worker per 256 chunks) free the
 * slots.  Every pass uses fresh tensor ids (rewritten between passes, not
 * timed).  Counted: DATA packets in per second.  Best of the repetitions.
 *
 * Shards (-t T): T threads, each with its own aggregator and its own
 * frames, the way RSS splits flows over cores: a tensor belongs to the
 * shard its id hashes to, and each shard gets 8 / T of the pass's 8
 * tensors.  A shard still has a whole round (256 chunks) in flight at a
 * time, so it keeps a whole pool (SLOTS, and 256 fallback entries): the
 * same load factor as one thread.  The threads start every pass together
 * (a barrier); the rate is all shards' packets over the wall time of the
 * passes.
 *
 * Also the naive ceiling: a loop that only byte-swaps and adds the same
 * frames' payloads into slots, with no parsing and no results.
 *
 *   bench-agg [-t T] W K REPS CHUNKS [SLOTS]
 *   bench-agg -c engine|naive W K PASSES CHUNKS [SLOTS]
 *
 * -c runs PASSES passes (after one to warm up) with no clock, for an
 * instruction counter: tools/dataplane/agg-callgrind counts what runs
 * inside count_engine_pass() or count_naive_pass() and divides by the
 * DATA packets this prints.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/engine/agg.h"
#include "dataplane/engine/simd.h"

#define JOB 0x7a11
#define ROUNDS 8
#define BURST 32
#define PASSES 20
#define MAX_SHARDS ROUNDS	/* a shard has a tensor at least */

/* a function an instruction counter can find by its name */
#if defined(__clang__)
#define COUNTED __attribute__((noinline))
#else
#define COUNTED __attribute__((noipa))
#endif

struct frames {
	size_t len;		/* one DATA frame */
	uint8_t *data;		/* [round][chunk][worker] */
	uint8_t *confirm;	/* [round][worker] */
	size_t clen;
};

struct bench;

/* one aggregator with its frames and its transmit side */
struct shard {
	struct bench *b;
	unsigned int id, n_shards;
	uint32_t rounds;	/* tensors per pass: ROUNDS / shards */
	struct tly_agg *a;
	struct frames fr;
	uint32_t n_slots;
	uint32_t next_tensor;	/* tensor ids are searched from here */
	uint8_t (*txring)[8192];
	unsigned int tx_next;
	uint64_t tx_frames, tx_replicas;
	uint64_t passes;
	pthread_t thread;
};

struct bench {
	uint16_t w, k;
	uint32_t chunks;
	unsigned int n_shards;
	struct tly_addr addrs[TLY_MAX_WORKERS + 1];
	struct shard sh[MAX_SHARDS];
	pthread_barrier_t bar;
	int reps;
	double wall;		/* timed seconds of the current repetition */
};

static uint8_t *b_alloc(void *ctx, size_t len)
{
	struct shard *s = ctx;

	(void)len;
	return s->txring[s->tx_next++ & 63];
}

static void b_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	struct shard *s = ctx;

	(void)dst;
	(void)f;
	(void)len;
	s->tx_frames++;
}

static void b_multicast(void *ctx, uint64_t mask, uint8_t *f, size_t len)
{
	struct shard *s = ctx;

	(void)f;
	(void)len;
	s->tx_frames++;
	s->tx_replicas += (uint64_t)__builtin_popcountll(mask);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint8_t *data_frame(const struct frames *fr, uint32_t chunks,
			   uint16_t w, uint32_t r, uint32_t c, uint16_t x)
{
	return fr->data + (((size_t)r * chunks + c) * w + x) * fr->len;
}

static uint8_t *confirm_frame(const struct frames *fr, uint16_t w,
			      uint32_t r, uint16_t x)
{
	return fr->confirm + ((size_t)r * w + x) * fr->clen;
}

static void build(struct frames *fr, const struct tly_addr *addrs,
		  uint16_t w, uint16_t k, uint32_t chunks, uint32_t rounds)
{
	size_t tl = TLY_HDR_LEN + 4u * k;
	uint32_t r, c, i;
	uint16_t x;

	fr->len = TLY_L2L4_LEN + tl;
	fr->clen = TLY_L2L4_LEN + TLY_HDR_LEN + 8;
	fr->data = aligned_alloc(64, ((size_t)rounds * chunks * w * fr->len +
				      63) & ~(size_t)63);
	fr->confirm = calloc((size_t)rounds * w, fr->clen);
	if (!fr->data || !fr->confirm)
		exit(1);
	/* tensor, chunk and slot are filled in by retag() */
	for (r = 0; r < rounds; r++) {
		for (c = 0; c < chunks; c++)
			for (x = 0; x < w; x++) {
				uint8_t *f = data_frame(fr, chunks, w, r, c, x);
				struct tly_hdr h = {
					.type = TLY_T_DATA, .job = JOB,
					.rank = x, .chunk = (uint16_t)c,
					.shift = 20,
				};

				tly_l2l4_write(f, &addrs[x], &addrs[w], 40, tl);
				tly_hdr_write(f + TLY_L2L4_LEN, &h);
				for (i = 0; i < 4u * k; i++)
					f[TLY_L2L4_LEN + TLY_HDR_LEN + i] =
						(uint8_t)(i * 7 + x);
			}
		for (x = 0; x < w; x++) {
			uint8_t *f = confirm_frame(fr, w, r, x);
			uint8_t *p = f + TLY_L2L4_LEN + TLY_HDR_LEN;
			struct tly_hdr h = {
				.type = TLY_T_CONFIRM, .job = JOB, .rank = x,
				.aux = 1,
			};

			tly_l2l4_write(f, &addrs[x], &addrs[w], 0,
				       TLY_HDR_LEN + 8);
			tly_hdr_write(f + TLY_L2L4_LEN, &h);
			tly_put16(p + 4, 0);		/* first chunk */
			p[6] = 0;
			p[7] = (uint8_t)(chunks - 1);	/* count - 1 */
		}
	}
}

/* the shard a tensor's frames go to (RSS on the tensor id) */
static unsigned int shard_of(uint32_t tensor, unsigned int n_shards)
{
	return (unsigned int)((tly_chunk_hash(tensor, 0, 0) >> 32) %
			      n_shards);
}

/*
 * Give every frame of the shard fresh tensor ids (and their slots): tensor
 * ids are unique per iteration, and the aggregator drops a chunk it has
 * already completed and freed as a stray.  Not timed.
 */
static void retag(struct bench *b, struct shard *s)
{
	uint32_t r, c;
	uint16_t x;

	for (r = 0; r < s->rounds; r++) {
		uint32_t t = s->next_tensor++;

		while (shard_of(t, s->n_shards) != s->id)
			t = s->next_tensor++;
		for (c = 0; c < b->chunks; c++) {
			uint16_t slot = (uint16_t)tly_slot_of(t, (uint16_t)c, 0,
							      s->n_slots);

			for (x = 0; x < b->w; x++) {
				uint8_t *h = data_frame(&s->fr, b->chunks,
							b->w, r, c, x) +
					     TLY_L2L4_LEN;

				tly_put16(h + 6, slot);
				tly_put32(h + 8, t);
			}
		}
		for (x = 0; x < b->w; x++)
			tly_put32(confirm_frame(&s->fr, b->w, r, x) +
				  TLY_L2L4_LEN + TLY_HDR_LEN, t);
	}
}

/* one pass: every round's DATA in rx bursts of 32, then its receipts */
static void engine_pass(const struct bench *b, struct shard *s)
{
	size_t per_round = (size_t)b->chunks * b->w, i;
	uint32_t r;
	uint16_t x;

	for (r = 0; r < s->rounds; r++) {
		const uint8_t *f = data_frame(&s->fr, b->chunks, b->w, r, 0, 0);
		const uint8_t *burst[BURST];
		uint16_t lens[BURST];

		for (i = 0; i < per_round; i++, f += s->fr.len) {
			burst[i % BURST] = f;
			lens[i % BURST] = (uint16_t)s->fr.len;
			if (i % BURST == BURST - 1 || i + 1 == per_round)
				tly_agg_rx_burst(s->a, burst, lens,
						 i % BURST + 1, 0);
		}
		for (x = 0; x < b->w; x++)
			tly_agg_rx(s->a, confirm_frame(&s->fr, b->w, r, x),
				   s->fr.clen, 0);
	}
	s->passes++;
}

static void *shard_main(void *arg)
{
	struct shard *s = arg;
	struct bench *b = s->b;
	int p;

	for (p = 0; p < PASSES; p++) {
		double t0 = 0;

		retag(b, s);
		pthread_barrier_wait(&b->bar);
		if (!s->id)
			t0 = now_s();
		engine_pass(b, s);
		pthread_barrier_wait(&b->bar);
		if (!s->id)
			b->wall += now_s() - t0;
	}
	return NULL;
}

static int shards_create(struct bench *b, unsigned int n, uint32_t n_slots)
{
	unsigned int i;

	b->n_shards = n;
	for (i = 0; i < n; i++) {
		struct shard *s = &b->sh[i];
		struct tly_agg_cfg c = {
			.job = JOB, .k = b->k, .n_workers = b->w,
			.self = b->w, .n_slots = n_slots,
			.n_fallback = 256,
			.evict_ns = 1000000000, .probe_ns = 1000000000,
			.net = { .addrs = b->addrs, .n_nodes = b->w + 1,
				 .port = 9191 },
			.ops = { .alloc = b_alloc, .send = b_send,
				 .multicast = b_multicast, .ctx = s },
		};

		memset(s, 0, sizeof(*s));
		s->b = b;
		s->id = i;
		s->rounds = ROUNDS / n;
		s->n_shards = n;
		s->n_slots = c.n_slots;
		s->next_tensor = 1000;
		s->txring = aligned_alloc(64, 64 * sizeof(*s->txring));
		s->a = tly_agg_create(&c);
		if (!s->a || !s->txring)
			return -1;
		build(&s->fr, b->addrs, b->w, b->k, b->chunks, s->rounds);
	}
	return 0;
}

/*
 * Every chunk completes once per pass and receipts free its slot.  A
 * chunk whose primary slot and fallback probes were all taken gets BUSY
 * (a real worker would retry; the benchmark does not): allow a few.
 */
static int shards_check(const struct bench *b, uint64_t *results,
			uint64_t *busy)
{
	unsigned int i;

	*results = *busy = 0;
	for (i = 0; i < b->n_shards; i++) {
		const struct shard *s = &b->sh[i];
		const struct tly_counters *ct = tly_agg_counters(s->a);
		uint64_t want = (uint64_t)b->chunks * s->rounds * s->passes;

		if (ct->completions + ct->busy < want ||
		    ct->busy * 100 > want ||
		    tly_agg_slots_busy(s->a) > ct->busy ||
		    s->tx_frames != ct->completions + ct->busy) {
			fprintf(stderr, "bench_agg: shard %u: %llu "
				"completions, %llu busy, %u slots held\n", i,
				(unsigned long long)ct->completions,
				(unsigned long long)ct->busy,
				tly_agg_slots_busy(s->a));
			return -1;
		}
		*results += ct->completions;
		*busy += ct->busy;
	}
	return 0;
}

static void shards_destroy(struct bench *b)
{
	unsigned int i;

	for (i = 0; i < b->n_shards; i++) {
		tly_agg_destroy(b->sh[i].a);
		free(b->sh[i].txring);
		free(b->sh[i].fr.data);
		free(b->sh[i].fr.confirm);
	}
}

/* one repetition: PASSES passes of every shard, all shards' rate */
static double run_shards(struct bench *b)
{
	size_t per_pass = (size_t)b->sh[0].rounds * b->chunks * b->w;
	unsigned int i;

	b->wall = 0;
	for (i = 1; i < b->n_shards; i++)
		if (pthread_create(&b->sh[i].thread, NULL, shard_main,
				   &b->sh[i]))
			exit(1);
	shard_main(&b->sh[0]);
	for (i = 1; i < b->n_shards; i++)
		pthread_join(b->sh[i].thread, NULL);
	return (double)b->n_shards * PASSES * per_pass / b->wall;
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

static void naive_pass(uint32_t *slots, const struct bench *b,
		       const struct frames *fr)
{
	size_t per_round = (size_t)b->chunks * b->w, i;
	uint32_t r;

	for (r = 0; r < b->sh[0].rounds; r++) {
		const uint8_t *f = data_frame(fr, b->chunks, b->w, r, 0, 0);

		for (i = 0; i < per_round; i++, f += fr->len)
			naive_add(slots + (size_t)(i / b->w) * b->k,
				  f + TLY_L2L4_LEN + TLY_HDR_LEN, b->k);
	}
}

static COUNTED void count_naive_pass(uint32_t *slots,
				     const struct bench *b,
				     const struct frames *fr)
{
	naive_pass(slots, b, fr);
}

static double run_naive(uint32_t *slots, const struct bench *b)
{
	size_t per_pass = (size_t)b->sh[0].rounds * b->chunks * b->w;
	double t0 = now_s();
	int p;

	for (p = 0; p < PASSES; p++)
		naive_pass(slots, b, &b->sh[0].fr);
	return (double)PASSES * per_pass / (now_s() - t0);
}

static COUNTED void count_engine_pass(struct bench *b, struct shard *s)
{
	engine_pass(b, s);
}

static unsigned int cpus_available(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return (unsigned int)sysconf(_SC_NPROCESSORS_ONLN);
	return (unsigned int)CPU_COUNT(&set);
}

static void usage(void)
{
	fprintf(stderr, "usage: bench-agg [-t THREADS] W K REPS CHUNKS "
		"[SLOTS]\n       bench-agg -c engine|naive W K PASSES "
		"CHUNKS [SLOTS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct bench b;
	const char *count = NULL;
	unsigned int threads = 1;
	uint32_t n_slots = 1024, *slots;
	uint64_t results, busy;
	double best = 0, best_naive = 0;
	int i, opt;

	while ((opt = getopt(argc, argv, "t:c:")) != -1) {
		if (opt == 't')
			threads = (unsigned int)atoi(optarg);
		else if (opt == 'c')
			count = optarg;
		else
			usage();
	}
	argc -= optind;
	argv += optind;
	if (argc < 4 || threads < 1 || threads > ROUNDS)
		usage();
	b.w = (uint16_t)atoi(argv[0]);
	b.k = (uint16_t)atoi(argv[1]);
	b.reps = atoi(argv[2]);
	b.chunks = (uint32_t)atoi(argv[3]);
	if (argc > 4)
		n_slots = (uint32_t)atoi(argv[4]);
	if (!b.w || b.w > TLY_MAX_WORKERS || !b.chunks || b.chunks > 256 ||
	    b.reps < 1)
		usage();
	for (i = 0; i <= b.w; i++) {
		memset(&b.addrs[i], 0, sizeof(b.addrs[i]));
		b.addrs[i].mac[0] = 2;
		b.addrs[i].mac[5] = (uint8_t)i;
		b.addrs[i].ip = 0x0a000001u + i;
		b.addrs[i].port = 9191;
	}
	if (shards_create(&b, threads, n_slots))
		return 1;
	slots = aligned_alloc(64, (size_t)b.chunks * b.k * 4);
	if (!slots)
		return 1;
	memset(slots, 0, (size_t)b.chunks * b.k * 4);

	if (count) {
		/* fixed work, no clock: an instruction counter's run */
		size_t pkts = (size_t)ROUNDS * b.chunks * b.w * b.reps;
		int naive = !strcmp(count, "naive");

		if (!naive && strcmp(count, "engine"))
			usage();
		retag(&b, &b.sh[0]);
		engine_pass(&b, &b.sh[0]);		/* warm up */
		naive_pass(slots, &b, &b.sh[0].fr);
		for (i = 0; i < b.reps; i++) {
			retag(&b, &b.sh[0]);
			if (naive)
				count_naive_pass(slots, &b, &b.sh[0].fr);
			else
				count_engine_pass(&b, &b.sh[0]);
		}
		if (shards_check(&b, &results, &busy))
			return 1;
		printf("count %s W=%u K=%u: %zu DATA packets in "
		       "count_%s_pass(), results %llu, BUSY %llu\n", count,
		       b.w, b.k, pkts, count, (unsigned long long)results,
		       (unsigned long long)busy);
		printf("packets %zu\n", pkts);
		shards_destroy(&b);
		free(slots);
		return 0;
	}

	for (i = 0; i < (int)threads; i++) {		/* warm up */
		retag(&b, &b.sh[i]);
		engine_pass(&b, &b.sh[i]);
	}
	pthread_barrier_init(&b.bar, NULL, threads);
	/* best of the repetitions; one thread: the naive loop in turn */
	for (i = 0; i < b.reps; i++) {
		double m = run_shards(&b), n;

		best = m > best ? m : best;
		if (threads > 1)
			continue;
		n = run_naive(slots, &b);
		best_naive = n > best_naive ? n : best_naive;
	}
	pthread_barrier_destroy(&b.bar);
	if (shards_check(&b, &results, &busy))
		return 1;
	if (threads == 1) {
		printf("agg W=%u K=%u slots=%u: %.2f Mpps (%.1f Gb/s of "
		       "frames), naive swap+add %.2f Mpps; results built "
		       "%llu, BUSY %llu\n", b.w, b.k, n_slots, best / 1e6,
		       best * (b.sh[0].fr.len + 24) * 8 / 1e9,
		       best_naive / 1e6, (unsigned long long)results,
		       (unsigned long long)busy);
		printf("figure-line agg_mpps_w%u_k%u %.2f\n", b.w, b.k,
		       best / 1e6);
		printf("figure-line agg_naive_mpps_w%u_k%u %.2f\n", b.w, b.k,
		       best_naive / 1e6);
	} else {
		unsigned int cpus = cpus_available();

		printf("agg W=%u K=%u, %u shards of %u slots, one thread "
		       "each, on %u CPUs: %.2f Mpps together; results built "
		       "%llu, BUSY %llu\n", b.w, b.k, threads, n_slots, cpus,
		       best / 1e6,
		       (unsigned long long)results,
		       (unsigned long long)busy);
		if (cpus < threads + 1)
			printf("note: %u threads on %u CPUs, shared with "
			       "whatever else runs here: the threads contend "
			       "for cores and the rate is low for that "
			       "reason, not the engine's\n", threads, cpus);
		printf("figure-line agg_cpus %u\n", cpus);
		printf("figure-line agg_mpps_w%u_k%u_%uthreads %.2f\n", b.w,
		       b.k, threads, best / 1e6);
	}
	shards_destroy(&b);
	free(slots);
	return 0;
}
