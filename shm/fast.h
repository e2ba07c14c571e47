/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fast.h - the local fast path's shared segment (docs/local-fast-path.md).
 *
 * A job that lives on one host alone gets, from tallyd, one more segment
 * that all its clients map: a small table of slots in which the clients
 * all-reduce small buffers among themselves, without a round trip through
 * the daemon.  Each client copies its contribution into its row of a
 * slot; the one whose arrival completes the slot reduces the rows (in rank
 * order, with the daemon's own reduction code, so the result is the same
 * bit for bit) into row 0; each client copies the result out and releases
 * the slot; the last release frees it.
 *
 * The daemon creates and initialises the segment, never trusts it, and
 * writes only with atomics: it sets @abort when a member leaves (every
 * waiting client then fails with that error), and it completes a slot
 * with TALLY_EMISMATCH when some members took the daemon's path for the
 * same (key, iteration) (they disagree on its size or flags).
 *
 * Which slot an operation uses, or whether it goes to the daemon after
 * all, its first member decides under the directory's lock and records in
 * the directory; later members follow the record (so no member ever
 * waits for a slot another operation holds, and every member of an
 * operation takes the same path).  The record goes when every member has
 * read it.
 *
 * A slot's @state is (seq << 2) | phase; seq grows with every reuse, so a
 * client that saw phase DONE of its own use can never mistake a later
 * use for it.
 */
#ifndef TALLY_SHM_FAST_H
#define TALLY_SHM_FAST_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TALLY_FAST_MAGIC 0x54465354u	/* "TFST" */
#define TALLY_FAST_VERSION 2
#define TALLY_FAST_MAX_SLOTS 1024
#define TALLY_FAST_MAX_BYTES (1u << 20)	/* one contribution */
#define TALLY_FAST_ALIGN 64
/* Directory entries per member: each member has at most 256 requests in
 * flight (TALLY_MAX_INFLIGHT), and every entry is some member's request
 * in flight, so half the directory is always free for probing. */
#define TALLY_FAST_DIR_PER_RANK 512

enum tally_fast_phase {
	TALLY_FAST_FREE = 0,	/* nobody uses it */
	TALLY_FAST_CLAIM = 1,	/* its first member is writing the header */
	TALLY_FAST_OPEN = 2,	/* members are arriving */
	TALLY_FAST_DONE = 3,	/* reduced (or failed): members copy out */
};

struct tally_fast_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t ranks;			/* the job's local size */
	uint32_t slots;
	uint64_t max_bytes;		/* of one contribution, aligned */
	uint64_t slot_stride;		/* tally_fast_stride(); slot 0 after
					 * the directory */
	_Atomic uint32_t abort;		/* 0, or a positive TALLY_E* code */
	_Atomic uint32_t wake;		/* futex word: bumped on every DONE
					 * and abort */
	_Atomic uint32_t sleepers;	/* clients inside FUTEX_WAIT */
	_Atomic uint32_t dir_lock;	/* 0, or the holder's rank + 1 */
	_Atomic uint64_t reduced;	/* slots reduced (tests) */
	/* members' requests that ended, as the daemon counts its own
	 * (tally_operations_total): metrics only, written by the clients */
	_Atomic uint64_t done;
	_Atomic uint64_t failed;
	uint32_t dir_entries;		/* a power of two; the directory at 128 */
	uint32_t pad;
};

/*
 * A directory entry: the route of (key, iteration), which members have
 * read it (set when they submit), written only under dir_lock.  Linear
 * probing from tally_fast_slot_of(key, iteration, dir_entries); a probe
 * ends at an EMPTY entry and passes DEAD ones (retired while later
 * entries of their chain lived).
 */
struct tally_fast_dirent {
	uint64_t key;
	uint64_t iteration;
	uint64_t seen;
	uint32_t route;		/* TALLY_FAST_ROUTE_* or _SLOT(i) */
	uint32_t pad;
};

#define TALLY_FAST_ROUTE_EMPTY 0u
#define TALLY_FAST_ROUTE_DEAD 1u
#define TALLY_FAST_ROUTE_DAEMON 2u	/* no slot was free: the daemon's */
#define TALLY_FAST_ROUTE_SLOT(i) ((uint32_t)(i) + 3u)
#define TALLY_FAST_ROUTE_SLOT_OF(r) ((r) - 3u)

/* The directory's size for @ranks members: a power of two. */
static inline uint32_t tally_fast_dir_entries(uint32_t ranks)
{
	uint32_t n = 1;

	while (n < ranks * TALLY_FAST_DIR_PER_RANK)
		n <<= 1;
	return n;
}

/* Fields a member may read while another reuses the slot are atomic
 * (read relaxed, then the state read again): a torn or stale read is
 * caught by the state check, never acted upon. */
struct tally_fast_slot {
	_Atomic uint64_t state;		/* seq << 2 | enum tally_fast_phase */
	_Atomic uint64_t key;		/* written in CLAIM, read in OPEN */
	_Atomic uint64_t iteration;
	_Atomic uint64_t count;
	_Atomic uint32_t desc;		/* dtype | redop << 8 */
	_Atomic int32_t res;		/* 0 or -TALLY_E*, written before DONE */
	_Atomic uint64_t arrived;	/* ranks whose row is written */
	_Atomic uint64_t released;	/* ranks that copied the result out */
	_Atomic uint32_t mismatch;	/* a member disagreed: no reduce */
	uint32_t pad;
	/* then ranks rows of max_bytes (a multiple of TALLY_FAST_ALIGN) from
	 * slot + TALLY_FAST_ROWS_OFFSET */
};

#define TALLY_FAST_DESC(dtype, redop) ((uint32_t)(dtype) | (uint32_t)(redop) << 8)

#define TALLY_FAST_ROWS_OFFSET 128
_Static_assert(sizeof(struct tally_fast_hdr) <= 128, "header fits");
_Static_assert(sizeof(struct tally_fast_slot) <= TALLY_FAST_ROWS_OFFSET,
	       "slot header fits before its rows");

#define TALLY_FAST_STATE(seq, phase) (((uint64_t)(seq) << 2) | (phase))
#define TALLY_FAST_PHASE(state) ((unsigned int)((state) & 3u))
#define TALLY_FAST_SEQ(state) ((state) >> 2)

/* Bytes of one slot with its rows, and of a whole segment. */
static inline uint64_t tally_fast_stride(uint32_t ranks, uint64_t max_bytes)
{
	return TALLY_FAST_ROWS_OFFSET + (uint64_t)ranks * max_bytes;
}

static inline uint64_t tally_fast_bytes(uint32_t ranks, uint32_t slots,
					uint64_t max_bytes)
{
	return 128 + (uint64_t)tally_fast_dir_entries(ranks) *
		     sizeof(struct tally_fast_dirent) +
	       (uint64_t)slots * tally_fast_stride(ranks, max_bytes);
}

/* Where (key, iteration)'s directory probe starts (@slots: the entries),
 * and its slot's search for a free one. */
static inline uint32_t tally_fast_slot_of(uint64_t key, uint64_t iteration,
					  uint32_t slots)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull ^ iteration;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)(h % slots);
}

/* The geometry each side keeps privately, from what it created or
 * checked: a peer may overwrite the shared header, never these. */
struct tally_fast_layout {
	uint32_t ranks;
	uint32_t slots;
	uint64_t max_bytes;
	uint64_t stride;
	uint32_t dir_entries;
};

static inline struct tally_fast_dirent *
tally_fast_dir(void *base)
{
	return (struct tally_fast_dirent *)((char *)base + 128);
}

static inline struct tally_fast_slot *
tally_fast_slot_at(void *base, const struct tally_fast_layout *l, uint32_t i)
{
	return (struct tally_fast_slot *)((char *)base + 128 +
		(uint64_t)l->dir_entries * sizeof(struct tally_fast_dirent) +
		(uint64_t)i * l->stride);
}

/* Does @s, read in state @st, hold (key, iteration), open or done?  Its
 * fields are the use @st's only if the state still reads @st after them
 * (each caller checks that, behind an acquire fence). */
static inline bool tally_fast_slot_holds(struct tally_fast_slot *s,
					 uint64_t st, uint64_t key,
					 uint64_t iteration)
{
	unsigned int phase = TALLY_FAST_PHASE(st);

	return (phase == TALLY_FAST_OPEN || phase == TALLY_FAST_DONE) &&
	       atomic_load_explicit(&s->key, memory_order_relaxed) == key &&
	       atomic_load_explicit(&s->iteration, memory_order_relaxed) ==
	       iteration;
}

static inline void *tally_fast_row(const struct tally_fast_layout *l,
				   struct tally_fast_slot *s, uint32_t rank)
{
	return (char *)s + TALLY_FAST_ROWS_OFFSET +
	       (uint64_t)rank * l->max_bytes;
}

/* The bitmap of every member. */
static inline uint64_t tally_fast_all(const struct tally_fast_layout *l)
{
	return l->ranks >= 64 ? ~0ull : (1ull << l->ranks) - 1;
}

/*
 * Tell sleepers a slot changed phase (or the run aborted): bump the futex
 * word, then wake them.  @always: whether or not the header counts any
 * sleeper (the daemon does not trust that count; it wakes rarely).
 */
static inline void tally_fast_kick(struct tally_fast_hdr *h, bool always)
{
	atomic_fetch_add(&h->wake, 1);
	if (always || atomic_load(&h->sleepers))
		syscall(SYS_futex, &h->wake, FUTEX_WAKE, INT_MAX, NULL, NULL,
			0);
}

#endif /* TALLY_SHM_FAST_H */
