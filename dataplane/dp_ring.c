// SPDX-License-Identifier: BSD-3-Clause
/*
 * dp_ring.c - setup and the eventfd side of the in-process SPSC ring
 * (the fast path is inline in dp_ring.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dataplane/dp_ring.h"

int dp_ring_init(struct dp_ring *r, uint32_t entries, uint32_t entry_size)
{
	if (entries < 2 || (entries & (entries - 1)) || !entry_size)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->entries = calloc(entries, entry_size);
	if (!r->entries)
		return -ENOMEM;
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		int err = -errno;

		free(r->entries);
		r->entries = NULL;
		return err;
	}
	r->mask = entries - 1;
	r->entry_size = entry_size;
	dp_ring_reset(r);
	return 0;
}

void dp_ring_fini(struct dp_ring *r)
{
	if (!r->entries)
		return;
	close(r->efd);
	free(r->entries);
	r->entries = NULL;
	r->efd = -1;
}

void dp_ring_reset(struct dp_ring *r)
{
	uint64_t v;

	atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
	atomic_store_explicit(&r->head, 0, memory_order_relaxed);
	atomic_store_explicit(&r->asleep, 0, memory_order_relaxed);
	r->cached_head = r->cached_tail = 0;
	(void)!read(r->efd, &v, sizeof(v));
}

void dp_ring_wake(struct dp_ring *r)
{
	uint64_t one = 1;

	/* EAGAIN: the counter is saturated, the consumer wakes anyway */
	(void)!write(r->efd, &one, sizeof(one));
}

void dp_ring_sleep_done(struct dp_ring *r)
{
	uint64_t v;

	atomic_store_explicit(&r->asleep, 0, memory_order_relaxed);
	(void)!read(r->efd, &v, sizeof(v));
}
