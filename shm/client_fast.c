// SPDX-License-Identifier: BSD-3-Clause
/*
 * client_fast.c - the local fast path, the clients' side (shm/fast.h,
 * docs/local-fast-path.md): small all-reduces of a one-host job reduced
 * among the clients themselves, by whichever arrives last.
 *
 * A request whose slot is taken by another operation is parked and tried
 * again whenever the library is entered (a submission, a test, a wait);
 * so are copy-out and release of finished slots.  Nothing here ever
 * waits for another client except in client_fast_sleep().
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/reduce.h"
#include "shm/client_internal.h"

int client_fast_map(struct tally_client *c, int fd, uint64_t bytes)
{
	struct client_fast *f = &c->fast;
	const struct tally_fast_hdr *h;
	struct stat st;
	void *base;

	if (bytes < sizeof(*h) || bytes > (256ull << 20) || fstat(fd, &st) ||
	    (uint64_t)st.st_size < bytes)
		return -TALLY_EPROTO;
	/* populated: a first touch of a page costs up to ~20 us here */
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, fd, 0);
	if (base == MAP_FAILED)
		return -TALLY_ENOMEM;
	h = base;
	f->l.ranks = h->ranks;
	f->l.slots = h->slots;
	f->l.max_bytes = h->max_bytes;
	f->l.stride = h->slot_stride;
	if (h->magic != TALLY_FAST_MAGIC || h->version != TALLY_FAST_VERSION ||
	    f->l.ranks != (uint32_t)c->size || f->l.ranks < 2 ||
	    f->l.ranks > 64 || (uint32_t)c->rank >= f->l.ranks ||
	    f->l.slots == 0 || f->l.slots > TALLY_FAST_MAX_SLOTS ||
	    f->l.max_bytes == 0 || f->l.max_bytes > TALLY_FAST_MAX_BYTES ||
	    f->l.max_bytes % TALLY_FAST_ALIGN ||
	    f->l.stride != tally_fast_stride(f->l.ranks, f->l.max_bytes) ||
	    tally_fast_bytes(f->l.ranks, f->l.slots, f->l.max_bytes) > bytes) {
		munmap(base, bytes);
		memset(&f->l, 0, sizeof(f->l));
		return -TALLY_EPROTO;
	}
	f->hdr = base;
	f->bytes = bytes;
	return 0;
}

void client_fast_unmap(struct tally_client *c)
{
	if (c->fast.hdr)
		munmap(c->fast.hdr, c->fast.bytes);
	c->fast.hdr = NULL;
}

bool client_fast_takes(const struct tally_client *c,
		       const struct tally_allreduce_args *a, uint64_t bytes)
{
	/* the same answer on every rank for the same arguments: a job's
	 * clients all have the segment or none has */
	enum tally_compression m = TALLY_F_COMPRESSION(a->flags);

	return c->fast.hdr && bytes <= c->fast.l.max_bytes &&
	       (m == TALLY_COMPRESS_DEFAULT || m == TALLY_COMPRESS_NONE) &&
	       !(a->flags & TALLY_F_EF_CALLER);
}

/* A member disagreed: the slot is done at once, failed, for those there
 * and for the ones still to come (who join it as it is). */
static void fail_slot(struct tally_fast_hdr *h, struct tally_fast_slot *s,
		      uint64_t seq)
{
	uint64_t open = TALLY_FAST_STATE(seq, TALLY_FAST_OPEN);

	if (atomic_compare_exchange_strong(&s->state, &open,
			TALLY_FAST_STATE(seq, TALLY_FAST_DONE)))
		tally_fast_kick(h, false);
}

/* The last arrival: reduce the rows into row 0, publish DONE. */
static void reduce_slot(struct client_fast *f, struct tally_fast_slot *s,
			uint64_t seq, const struct client_req_fast *rf)
{
	const void *in[64];
	void *out[1];
	int res;

	if (atomic_load(&s->mismatch)) {
		fail_slot(f->hdr, s, seq);
		return;
	}
	for (uint32_t i = 0; i < f->l.ranks; i++)
		in[i] = tally_fast_row(&f->l, s, i);
	out[0] = tally_fast_row(&f->l, s, 0);
	res = reduce_buffers(rf->dtype, rf->redop, in, f->l.ranks, out, 1,
			     rf->count, f->l.ranks);
	atomic_store_explicit(&s->res, res, memory_order_relaxed);
	atomic_fetch_add_explicit(&f->hdr->reduced, 1, memory_order_relaxed);
	atomic_store_explicit(&s->state, TALLY_FAST_STATE(seq, TALLY_FAST_DONE),
			      memory_order_release);
	tally_fast_kick(f->hdr, false);
}

/* Claim a free slot for @rf; false when another member got there first.
 * A member that looked while the slot was claimed but not yet open parked
 * its request: the opening wakes it. */
static bool claim(struct tally_fast_hdr *h, struct tally_fast_slot *s,
		  uint64_t st, const struct client_req_fast *rf)
{
	uint64_t seq = TALLY_FAST_SEQ(st);

	if (!atomic_compare_exchange_strong(&s->state, &st,
			TALLY_FAST_STATE(seq, TALLY_FAST_CLAIM)))
		return false;
	atomic_store_explicit(&s->key, rf->key, memory_order_relaxed);
	atomic_store_explicit(&s->iteration, rf->iteration,
			      memory_order_relaxed);
	atomic_store_explicit(&s->count, rf->count, memory_order_relaxed);
	atomic_store_explicit(&s->desc, TALLY_FAST_DESC(rf->dtype, rf->redop),
			      memory_order_relaxed);
	atomic_store_explicit(&s->res, 0, memory_order_relaxed);
	atomic_store_explicit(&s->mismatch, 0, memory_order_relaxed);
	atomic_store_explicit(&s->arrived, 0, memory_order_relaxed);
	atomic_store_explicit(&s->released, 0, memory_order_relaxed);
	atomic_store_explicit(&s->state, TALLY_FAST_STATE(seq, TALLY_FAST_OPEN),
			      memory_order_release);
	tally_fast_kick(h, false);
	return true;
}

/* Is the slot in use @st for @rf's (key, iteration), open or (a
 * mismatch) failed early? */
static bool slot_for(struct tally_fast_slot *s, uint64_t st,
		     const struct client_req_fast *rf)
{
	unsigned int phase = TALLY_FAST_PHASE(st);

	if ((phase != TALLY_FAST_OPEN && phase != TALLY_FAST_DONE) ||
	    atomic_load_explicit(&s->key, memory_order_relaxed) != rf->key ||
	    atomic_load_explicit(&s->iteration, memory_order_relaxed) !=
	    rf->iteration)
		return false;
	/* the fields were those of use @st: it cannot end before we
	 * arrive, so they stay */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&s->state, memory_order_relaxed) != st)
		return false;
	return phase == TALLY_FAST_OPEN || atomic_load(&s->mismatch);
}

/*
 * Try to put @r's row into its slot.  0 when it arrived or must wait for
 * the slot (r->fast.joined tells which), or the error it completes with.
 */
static int arrive(struct tally_client *c, struct client_req *r,
		  bool may_claim)
{
	struct client_fast *f = &c->fast;
	struct client_req_fast *rf = &r->fast;
	struct tally_fast_slot *s = tally_fast_slot_at(f->hdr, &f->l,
						       rf->slot);
	uint64_t bit = 1ull << c->rank, st, old;
	bool agree;

	st = atomic_load_explicit(&s->state, memory_order_acquire);
	if (TALLY_FAST_PHASE(st) == TALLY_FAST_FREE && may_claim &&
	    claim(f->hdr, s, st, rf))
		st = TALLY_FAST_STATE(TALLY_FAST_SEQ(st), TALLY_FAST_OPEN);
	else if (!slot_for(s, st, rf))
		return 0;		/* another operation's: parked */
	if (atomic_load(&s->arrived) & bit)
		return -TALLY_EBADOP;	/* (key, iteration) twice */
	agree = atomic_load_explicit(&s->count, memory_order_relaxed) ==
		rf->count &&
		atomic_load_explicit(&s->desc, memory_order_relaxed) ==
		TALLY_FAST_DESC(rf->dtype, rf->redop);
	if (!agree) {
		atomic_store_explicit(&s->res, -TALLY_EMISMATCH,
				      memory_order_relaxed);
		atomic_store(&s->mismatch, 1);
	} else if (TALLY_FAST_PHASE(st) == TALLY_FAST_OPEN) {
		memcpy(tally_fast_row(&f->l, s, (uint32_t)c->rank), rf->send,
		       rf->count * tally_dtype_size(rf->dtype));
	}
	rf->seq = TALLY_FAST_SEQ(st);
	rf->joined = true;
	old = atomic_fetch_or(&s->arrived, bit);
	if (!agree)
		fail_slot(f->hdr, s, rf->seq);
	else if ((old | bit) == tally_fast_all(&f->l) &&
		 TALLY_FAST_PHASE(st) == TALLY_FAST_OPEN)
		reduce_slot(f, s, rf->seq, rf);
	return 0;
}

static void finish(struct tally_client *c, struct client_req *r, int res)
{
	atomic_fetch_add_explicit(res ? &c->fast.hdr->failed :
				  &c->fast.hdr->done, 1, memory_order_relaxed);
	r->res = res;
	r->state = REQ_DONE;
	atomic_fetch_sub(&c->fast.pending, 1);
	atomic_fetch_add_explicit(&c->done_unclaimed, 1, memory_order_release);
}

/* @r's slot is done: copy the result out, release the slot. */
static void collect(struct tally_client *c, struct client_req *r)
{
	struct client_fast *f = &c->fast;
	struct client_req_fast *rf = &r->fast;
	struct tally_fast_slot *s = tally_fast_slot_at(f->hdr, &f->l,
						       rf->slot);
	uint64_t bit = 1ull << c->rank, old;
	int res = atomic_load_explicit(&s->res, memory_order_relaxed);

	if (res > 0 || res < -TALLY_EDEVICE)
		res = -TALLY_EPROTO;	/* not a result a member wrote */
	if (!res)
		memcpy(rf->recv, tally_fast_row(&f->l, s, 0),
		       rf->count * tally_dtype_size(rf->dtype));
	old = atomic_fetch_or(&s->released, bit);
	if ((old | bit) == tally_fast_all(&f->l)) {
		atomic_store_explicit(&s->state,
			TALLY_FAST_STATE(rf->seq + 1, TALLY_FAST_FREE),
			memory_order_release);
		tally_fast_kick(f->hdr, false);
	}
	finish(c, r, res);
}

static bool slot_done(const struct client_fast *f,
		      const struct client_req_fast *rf)
{
	struct tally_fast_slot *s = tally_fast_slot_at(f->hdr, &f->l,
						       rf->slot);

	return atomic_load_explicit(&s->state, memory_order_acquire) ==
	       TALLY_FAST_STATE(rf->seq, TALLY_FAST_DONE);
}

/* Advance one pending request.  @busy: the slots an older request of
 * this pass found taken.  A younger one may join its operation there,
 * but not claim such a slot when it frees in between: a client claims
 * each slot for its requests in the order it submitted them (a peer
 * doing them one by one in that order waits for exactly that). */
static void step(struct tally_client *c, struct client_req *r, int failed,
		 uint8_t *busy)
{
	uint32_t s = r->fast.slot;
	int res;

	if (r->fast.joined && slot_done(&c->fast, &r->fast)) {
		collect(c, r);
		return;
	}
	if (failed) {		/* done slots still deliver, above */
		finish(c, r, failed);
		return;
	}
	if (!r->fast.joined) {
		res = arrive(c, r, !(busy[s / 8] & (1u << (s % 8))));
		if (!res && !r->fast.joined)
			busy[s / 8] |= (uint8_t)(1u << (s % 8));
		if (res)
			finish(c, r, res);
		else if (r->fast.joined && slot_done(&c->fast, &r->fast))
			collect(c, r);	/* we were the last */
	}
}

/* Why every pending request fails now, or 0. */
static int fast_failure(struct tally_client *c)
{
	uint32_t abort = atomic_load(&c->fast.hdr->abort);

	if (abort)
		return -(int)(abort > TALLY_EDEVICE ? TALLY_EPEERLOST : abort);
	return c->daemon_lost ? -TALLY_EDAEMONLOST : 0;
}

void client_fast_progress(struct tally_client *c)
{
	uint8_t busy[TALLY_FAST_MAX_SLOTS / 8] = { 0 };
	struct client_req *order[TALLY_MAX_INFLIGHT];
	unsigned int n = 0;
	int failed;

	if (!atomic_load(&c->fast.pending))
		return;
	atomic_store(&c->fast.seen_wake, atomic_load(&c->fast.hdr->wake));
	failed = fast_failure(c);
	for (unsigned int i = 0; i < TALLY_MAX_INFLIGHT; i++) {
		struct client_req *r = &c->reqs[i];

		if (r->state == REQ_PENDING && r->fast.on)
			order[n++] = r;
	}
	/* oldest first: request slots are reused, submission numbers not */
	for (unsigned int i = 1; i < n; i++)
		for (unsigned int k = i; k > 0 &&
		     order[k - 1]->fast.submitted > order[k]->fast.submitted;
		     k--) {
			struct client_req *t = order[k];

			order[k] = order[k - 1];
			order[k - 1] = t;
		}
	for (unsigned int i = 0; i < n; i++)
		step(c, order[i], failed, busy);
}

int client_fast_submit(struct tally_client *c,
		       const struct tally_allreduce_args *a, uint64_t *req)
{
	struct client_req *r = client_req_take(c, req);

	if (!r)
		return -TALLY_EAGAIN;
	r->state = REQ_PENDING;
	r->cqe_flags = 0;
	r->ef = (struct client_req_ef){ 0 };
	r->fast = (struct client_req_fast){
		.on = true, .send = a->sendbuf, .recv = a->recvbuf,
		.key = a->key, .iteration = a->iteration, .count = a->count,
		.dtype = (uint8_t)a->dtype, .redop = (uint8_t)a->op,
		.slot = tally_fast_slot_of(a->key, a->iteration,
					   c->fast.l.slots),
	};
	c->inflight++;
	atomic_fetch_add(&c->fast.pending, 1);
	r->fast.submitted = c->fast.submitted++;
	client_fast_progress(c);	/* it arrives behind the older ones */
	return 0;
}

/*
 * What tally_wait_ready() may read from another thread: has the table
 * changed since this client last looked, while it has requests in it?
 * (Then a tally_test() may make progress.)  Reads only atomics.
 */
bool client_fast_ready(const struct tally_client *c)
{
	const struct client_fast *f = &c->fast;

	if (!f->hdr || !atomic_load(&f->pending))
		return false;
	return atomic_load(&f->hdr->wake) != atomic_load(&f->seen_wake) ||
	       atomic_load(&f->hdr->abort);
}

void client_fast_daemon_owes(struct tally_client *c)
{
	struct tally_fast_hdr *h = c->fast.hdr;

	/* the word bumped, not just a wake-up: one about to sleep sees
	 * the change.  Spurious for the job's other sleepers, and rare: it
	 * takes fast and daemon requests in flight at once. */
	if (h && atomic_load(&c->fast.pending))
		tally_fast_kick(h, false);
}

/*
 * Sleep on the table's futex until it changes, @deadline (ns, 0: none)
 * passes, or a slice ends: short when the daemon owes this client
 * completions too (they come on the doorbell, which is not watched
 * here), longer otherwise, when only the daemon's death is looked for.
 */
void client_fast_sleep(struct tally_client *c, uint64_t now,
		       uint64_t deadline, short gone)
{
	struct tally_fast_hdr *h = c->fast.hdr;
	bool daemon_owes = atomic_load(&c->daemon_inflight) > 0;
	uint64_t slice = daemon_owes ? CLIENT_FAST_SLICE_NS : 20000000;
	struct pollfd pfd = { .fd = c->sock, .events = gone };
	struct timespec ts;
	uint32_t seen = atomic_load(&c->fast.seen_wake);

	if (deadline && deadline - now < slice)
		slice = deadline > now ? deadline - now : 0;
	ts.tv_sec = (time_t)(slice / 1000000000);
	ts.tv_nsec = (long)(slice % 1000000000);
	atomic_fetch_add(&h->sleepers, 1);
	if (atomic_load(&h->wake) == seen && !atomic_load(&h->abort))
		syscall(SYS_futex, &h->wake, FUTEX_WAIT, seen, &ts, NULL, 0);
	atomic_fetch_sub(&h->sleepers, 1);
	if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (gone | POLLHUP | POLLERR)))
		c->daemon_lost = true;
}
