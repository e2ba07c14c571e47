// SPDX-License-Identifier: BSD-3-Clause
/*
 * client_fast.c - the local fast path, the clients' side (shm/fast.h,
 * docs/local-fast-path.md): small all-reduces of a one-host job reduced
 * among the clients themselves, by whichever arrives last.
 *
 * Every all-reduce of such a job is routed through the table's directory
 * when it is submitted: its first member takes a free slot for it, or
 * sends it to the daemon when none is free or the call is not the fast
 * path's; the others follow.  Copy-out and release of finished slots
 * happen whenever the library is entered (a submission, a test, a wait).
 * Nothing here waits for another client except client_fast_sleep() and,
 * for the few instructions a member holds it, the directory's lock.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
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
	f->l.dir_entries = h->dir_entries;
	if (h->magic != TALLY_FAST_MAGIC || h->version != TALLY_FAST_VERSION ||
	    f->l.ranks != (uint32_t)c->size || f->l.ranks < 2 ||
	    f->l.ranks > 64 || (uint32_t)c->rank >= f->l.ranks ||
	    f->l.slots == 0 || f->l.slots > TALLY_FAST_MAX_SLOTS ||
	    f->l.max_bytes == 0 || f->l.max_bytes > TALLY_FAST_MAX_BYTES ||
	    f->l.max_bytes % TALLY_FAST_ALIGN ||
	    f->l.stride != tally_fast_stride(f->l.ranks, f->l.max_bytes) ||
	    f->l.dir_entries != tally_fast_dir_entries(f->l.ranks) ||
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

/* Claim the free slot @s (state @st) for @rf and open it; false when it
 * was not free after all (a member spoilt the table). */
static bool claim(struct tally_fast_slot *s, uint64_t st,
		  const struct client_req_fast *rf)
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
	return true;
}

/* Why every request in the table fails now, or 0. */
static int fast_failure(struct tally_client *c)
{
	uint32_t abort = atomic_load(&c->fast.hdr->abort);

	if (abort)
		return -(int)(abort > TALLY_EDEVICE ? TALLY_EPEERLOST : abort);
	return c->daemon_lost ? -TALLY_EDAEMONLOST : 0;
}

/* Has the daemon closed our socket?  (Asked while waiting for a peer.) */
static bool daemon_gone(struct tally_client *c, short gone)
{
	struct pollfd pfd = { .fd = c->sock, .events = gone };

	if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (gone | POLLHUP | POLLERR)))
		c->daemon_lost = true;
	return c->daemon_lost;
}

/*
 * Take the directory's lock.  A member holds it for a look-up and at most
 * a claim, so spin, then yield the core to it; a member that died
 * holding it is seen by the daemon, whose abort ends the wait.
 */
static int dir_lock(struct tally_client *c)
{
	struct tally_fast_hdr *h = c->fast.hdr;
	uint32_t me = (uint32_t)c->rank + 1;
	int ret;

	for (unsigned int tries = 0;; tries++) {
		uint32_t held = 0;

		if (atomic_compare_exchange_weak_explicit(&h->dir_lock, &held,
				me, memory_order_acquire, memory_order_relaxed))
			return 0;
		if (held == me)
			return -TALLY_EPROTO;	/* never kept between calls */
		ret = fast_failure(c);
		if (ret)
			return ret;
		if (tries % 4096 == 4095 && daemon_gone(c, POLLRDHUP))
			return -TALLY_EDAEMONLOST;
		if (tries >= 64)
			sched_yield();
	}
}

static void dir_unlock(struct tally_client *c)
{
	atomic_store_explicit(&c->fast.hdr->dir_lock, 0,
			      memory_order_release);
}

/* Under the lock: (key, iteration)'s entry, or NULL and in *@spare where
 * one would go (NULL: the directory is full). */
static struct tally_fast_dirent *dir_find(struct client_fast *f,
					  uint64_t key, uint64_t iteration,
					  struct tally_fast_dirent **spare)
{
	struct tally_fast_dirent *dir = tally_fast_dir(f->hdr);
	uint32_t mask = f->l.dir_entries - 1;
	uint32_t i = tally_fast_slot_of(key, iteration, f->l.dir_entries);

	*spare = NULL;
	for (uint32_t n = 0; n < f->l.dir_entries; n++, i = (i + 1) & mask) {
		struct tally_fast_dirent *e = &dir[i];

		if (e->route == TALLY_FAST_ROUTE_EMPTY) {
			if (!*spare)
				*spare = e;
			return NULL;
		}
		if (e->route == TALLY_FAST_ROUTE_DEAD) {
			if (!*spare)
				*spare = e;
		} else if (e->key == key && e->iteration == iteration) {
			return e;
		}
	}
	return NULL;
}

/* Under the lock: every member has read @e.  DEAD keeps the probes that
 * pass it going; DEAD entries that end a chain become EMPTY. */
static void dir_retire(struct client_fast *f, struct tally_fast_dirent *e)
{
	struct tally_fast_dirent *dir = tally_fast_dir(f->hdr);
	uint32_t mask = f->l.dir_entries - 1;
	uint32_t i = (uint32_t)(e - dir);

	e->route = TALLY_FAST_ROUTE_DEAD;
	if (dir[(i + 1) & mask].route != TALLY_FAST_ROUTE_EMPTY)
		return;
	for (uint32_t n = 0; n < f->l.dir_entries &&
	     dir[i].route == TALLY_FAST_ROUTE_DEAD; n++, i = (i - 1) & mask)
		dir[i].route = TALLY_FAST_ROUTE_EMPTY;
}

/* Under the lock: a free slot claimed and opened for @rf, or -1 when every
 * slot holds an operation. */
static int take_slot(struct client_fast *f, const struct client_req_fast *rf)
{
	uint32_t first = tally_fast_slot_of(rf->key, rf->iteration,
					    f->l.slots);

	for (uint32_t n = 0; n < f->l.slots; n++) {
		uint32_t i = (first + n) % f->l.slots;
		struct tally_fast_slot *s = tally_fast_slot_at(f->hdr, &f->l,
							       i);
		uint64_t st = atomic_load_explicit(&s->state,
						   memory_order_acquire);

		if (TALLY_FAST_PHASE(st) == TALLY_FAST_FREE && claim(s, st, rf))
			return (int)i;
	}
	return -1;
}

/*
 * Has this member (key, iteration) in flight, submitted by either path and
 * not yet handed out?  Once every member has read an operation's entry it
 * is gone, so the directory alone cannot tell: a duplicate would make a
 * new entry that no other member reads, and wait in a slot alone.
 */
static bool own_in_flight(const struct tally_client *c, uint64_t key,
			  uint64_t iteration)
{
	uint32_t left = c->inflight;

	for (uint32_t i = 0; i < TALLY_MAX_INFLIGHT && left; i++) {
		const struct client_req *r = &c->reqs[i];

		if (r->state == REQ_FREE)
			continue;
		left--;
		if (r->allreduce && r->key == key && r->iteration == iteration)
			return true;
	}
	return false;
}

/*
 * Under the lock: @rf's route into *@route, this member marked as having
 * read it; the first member decides it (a slot when @table and one is
 * free, else the daemon).  -TALLY_EBADOP: this member has this (key,
 * iteration) in flight already.
 */
static int dir_route(struct tally_client *c, const struct client_req_fast *rf,
		     bool table, uint32_t *route)
{
	struct client_fast *f = &c->fast;
	uint64_t bit = 1ull << c->rank, all = tally_fast_all(&f->l);
	struct tally_fast_dirent *e, *spare;
	int slot;

	e = dir_find(f, rf->key, rf->iteration, &spare);
	if (e) {
		if (e->seen & bit)
			return -TALLY_EBADOP;
		*route = e->route;
		e->seen |= bit;
		if ((e->seen & all) == all)
			dir_retire(f, e);
		return 0;
	}
	if (own_in_flight(c, rf->key, rf->iteration))
		return -TALLY_EBADOP;
	if (!spare)
		return -TALLY_EAGAIN;
	slot = table ? take_slot(f, rf) : -1;
	*route = slot < 0 ? TALLY_FAST_ROUTE_DAEMON :
		 TALLY_FAST_ROUTE_SLOT(slot);
	*spare = (struct tally_fast_dirent){
		.key = rf->key, .iteration = rf->iteration, .seen = bit,
		.route = *route,
	};
	return 0;
}

void client_fast_unroute(struct tally_client *c, uint64_t key,
			 uint64_t iteration)
{
	struct client_fast *f = &c->fast;
	struct tally_fast_dirent *e, *spare;

	if (dir_lock(c))
		return;		/* aborted: nobody meets here any more */
	e = dir_find(f, key, iteration, &spare);
	if (e) {
		e->seen &= ~(1ull << c->rank);
		if (!(e->seen & tally_fast_all(&f->l)))
			dir_retire(f, e);
	}
	dir_unlock(c);
}

/* Is @s in use @st for @rf's (key, iteration), open or (a mismatch)
 * failed early? */
static bool slot_for(struct tally_fast_slot *s, uint64_t st,
		     const struct client_req_fast *rf)
{
	if (!tally_fast_slot_holds(s, st, rf->key, rf->iteration))
		return false;
	/* the fields were those of use @st: it cannot end before we
	 * arrive, so they stay */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&s->state, memory_order_relaxed) != st)
		return false;
	return TALLY_FAST_PHASE(st) == TALLY_FAST_OPEN ||
	       atomic_load(&s->mismatch);
}

/* Put @r's row into the slot the directory gave it: 0, or the error it
 * completes with. */
static int arrive(struct tally_client *c, struct client_req *r)
{
	struct client_fast *f = &c->fast;
	struct client_req_fast *rf = &r->fast;
	struct tally_fast_slot *s = tally_fast_slot_at(f->hdr, &f->l,
						       rf->slot);
	uint64_t bit = 1ull << c->rank, st, old;
	bool agree;

	st = atomic_load_explicit(&s->state, memory_order_acquire);
	if (!slot_for(s, st, rf))
		return -TALLY_EPROTO;	/* the directory was spoilt */
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

/* @r's slot is done: copy the result out, release the slot (nobody
 * waits for a free slot: no wake-up). */
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
	if ((old | bit) == tally_fast_all(&f->l))
		atomic_store_explicit(&s->state,
			TALLY_FAST_STATE(rf->seq + 1, TALLY_FAST_FREE),
			memory_order_release);
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

void client_fast_progress(struct tally_client *c)
{
	int failed;

	if (!atomic_load(&c->fast.pending))
		return;
	atomic_store(&c->fast.seen_wake, atomic_load(&c->fast.hdr->wake));
	failed = fast_failure(c);
	for (unsigned int i = 0; i < TALLY_MAX_INFLIGHT; i++) {
		struct client_req *r = &c->reqs[i];

		if (r->state != REQ_PENDING || !r->fast.on)
			continue;
		if (slot_done(&c->fast, &r->fast))
			collect(c, r);	/* done slots still deliver */
		else if (failed)
			finish(c, r, failed);
	}
}

/* A request of the table's, pending; it ends with @res now if not 0. */
static void fast_request(struct tally_client *c, struct client_req *r,
			 const struct client_req_fast *rf, int res)
{
	r->state = REQ_PENDING;
	r->cqe_flags = 0;
	r->ef = (struct client_req_ef){ 0 };
	r->fast = *rf;
	r->allreduce = true;
	r->key = rf->key;
	r->iteration = rf->iteration;
	c->inflight++;
	atomic_fetch_add(&c->fast.pending, 1);
	if (!res)
		res = arrive(c, r);
	if (res)
		finish(c, r, res);
	else if (slot_done(&c->fast, &r->fast))
		collect(c, r);	/* we were the last */
}

int client_fast_route(struct tally_client *c,
		      const struct tally_allreduce_args *a, uint64_t bytes,
		      uint64_t *req)
{
	bool table = client_fast_takes(c, a, bytes);
	struct client_req_fast rf = {
		.on = true, .send = a->sendbuf, .recv = a->recvbuf,
		.key = a->key, .iteration = a->iteration, .count = a->count,
		.dtype = (uint8_t)a->dtype, .redop = (uint8_t)a->op,
	};
	struct client_req *r = NULL;
	uint32_t route;
	int ret;

	if (table) {		/* before the directory: EAGAIN leaves none */
		r = client_req_take(c, req);
		if (!r)
			return -TALLY_EAGAIN;
		/* a duplicate is the caller's error whatever became of the
		 * table (members gone since the first one completed) */
		if (own_in_flight(c, a->key, a->iteration)) {
			fast_request(c, r, &rf, -TALLY_EBADOP);
			return CLIENT_FAST_TAKEN;
		}
	}
	ret = fast_failure(c);
	if (!ret)
		ret = dir_lock(c);
	if (ret) {		/* nobody meets in the table any more */
		if (!table)
			return CLIENT_FAST_TO_DAEMON_UNLISTED;
		fast_request(c, r, &rf, ret);
		return CLIENT_FAST_TAKEN;
	}
	ret = dir_route(c, &rf, table, &route);
	dir_unlock(c);
	if (ret == -TALLY_EAGAIN)
		return ret;
	/* the daemon's whatever the others do: where they took the table,
	 * the daemon finds them there and fails it as a mismatch */
	if (!table)
		return ret ? CLIENT_FAST_TO_DAEMON_UNLISTED :
		       CLIENT_FAST_TO_DAEMON;
	if (!ret && route == TALLY_FAST_ROUTE_DAEMON)
		return CLIENT_FAST_TO_DAEMON;
	if (!ret && (route < TALLY_FAST_ROUTE_SLOT(0) ||
		     TALLY_FAST_ROUTE_SLOT_OF(route) >= c->fast.l.slots))
		ret = -TALLY_EPROTO;	/* the directory was spoilt */
	rf.slot = ret ? 0 : TALLY_FAST_ROUTE_SLOT_OF(route);
	fast_request(c, r, &rf, ret);
	client_fast_progress(c);	/* collect what else is done */
	return CLIENT_FAST_TAKEN;
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
	daemon_gone(c, gone);
}
