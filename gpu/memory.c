// SPDX-License-Identifier: BSD-3-Clause
/*
 * memory.c - shared memory for the GPU: a tally_alloc() buffer (so tallyd
 * reduces in it), bound to the context's NUMA node before the GPU pins it,
 * and registered with cudaHostRegister so that copies to and from it run
 * at the link's full speed instead of through the driver's bounce buffer.
 */
#include <errno.h>
#include <string.h>

#include "gpu/context.h"
#include "gpu/numa_place.h"

void *tcu_pinned_alloc(struct tally_cuda *tc, size_t bytes, int *err)
{
	cudaError_t e;
	void *p;
	int r;

	pthread_mutex_lock(&tc->client_lock);
	p = tally_alloc(tc->client, bytes);
	r = p ? 0 : tally_last_error(tc->client);
	pthread_mutex_unlock(&tc->client_lock);
	if (!p) {
		*err = tcu_fail(tc, r ? r : -TALLY_ENOMEM,
				"tally_alloc (%zu bytes): %s", bytes,
				tally_strerror(r ? r : -TALLY_ENOMEM));
		return NULL;
	}
	if (tc->numa_node >= 0) {
		r = tcu_bind_to_node(p, bytes, tc->numa_node);
		if (r) {
			*err = tcu_fail(tc, r == -EINVAL ? -TALLY_EINVAL :
					-TALLY_ENOMEM, "mbind (node %d): %s",
					tc->numa_node, strerror(-r));
			goto err_free;
		}
	}
	/* portable: every context may copy from it; mapped: the flag-polling
	 * kernel and zero-copy users may read it from the device */
	e = cudaHostRegister(p, bytes, cudaHostRegisterPortable |
				       cudaHostRegisterMapped);
	if (e != cudaSuccess) {
		*err = tcu_fail_cuda(tc, "cudaHostRegister", e);
		goto err_free;
	}
	return p;

err_free:
	pthread_mutex_lock(&tc->client_lock);
	tally_free(tc->client, p);
	pthread_mutex_unlock(&tc->client_lock);
	return NULL;
}

void tcu_pinned_free(struct tally_cuda *tc, void *ptr)
{
	if (!ptr)
		return;
	cudaHostUnregister(ptr);
	pthread_mutex_lock(&tc->client_lock);
	tally_free(tc->client, ptr);
	pthread_mutex_unlock(&tc->client_lock);
}

void *tally_cuda_alloc(struct tally_cuda *tc, size_t bytes)
{
	int err;

	if (!tc || !bytes)
		return NULL;
	return tcu_pinned_alloc(tc, bytes, &err);
}

void tally_cuda_free(struct tally_cuda *tc, void *ptr)
{
	if (tc)
		tcu_pinned_free(tc, ptr);
}

int tally_cuda_numa_node(const struct tally_cuda *tc)
{
	return tc->numa_node;
}
