// SPDX-License-Identifier: BSD-3-Clause
/*
 * plan.c - the checks and chunking of a device all-reduce (plan.h).
 */
#include "gpu/plan.h"

bool tcu_chunk_bytes_valid(uint64_t chunk_bytes)
{
	return chunk_bytes >= TCU_CHUNK_MIN &&
	       chunk_bytes % TCU_CHUNK_ALIGN == 0 &&
	       chunk_bytes <= (1ull << 32);
}

/* the narrowings the GPU does: float32 to binary16 or bfloat16 */
static bool wire_dtype_valid(enum tally_dtype dtype, enum tally_dtype wire)
{
	if (wire == dtype)
		return true;
	return dtype == TALLY_FLOAT32 &&
	       (wire == TALLY_FLOAT16 || wire == TALLY_BFLOAT16);
}

int tcu_plan_make(struct tcu_plan *plan, uint64_t key, uint64_t count,
		  enum tally_dtype dtype, enum tally_dtype wire_dtype,
		  uint64_t chunk_bytes, const char **why)
{
	uint64_t chunks;

	if (!tally_dtype_size(dtype) || !tally_dtype_size(wire_dtype)) {
		*why = "unknown dtype or wire_dtype";
		return -TALLY_EINVAL;
	}
	if (!wire_dtype_valid(dtype, wire_dtype)) {
		*why = "wire_dtype must be dtype, or float16/bfloat16 for a "
		       "float32 tensor";
		return -TALLY_EINVAL;
	}
	if (key >> TCU_KEY_BITS) {
		*why = "key must be below 2^48 (the chunk index goes above)";
		return -TALLY_EINVAL;
	}
	if (!tcu_chunk_bytes_valid(chunk_bytes)) {
		*why = "chunk size must be a multiple of 64 bytes, 4 KiB .. 4 GiB";
		return -TALLY_EINVAL;
	}
	plan->dev_size = (uint32_t)tally_dtype_size(dtype);
	plan->wire_size = (uint32_t)tally_dtype_size(wire_dtype);
	plan->convert = wire_dtype != dtype;
	plan->chunk_elems = chunk_bytes / plan->wire_size;
	plan->count = count;
	chunks = count / plan->chunk_elems + (count % plan->chunk_elems != 0);
	if (chunks > TCU_MAX_CHUNKS) {
		*why = "tensor needs more than 65536 chunks: raise chunk_bytes";
		return -TALLY_EINVAL;
	}
	plan->chunks = chunks;
	return 0;
}
