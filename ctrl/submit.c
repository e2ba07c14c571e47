// SPDX-License-Identifier: BSD-3-Clause
/*
 * submit.c - the daemon's side of the rings: taking submissions,
 * validating them, matching them into local groups, reducing, completing.
 *
 * Nothing in a descriptor is trusted: opcode, dtype, op, count and both
 * buffer ranges are checked against what this client registered, and a
 * bad one completes with an error while the daemon keeps serving.
 */
#include <errno.h>
#include <unistd.h>

#include <tally/tally.h>
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "dataplane/reduce.h"
#include "dataplane/transport/transport.h"

void daemon_complete(struct tallyd *d, struct daemon_client *cl,
		     uint64_t user_data, int res)
{
	struct tally_cqe cqe = { .user_data = user_data, .res = res };

	if (res)
		d->stat_ops_failed++;
	else
		d->stat_ops_done++;
	cl->outstanding--;
	/* Room is guaranteed: we only take a submission while
	 * outstanding + unreaped completions < cq entries. */
	if (ring_push(&cl->cq, &cqe)) {
		log_err("client rank %d: completion ring corrupt", cl->rank);
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

/* Resolve one buffer of a descriptor and take a reference on its segment. */
static void *resolve(struct daemon_client *cl, uint32_t seg_id, uint64_t off,
		     uint64_t len, struct daemon_seg **ref)
{
	struct daemon_seg *s = daemon_seg_find(cl, seg_id);

	if (!s || !segment_contains(&s->seg, off, len))
		return NULL;
	s->refs++;
	*ref = s;
	return (char *)s->seg.base + off;
}

static void put_member(struct lg_member *m)
{
	daemon_seg_put(m->send_ref);
	daemon_seg_put(m->recv_ref);
}

static void run_group(struct tallyd *d, struct lg_group *g)
{
	const void *in[CONFIG_MAX_LOCAL_SIZE];
	void *out[CONFIG_MAX_LOCAL_SIZE];
	unsigned int n = d->groups.size;
	struct reduce_args args;
	int res;

	for (unsigned int r = 0; r < n; r++) {
		in[r] = g->m[r].send;
		out[r] = g->m[r].recv;
	}
	res = reduce_prepare(&args, g->op.dtype, g->op.redop, in, n, out, n,
			     g->op.count, n);
	if (!res)
		reduce_pool_run(d->reducer, &args);
	d->stat_bytes_reduced += g->op.count * tally_dtype_size(g->op.dtype);
	if (!res)
		daemon_observe_op(d, &g->op,
				  g->op.count * tally_dtype_size(g->op.dtype));
	for (unsigned int r = 0; r < n; r++) {
		put_member(&g->m[r]);
		daemon_complete(d, &d->clients[r], g->m[r].user_data, res);
	}
	local_group_release(&d->groups, g);
}

static void fail_group(struct tallyd *d, struct lg_group *g, unsigned int rank,
		       bool all)
{
	for (unsigned int r = 0; r < d->groups.size; r++) {
		if (!(g->arrived & (1ull << r)) || (!all && r != rank))
			continue;
		put_member(&g->m[r]);
		daemon_complete(d, &d->clients[r], g->m[r].user_data,
				-TALLY_EMISMATCH);
	}
	log_warn("key %llu iteration %llu: members disagree on count, dtype "
		 "or op (rank %u)", (unsigned long long)g->op.key,
		 (unsigned long long)g->op.iteration, rank);
	local_group_settle(&d->groups, g);
}

/* A client's first bad requests are logged, then one in BAD_LOG_EVERY: a
 * flood of them must not flood the log. */
#define BAD_LOG_FIRST 10
#define BAD_LOG_EVERY 10000

bool daemon_log_bad(struct daemon_client *cl)
{
	uint64_t n = ++cl->bad_requests;

	if (n == BAD_LOG_FIRST)
		log_warn("client rank %d: %d bad requests; logging one in %d "
			 "from now", cl->rank, BAD_LOG_FIRST, BAD_LOG_EVERY);
	return n <= BAD_LOG_FIRST || n % BAD_LOG_EVERY == 0;
}

static int check_sqe(const struct tally_sqe *s, uint64_t *bytes)
{
	size_t esz = tally_dtype_size((enum tally_dtype)s->dtype);

	if (s->opcode != TALLY_OP_ALLREDUCE || esz == 0 ||
	    s->redop >= TALLY_OP_MAX || (s->flags & ~TALLY_F_ALL))
		return -TALLY_EBADOP;
	if (s->count == 0 || s->count > UINT64_MAX / esz)
		return -TALLY_EINVAL;
	/* segments are page-aligned: aligned offsets are aligned elements,
	 * which the reduction kernels load as such */
	if ((s->send_off | s->recv_off) % esz)
		return -TALLY_EINVAL;
	*bytes = s->count * esz;
	return 0;
}

static void handle_sqe(struct tallyd *d, struct daemon_client *cl,
		       const struct tally_sqe *s)
{
	struct lg_op op = { s->key, s->iteration, s->count, s->dtype,
			    s->redop, s->priority, s->group,
			    (s->flags & TALLY_F_LAST_OF_ITERATION) != 0,
			    transport_now_ns() };
	struct lg_member m = { .user_data = s->user_data };
	struct daemon_seg *sref = NULL, *rref = NULL;
	struct lg_group *g;
	uint64_t bytes;
	int ret;

	cl->outstanding++;
	if (s->opcode == TALLY_OP_NOP) {
		daemon_complete(d, cl, s->user_data, 0);
		return;
	}
	ret = check_sqe(s, &bytes);
	if (ret) {
		if (daemon_log_bad(cl))
			log_warn("client rank %d: bad request (opcode %u dtype "
				 "%u op %u count %llu): %s", cl->rank,
				 s->opcode, s->dtype, s->redop,
				 (unsigned long long)s->count,
				 tally_strerror(ret));
		daemon_complete(d, cl, s->user_data, ret);
		return;
	}
	if (d->job_broken) {
		/* the other hosts would wait for this operation forever */
		if (d->cluster && !d->cluster_aborted) {
			d->cluster_aborted = true;
			cluster_local_abort(d);
		}
		daemon_complete(d, cl, s->user_data, -TALLY_EPEERLOST);
		return;
	}
	m.send = resolve(cl, s->send_seg, s->send_off, bytes, &sref);
	m.recv = resolve(cl, s->recv_seg, s->recv_off, bytes, &rref);
	if (!m.send || !m.recv ||
	    /* in place or disjoint, as the client library checks too */
	    (m.send != m.recv && (const char *)m.send < (char *)m.recv + bytes &&
	     (char *)m.recv < (const char *)m.send + bytes)) {
		if (sref)
			daemon_seg_put(sref);
		if (rref)
			daemon_seg_put(rref);
		if (daemon_log_bad(cl))
			log_warn("client rank %d: buffer outside its segments",
				 cl->rank);
		daemon_complete(d, cl, s->user_data, -TALLY_ERANGE);
		return;
	}
	m.send_ref = sref;
	m.recv_ref = rref;

	switch (local_group_add(&d->groups, (unsigned int)cl->rank, &op, &m,
				&g)) {
	case LG_WAITING:
		return;
	case LG_READY:
		if (d->cluster)
			cluster_submit_group(d, g);
		else
			run_group(d, g);
		return;
	case LG_MISMATCH:
		fail_group(d, g, (unsigned int)cl->rank, true);
		return;
	case LG_MISMATCH_ONE:
		fail_group(d, g, (unsigned int)cl->rank, false);
		return;
	case LG_DUPLICATE:
		log_warn("client rank %d: key %llu iteration %llu submitted "
			 "twice", cl->rank, (unsigned long long)s->key,
			 (unsigned long long)s->iteration);
		ret = -TALLY_EBADOP;
		break;
	case LG_FULL:
		ret = -TALLY_EAGAIN;
		break;
	case LG_BAD_RANK:
		ret = -TALLY_EBADOP;
		break;
	}
	put_member(&m);
	daemon_complete(d, cl, s->user_data, ret);
}

int daemon_drain_sq(struct tallyd *d, struct daemon_client *cl)
{
	struct tally_sqe sqe;
	int n = 0;

	while (cl->active && !cl->doomed) {
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
		handle_sqe(d, cl, &sqe);
		n++;
	}
	return n;
}
