// SPDX-License-Identifier: BSD-3-Clause
/*
 * agg.c - the aggregator's slot pool, fallback store and packet handling.
 */
#include "dataplane/engine/agg.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dataplane/compress/sign_ef.h"
#include "dataplane/compress/sparse.h"
#include "dataplane/engine/frame.h"
#include "dataplane/engine/quant.h"
#include "dataplane/engine/simd.h"

#define FB_PROBES	4
/*
 * The key of a slot that never held a chunk: no packet has it (a key's
 * bits 17..31 are 0).  A primary slot only ever takes keys whose hash
 * names it (slot_claim() runs on checked packets), so a DATA whose slot
 * holds its key needs no hash to prove its slot field right.
 */
#define KEY_NONE	(~0ull)

enum slot_state { SLOT_FREE = 0, SLOT_AGG, SLOT_DONE };

/* 64 bytes; what every DATA reads comes first */
struct agg_slot {
	uint64_t key;		/* tly_chunk_key() of the chunk held */
	uint64_t contrib;	/* workers whose contribution is in the sum */
	uint16_t count;
	uint8_t state;
	uint8_t mode;		/* TLY_F_EXP / TLY_F_INT / lane code */
	int8_t shift;
	uint8_t dscp;
	uint8_t fallback;
	uint8_t probes;
	uint64_t t_last;	/* AGG: last contribution; DONE: next probe */
	uint64_t confirmed;	/* DONE: workers that confirmed the result */
	uint16_t slot;		/* the chunk's primary slot index */
	uint8_t has_done;
	/* the DATA's aux (TLY_AUX_M): a sparse block's m(b), the
	 * contributions that complete it; an EXP slot's combine
	 * (TLY_AUX_COUNT: max and count); 0: n, max */
	uint8_t aux;
	/* set at claim from mode and aux (slot_common()): 0, agg_data()
	 * takes every DATA; else 1 + the common path's payload loop in
	 * tly_agg.common_add, so that path tests one byte */
	uint8_t common;
	uint16_t done_slot;	/* the tombstone's primary slot (fb_refs) */
	/* the chunk this entry last completed and freed (a tombstone),
	 * believed for tombstone_ns after done_ns; the switch profile has
	 * no tombstones and keeps the claim time here instead */
	union {
		uint64_t done_ns;
		uint64_t t_claim;
	};
	uint64_t done_key;
};
_Static_assert(sizeof(struct agg_slot) == 64, "agg_slot: one cache line");

/* the payload loops, picked once for the CPU (agg_kernels()) */
struct sum_kernels {
	void (*copy)(uint32_t *restrict sum, const uint8_t *pl, size_t k);
	void (*add)(uint32_t *restrict sum, const uint8_t *pl, size_t k);
	void (*max)(uint32_t *restrict sum, const uint8_t *pl, size_t k);
	void (*emit)(uint8_t *restrict pl, const uint32_t *sum, size_t k);
	void (*add_emit)(uint32_t *restrict sum, const uint8_t *pl,
			 uint8_t *restrict out, size_t k);
};

struct tly_agg {
	struct tly_agg_cfg cfg;
	struct tly_wire_limits lim;
	struct tly_data_rx fast;	/* DATA frames of this job */
	struct sum_kernels kern[3];	/* by lane code: int32, 16, 8 */
	/* agg_data_common()'s loop by agg_slot.common - 1: the add of
	 * each lane code, then the EXP max */
	void (*common_add[4])(uint32_t *restrict sum, const uint8_t *pl,
			      size_t k);
	struct tly_out_cache res_env;	/* the multicast RESULT's envelope */
	struct tly_counters c;
	uint64_t fb_magic;	/* n_fallback's reciprocal (fb_mod()) */
	uint64_t all;		/* bitmap of every worker */
	uint32_t n_total;	/* primary + fallback */
	/*
	 * By primary slot: the fallback entries that hold a chunk of that
	 * slot or keep a tombstone of one (NULL without a fallback store).
	 * Zero, the common case, proves that no fallback entry can match
	 * the slot's chunks: a chunk new there costs no hash and no probe.
	 */
	uint32_t *fb_refs;
	uint32_t busy;
	uint32_t cursor;	/* poll position */
	struct agg_slot *slots;
	uint32_t *sums;		/* n_total * k words, host order (mmap) */
	size_t sums_in;		/* bytes of it tly_agg_prefault() did */
	/* sign_ef count lanes: tly_sign_chunk_elems(k) bytes per entry,
	 * allocated when the first sign DATA arrives (8x the sums: see
	 * docs/compression.md section 3); a sign slot's sums[0] is its
	 * scale sum */
	uint8_t *counts;
};

/*
 * The payload loops.  Portable ones the compiler vectorises for the
 * baseline; on x86-64 with AVX2, explicit ones: a 32-byte load, one
 * vpshufb for the byte swap of 8 words, the add (or max) with the sum in
 * memory, a store, 4 of those per loop turn.
 */
static void sum_copy(uint32_t *restrict sum, const uint8_t *pl, size_t k)
{
	const tly_u32_una *w = (const tly_u32_una *)pl;
	size_t i;

	for (i = 0; i < k; i++)
		sum[i] = tly_be32(w[i]);
}

static void sum_add(uint32_t *restrict sum, const uint8_t *pl, size_t k)
{
	const tly_u32_una *w = (const tly_u32_una *)pl;
	size_t i;

	for (i = 0; i < k; i++)
		sum[i] += tly_be32(w[i]);	/* wraps: exact int32 mode */
}

static void sum_max(uint32_t *restrict sum, const uint8_t *pl, size_t k)
{
	const tly_u32_una *w = (const tly_u32_una *)pl;
	size_t i;

	for (i = 0; i < k; i++) {
		int32_t v = (int32_t)tly_be32(w[i]), m = (int32_t)sum[i];

		sum[i] = (uint32_t)(v > m ? v : m);
	}
}

static void sum_emit(uint8_t *restrict pl, const uint32_t *sum, size_t k)
{
	tly_u32_una *w = (tly_u32_una *)pl;
	size_t i;

	for (i = 0; i < k; i++)
		w[i] = tly_be32(sum[i]);
}

/* the last contribution: add, and write the RESULT's payload in the pass */
static void sum_add_emit(uint32_t *restrict sum, const uint8_t *pl,
			 uint8_t *restrict out, size_t k)
{
	const tly_u32_una *w = (const tly_u32_una *)pl;
	tly_u32_una *o = (tly_u32_una *)out;
	size_t i;

	for (i = 0; i < k; i++) {
		sum[i] += tly_be32(w[i]);
		o[i] = tly_be32(sum[i]);
	}
}

/*
 * Narrow lanes (docs/compression.md, section 2): the slot's k words hold
 * 2k int16 lanes (host order) or 4k int8 lanes.  Addition wraps at the
 * lane's width, which the narrow shift and limit keep from ever being
 * reached (n * lim < 2^(b-1)); tly_narrow_add() is the reference.  Plain
 * loops the compiler vectorises (a byte-swapping add of 16-bit lanes).
 */
static void lane16_copy(uint32_t *restrict sum, const uint8_t *pl, size_t k)
{
	uint16_t *s16 = (uint16_t *)sum;
	size_t i;

	for (i = 0; i < 2 * k; i++)
		s16[i] = tly_get16(pl + 2 * i);
}

static void lane16_add(uint32_t *restrict sum, const uint8_t *pl, size_t k)
{
	uint16_t *s16 = (uint16_t *)sum;
	size_t i;

	for (i = 0; i < 2 * k; i++)
		s16[i] = (uint16_t)(s16[i] + tly_get16(pl + 2 * i));
}

static void lane16_emit(uint8_t *restrict pl, const uint32_t *sum, size_t k)
{
	const uint16_t *s16 = (const uint16_t *)sum;
	size_t i;

	for (i = 0; i < 2 * k; i++)
		tly_put16(pl + 2 * i, s16[i]);
}

static void lane16_add_emit(uint32_t *restrict sum, const uint8_t *pl,
			    uint8_t *restrict out, size_t k)
{
	lane16_add(sum, pl, k);
	lane16_emit(out, sum, k);
}

static void lane8_copy(uint32_t *restrict sum, const uint8_t *pl, size_t k)
{
	memcpy(sum, pl, 4 * k);
}

static void lane8_add(uint32_t *restrict sum, const uint8_t *pl, size_t k)
{
	uint8_t *s8 = (uint8_t *)sum;
	size_t i;

	for (i = 0; i < 4 * k; i++)
		s8[i] = (uint8_t)(s8[i] + pl[i]);
}

static void lane8_emit(uint8_t *restrict pl, const uint32_t *sum, size_t k)
{
	memcpy(pl, sum, 4 * k);
}

static void lane8_add_emit(uint32_t *restrict sum, const uint8_t *pl,
			   uint8_t *restrict out, size_t k)
{
	lane8_add(sum, pl, k);
	lane8_emit(out, sum, k);
}

/* never called: an exponent round is never narrow (tly_lanes_ok()) */
static void lane_max(uint32_t *restrict sum, const uint8_t *pl, size_t k)
{
	(void)sum;
	(void)pl;
	(void)k;
}

static const struct sum_kernels lane_kernels[2] = {
	{ .copy = lane16_copy, .add = lane16_add, .max = lane_max,
	  .emit = lane16_emit, .add_emit = lane16_add_emit },
	{ .copy = lane8_copy, .add = lane8_add, .max = lane_max,
	  .emit = lane8_emit, .add_emit = lane8_add_emit },
};

/* the kernels of a slot's mode (its lane code; never SIGN: sign_*()) */
#define SLOT_KERN(a, mode)	(&(a)->kern[((mode) & TLY_F_LANES) >> 6])
/* what a slot's DATA must agree on */
#define MODE_BITS	(TLY_F_EXP | TLY_F_INT | TLY_F_LANES)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

static AVX2 inline __m256i be_swap8(__m256i v)
{
	const __m256i swap = _mm256_setr_epi8(
		3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
		3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);

	return _mm256_shuffle_epi8(v, swap);
}

static AVX2 inline __m256i ld8(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

static AVX2 inline void st8(void *p, __m256i v)
{
	_mm256_storeu_si256((__m256i *)p, v);
}

/*
 * 8 lanes at @j * 8: the new sum from the old one and the swapped payload
 * (OP), stored; STEP_EMIT also stores it swapped into the RESULT.
 */
#define STEP(OP, j)							\
	st8(sum + 8 * (j), OP(ld8(sum + 8 * (j)),			\
			      be_swap8(ld8(pl + 32 * (j)))))
#define STEP_EMIT(OP, j) do {						\
	__m256i s_ = OP(ld8(sum + 8 * (j)), be_swap8(ld8(pl + 32 * (j)))); \
									\
	st8(sum + 8 * (j), s_);						\
	st8(out + 32 * (j), be_swap8(s_));				\
} while (0)
#define STEP8(S, OP)							\
	do {								\
		S(OP, 0); S(OP, 1); S(OP, 2); S(OP, 3);			\
		S(OP, 4); S(OP, 5); S(OP, 6); S(OP, 7);			\
	} while (0)

/* 64 lanes a turn, then 8, then the portable loop for the last k % 8 */
#define AVX2_LOOP(name, OP, scalar)					\
static AVX2 void name(uint32_t *restrict sum, const uint8_t *pl,	\
		      size_t k)						\
{									\
	const uint32_t *end = sum + (k & ~(size_t)63);			\
									\
	for (; sum != end; sum += 64, pl += 256)			\
		STEP8(STEP, OP);					\
	for (end += k & 56; sum != end; sum += 8, pl += 32)		\
		STEP(OP, 0);						\
	if (k & 7)							\
		scalar(sum, pl, k & 7);					\
}

#define OP_COPY(s, v)	(v)
#define OP_ADD(s, v)	_mm256_add_epi32(s, v)
#define OP_MAX(s, v)	_mm256_max_epi32(s, v)

AVX2_LOOP(sum_copy_avx2, OP_COPY, sum_copy)
AVX2_LOOP(sum_add_avx2, OP_ADD, sum_add)
AVX2_LOOP(sum_max_avx2, OP_MAX, sum_max)

static AVX2 void sum_add_emit_avx2(uint32_t *restrict sum, const uint8_t *pl,
				   uint8_t *restrict out, size_t k)
{
	const uint32_t *end = sum + (k & ~(size_t)63);

	for (; sum != end; sum += 64, pl += 256, out += 256)
		STEP8(STEP_EMIT, OP_ADD);
	for (end += k & 56; sum != end; sum += 8, pl += 32, out += 32)
		STEP_EMIT(OP_ADD, 0);
	if (k & 7)
		sum_add_emit(sum, pl, out, k & 7);
}

static AVX2 void sum_emit_avx2(uint8_t *restrict out, const uint32_t *sum,
			       size_t k)
{
	const uint32_t *end = sum + (k & ~(size_t)63);

#define EMIT(unused, j) st8(out + 32 * (j), be_swap8(ld8(sum + 8 * (j))))
	for (; sum != end; sum += 64, out += 256)
		STEP8(EMIT, 0);
	for (end += k & 56; sum != end; sum += 8, out += 32)
		EMIT(0, 0);
#undef EMIT
	if (k & 7)
		sum_emit(out, sum, k & 7);
}

/* K a multiple of 64 (256, 1024): the 64-lane turns alone, no tails */
#define AVX2_LOOP64(name, OP)						\
static AVX2 void name(uint32_t *restrict sum, const uint8_t *pl,	\
		      size_t k)						\
{									\
	const uint32_t *end = sum + k;					\
									\
	do								\
		STEP8(STEP, OP);					\
	while (sum += 64, pl += 256, sum != end);			\
}

AVX2_LOOP64(sum_copy_avx2_64, OP_COPY)
AVX2_LOOP64(sum_add_avx2_64, OP_ADD)
AVX2_LOOP64(sum_max_avx2_64, OP_MAX)

static AVX2 void sum_add_emit_avx2_64(uint32_t *restrict sum,
				      const uint8_t *pl,
				      uint8_t *restrict out, size_t k)
{
	const uint32_t *end = sum + k;

	do
		STEP8(STEP_EMIT, OP_ADD);
	while (sum += 64, pl += 256, out += 256, sum != end);
}
#endif

static struct sum_kernels agg_kernels(int portable, uint16_t k)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (!portable && __builtin_cpu_supports("avx2") && k % 64 == 0)
		return (struct sum_kernels){
			.copy = sum_copy_avx2_64, .add = sum_add_avx2_64,
			.max = sum_max_avx2_64, .emit = sum_emit_avx2,
			.add_emit = sum_add_emit_avx2_64,
		};
	if (!portable && __builtin_cpu_supports("avx2"))
		return (struct sum_kernels){
			.copy = sum_copy_avx2, .add = sum_add_avx2,
			.max = sum_max_avx2, .emit = sum_emit_avx2,
			.add_emit = sum_add_emit_avx2,
		};
#endif
	(void)portable;
	(void)k;
	return (struct sum_kernels){
		.copy = sum_copy, .add = sum_add, .max = sum_max,
		.emit = sum_emit, .add_emit = sum_add_emit,
	};
}

#ifdef __SIZEOF_INT128__
/* x % n without a divide (Lemire's fastmod, exact for 32-bit x and n) */
static inline uint32_t fb_mod(const struct tly_agg *a, uint32_t x)
{
	uint64_t low = a->fb_magic * x;

	return (uint32_t)(((unsigned __int128)low * a->cfg.n_fallback) >> 64);
}
#else
static inline uint32_t fb_mod(const struct tly_agg *a, uint32_t x)
{
	return x % a->cfg.n_fallback;
}
#endif

/* the size of the sums' mapping: k words for every slot */
static size_t sums_bytes(const struct tly_agg *a)
{
	return (size_t)a->n_total * a->cfg.k * 4;
}

struct tly_agg *tly_agg_create(const struct tly_agg_cfg *cfg)
{
	struct tly_agg *a;

	if (!cfg->n_workers || cfg->n_workers > TLY_MAX_WORKERS ||
	    cfg->k < TLY_K_MIN || cfg->k > TLY_K_MAX || !cfg->n_slots ||
	    cfg->n_slots > TLY_MAX_SLOTS || !cfg->ops.alloc ||
	    !cfg->ops.send ||
	    (cfg->net.addrs && cfg->self >= cfg->net.n_nodes))
		return NULL;
	if (cfg->profile > TLY_PROFILE_SWITCH ||
	    (cfg->profile == TLY_PROFILE_SWITCH &&
	     (cfg->n_workers > TLY_SWITCH_MAX_WORKERS ||
	      !tly_switch_k_ok(cfg->k))))
		return NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->cfg = *cfg;
	if (cfg->profile == TLY_PROFILE_SWITCH)
		a->cfg.n_fallback = 0;	/* no second table */
	if (!a->cfg.poll_budget)
		a->cfg.poll_budget = 64;
	if (!a->cfg.tombstone_ns)
		a->cfg.tombstone_ns = 4 * a->cfg.evict_ns;
	a->lim = (struct tly_wire_limits){
		.job = cfg->job, .cookie = cfg->cookie, .k = cfg->k,
		.n_ranks = cfg->n_workers,
		.n_slots = cfg->n_slots, .n_hops = 0,
		.profile = cfg->profile,
	};
	tly_data_rx_init(&a->fast, &a->lim, cfg->net.addrs != NULL,
			 cfg->net.port);
	a->kern[0] = agg_kernels(cfg->portable_loops, cfg->k);
	a->kern[1] = lane_kernels[0];
	a->kern[2] = lane_kernels[1];
	for (int i = 0; i < 3; i++)
		a->common_add[i] = a->kern[i].add;
	a->common_add[3] = a->kern[0].max;
	if (a->cfg.n_fallback)
		a->fb_magic = UINT64_MAX / a->cfg.n_fallback + 1;
	a->all = cfg->n_workers == 64 ? ~0ull : (1ull << cfg->n_workers) - 1;
	a->n_total = cfg->n_slots + a->cfg.n_fallback;
	a->slots = aligned_alloc(64, (size_t)a->n_total * sizeof(*a->slots));
	if (a->cfg.n_fallback)
		a->fb_refs = calloc(cfg->n_slots, sizeof(*a->fb_refs));
	/*
	 * The sums from the kernel, zero and not yet touched: the owning
	 * dataplane thread faults them in on its idle turns
	 * (tly_agg_prefault()), or the first chunk to use a page does.
	 * Zeroing them here (5.3 MB for the default pool) cost 38-43 ms
	 * of page faults on the daemon's control thread at every roster,
	 * where every job's heartbeats wait; faulting them in chunk by
	 * chunk added 150 us to a 4 KiB all-reduce (tools/emu-bench).
	 */
	a->sums = mmap(NULL, sums_bytes(a), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a->sums == MAP_FAILED)
		a->sums = NULL;
	if (!a->slots || !a->sums || (a->cfg.n_fallback && !a->fb_refs)) {
		tly_agg_destroy(a);
		return NULL;
	}
	memset(a->slots, 0, (size_t)a->n_total * sizeof(*a->slots));
	for (size_t i = 0; i < a->n_total; i++)
		a->slots[i].key = KEY_NONE;
	return a;
}

void tly_agg_destroy(struct tly_agg *a)
{
	if (!a)
		return;
	free(a->slots);
	free(a->fb_refs);
	if (a->sums)
		munmap(a->sums, sums_bytes(a));
	free(a->counts);
	free(a);
}

int tly_agg_prefault(struct tly_agg *a, size_t max_bytes)
{
	size_t total = sums_bytes(a), page, len;

	if (a->sums_in >= total)
		return 0;	/* every idle turn from now on: nothing more */
	page = (size_t)sysconf(_SC_PAGESIZE);
	len = (max_bytes + page - 1) / page * page;
	if (len > total - a->sums_in)
		len = total - a->sums_in;
	/* write faults by the kernel's loop, no trap per page; a kernel
	 * without it (before 5.14) leaves the pages to fault on first use */
	if (madvise((uint8_t *)a->sums + a->sums_in, len,
		    MADV_POPULATE_WRITE)) {
		a->sums_in = total;
		return 0;
	}
	a->sums_in += len;
	return 1;
}

const struct tly_counters *tly_agg_counters(const struct tly_agg *a)
{
	return &a->c;
}

uint32_t tly_agg_slots_busy(const struct tly_agg *a)
{
	return a->busy;
}

static inline uint32_t *slot_sum(struct tly_agg *a, uint32_t idx)
{
	return a->sums + (size_t)idx * a->cfg.k;
}

/*
 * sign_ef slots (docs/compression.md section 3): an 8-bit count lane per
 * element and the scale words' sum; every worker's bits enter once (the
 * contributor bitmap), so no lane passes n <= 64.
 */
static inline int mode_sign(uint8_t mode)
{
	return (mode & TLY_F_LANES) == TLY_F_SIGN;
}

/*
 * What agg_data_common() may do with a slot of @mode and @aux: 0 when
 * every DATA goes through agg_data() (sign_ef counts, a sparse block's
 * or an EXP count's rule), else 1 + the index of its payload loop in
 * tly_agg.common_add (the add of its lane code; EXP: the signed max).
 */
static inline uint8_t slot_common(uint8_t mode, uint8_t aux)
{
	if (mode_sign(mode) || aux)
		return 0;
	if (mode & TLY_F_EXP)
		return 4;
	return (uint8_t)(1 + ((mode & TLY_F_LANES) >> 6));
}

static struct tly_sign_acc sign_acc(struct tly_agg *a, uint32_t idx)
{
	size_t m = tly_sign_chunk_elems(a->cfg.k);

	return (struct tly_sign_acc){ .scale_sum = slot_sum(a, idx)[0],
				      .count = a->counts + idx * m, .m = m };
}

static void sign_add(struct tly_agg *a, uint32_t idx, const uint8_t *pl,
		     int first)
{
	struct tly_sign_acc acc = sign_acc(a, idx);

	if (first)
		tly_sign_acc_init(&acc, acc.count, acc.m);
	tly_sign_acc_add(&acc, pl);
	slot_sum(a, idx)[0] = acc.scale_sum;
}

/* the count lanes of every entry, once; 0 or -1 (no memory: BUSY) */
static int sign_ready(struct tly_agg *a)
{
	if (!a->counts)
		a->counts = malloc((size_t)a->n_total *
				   tly_sign_chunk_elems(a->cfg.k));
	return a->counts ? 0 : -1;
}

static inline int slot_is(const struct agg_slot *s, uint64_t key)
{
	return s->state != SLOT_FREE && s->key == key;
}

static inline int slot_evictable(const struct tly_agg *a,
				 const struct agg_slot *s, uint64_t now)
{
	return s->state == SLOT_FREE ||
	       (s->state == SLOT_AGG && now - s->t_last >= a->cfg.evict_ns);
}

/* where the chunk's fallback probes start (hash2 % n_fallback) */
static inline uint32_t fb_base(const struct tly_agg *a, uint64_t hash)
{
	return fb_mod(a, tly_fallback_hash(hash));
}

/* the i-th fallback entry from @base (i < n_fallback) */
static inline uint32_t fb_entry(const struct tly_agg *a, uint32_t base,
				uint32_t i)
{
	uint32_t j = base + i;

	if (j >= a->cfg.n_fallback)
		j -= a->cfg.n_fallback;
	return a->cfg.n_slots + j;
}

static inline int fb_may_hold(const struct tly_agg *a, uint16_t primary)
{
	return a->fb_refs && a->fb_refs[primary];
}

static void slot_release(struct tly_agg *a, struct agg_slot *s,
			 uint64_t now)
{
	if (s->state == SLOT_DONE && a->cfg.profile != TLY_PROFILE_SWITCH) {
		if (s->fallback) {
			/* the tombstone moves to this chunk's primary */
			if (s->has_done)
				a->fb_refs[s->done_slot]--;
			a->fb_refs[s->slot]++;
			s->done_slot = s->slot;
		}
		s->done_ns = now;
		s->done_key = s->key;
		s->has_done = 1;
	}
	if (s->state != SLOT_FREE) {
		a->busy--;
		if (s->fallback)
			a->fb_refs[s->slot]--;
	}
	s->state = SLOT_FREE;
}

static void slot_claim(struct tly_agg *a, uint32_t idx,
		       const struct tly_hdr *h, uint64_t key, uint64_t now)
{
	struct agg_slot *s = &a->slots[idx];

	if (s->state == SLOT_AGG)
		a->c.evictions++;
	slot_release(a, s, now);
	s->state = SLOT_AGG;
	s->key = key;
	s->slot = h->slot;
	s->mode = h->flags & MODE_BITS;
	s->shift = h->shift;
	s->aux = h->aux & TLY_AUX_M;
	s->common = slot_common(s->mode, s->aux);
	s->contrib = 0;
	s->confirmed = 0;
	s->count = 0;
	s->probes = 0;
	s->t_last = now;
	s->fallback = idx >= a->cfg.n_slots;
	if (a->cfg.profile == TLY_PROFILE_SWITCH)
		s->t_claim = now;	/* for tly_agg_sweep() only */
	a->busy++;
	if (s->fallback)
		a->fb_refs[h->slot]++;
}

/*
 * A tombstone is believed for tombstone_ns only: strays arrive within a
 * network delay of the last receipt, while a later job of the same wire
 * id may use the chunk's id again (its tensor keys and iterations restart
 * on daemons that outlive it) and must get in; until the tombstone ends
 * its contributions are dropped and retransmitted.
 */
static inline int slot_finished(const struct tly_agg *a,
				 const struct agg_slot *s, uint64_t key,
				 uint64_t now)
{
	return s->has_done && now - s->done_ns < a->cfg.tombstone_ns &&
	       s->done_key == key;
}

/*
 * The fallback entries a chunk may use, from @base: the one holding it
 * (its index), else -1; *finished (if given) is set where one keeps its
 * tombstone.
 */
static int64_t fb_scan(const struct tly_agg *a, uint32_t base, uint64_t key,
		       uint64_t now, int *finished)
{
	uint32_t i;

	for (i = 0; i < FB_PROBES && i < a->cfg.n_fallback; i++) {
		uint32_t j = fb_entry(a, base, i);

		if (slot_is(&a->slots[j], key))
			return j;
		if (finished)
			*finished |= slot_finished(a, &a->slots[j], key, now);
	}
	return -1;
}

/* the fallback entry holding the chunk of @primary, or -1 */
static int64_t fb_find(const struct tly_agg *a, uint16_t primary,
		       uint64_t key, uint64_t hash)
{
	if (!fb_may_hold(a, primary))
		return -1;
	return fb_scan(a, fb_base(a, hash), key, 0, NULL);
}

/* a free (or evictable) fallback entry claimed for the chunk, or -1 */
static int64_t fb_claim(struct tly_agg *a, const struct tly_hdr *h,
			uint64_t key, uint64_t now)
{
	uint32_t base, i;

	if (!a->cfg.n_fallback)
		return -1;
	base = fb_base(a, tly_key_hash(key));
	for (i = 0; i < FB_PROBES && i < a->cfg.n_fallback; i++) {
		uint32_t j = fb_entry(a, base, i);

		if (slot_evictable(a, &a->slots[j], now)) {
			slot_claim(a, j, h, key, now);
			return j;
		}
	}
	return -1;
}

/*
 * Where a contribution goes whose primary slot does not hold its chunk:
 * the fallback entry holding it, a free (or evictable) primary slot, a
 * free fallback entry; -1 if none (BUSY), -2 for a stray of a chunk that
 * completed here and was confirmed by every worker (nobody waits for
 * it).  At most 2 * FB_PROBES + 1 entries seen, and only the primary
 * (no hash) where fb_refs says no fallback entry can match.
 */
static int64_t slot_for_new(struct tly_agg *a, const struct tly_hdr *h,
			    uint64_t key, uint64_t now)
{
	int finished = slot_finished(a, &a->slots[h->slot], key, now);

	if (fb_may_hold(a, h->slot)) {
		int64_t idx = fb_scan(a, fb_base(a, tly_key_hash(key)), key,
				      now, &finished);

		if (idx >= 0)
			return idx;
	}
	if (finished)
		return -2;
	if (slot_evictable(a, &a->slots[h->slot], now)) {
		slot_claim(a, h->slot, h, key, now);
		return h->slot;
	}
	return fb_claim(a, h, key, now);
}

static void hdr_for_slot(struct tly_hdr *h, const struct agg_slot *s,
			 uint8_t type, uint16_t rank)
{
	*h = (struct tly_hdr){
		.type = type, .flags = s->mode, .rank = rank,
		.slot = s->slot, .tensor = (uint32_t)(s->key >> 32),
		.chunk = (uint16_t)(s->key >> 1),
	};
	if (s->fallback)
		h->flags |= TLY_F_FALLBACK;
}

/* a reply (ACK or BUSY) echoing the packet's key; @extra: TLY_F_FALLBACK
 * or TLY_F_RELEASED; @n_rc receipts @rc after the header (the switch
 * profile's ACK of a CONFIRM echoes them), else header-only */
static void agg_reply_echo(struct tly_agg *a, const struct tly_hdr *in,
			   uint8_t type, uint8_t dscp, uint8_t extra,
			   const uint8_t *rc, uint8_t n_rc)
{
	size_t rl = (size_t)n_rc * TLY_RECEIPT_LEN;
	struct tly_out o;
	struct tly_hdr h = *in;

	if (tly_out_begin(&o, &a->cfg.ops, &a->cfg.net, &a->c, a->cfg.self,
			  in->rank, dscp, TLY_HDR_LEN + rl))
		return;
	h.type = type;
	h.flags = (in->flags & (TLY_F_EXP | TLY_F_INT)) | extra;
	h.shift = 0;
	h.aux = n_rc;		/* a DATA's m(b) or PULL is not echoed */
	h.job = a->cfg.job;
	h.cookie = a->cfg.cookie;
	tly_hdr_write(o.pkt, &h);
	if (rl)
		memcpy(o.pkt + TLY_HDR_LEN, rc, rl);
	tly_out_send(&o, &a->cfg.ops, &a->cfg.net, &a->c);
	if (type == TLY_T_ACK)
		a->c.acks++;
	else
		a->c.busy++;
}

static void agg_reply(struct tly_agg *a, const struct tly_hdr *in,
		      uint8_t type, uint8_t dscp, uint8_t extra)
{
	agg_reply_echo(a, in, type, dscp, extra, NULL, 0);
}

/*
 * The RESULT of slot @idx to @rank, or to the result group with
 * TLY_RANK_ALL (the frame is addressed to worker 0, whose envelope is
 * cached, and carries rank TLY_RANK_ALL).  @last, when not NULL, is the
 * contribution that completes the slot, not yet added: it is added in the
 * same pass that writes the payload, and added alone when no frame can be
 * had (the slot keeps the whole sum for later probes).
 */
static int result_build(struct tly_agg *a, uint32_t idx, uint16_t rank,
			uint8_t extra_flags, const uint8_t *last,
			struct tly_out *o)
{
	struct agg_slot *s = &a->slots[idx];
	size_t tl = TLY_HDR_LEN + 4u * a->cfg.k;
	struct tly_hdr h;
	int r;

	if (rank == 0 || rank == TLY_RANK_ALL)
		r = tly_out_begin_cached(o, &a->cfg.ops, &a->cfg.net, &a->c,
					 &a->res_env, a->cfg.self, 0, s->dscp,
					 tl);
	else
		r = tly_out_begin(o, &a->cfg.ops, &a->cfg.net, &a->c,
				  a->cfg.self, rank, s->dscp, tl);
	if (r) {
		if (last)
			SLOT_KERN(a, s->mode)->add(slot_sum(a, idx), last,
						   a->cfg.k);
		return -1;
	}
	hdr_for_slot(&h, s, TLY_T_RESULT, rank);
	if (s->mode & TLY_F_EXP)
		h.aux = s->aux;		/* the round's combine */
	h.flags |= extra_flags;
	h.job = a->cfg.job;
	h.cookie = a->cfg.cookie;
	h.shift = s->shift;
	if (mode_sign(s->mode)) {
		struct tly_sign_acc acc = sign_acc(a, idx);

		tly_hdr_write(o->pkt, &h);
		tly_sign_result(o->pkt + TLY_HDR_LEN, &acc, a->cfg.n_workers,
				tly_sign_tie_seed(h.tensor, h.chunk));
		return 0;
	}
	tly_hdr_write(o->pkt, &h);
	if (last)
		SLOT_KERN(a, s->mode)->add_emit(slot_sum(a, idx), last,
						o->pkt + TLY_HDR_LEN, a->cfg.k);
	else
		SLOT_KERN(a, s->mode)->emit(o->pkt + TLY_HDR_LEN,
					    slot_sum(a, idx), a->cfg.k);
	return 0;
}

static void result_unicast(struct tly_agg *a, uint32_t idx, uint16_t rank)
{
	struct tly_out o;

	if (!result_build(a, idx, rank, TLY_F_RETX, NULL, &o))
		tly_out_send(&o, &a->cfg.ops, &a->cfg.net, &a->c);
}

/* the RESULT to every worker: one frame replicated (the same bytes to a
 * result group: rank TLY_RANK_ALL), or one per worker (@last: as in
 * result_build()) */
static void result_to_all(struct tly_agg *a, uint32_t idx,
			  const uint8_t *last)
{
	const struct tly_net *net = &a->cfg.net;
	struct tly_out o, o2;
	uint16_t r;

	if (result_build(a, idx, a->cfg.ops.multicast_group ? TLY_RANK_ALL :
			 0, 0, last, &o))
		return;
	if (a->cfg.ops.multicast) {
		size_t tl = o.len - tly_l2l4_off(net);

		a->c.tx_pkts += a->cfg.n_workers;
		a->c.tx_bytes += (uint64_t)tl * a->cfg.n_workers;
		a->c.tx_frame_bytes += (uint64_t)(TLY_L2L4_LEN + tl +
				       TLY_WIRE_EXTRA) * a->cfg.n_workers;
		a->cfg.ops.multicast(a->cfg.ops.ctx, a->all, o.frame, o.len);
		return;
	}
	for (r = 1; r < a->cfg.n_workers; r++) {
		o2.len = o.len;
		o2.dst = r;
		o2.frame = a->cfg.ops.alloc(a->cfg.ops.ctx, o.len);
		if (!o2.frame) {
			a->c.tx_nobuf++;
			continue;
		}
		memcpy(o2.frame, o.frame, o.len);
		if (net->addrs)
			tly_frame_readdress(o2.frame, &net->addrs[r], r);
		else
			tly_frame_readdress_bare(o2.frame, r);
		tly_out_send(&o2, &a->cfg.ops, net, &a->c);
	}
	tly_out_send(&o, &a->cfg.ops, net, &a->c);
}

/*
 * block_topk's exponent round (EXP aux TLY_AUX_COUNT): each lane keeps
 * E * 256 + m, the max of the workers' words and how many were not
 * TLY_EXP_NONE (docs/compression.md section 4); the RESULT word as is.
 */
static void exp_count(uint32_t *sum, const uint8_t *pl, size_t k, int first)
{
	size_t i;

	for (i = 0; i < k; i++) {
		struct tly_sparse_exp_lane l = { TLY_EXP_NONE, 0 };
		int32_t e = (int32_t)tly_get32(pl + 4 * i);
		unsigned int m;

		if (!first) {
			tly_sparse_exp_unword(sum[i], &l.exp, &m);
			l.senders = (uint8_t)m;
		}
		tly_sparse_exp_add(&l, &e, 1);
		sum[i] = tly_sparse_exp_word(l.exp, l.senders);
	}
}

/* contributions that complete slot @s: a sparse block's m(b), else n */
static inline unsigned int slot_target(const struct tly_agg *a,
				       const struct agg_slot *s)
{
	return s->aux && !(s->mode & TLY_F_EXP) ? s->aux : a->cfg.n_workers;
}

/*
 * A non-sender's PULL of a sparse block (aux TLY_AUX_PULL): never claims
 * a slot nor adds.  The RESULT again if the block is done, an ACK while
 * it collects; nothing where no slot holds it (the puller retries).
 */
static void agg_pull(struct tly_agg *a, const struct tly_hdr *h,
		     uint64_t key, uint8_t dscp)
{
	int64_t idx = slot_is(&a->slots[h->slot], key) ? h->slot :
		      fb_find(a, h->slot, key, tly_key_hash(key));
	struct agg_slot *s;

	if (idx < 0) {
		a->c.drops[TLY_E_STALE]++;
		return;
	}
	s = &a->slots[idx];
	if (s->mode != (h->flags & MODE_BITS) ||
	    s->aux != (h->aux & TLY_AUX_M)) {
		a->c.drops[TLY_E_MISMATCH]++;
		return;
	}
	if (s->state == SLOT_DONE) {
		a->c.retx++;
		result_unicast(a, (uint32_t)idx, h->rank);
		return;
	}
	agg_reply(a, h, TLY_T_ACK, dscp, s->fallback ? TLY_F_FALLBACK : 0);
}

/* a DATA that passed every check of the wire (tly_data_rx() or the
 * general parser): the slot machine of docs/protocol.md */
static void agg_data(struct tly_agg *a, const struct tly_hdr *h,
		     uint64_t key, const uint8_t *pl, uint8_t dscp,
		     uint64_t now)
{
	uint64_t bit = 1ull << h->rank;
	struct agg_slot *s = &a->slots[h->slot];
	uint32_t *sum;
	int64_t idx = h->slot;
	int last;

	if (h->aux & TLY_AUX_PULL) {
		agg_pull(a, h, key, dscp);
		return;
	}
	if (mode_sign(h->flags) && !slot_is(s, key) && sign_ready(a)) {
		agg_reply(a, h, TLY_T_BUSY, dscp, 0);
		return;
	}
	if (!slot_is(s, key) && a->cfg.profile == TLY_PROFILE_SWITCH) {
		/* one table, no eviction here: a free slot or BUSY */
		if (s->state != SLOT_FREE) {
			agg_reply(a, h, TLY_T_BUSY, dscp, 0);
			return;
		}
		slot_claim(a, h->slot, h, key, now);
	} else if (!slot_is(s, key)) {
		idx = slot_for_new(a, h, key, now);
		if (idx == -2) {
			a->c.drops[TLY_E_STALE]++;
			return;
		}
		if (idx < 0) {
			agg_reply(a, h, TLY_T_BUSY, dscp, 0);
			return;
		}
		s = &a->slots[idx];
	}
	if (s->state == SLOT_DONE) {
		/* late or duplicate: the sender has not seen the result */
		a->c.dups++;
		a->c.retx++;
		result_unicast(a, (uint32_t)idx, h->rank);
		return;
	}
	if (s->mode != (h->flags & MODE_BITS) || s->shift != h->shift ||
	    s->aux != (h->aux & TLY_AUX_M)) {
		a->c.drops[TLY_E_MISMATCH]++;
		return;
	}
	if (s->contrib & bit) {
		a->c.dups++;
		if (h->flags & (TLY_F_ACK_REQ | TLY_F_RETX))
			agg_reply(a, h, TLY_T_ACK, dscp,
				  s->fallback ? TLY_F_FALLBACK : 0);
		return;
	}
	sum = slot_sum(a, (uint32_t)idx);
	/* the last of several sums is added while the RESULT is written */
	last = s->count + 1u == slot_target(a, s) && s->count &&
	       !(s->mode & TLY_F_EXP) && !mode_sign(s->mode);
	if (mode_sign(s->mode))
		sign_add(a, (uint32_t)idx, pl, !s->count);
	else if ((s->mode & TLY_F_EXP) && s->aux)
		exp_count(sum, pl, a->cfg.k, !s->count);
	else if (!s->count)
		SLOT_KERN(a, s->mode)->copy(sum, pl, a->cfg.k);
	else if (s->mode & TLY_F_EXP)
		a->kern[0].max(sum, pl, a->cfg.k);
	else if (!last)
		SLOT_KERN(a, s->mode)->add(sum, pl, a->cfg.k);
	s->contrib |= bit;
	s->count++;
	s->t_last = now;
	s->dscp = dscp;
	if (s->fallback)
		a->c.fallback++;
	if (s->count == slot_target(a, s)) {
		s->state = SLOT_DONE;
		s->t_last = now + a->cfg.probe_ns;
		a->c.completions++;
		result_to_all(a, (uint32_t)idx, last ? pl : NULL);
	} else if (h->flags & TLY_F_ACK_REQ) {
		agg_reply(a, h, TLY_T_ACK, dscp,
			  s->fallback ? TLY_F_FALLBACK : 0);
	}
}

/*
 * The common DATA, kept out of agg_data()'s call: entry @idx (its
 * primary slot, or the fallback entry fb_find() found) collects its
 * chunk, in its mode and shift, the sender is new, and it neither
 * completes the slot nor asks for an ACK.  Exactly what agg_data() does
 * for such a packet (the caller counts a fallback contribution);
 * everything else goes there.
 */
static inline int agg_data_common(struct tly_agg *a, uint32_t idx,
				  const struct tly_hdr *h, uint64_t key,
				  const uint8_t *pl, uint8_t dscp,
				  uint64_t now)
{
	struct agg_slot *s = &a->slots[idx];
	uint64_t bit = 1ull << h->rank;

	if (s->key != key || s->state != SLOT_AGG || !s->common ||
	    s->mode != (h->flags & MODE_BITS) ||
	    s->shift != h->shift || (s->contrib & bit) || !s->count ||
	    s->count + 1u >= a->cfg.n_workers || (h->flags & TLY_F_ACK_REQ))
		return 0;
	a->common_add[s->common - 1](slot_sum(a, idx), pl, a->cfg.k);
	s->contrib |= bit;
	s->count++;
	s->t_last = now;
	s->dscp = dscp;
	return 1;
}

static void agg_confirm_one(struct tly_agg *a, uint32_t tensor,
			    uint16_t chunk, uint8_t exp, uint64_t bit,
			    uint64_t now)
{
	uint64_t key = tly_chunk_key(tensor, chunk, exp);
	uint64_t hash = tly_key_hash(key);
	uint16_t slot = (uint16_t)tly_hash_range((uint32_t)hash,
						 a->cfg.n_slots);
	struct agg_slot *s;
	int64_t idx;

	idx = slot_is(&a->slots[slot], key) ? slot :
	      fb_find(a, slot, key, hash);
	if (idx < 0)
		return;
	s = &a->slots[idx];
	if (s->state != SLOT_DONE)
		return;
	s->confirmed |= bit;
	a->c.confirms++;
	if ((s->confirmed & a->all) == a->all)
		slot_release(a, s, now);
}

/* each range costs at most TLY_CONFIRM_RANGE_MAX lookups */
static void agg_confirm(struct tly_agg *a, const struct tly_hdr *h,
			const uint8_t *pkt, uint64_t now)
{
	const uint8_t *p = pkt + TLY_HDR_LEN;
	uint64_t bit = 1ull << h->rank;
	unsigned int i, j;

	for (i = 0; i < h->aux; i++, p += 8) {
		uint32_t tensor = tly_get32(p);
		uint16_t first = tly_get16(p + 4);
		uint8_t exp = p[6] >> 7;
		unsigned int count = p[7] + 1u;

		for (j = 0; j < count; j++)
			agg_confirm_one(a, tensor, (uint16_t)(first + j), exp,
					bit, now);
	}
}

/* one receipt of the switch profile's CONFIRM: only a DONE slot of that
 * chunk takes it; anywhere else the chunk was freed before (all receipts
 * in) and the sender only needs the ACK */
static void agg_receipt_switch(struct tly_agg *a, uint16_t slot,
			       uint64_t key, uint16_t rank, uint64_t now)
{
	struct agg_slot *s = &a->slots[slot];

	if (s->state == SLOT_DONE && s->key == key) {
		s->confirmed |= 1ull << rank;
		a->c.confirms++;
		if ((s->confirmed & a->all) == a->all)
			slot_release(a, s, now);
	} else {
		a->c.dups++;
	}
}

/*
 * The switch profile's CONFIRM: the header's chunk and aux more, each at
 * the slot it names (the parser checked they are the chunks' hashed
 * slots), one look-up each.  The ACK with RELEASED echoes them all.
 */
static void agg_confirm_switch(struct tly_agg *a, const struct tly_hdr *h,
			       const uint8_t *pkt, uint8_t dscp, uint64_t now)
{
	uint8_t exp = h->flags & TLY_F_EXP;
	const uint8_t *r = pkt + TLY_HDR_LEN;
	unsigned int i;

	agg_receipt_switch(a, h->slot, tly_chunk_key(h->tensor, h->chunk, exp),
			   h->rank, now);
	for (i = 0; i < h->aux; i++, r += TLY_RECEIPT_LEN)
		agg_receipt_switch(a, tly_get16(r + 6),
				   tly_chunk_key(tly_get32(r), tly_get16(r + 4),
						 exp),
				   h->rank, now);
	if (h->flags & TLY_F_ACK_REQ)
		agg_reply_echo(a, h, TLY_T_ACK, dscp, TLY_F_RELEASED,
			       pkt + TLY_HDR_LEN, h->aux);
}

/* any frame: not DATA of this job, or a DATA the fast check refused */
static void agg_rx_general(struct tly_agg *a, const uint8_t *frame,
			   size_t len, uint64_t now)
{
	const uint8_t *pkt;
	struct tly_hdr h;
	uint8_t dscp;

	if (tly_frame_rx(&a->cfg.net, &a->lim, frame, len, &h, &pkt, &dscp,
			 &a->c) != TLY_OK)
		return;
	switch (h.type) {
	case TLY_T_DATA:
		agg_data(a, &h, tly_chunk_key(h.tensor, h.chunk,
					      h.flags & TLY_F_EXP),
			 pkt + TLY_HDR_LEN, dscp, now);
		break;
	case TLY_T_CONFIRM:
		if (a->cfg.profile == TLY_PROFILE_SWITCH)
			agg_confirm_switch(a, &h, pkt, dscp, now);
		else
			agg_confirm(a, &h, pkt, now);
		break;
	default:
		a->c.drops[TLY_E_ROLE]++;
	}
}

/* 1 for a DATA taken by the fast check (counted by the caller) */
static inline __attribute__((always_inline)) int
agg_rx_one(struct tly_agg *a, const uint8_t *frame, size_t len, uint64_t now)
{
	struct tly_hdr h, hc;
	const uint8_t *pl;
	uint64_t key, hash;
	uint8_t dscp;

	if (__builtin_expect(!tly_data_rx(&a->fast, frame, len, &h, &key,
					  &dscp), 0)) {
		agg_rx_general(a, frame, len, now);
		return 0;
	}
	pl = frame + a->fast.off + TLY_HDR_LEN;
	/* the slot field is right if the slot holds the key (KEY_NONE) */
	if (a->slots[h.slot].key == key) {
		if (agg_data_common(a, h.slot, &h, key, pl, dscp, now))
			return 1;
	} else {
		int64_t idx;

		if (!tly_data_slot_ok(&a->fast, &h, key, &hash)) {
			agg_rx_general(a, frame, len, now);	/* drops it */
			return 0;
		}
		idx = fb_find(a, h.slot, key, hash);
		if (idx >= 0 && agg_data_common(a, (uint32_t)idx, &h, key, pl,
						dscp, now)) {
			a->c.fallback++;
			return 1;
		}
	}
	hc = h;		/* a copy: the common path keeps h in registers */
	agg_data(a, &hc, key, pl, dscp, now);
	return 1;
}

/* what tly_frame_rx() counts for @n frames the fast check took */
static inline void agg_rx_count(struct tly_agg *a, unsigned int n)
{
	a->c.rx_pkts += n;
	a->c.rx_bytes += (uint64_t)n * (TLY_HDR_LEN + 4u * a->cfg.k);
}

void tly_agg_rx(struct tly_agg *a, const uint8_t *frame, size_t len,
		uint64_t now)
{
	agg_rx_count(a, (unsigned int)agg_rx_one(a, frame, len, now));
}

void tly_agg_rx_burst(struct tly_agg *a, const uint8_t *const *frames,
		      const uint16_t *lens, unsigned int n, uint64_t now)
{
	unsigned int i, fast = 0;

	for (i = 0; i < n; i++) {
		if (i + 2 < n) {
			/* headers two ahead, so their misses overlap */
			__builtin_prefetch(frames[i + 2]);
			__builtin_prefetch(frames[i + 2] + 64);
		}
		fast += (unsigned int)agg_rx_one(a, frames[i], lens[i], now);
	}
	agg_rx_count(a, fast);
}

void tly_agg_poll(struct tly_agg *a, uint64_t now)
{
	uint32_t n;

	if (a->cfg.profile == TLY_PROFILE_SWITCH)
		return;		/* no timers: the workers drive recovery */
	for (n = 0; n < a->cfg.poll_budget && n < a->n_total; n++) {
		uint32_t idx = a->cursor;
		struct agg_slot *s = &a->slots[idx];

		a->cursor = idx + 1 == a->n_total ? 0 : idx + 1;
		if (s->state != SLOT_DONE || (int64_t)(now - s->t_last) < 0)
			continue;
		for (uint16_t r = 0; r < a->cfg.n_workers; r++) {
			if (s->confirmed & (1ull << r))
				continue;
			a->c.retx++;
			result_unicast(a, idx, r);
		}
		if (s->probes < 6)
			s->probes++;
		s->t_last = now + (a->cfg.probe_ns << s->probes);
	}
}

uint32_t tly_agg_sweep(struct tly_agg *a, uint64_t now)
{
	uint32_t i, n = 0;

	if (a->cfg.profile != TLY_PROFILE_SWITCH)
		return 0;
	for (i = 0; i < a->n_total; i++) {
		struct agg_slot *s = &a->slots[i];

		if (s->state != SLOT_AGG || now - s->t_claim < a->cfg.evict_ns)
			continue;
		a->c.evictions++;
		slot_release(a, s, now);
		n++;
	}
	return n;
}

uint64_t tly_agg_sweep_interval(const struct tly_agg *a)
{
	return a->cfg.profile == TLY_PROFILE_SWITCH ? a->cfg.evict_ns : 0;
}
