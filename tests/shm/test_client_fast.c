// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_client_fast.c - the local fast path's directory (shm/client_fast.c,
 * docs/local-fast-path.md), two members in one process over a table made
 * by the daemon's own code, no daemon.  The first member of an operation
 * decides its route (a free slot, or the daemon when none is free) and
 * every later member follows it, whatever became free meanwhile; that is
 * what keeps members that wait in different orders from waiting for each
 * other.  Entries go when both members have read them, probes pass the
 * retired ones, and a lock held by a member that died ends with the
 * daemon's abort.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctrl/local_fast.h"
#include "shm/client_internal.h"

#define N 4

struct pair {
	struct local_fast table;
	struct tally_client *c[2];
};

static int setup(void **state, unsigned int slots)
{
	struct pair *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	assert_int_equal(local_fast_create(&p->table, 2, slots, 64), 0);
	for (int i = 0; i < 2; i++) {
		p->c[i] = calloc(1, sizeof(*p->c[i]));
		assert_non_null(p->c[i]);
		p->c[i]->sock = -1;
		p->c[i]->size = 2;
		p->c[i]->rank = i;
		assert_int_equal(client_fast_map(p->c[i], p->table.seg.fd,
						 p->table.seg.size), 0);
	}
	*state = p;
	return 0;
}

static int setup_one_slot(void **state)
{
	return setup(state, 1);
}

static int setup_many_slots(void **state)
{
	return setup(state, 8);
}

static int teardown(void **state)
{
	struct pair *p = *state;

	for (int i = 0; i < 2; i++) {
		client_fast_unmap(p->c[i]);
		free(p->c[i]);
	}
	local_fast_destroy(&p->table);
	free(p);
	return 0;
}

/* Route an in-place sum of @count floats (@count > 16: too large for the
 * table's 64-byte rows, the daemon's); member @rank's buffer holds
 * i + 1 (times 10 for rank 1).  The route's code, the handle in *@req. */
static int route(struct tally_client *c, uint64_t key, float *buf,
		 uint64_t count, uint64_t *req)
{
	struct tally_allreduce_args a = {
		.key = key, .iteration = 1, .sendbuf = buf, .recvbuf = buf,
		.count = count, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
	};

	for (uint64_t i = 0; i < count && i < N; i++)
		buf[i] = (float)(i + 1) * (c->rank ? 10.0f : 1.0f);
	return client_fast_route(c, &a, count * sizeof(float), req);
}

static struct client_req *req_of(struct tally_client *c, uint64_t req)
{
	return &c->reqs[req & 0xffff];
}

/* @req ended with @res (and was handed out: its slot freed). */
static void assert_ended(struct tally_client *c, uint64_t req, int res)
{
	struct client_req *r = req_of(c, req);

	client_fast_progress(c);
	assert_int_equal(r->state, REQ_DONE);
	assert_int_equal(r->res, res);
	r->state = REQ_FREE;
	c->inflight--;
	atomic_fetch_sub(&c->done_unclaimed, 1);
}

static void assert_summed(const float *buf)
{
	for (int i = 0; i < N; i++)
		assert_true(buf[i] == (float)(i + 1) * 11.0f);
}

static unsigned int live_entries(struct pair *p)
{
	struct tally_fast_dirent *dir = tally_fast_dir(p->table.seg.base);
	unsigned int n = 0;

	for (uint32_t i = 0; i < p->table.l.dir_entries; i++)
		n += dir[i].route != TALLY_FAST_ROUTE_EMPTY;
	return n;
}

/* The first member takes a slot, the second follows it there and, the
 * last, reduces; the entry goes once both have read it. */
static void test_second_member_follows_the_first(void **state)
{
	struct pair *p = *state;
	float b0[N], b1[N];
	uint64_t r0, r1;

	assert_int_equal(route(p->c[0], 7, b0, N, &r0), CLIENT_FAST_TAKEN);
	assert_int_equal(live_entries(p), 1);
	assert_int_equal(route(p->c[1], 7, b1, N, &r1), CLIENT_FAST_TAKEN);
	assert_int_equal(req_of(p->c[0], r0)->fast.slot,
			 req_of(p->c[1], r1)->fast.slot);
	assert_int_equal(live_entries(p), 0);
	assert_ended(p->c[1], r1, 0);
	assert_ended(p->c[0], r0, 0);
	assert_summed(b0);
	assert_summed(b1);
}

/*
 * The program the bounded table used to hang: member 0 has operation 1
 * in the only slot and operation 2 in flight; member 1 will do 2 only
 * after 1.  Operation 2 went to the daemon when member 0 found no free
 * slot for it, and member 1 follows it there although the slot is free
 * again by the time it comes.
 */
static void test_no_free_slot_sends_all_to_the_daemon(void **state)
{
	struct pair *p = *state;
	float b0[N], b1[N], b0_2[N], b1_2[N];
	uint64_t r0, r1, r;

	assert_int_equal(route(p->c[0], 1, b0, N, &r0), CLIENT_FAST_TAKEN);
	assert_int_equal(route(p->c[0], 2, b0_2, N, &r), CLIENT_FAST_TO_DAEMON);
	assert_int_equal(route(p->c[1], 1, b1, N, &r1), CLIENT_FAST_TAKEN);
	assert_ended(p->c[1], r1, 0);
	assert_ended(p->c[0], r0, 0);
	assert_summed(b0);
	assert_int_equal(TALLY_FAST_PHASE(atomic_load(&tally_fast_slot_at(
		p->table.seg.base, &p->table.l, 0)->state)), TALLY_FAST_FREE);
	assert_int_equal(route(p->c[1], 2, b1_2, N, &r), CLIENT_FAST_TO_DAEMON);
	assert_int_equal(live_entries(p), 0);
}

/* A call too large for the table, first: the daemon's for both, the
 * second member's fitting call too (the daemon sees the mismatch). */
static void test_large_first_call_routes_the_small_one(void **state)
{
	struct pair *p = *state;
	float big[32], b1[N];
	uint64_t r;

	assert_int_equal(route(p->c[0], 3, big, 32, &r),
			 CLIENT_FAST_TO_DAEMON);
	assert_int_equal(route(p->c[1], 3, b1, N, &r), CLIENT_FAST_TO_DAEMON);
	assert_int_equal(live_entries(p), 0);
}

/* (key, iteration) twice while the first is in flight: EBADOP for the
 * second, at its completion; the first goes on. */
static void test_duplicate_in_flight(void **state)
{
	struct pair *p = *state;
	float b0[N], b0_again[N], b1[N];
	uint64_t r0, r_again, r1;

	assert_int_equal(route(p->c[0], 5, b0, N, &r0), CLIENT_FAST_TAKEN);
	assert_int_equal(route(p->c[0], 5, b0_again, N, &r_again),
			 CLIENT_FAST_TAKEN);
	assert_ended(p->c[0], r_again, -TALLY_EBADOP);
	assert_int_equal(route(p->c[1], 5, b1, N, &r1), CLIENT_FAST_TAKEN);
	assert_ended(p->c[1], r1, 0);
	assert_ended(p->c[0], r0, 0);
	assert_summed(b0);
}

/*
 * A duplicate after every member has read the entry (it is gone): the
 * member's own requests show it in flight, so it fails at once instead of
 * making a new entry nobody else reads and waiting in a slot alone.
 */
static void test_duplicate_after_the_entry_went(void **state)
{
	struct pair *p = *state;
	float b0[N], b0_again[N], b1[N];
	uint64_t r0, r_again, r1;

	assert_int_equal(route(p->c[0], 5, b0, N, &r0), CLIENT_FAST_TAKEN);
	assert_int_equal(route(p->c[1], 5, b1, N, &r1), CLIENT_FAST_TAKEN);
	assert_int_equal(live_entries(p), 0);
	/* rank 0 has not collected its result: (5, 1) is in flight */
	assert_int_equal(route(p->c[0], 5, b0_again, N, &r_again),
			 CLIENT_FAST_TAKEN);
	assert_ended(p->c[0], r_again, -TALLY_EBADOP);
	assert_int_equal(live_entries(p), 0);
	assert_ended(p->c[0], r0, 0);
	assert_ended(p->c[1], r1, 0);
	assert_summed(b0);
	/* handed out, (5, 1) may come again (a new operation) */
	assert_int_equal(route(p->c[0], 5, b0, N, &r0), CLIENT_FAST_TAKEN);
	assert_int_equal(live_entries(p), 1);
}

/* The same when the first went to the daemon: a large call is not the
 * table's, and its duplicate is not listed either */
static void test_duplicate_of_a_daemon_request(void **state)
{
	struct pair *p = *state;
	float big0[32], big1[32], small[N];
	uint64_t r0, r1, r;

	assert_int_equal(route(p->c[0], 7, big0, 32, &r0),
			 CLIENT_FAST_TO_DAEMON);
	/* what the daemon submission would have recorded (request 0: the
	 * route took none) */
	req_of(p->c[0], 0)->state = REQ_PENDING;
	req_of(p->c[0], 0)->allreduce = true;
	req_of(p->c[0], 0)->key = 7;
	req_of(p->c[0], 0)->iteration = 1;
	p->c[0]->inflight++;
	assert_int_equal(route(p->c[1], 7, big1, 32, &r1),
			 CLIENT_FAST_TO_DAEMON);
	assert_int_equal(live_entries(p), 0);
	assert_int_equal(route(p->c[0], 7, small, N, &r), CLIENT_FAST_TAKEN);
	assert_ended(p->c[0], r, -TALLY_EBADOP);
	assert_int_equal(route(p->c[0], 7, big0, 32, &r),
			 CLIENT_FAST_TO_DAEMON_UNLISTED);
	assert_int_equal(live_entries(p), 0);
}

/* A member whose daemon submission failed takes its mark back: the
 * entry goes, and the next member decides anew (a slot is free). */
static void test_unroute_forgets(void **state)
{
	struct pair *p = *state;
	float b0[N], b1[N], b0_1[N];
	uint64_t r0, r1, r;

	assert_int_equal(route(p->c[0], 1, b0_1, N, &r0), CLIENT_FAST_TAKEN);
	assert_int_equal(route(p->c[0], 2, b0, N, &r), CLIENT_FAST_TO_DAEMON);
	client_fast_unroute(p->c[0], 2, 1);
	assert_int_equal(live_entries(p), 1);
	assert_int_equal(route(p->c[1], 1, b1, N, &r1), CLIENT_FAST_TAKEN);
	assert_ended(p->c[1], r1, 0);
	assert_ended(p->c[0], r0, 0);
	assert_int_equal(route(p->c[1], 2, b1, N, &r1), CLIENT_FAST_TAKEN);
	assert_int_equal(route(p->c[0], 2, b0, N, &r0), CLIENT_FAST_TAKEN);
	assert_ended(p->c[0], r0, 0);
	assert_ended(p->c[1], r1, 0);
	assert_summed(b0);
}

/* Many times the directory's size, one operation after another: entries
 * go, it never fills. */
static void test_directory_recycles(void **state)
{
	struct pair *p = *state;
	uint32_t n = 4 * p->table.l.dir_entries;
	float b0[N], b1[N];
	uint64_t r0, r1;

	for (uint32_t k = 0; k < n; k++) {
		assert_int_equal(route(p->c[k % 2], k, b0, N, &r0),
				 CLIENT_FAST_TAKEN);
		assert_int_equal(route(p->c[1 - k % 2], k, b1, N, &r1),
				 CLIENT_FAST_TAKEN);
		assert_ended(p->c[0], k % 2 ? r1 : r0, 0);
		assert_ended(p->c[1], k % 2 ? r0 : r1, 0);
	}
	assert_int_equal(live_entries(p), 0);
}

/* Keys whose probes start at the same entry: retiring the middle one of
 * a chain leaves it DEAD so that the last is still found past it; once
 * the last goes too, both become EMPTY behind the first. */
static void test_probe_passes_retired_entries(void **state)
{
	struct pair *p = *state;
	struct tally_fast_dirent *dir = tally_fast_dir(p->table.seg.base);
	uint32_t d = p->table.l.dir_entries;
	uint32_t start = tally_fast_slot_of(0, 1, d);
	uint64_t key[3] = { 0 }, r[3], r1;
	float b[3][32], b1[32];
	int found = 1;

	for (uint64_t k = 1; found < 3; k++)
		if (tally_fast_slot_of(k, 1, d) == start)
			key[found++] = k;
	for (int i = 0; i < 3; i++)	/* the daemon's, so no slot in play */
		assert_int_equal(route(p->c[0], key[i], b[i], 32, &r[i]),
				 CLIENT_FAST_TO_DAEMON);
	assert_int_equal(route(p->c[1], key[1], b1, 32, &r1),
			 CLIENT_FAST_TO_DAEMON);
	assert_int_equal(dir[(start + 1) % d].route, TALLY_FAST_ROUTE_DEAD);
	assert_int_equal(route(p->c[1], key[2], b1, 32, &r1),
			 CLIENT_FAST_TO_DAEMON);
	assert_int_equal(dir[(start + 1) % d].route, TALLY_FAST_ROUTE_EMPTY);
	assert_int_equal(dir[(start + 2) % d].route, TALLY_FAST_ROUTE_EMPTY);
	assert_int_equal(live_entries(p), 1);
	/* and the first is still the first's */
	assert_int_equal(route(p->c[0], key[0], b[0], 32, &r[0]),
			 CLIENT_FAST_TO_DAEMON_UNLISTED);	/* twice */
	assert_int_equal(route(p->c[1], key[0], b1, 32, &r1),
			 CLIENT_FAST_TO_DAEMON);
	assert_int_equal(live_entries(p), 0);
}

static void *abort_soon(void *arg)
{
	struct pair *p = arg;

	usleep(20000);
	local_fast_abort(&p->table, -TALLY_EPEERLOST);
	return NULL;
}

/* The directory's lock held by member 1, which died: the daemon's abort
 * (20 ms later) ends member 0's wait for it, with the abort's error. */
static void test_lock_of_a_dead_member(void **state)
{
	struct pair *p = *state;
	struct tally_fast_hdr *h = p->table.seg.base;
	float b0[N], big[32];
	pthread_t daemon;
	uint64_t r;

	atomic_store(&h->dir_lock, 2);
	assert_int_equal(pthread_create(&daemon, NULL, abort_soon, p), 0);
	assert_int_equal(route(p->c[0], 1, b0, N, &r), CLIENT_FAST_TAKEN);
	pthread_join(daemon, NULL);
	assert_ended(p->c[0], r, -TALLY_EPEERLOST);
	assert_int_equal(route(p->c[0], 2, big, 32, &r),
			 CLIENT_FAST_TO_DAEMON_UNLISTED);
}

/* The lock word naming this member, which never keeps it between calls:
 * the table was spoilt, EPROTO rather than a wait for ever. */
static void test_lock_named_ours_is_spoilt(void **state)
{
	struct pair *p = *state;
	struct tally_fast_hdr *h = p->table.seg.base;
	float b0[N];
	uint64_t r;

	atomic_store(&h->dir_lock, 1);
	assert_int_equal(route(p->c[0], 1, b0, N, &r), CLIENT_FAST_TAKEN);
	assert_ended(p->c[0], r, -TALLY_EPROTO);
}

/* A route naming a slot past the table's: EPROTO, nothing touched. */
static void test_spoilt_route(void **state)
{
	struct pair *p = *state;
	struct tally_fast_dirent *dir = tally_fast_dir(p->table.seg.base);
	uint32_t d = p->table.l.dir_entries;
	float b1[N];
	uint64_t r;

	dir[tally_fast_slot_of(9, 1, d)] = (struct tally_fast_dirent){
		.key = 9, .iteration = 1, .seen = 1,
		.route = TALLY_FAST_ROUTE_SLOT(1000),
	};
	assert_int_equal(route(p->c[1], 9, b1, N, &r), CLIENT_FAST_TAKEN);
	assert_ended(p->c[1], r, -TALLY_EPROTO);
}

int main(void)
{
#define T(fn, setup) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_second_member_follows_the_first, setup_many_slots),
		T(test_no_free_slot_sends_all_to_the_daemon, setup_one_slot),
		T(test_large_first_call_routes_the_small_one, setup_many_slots),
		T(test_duplicate_in_flight, setup_many_slots),
		T(test_duplicate_after_the_entry_went, setup_many_slots),
		T(test_duplicate_of_a_daemon_request, setup_many_slots),
		T(test_unroute_forgets, setup_one_slot),
		T(test_directory_recycles, setup_one_slot),
		T(test_probe_passes_retired_entries, setup_many_slots),
		T(test_lock_of_a_dead_member, setup_many_slots),
		T(test_lock_named_ours_is_spoilt, setup_many_slots),
		T(test_spoilt_route, setup_many_slots),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
