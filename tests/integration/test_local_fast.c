// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_local_fast.c - the local fast path (docs/local-fast-path.md): the
 * small all-reduces of a one-host job, reduced among its clients in the
 * table tallyd hands them.
 *
 * - it is taken (the table's counter moves) up to fast_path_bytes and not
 *   beyond, and gives the daemon's result bit for bit: random floats of
 *   every dtype and op, checked against reduce_buffers() over the inputs
 *   in rank order, which is what the daemon runs;
 * - operations submitted in different orders on different ranks, more of
 *   them than the table has slots, all complete exactly;
 * - ranks that wait for them in different orders too (one submits all at
 *   once, another does one at a time): the directory sends what finds no
 *   free slot to the daemon, for every member alike, so nobody waits for
 *   a slot another operation holds;
 * - members that disagree on the size, so that some take the daemon's
 *   path, all fail with TALLY_EMISMATCH instead of waiting for ever;
 * - one (key, iteration) twice fails with TALLY_EBADOP;
 * - a member that dies holding the directory's lock fails the others with
 *   TALLY_EPEERLOST, and the job's next run gets a fresh table;
 * - a daemon's and a fast-path operation in flight together complete,
 *   waited for in either order;
 * - fast_path_bytes = 0 turns it off.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "dataplane/reduce.h"
#include "harness.h"
#include "shm/client_internal.h"

#define NCLIENTS 4
#define FAST_BYTES 32768	/* the default fast_path_bytes */

static struct test_daemon dmn;

static int teardown(void **state)
{
	(void)state;
	return daemon_stop(&dmn);
}

static int setup_default(void **state)
{
	(void)state;
	return daemon_start(&dmn, NCLIENTS, NULL);
}

static int setup_two_slots(void **state)
{
	static const char *const extra[] = {
		"--set", "daemon.fast_path_slots=2", NULL,
	};

	(void)state;
	return daemon_start(&dmn, NCLIENTS, extra);
}

static int setup_one_slot(void **state)
{
	static const char *const extra[] = {
		"--set", "daemon.fast_path_slots=1", NULL,
	};

	(void)state;
	return daemon_start(&dmn, NCLIENTS, extra);
}

static int setup_off(void **state)
{
	static const char *const extra[] = {
		"--set", "daemon.fast_path_bytes=0", NULL,
	};

	(void)state;
	return daemon_start(&dmn, NCLIENTS, extra);
}

/* Rank @rank's input element @i for case @seed: random bits of the dtype,
 * finite for the float types. */
static void fill(void *buf, enum tally_dtype t, size_t count, int rank,
		 uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank + 1;

	for (size_t i = 0; i < count; i++) {
		float f;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		f = (float)((int64_t)(x % 2000001) - 1000000) / 1024.0f;
		switch (t) {
		case TALLY_FLOAT32:
			((float *)buf)[i] = f;
			break;
		case TALLY_INT32:
			((int32_t *)buf)[i] = (int32_t)(x >> 33);
			break;
		case TALLY_FLOAT16: {
			_Float16 h = (_Float16)(f / 64);

			memcpy((uint16_t *)buf + i, &h, 2);
			break;
		}
		default: {
			uint32_t u;

			memcpy(&u, &f, 4);
			((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
			break;
		}
		}
	}
}

/* What the daemon would compute: its reduction, inputs in rank order. */
static void expected(void *out, enum tally_dtype t, enum tally_op op,
		     size_t count, uint64_t seed)
{
	size_t bytes = count * tally_dtype_size(t);
	void *in[NCLIENTS];
	void *o[1] = { out };

	for (int r = 0; r < NCLIENTS; r++) {
		in[r] = malloc(bytes);
		assert_non_null(in[r]);
		fill(in[r], t, count, r, seed);
	}
	assert_int_equal(reduce_buffers(t, op, (const void *const *)in,
					NCLIENTS, o, 1, count, NCLIENTS), 0);
	for (int r = 0; r < NCLIENTS; r++)
		free(in[r]);
}

static uint64_t fast_completed(const struct tally_client *c)
{
	return atomic_load(&c->fast.hdr->reduced);
}

/* All-reduce 8 floats of @buf in place (key @key, iteration @it, SUM)
 * with @v in element 0; *@sum gets element 0 after.  The wait's result. */
static int sum_of_8(struct tally_client *c, float *buf, uint64_t key,
		    uint64_t it, float v, float *sum)
{
	struct tally_allreduce_args a = {
		.key = key, .iteration = it, .sendbuf = buf, .recvbuf = buf,
		.count = 8,
	};
	uint64_t req;
	int ret;

	buf[0] = v;
	ret = tally_allreduce(c, &a, &req);
	if (!ret)
		ret = tally_wait(c, req, 5000);
	*sum = buf[0];
	return ret;
}

/* ---- exact, and taken up to the threshold ---- */

static int exact_member(void *p)
{
	(void)p;
	struct tally_client *c;
	uint64_t iteration = 0, req, before, done_before;
	size_t max = FAST_BYTES + 4096;
	char *send, *recv, *want;
	int fast_ops = 0;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	CHECK(c->fast.hdr, 3);		/* the job got a table */
	send = tally_alloc(c, max);
	recv = tally_alloc(c, max);
	want = malloc(max);
	CHECK(send && recv && want, 4);
	before = fast_completed(c);
	done_before = atomic_load(&c->fast.hdr->done);
	for (int t = 0; t < TALLY_DTYPE_MAX; t++)
	for (int op = 0; op < TALLY_OP_MAX; op++)
	for (int inplace = 0; inplace < 2; inplace++) {
		size_t esz = tally_dtype_size(t);
		size_t counts[] = { 1, 7, FAST_BYTES / esz,
				    FAST_BYTES / esz + 1 };

		for (size_t k = 0; k < 4; k++) {
			uint64_t seed = iteration;
			struct tally_allreduce_args a = {
				.key = k, .iteration = iteration++,
				.sendbuf = send,
				.recvbuf = inplace ? send : recv,
				.count = counts[k], .dtype = t, .op = op,
			};

			fill(send, t, counts[k], tally_rank(c), seed);
			CHECK(tally_allreduce(c, &a, &req) == 0, 5);
			CHECK(tally_wait(c, req, 10000) == 0, 6);
			expected(want, t, op, counts[k], seed);
			CHECK(!memcmp(a.recvbuf, want, counts[k] * esz), 7);
			fast_ops += k < 3;
		}
	}
	/* every fast one counted once by whoever reduced it; the one past
	 * the threshold never */
	CHECK(fast_completed(c) - before == (uint64_t)fast_ops, 8);
	/* and each member's request counted once for the metrics (all of
	 * them collected theirs before submitting the last, daemon's, one) */
	CHECK(atomic_load(&c->fast.hdr->done) - done_before ==
	      (uint64_t)NCLIENTS * fast_ops, 9);
	free(want);
	tally_disconnect(c);
	return 0;
}

static void run_members(int (*fn)(void *), void *arg)
{
	pid_t pid[NCLIENTS];

	for (int i = 0; i < NCLIENTS; i++)
		pid[i] = child_start(fn, arg);
	for (int i = 0; i < NCLIENTS; i++)
		assert_int_equal(child_wait(pid[i], 60000), 0);
	assert_true(daemon_alive(&dmn));
}

static void test_fast_exact_up_to_threshold(void **state)
{
	(void)state;
	run_members(exact_member, NULL);
}

/* ---- out of order, more operations than slots ---- */

#define N_OOO 47		/* prime: i * (2r + 1) mod N is a permutation */

/* Submit key @key of @buf's N_OOO rows of 64 int32 (key * 1000 + e +
 * rank), in place, at @iteration. */
static int submit_key(struct tally_client *c, int32_t *buf, int key,
		      uint64_t iteration, uint64_t *req)
{
	struct tally_allreduce_args a = {
		.key = (uint64_t)key, .iteration = iteration,
		.sendbuf = buf + key * 64, .recvbuf = buf + key * 64,
		.count = 64, .dtype = TALLY_INT32,
	};

	for (int e = 0; e < 64; e++)
		buf[key * 64 + e] = key * 1000 + e + tally_rank(c);
	return tally_allreduce(c, &a, req);
}

/* Every row summed over the 4 ranks. */
static bool keys_summed(const int32_t *buf)
{
	for (int key = 0; key < N_OOO; key++)
		for (int e = 0; e < 64; e++)
			if (buf[key * 64 + e] !=
			    4 * (key * 1000 + e) + 0 + 1 + 2 + 3)
				return false;
	return true;
}

static int ooo_member(void *p)
{
	(void)p;
	struct tally_client *c;
	uint64_t req[N_OOO];
	int32_t *buf;
	int rank;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, N_OOO * 64 * sizeof(int32_t));
	CHECK(buf, 3);
	/* rank r submits key (i * (2r + 1)) mod N: a different order each */
	for (int i = 0; i < N_OOO; i++) {
		int key = (i * (2 * rank + 1)) % N_OOO;

		CHECK(submit_key(c, buf, key, 3, &req[key]) == 0, 4);
	}
	for (int i = N_OOO - 1; i >= 0; i--) {
		int ret = tally_wait(c, req[i], 10000);

		if (ret)
			fprintf(stderr, "rank %d key %d: %s\n", rank, i,
				tally_strerror(ret));
		CHECK(ret == 0, 5);
	}
	CHECK(keys_summed(buf), 6);
	CHECK(c->fast.l.slots == 2, 7);	/* so most went to the daemon */
	tally_disconnect(c);
	return 0;
}

static void test_fast_out_of_order_few_slots(void **state)
{
	(void)state;
	run_members(ooo_member, NULL);
}

/*
 * Rank 0 submits keys N_OOO - 1 down to 0 at once, the others do keys 0
 * up to N_OOO - 1 one at a time, each waited for before the next.  With
 * one slot, rank 0's first key holds it until the others reach that key:
 * a table whose operations waited for a slot hung here (key 0 waited for
 * the slot held by key N_OOO - 1, which waited for ranks that do key 0
 * first); the directory sends what finds no free slot to the daemon.
 */
static int orders_member(void *p)
{
	(void)p;
	struct tally_client *c;
	uint64_t req[N_OOO];
	int32_t *buf;
	int rank;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, N_OOO * 64 * sizeof(int32_t));
	CHECK(buf, 3);
	for (int i = 0; i < N_OOO; i++) {
		int key = rank == 0 ? N_OOO - 1 - i : i;

		CHECK(submit_key(c, buf, key, 4, &req[key]) == 0, 4);
		if (rank != 0)
			CHECK(tally_wait(c, req[key], 10000) == 0, 5);
	}
	for (int key = 0; rank == 0 && key < N_OOO; key++)
		CHECK(tally_wait(c, req[key], 10000) == 0, 6);
	CHECK(keys_summed(buf), 7);
	tally_disconnect(c);
	return 0;
}

static void test_fast_waits_in_different_orders(void **state)
{
	(void)state;
	run_members(orders_member, NULL);
}

/* ---- members on different paths ---- */

/* The small ones are in the table before the large ones come: the order
 * in which the directory puts the operation there (the first member
 * decides; a large first one would send it to the daemon for all). */
struct small_first {
	atomic_int small_in;
};

static int cross_member(void *p)
{
	struct small_first *order = p;
	struct tally_client *c;
	uint64_t req, t0;
	float *buf, sum;
	int rank;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, 2 * FAST_BYTES);
	CHECK(buf, 3);
	{
		/* ranks 0 and 2 small (the table), 1 and 3 large (daemon) */
		struct tally_allreduce_args a = {
			.key = 9, .sendbuf = buf, .recvbuf = buf,
			.count = rank % 2 ? 2 * FAST_BYTES / 4 : 8,
		};

		t0 = test_now_ms();
		while (rank % 2 && atomic_load(&order->small_in) < 2 &&
		       test_now_ms() < t0 + 5000)
			usleep(1000);
		t0 = test_now_ms();
		CHECK(tally_allreduce(c, &a, &req) == 0, 4);
		if (rank % 2 == 0)
			atomic_fetch_add(&order->small_in, 1);
		CHECK(tally_wait(c, req, 5000) == -TALLY_EMISMATCH, 5);
		CHECK(test_now_ms() - t0 < 2000, 6);
	}
	/* and the job goes on */
	CHECK(sum_of_8(c, buf, 10, 0, (float)rank, &sum) == 0, 8);
	CHECK(sum == 6.0f, 9);
	tally_disconnect(c);
	return 0;
}

static void test_fast_mismatch_across_paths(void **state)
{
	struct small_first *order = mmap(NULL, sizeof(*order),
					 PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_true(order != MAP_FAILED);
	atomic_init(&order->small_in, 0);
	run_members(cross_member, order);
	munmap(order, sizeof(*order));
	assert_true(daemon_log_count(&dmn, "some took the fast path") >= 1);
}

/* Members meet here before they leave: a member that leaves aborts the
 * run, and one that has not yet submitted would get TALLY_EPEERLOST. */
struct meet {
	atomic_int arrived;
};

static int meet(struct meet *m)
{
	uint64_t end = test_now_ms() + 10000;

	atomic_fetch_add(&m->arrived, 1);
	while (atomic_load(&m->arrived) < NCLIENTS)
		if (test_now_ms() > end)
			return -1;
		else
			usleep(1000);
	return 0;
}

/* Disagreeing on the count within the table: all fail, at once for
 * those there, and the last one too. */
static int count_member(void *p)
{
	struct meet *m = p;
	struct tally_client *c;
	uint64_t req;
	float *buf;
	int rank;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 3);
	{
		struct tally_allreduce_args a = {
			.key = 4, .sendbuf = buf, .recvbuf = buf,
			.count = rank == 3 ? 5 : 4,
		};

		int ret;

		CHECK(tally_allreduce(c, &a, &req) == 0, 4);
		ret = tally_wait(c, req, 5000);
		if (ret != -TALLY_EMISMATCH)
			fprintf(stderr, "rank %d: %s\n", rank,
				tally_strerror(ret));
		CHECK(ret == -TALLY_EMISMATCH, 5);
		CHECK(atomic_load(&c->fast.hdr->failed) >= 1, 6);
	}
	CHECK(meet(m) == 0, 7);
	tally_disconnect(c);
	return 0;
}

static void test_fast_count_mismatch(void **state)
{
	struct meet *m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_true(m != MAP_FAILED);
	atomic_init(&m->arrived, 0);
	run_members(count_member, m);
	munmap(m, sizeof(*m));
}

/* ---- twice the same (key, iteration) ---- */

struct dup_arg {
	int submitted[2];	/* rank 0 -> the others: both are in */
};

static int dup_member(void *p)
{
	struct dup_arg *d = p;
	struct tally_client *c;
	uint64_t r1, r2;
	float *buf;
	int rank;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 3);
	{
		struct tally_allreduce_args a = {
			.key = 2, .iteration = 5, .sendbuf = buf,
			.recvbuf = buf, .count = 16,
		};

		buf[0] = 1.0f;
		/* rank 0 submits it twice while it is still open */
		if (rank != 0)
			CHECK(sync_wait(d->submitted[0], 5000) == 0, 4);
		CHECK(tally_allreduce(c, &a, &r1) == 0, 5);
		if (rank == 0) {
			CHECK(tally_allreduce(c, &a, &r2) == 0, 6);
			for (int i = 0; i < NCLIENTS - 1; i++)
				sync_signal(d->submitted[1]);
			CHECK(tally_wait(c, r2, 5000) == -TALLY_EBADOP, 7);
		}
		CHECK(tally_wait(c, r1, 5000) == 0, 8);
		CHECK(buf[0] == 4.0f, 9);
	}
	tally_disconnect(c);
	return 0;
}

static void test_fast_duplicate(void **state)
{
	struct dup_arg d;

	(void)state;
	assert_int_equal(pipe(d.submitted), 0);
	run_members(dup_member, &d);
	close(d.submitted[0]);
	close(d.submitted[1]);
}

/* Rank 0 comes last, so every member has read the operation's entry
 * (gone), and submits it again before it collects the first: the
 * duplicate still fails, it does not wait in a slot of its own. */
static int dup_late_member(void *p)
{
	struct dup_arg *d = p;
	struct tally_client *c;
	uint64_t r1, r2;
	float *buf;
	int rank;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 3);
	{
		struct tally_allreduce_args a = {
			.key = 2, .iteration = 6, .sendbuf = buf,
			.recvbuf = buf, .count = 16,
		};

		buf[0] = 1.0f;
		if (rank == 0)
			for (int i = 0; i < NCLIENTS - 1; i++)
				CHECK(sync_wait(d->submitted[0], 5000) == 0,
				      4);
		CHECK(tally_allreduce(c, &a, &r1) == 0, 5);
		if (rank != 0) {
			sync_signal(d->submitted[1]);
		} else {
			CHECK(tally_allreduce(c, &a, &r2) == 0, 6);
			CHECK(tally_wait(c, r2, 5000) == -TALLY_EBADOP, 7);
		}
		CHECK(tally_wait(c, r1, 5000) == 0, 8);
		CHECK(buf[0] == 4.0f, 9);
	}
	tally_disconnect(c);
	return 0;
}

static void test_fast_duplicate_after_all_routed(void **state)
{
	struct dup_arg d;

	(void)state;
	assert_int_equal(pipe(d.submitted), 0);
	run_members(dup_late_member, &d);
	close(d.submitted[0]);
	close(d.submitted[1]);
}

/* ---- a member dies holding the directory's lock ---- */

struct death_arg {
	int claimed[2];		/* the victim -> the others */
};

static int death_member(void *p)
{
	struct death_arg *a = p;
	struct tally_client *c;
	uint64_t req, t0;
	float *buf;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 3);
	if (tally_rank(c) == 3) {
		/* the directory's lock, as a member leaves it that dies
		 * while it routes an operation */
		atomic_store(&c->fast.hdr->dir_lock, 4);
		for (int i = 0; i < NCLIENTS - 1; i++)
			sync_signal(a->claimed[1]);
		usleep(100000);		/* the others wait for the lock */
		_exit(0);
	}
	CHECK(sync_wait(a->claimed[0], 5000) == 0, 5);
	{
		struct tally_allreduce_args args = {
			.key = 1, .sendbuf = buf, .recvbuf = buf, .count = 8,
		};

		CHECK(tally_allreduce(c, &args, &req) == 0, 6);
		t0 = test_now_ms();
		CHECK(tally_wait(c, req, 5000) == -TALLY_EPEERLOST, 7);
		CHECK(test_now_ms() - t0 < 1500, 8);
		/* what comes after fails at once too */
		args.iteration = 1;
		CHECK(tally_allreduce(c, &args, &req) == 0, 9);
		CHECK(tally_wait(c, req, 1000) == -TALLY_EPEERLOST, 10);
	}
	tally_disconnect(c);
	return 0;
}

/* The next run of the job: a fresh table, every slot free. */
static int rerun_member(void *p)
{
	(void)p;
	struct tally_client *c;
	uint64_t end = test_now_ms() + 5000;
	float *buf, sum;
	int ret;

	/* the old run's members may still be leaving */
	while ((ret = tally_connect(dmn.sock, &c)) == -TALLY_EDENIED &&
	       test_now_ms() < end)
		usleep(20000);
	CHECK(ret == 0, 2);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 3);
	CHECK(sum_of_8(c, buf, 1, 0, 1.0f, &sum) == 0, 5);
	CHECK(sum == 4.0f, 6);
	CHECK(fast_completed(c) == 1, 7);
	tally_disconnect(c);
	return 0;
}

static void test_fast_member_dies_routing(void **state)
{
	struct death_arg a;

	(void)state;
	assert_int_equal(pipe(a.claimed), 0);
	run_members(death_member, &a);
	close(a.claimed[0]);
	close(a.claimed[1]);
	run_members(rerun_member, NULL);
}

/* ---- both paths at once ---- */

/* A large (the daemon's) and a small (the table's) all-reduce in flight
 * together, waited for in either order: a client asleep for one kind
 * still moves the other on. */
static int mixed_member(void *p)
{
	(void)p;
	size_t big = 4 * FAST_BYTES / sizeof(int32_t);
	struct tally_client *c;
	uint64_t rb, rs;
	int32_t *b, *sm;
	int rank;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	rank = tally_rank(c);
	b = tally_alloc(c, big * sizeof(int32_t));
	sm = tally_alloc(c, 64 * sizeof(int32_t));
	CHECK(b && sm, 3);
	for (int it = 0; it < 50; it++) {
		struct tally_allreduce_args ab = {
			.key = 1, .iteration = (uint64_t)it, .sendbuf = b,
			.recvbuf = b, .count = big, .dtype = TALLY_INT32,
		};
		struct tally_allreduce_args as = ab;

		as.key = 2;
		as.sendbuf = as.recvbuf = sm;
		as.count = 64;
		for (size_t i = 0; i < big; i++)
			b[i] = (int32_t)i + rank;
		for (int i = 0; i < 64; i++)
			sm[i] = it + rank;
		CHECK(tally_allreduce(c, &ab, &rb) == 0, 4);
		CHECK(tally_allreduce(c, &as, &rs) == 0, 5);
		if ((rank + it) % 2) {
			CHECK(tally_wait(c, rb, 10000) == 0, 6);
			CHECK(tally_wait(c, rs, 10000) == 0, 7);
		} else {
			CHECK(tally_wait(c, rs, 10000) == 0, 8);
			CHECK(tally_wait(c, rb, 10000) == 0, 9);
		}
		for (size_t i = 0; i < big; i++)
			CHECK(b[i] == 4 * (int32_t)i + 6, 10);
		for (int i = 0; i < 64; i++)
			CHECK(sm[i] == 4 * it + 6, 11);
	}
	tally_disconnect(c);
	return 0;
}

static void test_fast_and_daemon_in_flight(void **state)
{
	(void)state;
	run_members(mixed_member, NULL);
}

/* ---- off ---- */

static int off_member(void *p)
{
	(void)p;
	struct tally_client *c;
	float *buf, sum;

	CHECK(tally_connect(dmn.sock, &c) == 0, 2);
	CHECK(!c->fast.hdr, 3);
	buf = tally_alloc(c, 4096);
	CHECK(buf, 4);
	CHECK(sum_of_8(c, buf, 1, 0, 2.0f, &sum) == 0, 6);
	CHECK(sum == 8.0f, 7);
	tally_disconnect(c);
	return 0;
}

static void test_fast_off(void **state)
{
	(void)state;
	run_members(off_member, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fast_exact_up_to_threshold,
						setup_default, teardown),
		cmocka_unit_test_setup_teardown(
			test_fast_out_of_order_few_slots, setup_two_slots,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_fast_waits_in_different_orders, setup_one_slot,
			teardown),
		cmocka_unit_test_setup_teardown(test_fast_mismatch_across_paths,
						setup_default, teardown),
		cmocka_unit_test_setup_teardown(test_fast_count_mismatch,
						setup_default, teardown),
		cmocka_unit_test_setup_teardown(test_fast_duplicate,
						setup_default, teardown),
		cmocka_unit_test_setup_teardown(
			test_fast_duplicate_after_all_routed, setup_default,
			teardown),
		cmocka_unit_test_setup_teardown(test_fast_member_dies_routing,
						setup_default, teardown),
		cmocka_unit_test_setup_teardown(test_fast_and_daemon_in_flight,
						setup_default, teardown),
		cmocka_unit_test_setup_teardown(test_fast_off, setup_off,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
