// SPDX-License-Identifier: BSD-3-Clause
/*
 * local_group.c - (key, iteration) matching of local submissions
 * (see local_group.h).
 */
#include <stdlib.h>
#include <string.h>

#include "ctrl/local_group.h"

#define LG_NONE UINT32_MAX

static uint32_t hash_key(uint64_t key, uint64_t iteration)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull ^ iteration;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h;
}

int local_group_init(struct local_group *lg, unsigned int size,
		     uint32_t max_groups)
{
	memset(lg, 0, sizeof(*lg));
	if (size == 0 || size > 64 || max_groups == 0)
		return -1;
	lg->size = size;
	lg->n_pool = max_groups;
	lg->n_buckets = 1;
	while (lg->n_buckets < 2 * max_groups)
		lg->n_buckets <<= 1;
	lg->pool = calloc(max_groups, sizeof(*lg->pool));
	lg->members = calloc((size_t)max_groups * size, sizeof(*lg->members));
	lg->buckets = malloc(lg->n_buckets * sizeof(*lg->buckets));
	if (!lg->pool || !lg->members || !lg->buckets) {
		local_group_destroy(lg);
		return -1;
	}
	for (uint32_t i = 0; i < lg->n_buckets; i++)
		lg->buckets[i] = LG_NONE;
	for (uint32_t i = 0; i < max_groups; i++) {
		lg->pool[i].m = &lg->members[(size_t)i * size];
		lg->pool[i].next = i + 1 < max_groups ? i + 1 : LG_NONE;
	}
	lg->free_head = 0;
	return 0;
}

void local_group_destroy(struct local_group *lg)
{
	free(lg->pool);
	free(lg->members);
	free(lg->buckets);
	memset(lg, 0, sizeof(*lg));
}

static struct lg_group *lookup(struct local_group *lg, uint64_t key,
			       uint64_t iteration, uint32_t bucket)
{
	for (uint32_t i = lg->buckets[bucket]; i != LG_NONE;
	     i = lg->pool[i].next) {
		struct lg_group *g = &lg->pool[i];

		if (g->op.key == key && g->op.iteration == iteration)
			return g;
	}
	return NULL;
}

static bool same_op(const struct lg_op *a, const struct lg_op *b)
{
	return a->count == b->count && a->dtype == b->dtype &&
	       a->redop == b->redop && a->codec == b->codec;
}

enum lg_result local_group_add(struct local_group *lg, unsigned int rank,
			       const struct lg_op *op,
			       const struct lg_member *m, struct lg_group **out)
{
	uint32_t bucket = hash_key(op->key, op->iteration) &
			  (lg->n_buckets - 1);
	struct lg_group *g = lookup(lg, op->key, op->iteration, bucket);
	uint64_t bit;

	*out = NULL;
	if (rank >= lg->size)
		return LG_BAD_RANK;
	bit = 1ull << rank;
	if (!g) {
		uint32_t i = lg->free_head;

		if (i == LG_NONE)
			return LG_FULL;
		g = &lg->pool[i];
		lg->free_head = g->next;
		g->op = *op;
		g->arrived = 0;
		g->failed = false;
		g->sent = false;
		g->used = true;
		g->next = lg->buckets[bucket];
		lg->buckets[bucket] = i;
		lg->n_used++;
	} else if (g->arrived & bit) {
		return LG_DUPLICATE;
	}
	*out = g;
	g->arrived |= bit;
	g->m[rank] = *m;
	if (g->failed)
		return LG_MISMATCH_ONE;
	if (!same_op(&g->op, op)) {
		g->failed = true;
		return LG_MISMATCH;
	}
	if (op->priority < g->op.priority)	/* most urgent member wins */
		g->op.priority = op->priority;
	g->op.last |= op->last;
	return g->arrived == lg_all(lg) ? LG_READY : LG_WAITING;
}

void local_group_settle(struct local_group *lg, struct lg_group *g)
{
	if (g->arrived == lg_all(lg))
		local_group_release(lg, g);
}

void local_group_release(struct local_group *lg, struct lg_group *g)
{
	uint32_t idx = (uint32_t)(g - lg->pool);
	uint32_t bucket = hash_key(g->op.key, g->op.iteration) &
			  (lg->n_buckets - 1);
	uint32_t *link = &lg->buckets[bucket];

	while (*link != LG_NONE && *link != idx)
		link = &lg->pool[*link].next;
	if (*link == idx)
		*link = g->next;
	g->used = false;
	g->next = lg->free_head;
	lg->free_head = idx;
	lg->n_used--;
}
