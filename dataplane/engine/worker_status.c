// SPDX-License-Identifier: BSD-3-Clause
/*
 * worker_status.c - what an unfinished tensor is waiting for, for the
 * daemon's watchdog: its chunks by state and the first one not done,
 * with the node whose packet would move it on.
 */
#include <errno.h>
#include <string.h>

#include "dataplane/engine/wire.h"
#include "dataplane/engine/worker_internal.h"

static const char *const state_names[] = {
	[C_WAIT] = "exponent",
	[C_READY] = "ready",
	[C_INFLIGHT] = "inflight",
	[C_ACKED] = "acked",
	[C_DEFER] = "deferred",
	[C_DONE] = "done",
	[C_IDLE] = "idle",
};

_Static_assert(C_IDLE + 1 == TLY_CHUNK_STATES,
	       "tly_tensor_wait.by_state has one count per chunk state");

const char *tly_chunk_state_name(unsigned int state)
{
	if (state >= TLY_CHUNK_STATES || !state_names[state])
		return "unknown";
	return state_names[state];
}

int tly_worker_tensor_wait(const struct tly_worker *w, uint32_t id,
			   struct tly_tensor_wait *out)
{
	const struct wtensor *t = NULL;

	for (uint32_t i = 0; i < w->cfg.max_tensors && !t; i++)
		if (w->tensors[i].active && w->tensors[i].d.id == id)
			t = &w->tensors[i];
	if (!t)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->n_chunks = t->n_chunks;
	out->done = t->done;
	out->first = UINT32_MAX;
	for (uint32_t c = 0; c < t->n_chunks + t->n_groups; c++) {
		uint8_t s = t->chunks[c].state;

		if (s < TLY_CHUNK_STATES)
			out->by_state[s]++;
		if (c < t->n_chunks && s != C_DONE && out->first == UINT32_MAX) {
			out->first = c;
			out->first_state = s;
			out->peer = t->algo->peer(w, t, c);
		}
	}
	return 0;
}
