/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ef_store.h - error-feedback residuals, one float32 buffer per tensor key,
 * in the memory of whoever owns the store: the client library (CPU path;
 * libc only, so libtally can embed it) or, with the GPU path, the same
 * layout in device memory kept by libtally-cuda (docs/compression.md).
 *
 * A residual is created zeroed on first use, re-created zeroed when the
 * tensor's element count changes (a new shape is a new tensor), and reset
 * on request: one tensor, or all of them (a job resets after a GradScaler
 * skipped step, a checkpoint restore, or a change of method).
 */
#ifndef TALLY_DATAPLANE_COMPRESS_EF_STORE_H
#define TALLY_DATAPLANE_COMPRESS_EF_STORE_H

#include <stddef.h>
#include <stdint.h>

#define TLY_EF_BUCKETS	64

struct tly_ef_entry;

struct tly_ef_store {
	struct tly_ef_entry *bucket[TLY_EF_BUCKETS];
	size_t n_tensors;
	size_t bytes;		/* residual bytes held */
};

void tly_ef_store_init(struct tly_ef_store *s);
void tly_ef_store_fini(struct tly_ef_store *s);
/* the residual of @key with @n elements; NULL when out of memory */
float *tly_ef_get(struct tly_ef_store *s, uint64_t key, size_t n);
/* zero one residual (-1 if @key has none) or all of them */
int tly_ef_reset(struct tly_ef_store *s, uint64_t key);
void tly_ef_reset_all(struct tly_ef_store *s);
/* forget one tensor's residual (-1 if none) */
int tly_ef_drop(struct tly_ef_store *s, uint64_t key);

#endif /* TALLY_DATAPLANE_COMPRESS_EF_STORE_H */
