// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_fast_table.c - the local fast path's table (shm/fast.h) as a member
 * that spoils it may leave it, read by both of its other users:
 *
 * - the daemon (ctrl/local_fast.c): looking for an operation some members
 *   took to it (local_fast_cross), reading the count, aborting;
 * - a client (shm/client_fast.c): checking the header when it maps the
 *   table, then routing a call through its directory, submitting into a
 *   slot and moving its requests on.
 *
 * The input: a few script bytes (key, iteration, ranks, the client's rank
 * and operation), whether the daemon's header is kept, then the table's
 * bytes.  Nothing may crash, touch memory outside the table or loop;
 * ASan and UBSan watch.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/local_fast.h"
#include "fuzz_input.h"
#include "shm/client_internal.h"

#define RANKS 4
#define SLOTS 2
#define ROW 64

/* The client's script comes first in the input, the table last. */
static void as_client(struct local_fast *f, struct fuzz_in *in)
{
	struct tally_client *c = calloc(1, sizeof(*c));
	float send[ROW / 4], recv[ROW / 4];
	struct tally_allreduce_args a = { 0 };
	uint64_t req;

	if (!c)
		return;
	c->sock = -1;
	c->size = RANKS;
	c->rank = fuzz_u8(in) % RANKS;
	a.key = fuzz_u8(in) % 4;
	a.iteration = fuzz_u8(in) % 4;
	a.dtype = fuzz_u8(in) % TALLY_DTYPE_MAX;
	a.op = fuzz_u8(in) % TALLY_OP_MAX;
	a.count = 1 + fuzz_u8(in) % (ROW / tally_dtype_size(a.dtype));
	memset(send, 0, sizeof(send));
	a.sendbuf = send;
	a.recvbuf = recv;
	if (!client_fast_map(c, f->seg.fd, f->seg.size)) {
		if (client_fast_route(c, &a, a.count *
				      tally_dtype_size(a.dtype), &req) ==
		    CLIENT_FAST_TAKEN)
			for (int i = 0; i < 3; i++) {
				client_fast_progress(c);
				(void)client_fast_ready(c);
			}
		client_fast_unmap(c);
	}
	free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct local_fast f;
	uint64_t key, iteration, ranks, done, failed;
	size_t from;
	uint8_t *t;

	struct fuzz_in script = { data, size < 6 ? size : 6 };

	if (local_fast_create(&f, RANKS, SLOTS, ROW))
		return 0;
	t = f.seg.base;
	in.p += script.n;
	in.n -= script.n;
	key = fuzz_u8(&in) % 4;
	iteration = fuzz_u8(&in) % 4;
	ranks = fuzz_u8(&in);
	from = fuzz_u8(&in) & 1 ? 128 : 0;	/* the header kept, or not */
	fuzz_bytes(&in, t + from, f.seg.size - from);
	/* a directory lock held by another member is a live member's: the
	 * client waits for it until the daemon's abort (test_client_fast);
	 * one naming the client itself (its rank: the script's first byte)
	 * is exercised */
	{
		struct fuzz_in peek = script;
		_Atomic uint32_t *lock = &((struct tally_fast_hdr *)t)->dir_lock;
		uint32_t me = fuzz_u8(&peek) % RANKS + 1;

		if (atomic_load(lock) != me)
			atomic_store(lock, 0);
	}

	(void)local_fast_cross(&f, key, iteration, ranks);
	local_fast_counts(&f, &done, &failed);
	as_client(&f, &script);
	(void)local_fast_cross(&f, key, iteration, ranks);
	local_fast_abort(&f, TALLY_EPEERLOST);
	local_fast_destroy(&f);
	return 0;
}
