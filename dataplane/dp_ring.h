/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_ring.h - single-producer single-consumer ring of fixed-size entries
 * between two threads of one process (the control thread and a dataplane
 * thread), with a sleep/wake-up handshake over an eventfd.
 *
 * The in-process sibling of shm/ring.h: the same layout (producer index,
 * consumer index and the consumer's sleep flag each on its own cache
 * line) and the same doorbell protocol, without the checks a ring shared
 * with an untrusted process needs.
 *
 * Ordering: the producer writes the entry, then publishes the tail with a
 * release store; the consumer reads the tail with an acquire load before
 * reading the entry, and gives the space back with a release store of the
 * head.  Whatever an entry points to (client memory) passes with it.
 *
 * Sleep: a consumer about to block calls dp_ring_sleep_prepare(), which
 * sets 'asleep' and re-reads the tail; only if the ring is still empty may
 * it block on dp_ring_fd().  A producer calls dp_ring_notify() after
 * publishing: a read-modify-write of the tail, then it reads 'asleep' and
 * writes the eventfd only if the consumer announced sleep.  All four are
 * seq_cst (Dekker): in their single total order one side's store comes
 * first, so the other side's load sees it: no lost wake-up, and no
 * syscall while the consumer polls.  (seq_cst operations rather than
 * fences: ThreadSanitizer checks the former and not the latter.)
 */
#ifndef TALLY_DATAPLANE_DP_RING_H
#define TALLY_DATAPLANE_DP_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define DP_RING_CACHELINE 64

struct dp_ring {
	/* producer's line */
	_Alignas(DP_RING_CACHELINE) _Atomic uint32_t tail;
	uint32_t cached_head;		/* producer's last view of head */
	/* consumer's line */
	_Alignas(DP_RING_CACHELINE) _Atomic uint32_t head;
	uint32_t cached_tail;		/* consumer's last view of tail */
	/* the consumer's sleep flag, written by it, read by the producer */
	_Alignas(DP_RING_CACHELINE) _Atomic uint32_t asleep;
	/* fixed at setup */
	_Alignas(DP_RING_CACHELINE) uint32_t mask;	/* entries - 1 */
	uint32_t entry_size;
	int efd;			/* the consumer's wake-up eventfd */
	unsigned char *entries;
};

/* A ring of @entries (a power of two) entries of @entry_size bytes, with
 * its eventfd.  0, or a negative errno. */
int dp_ring_init(struct dp_ring *r, uint32_t entries, uint32_t entry_size);
void dp_ring_fini(struct dp_ring *r);

/* Empty the ring; only while neither side runs (both quiesced). */
void dp_ring_reset(struct dp_ring *r);

/* The eventfd the consumer sleeps on (poll/epoll for POLLIN). */
static inline int dp_ring_fd(const struct dp_ring *r)
{
	return r->efd;
}

static inline uint32_t dp_ring_size(const struct dp_ring *r)
{
	return r->mask + 1;
}

/* ---- producer ---------------------------------------------------------- */

/* Free entries. */
static inline uint32_t dp_ring_free(struct dp_ring *r)
{
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	r->cached_head = atomic_load_explicit(&r->head, memory_order_acquire);
	return r->mask + 1 - (tail - r->cached_head);
}

/* Copy one entry in and publish it: 0, or -1 when the ring is full. */
static inline int dp_ring_push(struct dp_ring *r, const void *entry)
{
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	if (tail - r->cached_head > r->mask && dp_ring_free(r) == 0)
		return -1;
	memcpy(r->entries + (size_t)(tail & r->mask) * r->entry_size, entry,
	       r->entry_size);
	atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
	return 0;
}

/* Wake the consumer if it sleeps; call after a push (or a batch). */
void dp_ring_wake(struct dp_ring *r);

static inline void dp_ring_notify(struct dp_ring *r)
{
	atomic_fetch_add_explicit(&r->tail, 0, memory_order_seq_cst);
	if (atomic_load_explicit(&r->asleep, memory_order_seq_cst))
		dp_ring_wake(r);
}

/* ---- consumer ---------------------------------------------------------- */

/* Entries ready. */
static inline uint32_t dp_ring_ready(struct dp_ring *r)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

	r->cached_tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	return r->cached_tail - head;
}

/* The oldest entry, left in place (NULL when empty); dp_ring_consume()
 * gives its space back once the caller is done with it. */
static inline void *dp_ring_peek(struct dp_ring *r)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

	if (r->cached_tail == head && dp_ring_ready(r) == 0)
		return NULL;
	return r->entries + (size_t)(head & r->mask) * r->entry_size;
}

static inline void dp_ring_consume(struct dp_ring *r)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

	atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

/* Copy the oldest entry out: 1, or 0 when empty. */
static inline int dp_ring_pop(struct dp_ring *r, void *entry)
{
	void *e = dp_ring_peek(r);

	if (!e)
		return 0;
	memcpy(entry, e, r->entry_size);
	dp_ring_consume(r);
	return 1;
}

/* Announce sleep; returns the entries ready: block on dp_ring_fd() only
 * when it is 0, and call dp_ring_sleep_done() either way. */
static inline uint32_t dp_ring_sleep_prepare(struct dp_ring *r)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

	atomic_store_explicit(&r->asleep, 1, memory_order_seq_cst);
	r->cached_tail = atomic_load_explicit(&r->tail, memory_order_seq_cst);
	return r->cached_tail - head;
}

/* Awake again: clear the flag and drain the eventfd. */
void dp_ring_sleep_done(struct dp_ring *r);

#endif /* TALLY_DATAPLANE_DP_RING_H */
