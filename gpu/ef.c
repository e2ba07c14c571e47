// SPDX-License-Identifier: BSD-3-Clause
/*
 * ef.c - the device residuals of libtally-cuda's error feedback (ef.h)
 * and their reset, tally_cuda_ef_reset().  A context keeps a few keys
 * (one per gradient tensor): a linear table, searched once per
 * tally_cuda_allreduce().
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/context.h"
#include "gpu/kernels/numerics.h"

_Static_assert(TCU_F32 == TALLY_FLOAT32 && TCU_F16 == TALLY_FLOAT16 &&
	       TCU_BF16 == TALLY_BFLOAT16, "ef.cu's types are tally's");

static bool method_ef(enum tally_compression m)
{
	return m == TALLY_COMPRESS_SIGN_EF ||
	       m == TALLY_COMPRESS_BLOCK_TOPK10_EF ||
	       m == TALLY_COMPRESS_BLOCK_TOPK1_EF;
}

bool tcu_ef_applies(struct tally_cuda *tc,
		    const struct tally_cuda_allreduce_args *a)
{
	enum tally_compression m = TALLY_F_COMPRESSION(a->flags);

	if (a->dtype != TALLY_FLOAT32 && a->dtype != TALLY_FLOAT16 &&
	    a->dtype != TALLY_BFLOAT16)
		return false;
	if (m == TALLY_COMPRESS_DEFAULT) {
		pthread_mutex_lock(&tc->client_lock);
		m = tally_job_compression(tc->client);
		pthread_mutex_unlock(&tc->client_lock);
	}
	return method_ef(m);
}

/* the slots' `sent` buffers, once */
static int make_sent(struct tally_cuda *tc)
{
	int err, size;

	if (tc->ef.sent)
		return 0;
	tc->ef.sent = tcu_pinned_alloc(tc, (size_t)tc->depth * tc->chunk_bytes,
				       &err);
	if (!tc->ef.sent)
		return err;
	for (unsigned int i = 0; i < tc->depth; i++)
		tc->slot[i].sent = (char *)tc->ef.sent + i * tc->chunk_bytes;
	pthread_mutex_lock(&tc->client_lock);
	size = tally_size(tc->client);
	pthread_mutex_unlock(&tc->client_lock);
	tc->ef.inv_l = 1.0f / (float)(size > 0 ? size : 1);
	return 0;
}

static struct tcu_ef_key *key_find(struct tally_cuda *tc, uint64_t key)
{
	for (size_t i = 0; i < tc->ef.n_keys; i++)
		if (tc->ef.keys[i].key == key)
			return &tc->ef.keys[i];
	return NULL;
}

static int key_add(struct tally_cuda *tc, uint64_t key,
		   struct tcu_ef_key **out)
{
	struct tcu_ef *ef = &tc->ef;
	struct tcu_ef_key *k;
	cudaError_t e;

	if (ef->n_keys == ef->cap_keys) {
		size_t cap = ef->cap_keys ? 2 * ef->cap_keys : 32;
		struct tcu_ef_key *nk = realloc(ef->keys, cap * sizeof(*nk));

		if (!nk)
			return tcu_fail(tc, -TALLY_ENOMEM, "tally_cuda_allreduce:"
					" realloc (error feedback keys)");
		ef->keys = nk;
		ef->cap_keys = cap;
	}
	k = &ef->keys[ef->n_keys];
	*k = (struct tcu_ef_key){ .key = key };
	e = cudaEventCreateWithFlags(&k->fed, cudaEventDisableTiming);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaEventCreateWithFlags", e);
	ef->n_keys++;
	*out = k;
	return 0;
}

int tcu_ef_key_get(struct tally_cuda *tc, uint64_t key, uint64_t count,
		   struct tcu_ef_key **out)
{
	struct tcu_ef_key *k;
	cudaError_t e;
	int r;

	r = make_sent(tc);
	if (r)
		return r;
	k = key_find(tc, key);
	if (!k) {
		r = key_add(tc, key, &k);
		if (r)
			return r;
	}
	*out = k;
	if (k->count == count)
		return 0;
	/* a new shape is a new tensor: cudaFree waits for the old one's
	 * kernels (it synchronizes the device) */
	cudaFree(k->e);
	k->e = NULL;
	k->count = 0;
	e = cudaMalloc((void **)&k->e, count * sizeof(float));
	if (e == cudaSuccess)
		e = cudaMemsetAsync(k->e, 0, count * sizeof(float),
				    tc->copy_in);
	if (e != cudaSuccess) {
		cudaFree(k->e);
		k->e = NULL;
		return tcu_fail_cuda(tc, "cudaMalloc/cudaMemsetAsync (error "
				     "feedback residual)", e);
	}
	k->count = count;
	return 0;
}

int tcu_ef_op_begin(struct tally_cuda *tc, struct tcu_ef_key *k)
{
	cudaError_t e = cudaStreamWaitEvent(tc->copy_in, k->fed, 0);

	return e == cudaSuccess ? 0 :
	       tcu_fail_cuda(tc, "cudaStreamWaitEvent (error feedback)", e);
}

int tcu_ef_op_end(struct tally_cuda *tc, struct tcu_ef_key *k)
{
	cudaError_t e = cudaEventRecord(k->fed, tc->copy_out);

	return e == cudaSuccess ? 0 :
	       tcu_fail_cuda(tc, "cudaEventRecord (error feedback)", e);
}

int tcu_ef_zero(struct tally_cuda *tc, struct tcu_ef_key *k)
{
	cudaError_t e = cudaSuccess;

	if (k->e)
		e = cudaMemsetAsync(k->e, 0, k->count * sizeof(float),
				    tc->copy_out);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaMemsetAsync (error feedback "
				     "reset)", e);
	return tcu_ef_op_end(tc, k);
}

int tcu_ef_abort(struct tally_cuda *tc, struct tcu_ef_key *k)
{
	cudaError_t e = cudaEventRecord(k->fed, tc->copy_in);

	if (e == cudaSuccess)
		e = cudaStreamWaitEvent(tc->copy_out, k->fed, 0);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaEventRecord/cudaStreamWaitEvent "
				     "(error feedback reset)", e);
	return tcu_ef_zero(tc, k);
}

void tcu_ef_nan_fill(void *buf, enum tally_dtype dtype, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tcu_store(buf, (int)dtype, (size_t)i, NAN);
}

void tcu_ef_free(struct tally_cuda *tc)
{
	for (size_t i = 0; i < tc->ef.n_keys; i++) {
		cudaFree(tc->ef.keys[i].e);
		cudaEventDestroy(tc->ef.keys[i].fed);
	}
	free(tc->ef.keys);
	tcu_pinned_free(tc, tc->ef.sent);
	memset(&tc->ef, 0, sizeof(tc->ef));
}

/* the caller's thread may be on another device */
static int on_device(struct tally_cuda *tc, int *prev)
{
	cudaError_t e;

	*prev = -1;
	if (cudaGetDevice(prev) == cudaSuccess && *prev == tc->device)
		return 0;
	e = cudaSetDevice(tc->device);
	return e == cudaSuccess ? 0 : tcu_fail_cuda(tc, "cudaSetDevice", e);
}

static void off_device(struct tally_cuda *tc, int prev)
{
	if (prev >= 0 && prev != tc->device)
		cudaSetDevice(prev);
}

int tally_cuda_ef_reset(struct tally_cuda *tc, uint64_t key)
{
	struct tcu_ef_key *k;
	int prev, r;

	if (!tc)
		return -TALLY_EINVAL;
	k = key_find(tc, key);
	if (!k)
		return -TALLY_ENOENT;
	r = on_device(tc, &prev);
	if (!r)
		r = tcu_ef_zero(tc, k);
	off_device(tc, prev);
	return r;
}

int tally_cuda_ef_reset_all(struct tally_cuda *tc)
{
	int prev, r;

	if (!tc)
		return -TALLY_EINVAL;
	r = on_device(tc, &prev);
	for (size_t i = 0; !r && i < tc->ef.n_keys; i++)
		r = tcu_ef_zero(tc, &tc->ef.keys[i]);
	off_device(tc, prev);
	return r;
}
