// SPDX-License-Identifier: BSD-3-Clause
/*
 * client.c - one admitted client: completions, segments, release
 * (see client.h).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "ctrl/client.h"
#include "ctrl/log.h"

void client_complete(struct daemon_client *cl, uint64_t user_data, int res)
{
	client_complete_flags(cl, user_data, res, 0);
}

void client_complete_flags(struct daemon_client *cl, uint64_t user_data,
			   int res, uint32_t flags)
{
	struct tally_cqe cqe = { .user_data = user_data, .res = res,
				 .flags = flags };

	cl->outstanding--;
	/* Room is guaranteed: we only take a submission while
	 * outstanding + unreaped completions < cq entries. */
	if (ring_push(&cl->cq, &cqe)) {
		log_err("client pid %d: completion ring corrupt", cl->pid);
		cl->doomed = true;
		return;
	}
	if (ring_needs_wakeup(&cl->cq)) {
		char one = 1;

		/* our own non-blocking pipe end: a full pipe means a wake-up
		 * is pending already; EPIPE means the client is gone */
		if (write(cl->cq_kick_fd, &one, sizeof(one)) < 0 &&
		    errno != EAGAIN)
			cl->doomed = true;
	}
}

struct daemon_seg *client_seg_find(struct daemon_client *cl, uint32_t id)
{
	if (id == 0)
		return NULL;
	for (int i = 0; i < TALLY_MAX_SEGMENTS; i++)
		if (cl->segs[i].id == id && !cl->segs[i].deleted)
			return &cl->segs[i];
	return NULL;
}

void client_seg_put(struct daemon_seg *s)
{
	if (--s->refs == 0 && s->deleted) {
		segment_destroy(&s->seg);
		s->id = 0;
		s->deleted = false;
	}
}

#define BAD_LOG_FIRST 10
#define BAD_LOG_EVERY 10000

bool client_log_bad(struct daemon_client *cl)
{
	uint64_t n = ++cl->bad_requests;

	if (n == BAD_LOG_FIRST)
		log_warn("client pid %d: %d bad requests; logging one in %d "
			 "from now", cl->pid, BAD_LOG_FIRST, BAD_LOG_EVERY);
	return n <= BAD_LOG_FIRST || n % BAD_LOG_EVERY == 0;
}

void client_release(struct daemon_client *cl)
{
	for (int i = 0; i < TALLY_MAX_SEGMENTS; i++)
		if (cl->segs[i].id)
			segment_destroy(&cl->segs[i].seg);
	memset(cl->segs, 0, sizeof(cl->segs));
	cl->n_segs = 0;
	cl->seg_bytes = 0;
	segment_destroy(&cl->ctrl);
	msg_rx_reset(&cl->rx);
	close(cl->sock);
	close(cl->sq_kick_fd);
	close(cl->cq_kick_fd);
	cl->sock = cl->sq_kick_fd = cl->cq_kick_fd = -1;
}
