/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ring.h - single-producer single-consumer ring of fixed-size entries in
 * shared memory, and the doorbell handshake around it.
 *
 * Shared part (struct ring_shared): the producer index, the consumer index
 * and the consumer's "asleep" flag, each on its own cache line so the two
 * sides never write the same line.  Private part (struct ring): each side's
 * own view, with the size fixed at setup and its own index kept privately,
 * so a corrupted or hostile peer can only make ring_* report an error, not
 * make us read or write outside the ring.
 *
 * Ordering: the producer writes the entry, then publishes the new tail with
 * a release store; the consumer reads the tail with an acquire load before
 * reading entries.  Doorbell: a consumer about to sleep sets 'asleep' and
 * re-checks the ring; a producer publishes, then reads 'asleep'.  Both use
 * seq_cst fences between their store and load (Dekker), so at least one of
 * them sees the other: no lost wake-up.
 */
#ifndef TALLY_SHM_RING_H
#define TALLY_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RING_CACHELINE 64

struct ring_shared {
	_Alignas(RING_CACHELINE) _Atomic uint32_t tail;	/* producer */
	_Alignas(RING_CACHELINE) _Atomic uint32_t head;	/* consumer */
	_Alignas(RING_CACHELINE) _Atomic uint32_t asleep; /* consumer */
	_Alignas(RING_CACHELINE) unsigned char entries[];
};

struct ring {
	struct ring_shared *sh;
	uint32_t mask;		/* entries - 1, entries a power of two */
	uint32_t entry_size;
	uint32_t local;		/* our own index: tail or head */
	uint32_t cached;	/* last seen index of the other side */
};

/* Bytes of shared memory a ring of @entries entries of @entry_size needs. */
static inline size_t ring_bytes(uint32_t entries, uint32_t entry_size)
{
	return sizeof(struct ring_shared) + (size_t)entries * entry_size;
}

/* Attach to (and, with @reset, initialise) a ring at @mem. */
static inline void ring_attach(struct ring *r, void *mem, uint32_t entries,
			       uint32_t entry_size, bool producer, bool reset)
{
	r->sh = mem;
	r->mask = entries - 1;
	r->entry_size = entry_size;
	if (reset) {
		atomic_store_explicit(&r->sh->tail, 0, memory_order_relaxed);
		atomic_store_explicit(&r->sh->head, 0, memory_order_relaxed);
		atomic_store_explicit(&r->sh->asleep, 0, memory_order_relaxed);
	}
	r->local = producer ?
		atomic_load_explicit(&r->sh->tail, memory_order_relaxed) :
		atomic_load_explicit(&r->sh->head, memory_order_relaxed);
	r->cached = producer ?
		atomic_load_explicit(&r->sh->head, memory_order_acquire) :
		atomic_load_explicit(&r->sh->tail, memory_order_acquire);
}

/* Producer: free entries, or -1 if the consumer's index is impossible. */
static inline int64_t ring_free(struct ring *r)
{
	uint32_t used;

	r->cached = atomic_load_explicit(&r->sh->head, memory_order_acquire);
	used = r->local - r->cached;
	if (used > r->mask + 1)
		return -1;
	return (int64_t)(r->mask + 1 - used);
}

/* Producer: copy one entry in and publish it.  0, or -1 if full/corrupt. */
static inline int ring_push(struct ring *r, const void *entry)
{
	if (r->local - r->cached > r->mask && ring_free(r) <= 0)
		return -1;
	memcpy(r->sh->entries + (size_t)(r->local & r->mask) * r->entry_size,
	       entry, r->entry_size);
	r->local++;
	atomic_store_explicit(&r->sh->tail, r->local, memory_order_release);
	return 0;
}

/* Consumer: entries ready, or -1 if the producer's index is impossible. */
static inline int64_t ring_ready(struct ring *r)
{
	uint32_t ready;

	r->cached = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
	ready = r->cached - r->local;
	if (ready > r->mask + 1)
		return -1;
	return ready;
}

/* Consumer: copy one entry out and release its space.
 * 1 if one was taken, 0 if empty, -1 if the ring is corrupt. */
static inline int ring_pop(struct ring *r, void *entry)
{
	/* re-read (and validate) the tail unless 1..entries are known ready:
	 * a cached tail from attach or from a failed ring_ready() may be
	 * corrupt and must not be trusted */
	if (r->cached - r->local - 1 > r->mask) {
		int64_t n = ring_ready(r);

		if (n <= 0)
			return n < 0 ? -1 : 0;
	}
	memcpy(entry,
	       r->sh->entries + (size_t)(r->local & r->mask) * r->entry_size,
	       r->entry_size);
	r->local++;
	atomic_store_explicit(&r->sh->head, r->local, memory_order_release);
	return 1;
}

/* Consumer: announce sleep; the caller then re-checks ring_ready(). */
static inline void ring_sleep_prepare(struct ring *r)
{
	atomic_store_explicit(&r->sh->asleep, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}

static inline void ring_sleep_done(struct ring *r)
{
	atomic_store_explicit(&r->sh->asleep, 0, memory_order_relaxed);
}

/* Producer, after pushing: does the consumer need a doorbell? */
static inline bool ring_needs_wakeup(struct ring *r)
{
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&r->sh->asleep, memory_order_relaxed);
}

#endif /* TALLY_SHM_RING_H */
