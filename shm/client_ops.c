// SPDX-License-Identifier: BSD-3-Clause
/*
 * client_ops.c - libtally's data path: submitting all-reduces, reaping
 * completions, and waiting on the completion doorbell.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "shm/client_internal.h"

#define REQ_SLOT(req) ((uint32_t)((req) & 0xffffu))
#define REQ_GEN(req) ((uint32_t)((req) >> 16))

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct client_req *req_lookup(struct tally_client *c, uint64_t req)
{
	struct client_req *r;

	if (REQ_SLOT(req) >= TALLY_MAX_INFLIGHT)
		return NULL;
	r = &c->reqs[REQ_SLOT(req)];
	if (r->state == REQ_FREE || r->gen != REQ_GEN(req))
		return NULL;
	return r;
}

/* Move every completion from the ring into its request slot. */
static void reap(struct tally_client *c)
{
	struct tally_cqe cqe;
	int got;

	while ((got = ring_pop(&c->cq, &cqe)) > 0) {
		struct client_req *r = req_lookup(c, cqe.user_data);

		if (r && r->state == REQ_PENDING) {
			r->state = REQ_DONE;
			r->res = cqe.res;
			r->cqe_flags = cqe.flags;
			atomic_fetch_add_explicit(&c->done_unclaimed, 1,
						  memory_order_release);
		}
	}
	if (got < 0)		/* the daemon corrupted the ring */
		c->daemon_lost = true;
}

/*
 * Ring the daemon's submission doorbell, a pipe.  When the daemon has died
 * the write raises SIGPIPE, whose default action would kill the training
 * process: block it around the write, and take back the one the write
 * raised (not one that was pending already).  0, or a negative errno;
 * -EAGAIN (a full pipe) means a wake-up is pending already.
 */
static int doorbell_ring(int fd)
{
	static const struct timespec no_wait = { 0, 0 };
	sigset_t pipe_only, old, pending;
	bool was_pending;
	char one = 1;
	int ret = 0;

	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
	was_pending = !sigpending(&pending) && sigismember(&pending, SIGPIPE);
	if (write(fd, &one, sizeof(one)) < 0) {
		ret = -errno;
		if (ret == -EPIPE && !was_pending)
			sigtimedwait(&pipe_only, NULL, &no_wait);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

static int submit_ef(struct tally_client *c, struct tally_sqe *sqe,
		     uint64_t *req, const struct client_req_ef *ef);

int client_submit_sqe(struct tally_client *c, struct tally_sqe *sqe,
		      uint64_t *req)
{
	return submit_ef(c, sqe, req, NULL);
}

static int submit_ef(struct tally_client *c, struct tally_sqe *sqe,
		     uint64_t *req, const struct client_req_ef *ef)
{
	struct client_req *r;

	if (c->daemon_lost)
		return -TALLY_EDAEMONLOST;
	r = client_req_take(c, &sqe->user_data);
	if (!r)
		return -TALLY_EAGAIN;
	if (ring_push(&c->sq, sqe))
		return -TALLY_EAGAIN;
	r->state = REQ_PENDING;
	r->cqe_flags = 0;
	r->ef = ef ? *ef : (struct client_req_ef){ 0 };
	r->allreduce = sqe->opcode == TALLY_OP_ALLREDUCE;
	r->key = sqe->key;
	r->iteration = sqe->iteration;
	r->fast.on = false;
	c->inflight++;
	if (!atomic_fetch_add(&c->daemon_inflight, 1))
		client_fast_daemon_owes(c);
	if (ring_needs_wakeup(&c->sq)) {
		int e = doorbell_ring(c->sq_kick_fd);

		if (e && e != -EAGAIN)
			c->daemon_lost = true;
	}
	*req = sqe->user_data;
	return 0;
}

static int check_args(const struct tally_allreduce_args *a, uint64_t *bytes)
{
	size_t esz;

	if (!a || (unsigned int)a->dtype >= TALLY_DTYPE_MAX ||
	    (unsigned int)a->op >= TALLY_OP_MAX || a->count == 0 ||
	    !a->sendbuf || !a->recvbuf ||
	    (a->flags & ~(TALLY_F_ALL | TALLY_F_EF_CALLER)) ||
	    TALLY_F_COMPRESSION(a->flags) > TALLY_COMPRESS_BLOCK_TOPK1_EF ||
	    a->group > UINT16_MAX)
		return -TALLY_EINVAL;
	esz = tally_dtype_size(a->dtype);
	if (a->count > UINT64_MAX / esz ||
	    ((uintptr_t)a->sendbuf | (uintptr_t)a->recvbuf) % esz)
		return -TALLY_EINVAL;	/* the daemon refuses them too */
	*bytes = a->count * esz;
	return 0;
}

int tally_allreduce(struct tally_client *c,
		    const struct tally_allreduce_args *a, uint64_t *req)
{
	struct tally_sqe sqe = { .opcode = TALLY_OP_ALLREDUCE };
	struct client_req_ef ef;
	const void *send;
	uint64_t bytes;
	int ret, route = CLIENT_FAST_TO_DAEMON_UNLISTED;

	if (!c || !req)
		return -TALLY_EINVAL;
	ret = check_args(a, &bytes);
	if (ret)
		return ret;
	if (client_translate(c, a->sendbuf, bytes, &sqe.send_seg,
			     &sqe.send_off) ||
	    client_translate(c, a->recvbuf, bytes, &sqe.recv_seg,
			     &sqe.recv_off))
		return -TALLY_ERANGE;
	/* in place, or disjoint: a partial overlap would read what the
	 * reduction already wrote */
	if (sqe.send_seg == sqe.recv_seg && sqe.send_off != sqe.recv_off &&
	    sqe.send_off < sqe.recv_off + bytes &&
	    sqe.recv_off < sqe.send_off + bytes)
		return -TALLY_EINVAL;
	if (c->daemon_lost)
		return -TALLY_EDAEMONLOST;
	if (c->inflight >= TALLY_MAX_INFLIGHT)
		reap(c);
	/* a job with a table: its directory says where this one goes */
	if (c->fast.hdr) {
		route = client_fast_route(c, a, bytes, req);
		if (route <= CLIENT_FAST_TAKEN)
			return route;
	}
	/* sign_ef: p = g + e goes from the library's scratch instead */
	send = a->sendbuf;
	ret = client_ef_prepare(c, a, &send, &ef);
	if (ret)
		goto unroute;
	if (ef.used && client_translate(c, send, bytes, &sqe.send_seg,
					&sqe.send_off)) {
		client_ef_cancel(c, &ef);
		ret = -TALLY_ERANGE;
		goto unroute;
	}
	sqe.dtype = (uint8_t)a->dtype;
	sqe.redop = (uint8_t)a->op;
	sqe.priority = a->priority > UINT16_MAX ? UINT16_MAX :
		       (uint16_t)a->priority;
	sqe.group = (uint16_t)a->group;
	/* TALLY_F_ALL fits 8 bits; TALLY_F_EF_CALLER stays here */
	sqe.flags = (uint8_t)(a->flags & TALLY_F_ALL);
	sqe.key = a->key;
	sqe.iteration = a->iteration;
	sqe.count = a->count;
	ret = submit_ef(c, &sqe, req, &ef);
	if (!ret)
		return 0;
	client_ef_cancel(c, &ef);
unroute:
	/* not submitted: this member has not been there after all */
	if (route == CLIENT_FAST_TO_DAEMON)
		client_fast_unroute(c, a->key, a->iteration);
	return ret;
}

/* Hand out a finished request's result and free its slot. */
static int req_finish(struct tally_client *c, struct client_req *r)
{
	if (r->state == REQ_DONE)
		atomic_fetch_sub_explicit(&c->done_unclaimed, 1,
					  memory_order_relaxed);
	client_ef_finish(c, &r->ef, r->res, r->cqe_flags);
	if (!r->fast.on)
		atomic_fetch_sub(&c->daemon_inflight, 1);
	r->state = REQ_FREE;
	c->inflight--;
	return r->res;
}

/* One look at a request: its result (its slot freed), or
 * -TALLY_EINPROGRESS. */
static int req_check(struct tally_client *c, struct client_req *r)
{
	client_fast_progress(c);
	if (r->state == REQ_PENDING && !r->fast.on)
		reap(c);
	if (r->state == REQ_DONE)
		return req_finish(c, r);
	if (c->daemon_lost) {
		if (r->fast.on)		/* still counted as in the table */
			atomic_fetch_sub(&c->fast.pending, 1);
		r->res = -TALLY_EDAEMONLOST;
		return req_finish(c, r);
	}
	return -TALLY_EINPROGRESS;
}

int tally_test(struct tally_client *c, uint64_t req)
{
	struct client_req *r;

	if (!c)
		return -TALLY_EINVAL;
	r = req_lookup(c, req);
	if (!r)
		return -TALLY_ENOENT;
	return req_check(c, r);
}

/* Completions published and not yet taken.  Reads only the shared
 * indices, so another thread may reap meanwhile (tally_wait_ready). */
static bool cq_has_entries(const struct tally_client *c)
{
	return atomic_load_explicit(&c->cq.sh->tail, memory_order_acquire) !=
	       atomic_load_explicit(&c->cq.sh->head, memory_order_acquire);
}

/* What tally_wait_ready() waits for: completions on the ring, or taken
 * off it by another thread's reap (tally_allreduce() on a full ring) and
 * not yet collected.  Without the second, a progress thread slept through
 * completions a submitting thread had reaped, and both waited for ever. */
static bool ready_to_collect(const struct tally_client *c)
{
	return atomic_load_explicit(&c->done_unclaimed,
				    memory_order_acquire) ||
	       cq_has_entries(c) || client_fast_ready(c);
}

/* Sleep until the daemon rings the doorbell, the socket says it is gone,
 * or the deadline passes.  @gone is what on the socket means gone: POLLIN
 * when we alone use it (the daemon never writes unasked, so readable means
 * EOF), POLLRDHUP when another thread may be awaiting a reply on it.
 * Returns false on timeout. */
static bool sleep_on_doorbell(struct tally_client *c, uint64_t deadline,
			      short gone,
			      bool (*ready)(const struct tally_client *))
{
	struct pollfd pfd[2] = {
		{ .fd = c->cq_kick_fd, .events = POLLIN },
		{ .fd = c->sock, .events = gone },
	};
	struct timespec ts, *timeout = NULL;
	int n;

	ring_sleep_prepare(&c->cq);
	if (ready(c)) {		/* raced with a completion */
		ring_sleep_done(&c->cq);
		return true;
	}
	if (deadline) {
		uint64_t now = now_ns(), left = now >= deadline ? 0 :
						deadline - now;

		ts.tv_sec = (time_t)(left / 1000000000);
		ts.tv_nsec = (long)(left % 1000000000);
		timeout = &ts;	/* to the ns: the fast path's slices */
	}
	n = ppoll(pfd, 2, timeout, NULL);
	ring_sleep_done(&c->cq);
	if (n > 0 && (pfd[0].revents & POLLIN)) {
		char v[64];
		ssize_t r = read(c->cq_kick_fd, v, sizeof(v));

		/* EOF: the daemon closed its end */
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			c->daemon_lost = true;
	}
	if (n > 0 && (pfd[1].revents & (gone | POLLHUP | POLLERR)))
		c->daemon_lost = true;
	return n != 0;
}

/* Waiting on the doorbell for the daemon: while fast-path requests are
 * pending too, wake every CLIENT_FAST_SLICE_NS to move them on (their
 * slots are released by this client's progress only). */
static uint64_t doorbell_deadline(const struct tally_client *c, uint64_t now,
				  uint64_t deadline)
{
	uint64_t slice = now + CLIENT_FAST_SLICE_NS;

	if (!atomic_load(&c->fast.pending))
		return deadline;
	return deadline && deadline < slice ? deadline : slice;
}

static uint64_t spin_budget(const struct tally_client *c)
{
	uint64_t b = 2 * c->spin_ewma_ns;

	if (c->spin_ewma_ns > CLIENT_SPIN_MAX_NS)
		return 0;
	return b > CLIENT_SPIN_MAX_NS ? CLIENT_SPIN_MAX_NS : b;
}

int tally_wait(struct tally_client *c, uint64_t req, int timeout_ms)
{
	uint64_t start = now_ns(), deadline = 0, spin_end;
	struct client_req *r;
	int ret;

	if (!c)
		return -TALLY_EINVAL;
	r = req_lookup(c, req);
	if (!r)
		return -TALLY_ENOENT;
	if (timeout_ms >= 0)
		deadline = start + (uint64_t)timeout_ms * 1000000ull + 1;
	spin_end = start + spin_budget(c);

	while ((ret = req_check(c, r)) == -TALLY_EINPROGRESS) {
		uint64_t now = now_ns();

		if (deadline && now >= deadline)
			return -TALLY_ETIMEDOUT;
		if (now < spin_end)
			sched_yield();	/* lets the daemon run on our core */
		else if (r->fast.on)
			client_fast_sleep(c, now, deadline, POLLIN);
		else
			sleep_on_doorbell(c, doorbell_deadline(c, now,
							       deadline),
					  POLLIN, cq_has_entries);
	}
	/* remember how long waits take: 7/8 old + 1/8 new */
	c->spin_ewma_ns = (7 * c->spin_ewma_ns + (now_ns() - start)) / 8;
	return ret;
}

int tally_wait_ready(struct tally_client *c, int timeout_ms)
{
	uint64_t deadline = 0, now;

	if (!c)
		return -TALLY_EINVAL;
	if (timeout_ms >= 0)
		deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull + 1;
	for (;;) {
		if (c->daemon_lost)
			return -TALLY_EDAEMONLOST;
		if (ready_to_collect(c))
			return 0;
		now = now_ns();
		if (deadline && now >= deadline)
			return -TALLY_ETIMEDOUT;
		if (atomic_load(&c->fast.pending))
			client_fast_sleep(c, now, deadline, POLLRDHUP);
		else
			sleep_on_doorbell(c, deadline, POLLRDHUP,
					  ready_to_collect);
	}
}
