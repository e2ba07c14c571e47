// SPDX-License-Identifier: BSD-3-Clause
/*
 * worker_mem.c - a tensor slot's arrays (chunk states, block exponents,
 * the ring's running sums, its ready queue) outlive the tensor and serve
 * the slot's next one when they are large enough.
 *
 * Why: allocated and freed per operation, large arrays come from mmap and
 * go back to the kernel, so every operation faulted its pages in again on
 * the dataplane thread.  The ring's running sums are as large as the
 * tensor in 32-bit words: 16384 fresh pages for a 64 MiB all-reduce, each
 * fault 6-15 us on the virtual machines this was measured on
 * (docs/performance.md, "Arrays kept between operations").
 *
 * What a worker keeps is bounded: when a tensor finishes while the slots'
 * arrays add up to more than cfg.keep_bytes, its own are freed.
 */
#include "dataplane/engine/worker_internal.h"

#include <stdlib.h>
#include <string.h>

void *tensor_buf(struct tly_worker *w, struct wtensor *t,
		 enum wbuf_kind kind, size_t bytes, bool zero)
{
	struct wbuf *b = &t->mem[kind];

	if (b->cap < bytes) {
		w->mem.kept_bytes -= b->cap;
		free(b->p);
		/* calloc: fresh pages come zeroed, memset would fault
		 * them in here rather than where they are first used */
		b->p = zero ? calloc(1, bytes) : malloc(bytes);
		b->cap = b->p ? bytes : 0;
		w->mem.kept_bytes += b->cap;
		if (!b->p)
			return NULL;
		w->mem.allocs++;
		return b->p;
	}
	if (zero)
		memset(b->p, 0, bytes);
	w->mem.reuses++;
	return b->p;
}

void tensor_bufs_free(struct tly_worker *w, struct wtensor *t)
{
	for (int k = 0; k < WBUF_KINDS; k++) {
		w->mem.kept_bytes -= t->mem[k].cap;
		free(t->mem[k].p);
		t->mem[k] = (struct wbuf){ 0 };
	}
}

void tensor_bufs_trim(struct tly_worker *w, struct wtensor *t)
{
	if (w->mem.kept_bytes > w->cfg.keep_bytes)
		tensor_bufs_free(w, t);
}

void tly_worker_mem(const struct tly_worker *w, struct tly_worker_mem *out)
{
	*out = w->mem;
}
