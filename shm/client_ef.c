// SPDX-License-Identifier: BSD-3-Clause
/*
 * client_ef.c - the error feedback of sign_ef and block_topk<p>_ef in
 * the client library (docs/compression.md, sections 3, 4 and 5).
 *
 * The residual e of each tensor key lives here (ef_store.c, libc only),
 * never in the daemon.  Such a submission sends p = g + e from a
 * scratch buffer of the library's own (carved from shared segments like
 * tally_alloc()'s, one per key), and e holds p meanwhile.  The daemon
 * compresses the host's local sum and, on completion, leaves in every
 * member's scratch what the host sent, decoded (TALLY_CQE_F_SENT); then
 * e := p - sent / L (L: the host's clients), so the members' residuals
 * add up to the host's (block_topk: sent is 0 in a block the host did
 * not send, so e keeps p there).  A non-finite chunk (sent NaN) resets its
 * residual; a request that failed, or whose tensor was not compressed
 * (one host alone: the sum is exact), leaves e = 0.
 *
 * A caller that keeps its own residual (TALLY_F_EF_CALLER: libtally-cuda,
 * whose residuals are in device memory) sends p from its own sendbuf,
 * apart from its recvbuf; the library keeps nothing for it and on
 * completion leaves sent in that sendbuf, or NaN throughout where the
 * caller's e must become 0 (failed, or not compressed).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shm/client_internal.h"
#include "dataplane/compress/ef_store.h"
#include "dataplane/compress/elem.h"

/* scratch comes from segments of at least this much, shared by keys */
#define EF_ARENA_MIN (16ull << 20)

struct ef_key {
	uint64_t key;
	size_t bytes;
	void *scratch;
	bool busy;		/* a request of the key is in flight */
	bool reset;		/* reset while busy: e = 0 at its completion
				 * (e holds p until then) */
};

struct client_ef {
	struct tly_ef_store store;
	struct ef_key *keys;
	size_t n_keys, cap_keys;
	char *arena;		/* the current segment's free part */
	size_t arena_left;
};

static struct client_ef *ef_of(struct tally_client *c)
{
	if (!c->ef) {
		c->ef = calloc(1, sizeof(*c->ef));
		if (c->ef)
			tly_ef_store_init(&c->ef->store);
	}
	return c->ef;
}

void client_ef_free(struct tally_client *c)
{
	if (!c->ef)
		return;
	tly_ef_store_fini(&c->ef->store);
	free(c->ef->keys);
	free(c->ef);
	c->ef = NULL;
}

/* @bytes of shared memory the daemon can reach, 64-byte aligned */
static void *arena_take(struct tally_client *c, struct client_ef *ef,
			size_t bytes)
{
	void *p;

	bytes = (bytes + 63) & ~(size_t)63;
	if (ef->arena_left < bytes) {
		size_t n = bytes > EF_ARENA_MIN ? bytes : EF_ARENA_MIN;

		ef->arena = tally_alloc(c, n);
		if (!ef->arena) {
			ef->arena_left = 0;
			return NULL;
		}
		ef->arena_left = n;
	}
	p = ef->arena;
	ef->arena += bytes;
	ef->arena_left -= bytes;
	return p;
}

/* the key's scratch of @bytes (a new one when its size changed) */
static struct ef_key *key_scratch(struct tally_client *c,
				  struct client_ef *ef, uint64_t key,
				  size_t bytes)
{
	struct ef_key *k = NULL;

	for (size_t i = 0; i < ef->n_keys && !k; i++)
		if (ef->keys[i].key == key)
			k = &ef->keys[i];
	if (!k) {
		if (ef->n_keys == ef->cap_keys) {
			size_t cap = ef->cap_keys ? 2 * ef->cap_keys : 32;
			struct ef_key *nk = realloc(ef->keys,
						    cap * sizeof(*nk));

			if (!nk)
				return NULL;
			ef->keys = nk;
			ef->cap_keys = cap;
		}
		k = &ef->keys[ef->n_keys++];
		*k = (struct ef_key){ .key = key };
	}
	if (k->bytes < bytes) {
		/* a larger shape: the old scratch stays in its arena */
		void *s = arena_take(c, ef, bytes);

		if (!s)
			return NULL;
		k->scratch = s;
		k->bytes = bytes;
	}
	return k;
}

/* the methods whose residual the library keeps: sign_ef, block_topk */
static bool method_ef(int m)
{
	return m == TALLY_COMPRESS_SIGN_EF ||
	       m == TALLY_COMPRESS_BLOCK_TOPK10_EF ||
	       m == TALLY_COMPRESS_BLOCK_TOPK1_EF;
}

/* whether @a travels with error feedback (named, or the job's default) */
static bool is_ef(const struct tally_client *c,
		  const struct tally_allreduce_args *a)
{
	enum tally_compression m = TALLY_F_COMPRESSION(a->flags);

	if (a->dtype == TALLY_INT32)
		return false;	/* named: the daemon refuses it */
	return method_ef(m) ||
	       (m == TALLY_COMPRESS_DEFAULT && method_ef(c->job_method));
}

enum tally_compression tally_job_compression(const struct tally_client *c)
{
	return c ? (enum tally_compression)c->job_method :
		   TALLY_COMPRESS_DEFAULT;
}

/* TALLY_F_EF_CALLER: the daemon writes sent into sendbuf only when no
 * member of the host reduces in place, so it must be apart from recvbuf */
static int prepare_caller(const struct tally_allreduce_args *a,
			  struct client_req_ef *re)
{
	uintptr_t s = (uintptr_t)a->sendbuf, r = (uintptr_t)a->recvbuf;
	uint64_t bytes = a->count * tally_dtype_size(a->dtype);

	if (s < r + bytes && r < s + bytes)
		return -TALLY_EINVAL;
	*re = (struct client_req_ef){ .used = true, .caller = true,
				      .key = a->key, .count = a->count,
				      .dtype = a->dtype,
				      .sent = (void *)a->sendbuf };
	return 0;
}

int client_ef_prepare(struct tally_client *c,
		      const struct tally_allreduce_args *a,
		      const void **send, struct client_req_ef *re)
{
	enum tly_dtype dt = (enum tly_dtype)a->dtype;
	struct client_ef *ef;
	struct ef_key *k;
	float *e;

	re->used = false;
	if (!is_ef(c, a))
		return 0;
	if (a->count > SIZE_MAX / sizeof(float))
		return -TALLY_EINVAL;
	if (a->flags & TALLY_F_EF_CALLER)
		return prepare_caller(a, re);
	ef = ef_of(c);
	if (!ef)
		return -TALLY_ENOMEM;
	k = key_scratch(c, ef, a->key, a->count * tally_dtype_size(a->dtype));
	if (!k)
		return c->last_error ? c->last_error : -TALLY_ENOMEM;
	if (k->busy)
		return -TALLY_EAGAIN;	/* its last request is not reaped */
	e = tly_ef_get(&ef->store, a->key, a->count);
	if (!e)
		return -TALLY_ENOMEM;
	/* p = g + e goes in the tensor's type; e keeps p in float32, so
	 * a float16 rounding of p is fed back too */
	for (uint64_t i = 0; i < a->count; i++) {
		e[i] += tly_elem_load(a->sendbuf, dt, i);
		tly_elem_store(k->scratch, dt, i, e[i]);
	}
	k->busy = true;
	*re = (struct client_req_ef){ .used = true, .key = a->key,
				      .count = a->count, .dtype = a->dtype };
	*send = k->scratch;
	return 0;
}

void client_ef_finish(struct tally_client *c, struct client_req_ef *re,
		      int res, uint32_t cqe_flags)
{
	struct client_ef *ef = c->ef;
	enum tly_dtype dt = (enum tly_dtype)re->dtype;
	struct ef_key *k = NULL;
	float *e, inv = 1.0f / (float)(c->size > 0 ? c->size : 1);

	if (re->used && re->caller) {
		re->used = false;
		if (res || !(cqe_flags & TALLY_CQE_F_SENT))
			for (uint64_t i = 0; i < re->count; i++)
				tly_elem_store(re->sent, dt, i, NAN);
		return;
	}
	if (!re->used || !ef)
		return;
	re->used = false;
	for (size_t i = 0; i < ef->n_keys && !k; i++)
		if (ef->keys[i].key == re->key)
			k = &ef->keys[i];
	if (!k)
		return;
	k->busy = false;
	e = tly_ef_get(&ef->store, re->key, re->count);
	if (!e)
		return;
	if (res || !(cqe_flags & TALLY_CQE_F_SENT) || k->reset) {
		k->reset = false;
		memset(e, 0, re->count * sizeof(*e));
		return;
	}
	for (uint64_t i = 0; i < re->count; i++) {
		float s = tly_elem_load(k->scratch, dt, i);

		e[i] = isfinite(s) ? e[i] - s * inv : 0.0f;
	}
}

void client_ef_cancel(struct tally_client *c, struct client_req_ef *re)
{
	if (re->used && re->caller)
		re->used = false;	/* its sendbuf is untouched */
	else
		client_ef_finish(c, re, -TALLY_EINVAL, 0);
}

int client_ef_peek(struct tally_client *c, uint64_t key, uint64_t n,
		   const float **e, const void **scratch)
{
	if (!c->ef)
		return -1;
	for (size_t i = 0; i < c->ef->n_keys; i++)
		if (c->ef->keys[i].key == key) {
			*scratch = c->ef->keys[i].scratch;
			*e = tly_ef_get(&c->ef->store, key, n);
			return *e ? 0 : -1;
		}
	return -1;
}

/* a reset of a key in flight takes effect at its completion */
static void mark_busy_reset(struct client_ef *ef, const uint64_t *key)
{
	for (size_t i = 0; i < ef->n_keys; i++)
		if (ef->keys[i].busy && (!key || ef->keys[i].key == *key))
			ef->keys[i].reset = true;
}

int tally_ef_reset(struct tally_client *c, uint64_t key)
{
	if (!c)
		return -TALLY_EINVAL;
	if (!c->ef || tly_ef_reset(&c->ef->store, key))
		return -TALLY_ENOENT;
	mark_busy_reset(c->ef, &key);
	return 0;
}

void tally_ef_reset_all(struct tally_client *c)
{
	if (c && c->ef) {
		tly_ef_reset_all(&c->ef->store);
		mark_busy_reset(c->ef, NULL);
	}
}
