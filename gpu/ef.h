/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ef.h - error feedback on the device (docs/gpu.md, docs/compression.md
 * section 5): libtally-cuda keeps the residual e of every key that
 * travels with error feedback in device memory, one float32 per element,
 * the layout of dataplane/compress/ef_store.h.  Chunk c of a key uses
 * e[first(c) .. first(c) + elems(c)).
 *
 * copy_in runs e += g, p = e in the wire dtype (ef.cu) before the copy
 * to shared memory; the chunk goes to tallyd with TALLY_F_EF_CALLER from
 * the slot's `sent` buffer (apart from its result buffer), where the
 * completion leaves what the host sent, or NaN; copy_out, after the
 * result, copies it back and runs e := e - sent / L.  The operations of
 * one key run one after another: copy_in of the next waits for `fed`,
 * recorded on copy_out after the last one's feedback (or a reset).
 */
#ifndef TALLY_GPU_EF_H
#define TALLY_GPU_EF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include <tally/tally_cuda.h>

struct tcu_ef_key {
	uint64_t key;
	uint64_t count;		/* elements of e */
	float *e;		/* device memory */
	cudaEvent_t fed;	/* copy_out: the last feedback or reset */
};

struct tcu_ef {
	struct tcu_ef_key *keys;
	size_t n_keys, cap_keys;
	void *sent;		/* depth * chunk_bytes of shared memory,
				 * pinned: the slots' `sent`; NULL until the
				 * first operation with error feedback */
	float inv_l;		/* 1 / the host's clients */
};

/* does @a travel with error feedback (its method, or the job's, has a
 * residual; a float dtype) */
bool tcu_ef_applies(struct tally_cuda *tc,
		    const struct tally_cuda_allreduce_args *a);

/* *@out: the residual of @key with @count elements, created zeroed (on
 * copy_in) when new or when its count changed; the slots' `sent`
 * buffers made on first use.  0, or a -TALLY_E* code with the
 * context's message set. */
int tcu_ef_key_get(struct tally_cuda *tc, uint64_t key, uint64_t count,
		   struct tcu_ef_key **out);

/* copy_in waits for the key's last feedback; 0 or -TALLY_EDEVICE */
int tcu_ef_op_begin(struct tally_cuda *tc, struct tcu_ef_key *k);
/* the op's last feedback is queued on copy_out: record `fed` */
int tcu_ef_op_end(struct tally_cuda *tc, struct tcu_ef_key *k);
/* zero @k after everything queued on copy_out, then record `fed` */
int tcu_ef_zero(struct tally_cuda *tc, struct tcu_ef_key *k);

/* an operation that failed while queueing: zero @k after what copy_in
 * and copy_out hold of it (e += g without its feedback) */
int tcu_ef_abort(struct tally_cuda *tc, struct tcu_ef_key *k);

/* NaN in @n elements of @buf in @dtype: a chunk that failed before
 * libtally completed it, whose residual must become 0 */
void tcu_ef_nan_fill(void *buf, enum tally_dtype dtype, uint64_t n);

/* at close, the streams idle: free every residual and the `sent` slots */
void tcu_ef_free(struct tally_cuda *tc);

#endif /* TALLY_GPU_EF_H */
