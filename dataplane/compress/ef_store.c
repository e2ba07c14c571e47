// SPDX-License-Identifier: BSD-3-Clause
/*
 * ef_store.c - the residual store (see ef_store.h): chained hash buckets
 * of per-tensor float32 buffers.  libc only.
 */
#include "dataplane/compress/ef_store.h"

#include <stdlib.h>
#include <string.h>

struct tly_ef_entry {
	struct tly_ef_entry *next;
	uint64_t key;
	size_t n;
	float *r;
};

static struct tly_ef_entry **slot_of(struct tly_ef_store *s, uint64_t key)
{
	/* Fibonacci hashing: keys are often small consecutive integers */
	uint64_t h = key * 0x9e3779b97f4a7c15ull;

	return &s->bucket[h >> 58];	/* 64 buckets */
}

void tly_ef_store_init(struct tly_ef_store *s)
{
	memset(s, 0, sizeof(*s));
}

static void entry_free(struct tly_ef_store *s, struct tly_ef_entry *e)
{
	s->bytes -= e->n * sizeof(float);
	s->n_tensors--;
	free(e->r);
	free(e);
}

void tly_ef_store_fini(struct tly_ef_store *s)
{
	size_t b;

	for (b = 0; b < TLY_EF_BUCKETS; b++) {
		while (s->bucket[b]) {
			struct tly_ef_entry *e = s->bucket[b];

			s->bucket[b] = e->next;
			entry_free(s, e);
		}
	}
}

static struct tly_ef_entry **find(struct tly_ef_store *s, uint64_t key)
{
	struct tly_ef_entry **pe = slot_of(s, key);

	while (*pe && (*pe)->key != key)
		pe = &(*pe)->next;
	return pe;
}

float *tly_ef_get(struct tly_ef_store *s, uint64_t key, size_t n)
{
	struct tly_ef_entry **pe = find(s, key), *e = *pe;
	float *r;

	if (e && e->n == n)
		return e->r;
	r = calloc(n ? n : 1, sizeof(float));
	if (!r)
		return NULL;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e) {
			free(r);
			return NULL;
		}
		e->key = key;
		e->next = *slot_of(s, key);
		*slot_of(s, key) = e;
		s->n_tensors++;
	} else {
		s->bytes -= e->n * sizeof(float);
		free(e->r);
	}
	e->r = r;
	e->n = n;
	s->bytes += n * sizeof(float);
	return r;
}

int tly_ef_reset(struct tly_ef_store *s, uint64_t key)
{
	struct tly_ef_entry *e = *find(s, key);

	if (!e)
		return -1;
	memset(e->r, 0, e->n * sizeof(float));
	return 0;
}

void tly_ef_reset_all(struct tly_ef_store *s)
{
	struct tly_ef_entry *e;
	size_t b;

	for (b = 0; b < TLY_EF_BUCKETS; b++)
		for (e = s->bucket[b]; e; e = e->next)
			memset(e->r, 0, e->n * sizeof(float));
}

int tly_ef_drop(struct tly_ef_store *s, uint64_t key)
{
	struct tly_ef_entry **pe = find(s, key), *e = *pe;

	if (!e)
		return -1;
	*pe = e->next;
	entry_free(s, e);
	return 0;
}
