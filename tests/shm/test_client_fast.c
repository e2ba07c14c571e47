// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_client_fast.c - the wake-ups of the local fast path's table
 * (shm/client_fast.c, docs/local-fast-path.md), two members in one
 * process, no daemon.  A member whose request is parked (its slot not
 * yet open for it) sleeps until the table's wake word changes: every
 * change of a slot that may let it go on must bump that word, or the
 * member sleeps for ever while its peer waits for it.  Each case parks
 * one member, lets the other make the change, and asks the parked one
 * whether it would wake (client_fast_ready(), what tally_wait_ready()
 * sleeps on), then finishes the operations and checks the sums.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
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

/* An in-place sum of N floats: member @rank's buffer holds rank+1..
 * (times 10 for rank 1). */
static void submit(struct tally_client *c, uint64_t key, float *buf)
{
	struct tally_allreduce_args a = {
		.key = key, .iteration = 1, .sendbuf = buf, .recvbuf = buf,
		.count = N, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
	};
	uint64_t req;

	for (int i = 0; i < N; i++)
		buf[i] = (float)(i + 1) * (c->rank ? 10.0f : 1.0f);
	assert_true(client_fast_takes(c, &a, sizeof(float) * N));
	assert_int_equal(client_fast_submit(c, &a, &req), 0);
}

static unsigned int done_requests(const struct tally_client *c)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < TALLY_MAX_INFLIGHT; i++)
		if (c->reqs[i].state == REQ_DONE) {
			assert_int_equal(c->reqs[i].res, 0);
			n++;
		}
	return n;
}

static void assert_summed(const float *buf)
{
	for (int i = 0; i < N; i++)
		assert_true(buf[i] == (float)(i + 1) * 11.0f);
}

/*
 * Member 1 looks while member 0 has claimed the slot and not yet opened
 * it: nothing to join, so it parks.  Member 0 then opens the slot and
 * arrives; the opening must wake member 1 (it did not: both members of
 * a torch job slept, each waiting for the other).  The claim is replayed
 * whole: the test holds the slot in CLAIM while member 1 looks, then
 * hands it back free for member 0's real claim.
 */
static void test_parked_on_claim_woken_by_opening(void **state)
{
	struct pair *p = *state;
	float b0[N], b1[N];
	uint32_t i = tally_fast_slot_of(7, 1, p->c[0]->fast.l.slots);
	struct tally_fast_slot *s = tally_fast_slot_at(p->c[0]->fast.hdr,
						       &p->c[0]->fast.l, i);

	atomic_store(&s->state, TALLY_FAST_STATE(0, TALLY_FAST_CLAIM));
	submit(p->c[1], 7, b1);
	assert_false(p->c[1]->reqs[0].fast.joined);
	assert_false(client_fast_ready(p->c[1]));

	atomic_store(&s->state, TALLY_FAST_STATE(0, TALLY_FAST_FREE));
	submit(p->c[0], 7, b0);
	assert_int_equal(atomic_load(&s->state),
			 TALLY_FAST_STATE(0, TALLY_FAST_OPEN));
	assert_true(client_fast_ready(p->c[1]));

	client_fast_progress(p->c[1]);		/* joins, the last: reduces */
	client_fast_progress(p->c[0]);
	assert_int_equal(done_requests(p->c[0]), 1);
	assert_int_equal(done_requests(p->c[1]), 1);
	assert_summed(b0);
	assert_summed(b1);
	assert_int_equal(atomic_load(&s->state),
			 TALLY_FAST_STATE(1, TALLY_FAST_FREE));
}

/*
 * One slot: member 1 finished operation 7 and parks operation 8 behind
 * it, since member 0 has not copied 7's result out yet.  Member 0's
 * release frees the slot and must wake member 1, who then claims it.
 */
static void test_parked_on_busy_slot_woken_by_release(void **state)
{
	struct pair *p = *state;
	float b0[N], b1[N], b1_next[N], b0_next[N];

	submit(p->c[0], 7, b0);
	submit(p->c[1], 7, b1);			/* the last: reduces */
	assert_int_equal(done_requests(p->c[1]), 1);
	assert_summed(b1);

	submit(p->c[1], 8, b1_next);
	assert_false(client_fast_ready(p->c[1]));
	client_fast_progress(p->c[0]);		/* copies out, releases */
	assert_int_equal(done_requests(p->c[0]), 1);
	assert_summed(b0);
	assert_true(client_fast_ready(p->c[1]));

	client_fast_progress(p->c[1]);		/* claims, arrives */
	submit(p->c[0], 8, b0_next);		/* the last: reduces */
	client_fast_progress(p->c[1]);
	assert_int_equal(done_requests(p->c[1]), 2);
	assert_summed(b0_next);
	assert_summed(b1_next);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_parked_on_claim_woken_by_opening,
			setup_many_slots, teardown),
		cmocka_unit_test_setup_teardown(
			test_parked_on_busy_slot_woken_by_release,
			setup_one_slot, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
