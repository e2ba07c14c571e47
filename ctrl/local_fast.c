// SPDX-License-Identifier: BSD-3-Clause
/*
 * local_fast.c - the local fast path's table, the daemon's side (see
 * local_fast.h).  Everything the clients can write is read with atomics
 * and only used to decide what to mark; the geometry is our own copy.
 */
#include <string.h>
#include <tally/tally.h>

#include "ctrl/local_fast.h"

int local_fast_create(struct local_fast *f, unsigned int ranks,
		      unsigned int slots, uint64_t max_bytes)
{
	struct tally_fast_hdr *h;
	int ret;

	memset(f, 0, sizeof(*f));
	f->seg.fd = -1;
	max_bytes = (max_bytes + TALLY_FAST_ALIGN - 1) &
		    ~(uint64_t)(TALLY_FAST_ALIGN - 1);
	if (ranks < 2 || ranks > 64 || slots == 0 || max_bytes == 0 ||
	    max_bytes > TALLY_FAST_MAX_BYTES)
		return -TALLY_EINVAL;
	f->l.ranks = ranks;
	f->l.max_bytes = max_bytes;
	f->l.stride = tally_fast_stride(ranks, max_bytes);
	f->l.dir_entries = tally_fast_dir_entries(ranks);
	if (slots > TALLY_FAST_MAX_SLOTS)
		slots = TALLY_FAST_MAX_SLOTS;
	while (slots > 1 && tally_fast_bytes(ranks, slots, max_bytes) >
			    LOCAL_FAST_MAX_TABLE)
		slots /= 2;
	f->l.slots = slots;
	ret = segment_create(&f->seg, tally_fast_bytes(ranks, slots,
						       max_bytes),
			     "tally-fast");
	if (ret) {
		memset(f, 0, sizeof(*f));
		f->seg.fd = -1;
		return ret;
	}
	h = f->seg.base;	/* zero: every slot FREE at seq 0 */
	h->magic = TALLY_FAST_MAGIC;
	h->version = TALLY_FAST_VERSION;
	h->ranks = ranks;
	h->slots = slots;
	h->max_bytes = max_bytes;
	h->slot_stride = f->l.stride;
	h->dir_entries = f->l.dir_entries;	/* every entry EMPTY */
	return 0;
}

void local_fast_destroy(struct local_fast *f)
{
	if (f->seg.base)
		segment_destroy(&f->seg);
	memset(f, 0, sizeof(*f));
	f->seg.fd = -1;
}

void local_fast_counts(const struct local_fast *f, uint64_t *done,
		       uint64_t *failed)
{
	const struct tally_fast_hdr *h = f->seg.base;

	*done = h ? atomic_load_explicit(&h->done, memory_order_relaxed) : 0;
	*failed = h ? atomic_load_explicit(&h->failed, memory_order_relaxed)
		    : 0;
}

void local_fast_abort(struct local_fast *f, int code)
{
	struct tally_fast_hdr *h = f->seg.base;

	if (!h)
		return;
	atomic_store(&h->abort, (uint32_t)(code < 0 ? -code : code));
	tally_fast_kick(h, true);
}

/* The slot (key, iteration) is open or done in, and its state then; NULL
 * when none is.  Every slot is looked at: the directory, which says
 * where, is the clients' (under their lock), and there are few slots. */
static struct tally_fast_slot *slot_holding(struct local_fast *f,
					    uint64_t key, uint64_t iteration,
					    uint64_t *state)
{
	for (uint32_t i = 0; i < f->l.slots; i++) {
		struct tally_fast_slot *s = tally_fast_slot_at(f->seg.base,
							       &f->l, i);
		uint64_t st = atomic_load_explicit(&s->state,
						   memory_order_acquire);

		if (tally_fast_slot_holds(s, st, key, iteration)) {
			*state = st;
			return s;
		}
	}
	return NULL;
}

bool local_fast_cross(struct local_fast *f, uint64_t key, uint64_t iteration,
		      uint64_t ranks)
{
	struct tally_fast_slot *s;
	uint64_t st, open, released;
	unsigned int phase;

	if (!f->seg.base || !(ranks &= tally_fast_all(&f->l)))
		return false;
	s = slot_holding(f, key, iteration, &st);
	if (!s)
		return false;
	phase = TALLY_FAST_PHASE(st);
	atomic_thread_fence(memory_order_acquire);
	/* done and not failed: complete without these ranks, impossible
	 * unless they are there too (submitted it twice): leave it */
	if (atomic_load(&s->state) != st || (atomic_load(&s->arrived) & ranks) ||
	    (phase == TALLY_FAST_DONE && !atomic_load(&s->mismatch)))
		return false;
	/* as a member that disagrees (client_fast.c): fail it for all,
	 * then release for the ranks that are here instead */
	atomic_store_explicit(&s->res, -TALLY_EMISMATCH, memory_order_relaxed);
	atomic_store(&s->mismatch, 1);
	atomic_fetch_or(&s->arrived, ranks);
	open = TALLY_FAST_STATE(TALLY_FAST_SEQ(st), TALLY_FAST_OPEN);
	atomic_compare_exchange_strong(&s->state, &open,
		TALLY_FAST_STATE(TALLY_FAST_SEQ(st), TALLY_FAST_DONE));
	released = atomic_fetch_or(&s->released, ranks) | ranks;
	if (released == tally_fast_all(&f->l))
		atomic_store_explicit(&s->state,
			TALLY_FAST_STATE(TALLY_FAST_SEQ(st) + 1,
					 TALLY_FAST_FREE),
			memory_order_release);
	tally_fast_kick(f->seg.base, true);
	return true;
}
