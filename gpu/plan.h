/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan.h - how a device all-reduce is cut into pipeline chunks: the size
 * checks, the chunks' element ranges and the keys they travel under.  Pure
 * arithmetic, no CUDA: unit-tested everywhere.
 */
#ifndef TALLY_GPU_PLAN_H
#define TALLY_GPU_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include <tally/tally.h>

/* as TALLY_CUDA_KEY_LIMIT / TALLY_CUDA_MAX_CHUNKS in tally_cuda.h */
#define TCU_KEY_BITS 48
#define TCU_MAX_CHUNKS 65536u
/* chunk_bytes: at least a page, a multiple of a cache line */
#define TCU_CHUNK_MIN 4096u
#define TCU_CHUNK_ALIGN 64u

struct tcu_plan {
	uint32_t dev_size;	/* bytes per element in device memory */
	uint32_t wire_size;	/* bytes per element in shared memory */
	bool convert;		/* narrowed on the GPU (wire != dtype) */
	uint64_t chunk_elems;	/* elements of every chunk but the last */
	uint64_t chunks;	/* 0 for an empty tensor */
	uint64_t count;
};

/* is @chunk_bytes a valid pipeline chunk size */
bool tcu_chunk_bytes_valid(uint64_t chunk_bytes);

/*
 * Cut @count elements of @dtype, carried as @wire_dtype, into chunks of at
 * most @chunk_bytes on the wire side.  Returns 0, or -TALLY_EINVAL with
 * *@why saying which rule the arguments broke.
 */
int tcu_plan_make(struct tcu_plan *plan, uint64_t key, uint64_t count,
		  enum tally_dtype dtype, enum tally_dtype wire_dtype,
		  uint64_t chunk_bytes, const char **why);

/* first element and element count of chunk @c */
static inline uint64_t tcu_plan_first(const struct tcu_plan *plan,
				      uint64_t c)
{
	return c * plan->chunk_elems;
}

static inline uint64_t tcu_plan_elems(const struct tcu_plan *plan,
				      uint64_t c)
{
	uint64_t first = tcu_plan_first(plan, c);
	uint64_t left = plan->count - first;

	return left < plan->chunk_elems ? left : plan->chunk_elems;
}

/* the key chunk @c of tensor @key travels under */
static inline uint64_t tcu_chunk_key(uint64_t key, uint64_t c)
{
	return key | c << TCU_KEY_BITS;
}

#endif /* TALLY_GPU_PLAN_H */
