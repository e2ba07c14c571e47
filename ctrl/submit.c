// SPDX-License-Identifier: BSD-3-Clause
/*
 * submit.c - the daemon's side of the submission rings: taking what a
 * client queued, within its completion ring's room and the outstanding
 * limit, and handing it to the client's job (job.c validates, matches,
 * reduces and completes).
 */
#include <tally/tally.h>
#include "ctrl/daemon.h"
#include "ctrl/job.h"
#include "ctrl/log.h"

/* Over service.max_outstanding: completed at once with -TALLY_ELIMIT. */
static void refuse_over_limit(struct daemon_client *cl,
			      const struct tally_sqe *s)
{
	cl->job->st.limit_refusals++;
	cl->job->st.ops_failed++;
	if (client_log_bad(cl))
		log_warn("job %s rank %d: request refused: %u operations "
			 "outstanding, the limit (service.max_outstanding)",
			 cl->job->id, cl->rank, cl->outstanding - 1);
	client_complete(cl, s->user_data, -TALLY_ELIMIT);
}

int daemon_drain_sq(struct tallyd *d, struct daemon_client *cl)
{
	struct tally_sqe sqe;
	int n = 0;

	while (cl->active && !cl->doomed && cl->job) {
		int64_t cq_free = ring_free(&cl->cq);
		int got;

		/* back-pressure: only take what we can surely complete, and
		 * no more than the API lets a client have in flight, so that
		 * one member cannot fill the pool of local groups (sized
		 * local_size * TALLY_MAX_INFLIGHT) whatever ring it declared */
		if (cl->outstanding >= TALLY_MAX_INFLIGHT)
			break;
		if (cq_free < 0 || (uint64_t)cq_free <= cl->outstanding) {
			if (cq_free < 0)
				cl->doomed = true;
			break;
		}
		got = ring_pop(&cl->sq, &sqe);
		if (got <= 0) {
			if (got < 0) {
				log_err("client rank %d: submission ring "
					"corrupt", cl->rank);
				cl->doomed = true;
			}
			break;
		}
		cl->outstanding++;
		if (cl->outstanding > (uint32_t)d->cfg.max_outstanding)
			refuse_over_limit(cl, &sqe);
		else
			job_submit(cl->job, cl, &sqe);
		n++;
	}
	return n;
}
