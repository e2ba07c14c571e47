// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_wait_ready.c - tally_wait_ready(), the progress-thread pattern the
 * Python binding uses: one thread submits under a lock while another
 * sleeps in tally_wait_ready() without it and collects completions with
 * tally_test() under the lock.
 *
 * Checked: every sum is exact and every request completes exactly once;
 * the call times out when nothing is pending and returns at once when a
 * completion is ready; it reports a daemon that dies while the submitting
 * thread holds a tally_alloc() reply pending, and does not take a reply
 * on the socket for the daemon's death.  Runs under TSan (make test-tsan).
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "harness.h"

#define OPS 2000
#define WINDOW 64
#define COUNT 1024

struct progress {
	struct tally_client *c;
	pthread_mutex_t lock;
	uint64_t req[OPS];
	atomic_int state[OPS];	/* 0 free, 1 pending, 2 done */
	int result[OPS];
	atomic_int submitted, completed;
	atomic_bool stop;
	int wakeups;
};

static void *progress_main(void *arg)
{
	struct progress *p = arg;

	while (!atomic_load(&p->stop)) {
		int ret = tally_wait_ready(p->c, 100);
		int n = atomic_load(&p->submitted);

		if (ret == -TALLY_ETIMEDOUT)
			continue;
		if (ret && ret != -TALLY_EDAEMONLOST)
			break;
		p->wakeups++;
		pthread_mutex_lock(&p->lock);
		for (int i = 0; i < n; i++) {
			int r;

			if (atomic_load(&p->state[i]) != 1)
				continue;
			r = tally_test(p->c, p->req[i]);
			if (r == -TALLY_EINPROGRESS)
				continue;
			p->result[i] = r;
			atomic_store(&p->state[i], 2);
			atomic_fetch_add(&p->completed, 1);
		}
		pthread_mutex_unlock(&p->lock);
		if (ret == -TALLY_EDAEMONLOST)
			break;
	}
	return NULL;
}

static void test_progress_thread(void **state)
{
	struct test_daemon d;
	struct progress *p = calloc(1, sizeof(*p));
	int32_t *buf;
	pthread_t th;
	(void)state;

	assert_non_null(p);
	assert_int_equal(daemon_start(&d, 1, NULL), 0);
	assert_int_equal(tally_connect(d.sock, &p->c), 0);
	buf = tally_alloc(p->c, (size_t)WINDOW * COUNT * sizeof(int32_t));
	assert_non_null(buf);
	/* nothing pending: a bounded sleep, then a timeout */
	assert_int_equal(tally_wait_ready(p->c, 20), -TALLY_ETIMEDOUT);
	pthread_mutex_init(&p->lock, NULL);
	assert_int_equal(pthread_create(&th, NULL, progress_main, p), 0);

	for (int i = 0; i < OPS; i++) {
		int32_t *slice = buf + (size_t)(i % WINDOW) * COUNT;
		uint64_t t0 = test_now_ms();
		int ret;

		/* reuse a slice only when its last operation is done */
		while (i >= WINDOW &&
		       atomic_load(&p->state[i - WINDOW]) != 2) {
			assert_true(test_now_ms() - t0 < 10000);
			sched_yield();
		}
		if (i >= WINDOW) {
			assert_int_equal(p->result[i - WINDOW], 0);
			for (int j = 0; j < COUNT; j++)
				assert_int_equal(slice[j],
						 (int32_t)(i - WINDOW + j));
		}
		for (int j = 0; j < COUNT; j++)
			slice[j] = i + j;
		pthread_mutex_lock(&p->lock);
		ret = tally_allreduce(p->c, &(struct tally_allreduce_args){
			.key = (uint64_t)(i % WINDOW), .iteration = (uint64_t)i,
			.sendbuf = slice, .recvbuf = slice, .count = COUNT,
			.dtype = TALLY_INT32, .op = TALLY_SUM }, &p->req[i]);
		if (ret == 0)
			atomic_store(&p->state[i], 1);
		pthread_mutex_unlock(&p->lock);
		assert_int_equal(ret, 0);
		atomic_store(&p->submitted, i + 1);
	}
	for (uint64_t t0 = test_now_ms();
	     atomic_load(&p->completed) < OPS;)
		assert_true(test_now_ms() - t0 < 10000);
	for (int i = 0; i < OPS; i++)
		assert_int_equal(p->result[i], 0);

	/* a daemon that dies while this thread waits for an alloc reply is
	 * reported as lost, to the progress thread too */
	atomic_store(&p->submitted, 0);
	kill(d.pid, SIGKILL);
	pthread_mutex_lock(&p->lock);
	assert_null(tally_alloc(p->c, 4096));
	pthread_mutex_unlock(&p->lock);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(tally_wait_ready(p->c, -1), -TALLY_EDAEMONLOST);
	tally_disconnect(p->c);
	daemon_stop(&d);
	free(p);
}

/*
 * A completion another call took off the ring (tally_wait() of a later
 * request, or tally_allreduce() reaping on a full ring) is still ready to
 * be collected: tally_wait_ready() must say so at once.  It used to look
 * at the ring only, so the Python binding's progress thread slept through
 * completions its submitting thread had reaped and 300 requests in flight
 * hung (python_binding: test_more_than_max_inflight, 1 run in 4).
 */
#define REAPED_OPS 8

static void test_reaped_completion_is_ready(void **state)
{
	struct test_daemon d;
	struct tally_client *c;
	uint64_t req[REAPED_OPS];
	int32_t *buf;
	(void)state;

	assert_int_equal(daemon_start(&d, 1, NULL), 0);
	assert_int_equal(tally_connect(d.sock, &c), 0);
	buf = tally_alloc(c, REAPED_OPS * 16 * sizeof(int32_t));
	assert_non_null(buf);
	for (int i = 0; i < REAPED_OPS; i++) {
		for (int j = 0; j < 16; j++)
			buf[i * 16 + j] = i * 100 + j;
		assert_int_equal(tally_allreduce(c, &(struct tally_allreduce_args){
			.key = (uint64_t)i, .iteration = 1,
			.sendbuf = buf + i * 16, .recvbuf = buf + i * 16,
			.count = 16, .dtype = TALLY_INT32, .op = TALLY_SUM },
			&req[i]), 0);
	}
	/* the daemon completes in order: waiting for the last reaps all */
	assert_int_equal(tally_wait(c, req[REAPED_OPS - 1], 10000), 0);
	assert_int_equal(tally_wait_ready(c, 0), 0);
	for (int i = 0; i < REAPED_OPS - 1; i++) {
		assert_int_equal(tally_test(c, req[i]), 0);
		for (int j = 0; j < 16; j++)
			assert_int_equal(buf[i * 16 + j], i * 100 + j);
	}
	/* all collected: nothing is ready any more */
	assert_int_equal(tally_wait_ready(c, 0), -TALLY_ETIMEDOUT);
	tally_disconnect(c);
	assert_int_equal(daemon_stop(&d), 0);
}

/* A progress thread sleeping in tally_wait_ready() must not take the
 * daemon's reply to another thread's tally_alloc() for its death. */
struct alloc_race {
	struct tally_client *c;
	atomic_bool stop;
	int lost;
};

static void *sleeper_main(void *arg)
{
	struct alloc_race *a = arg;

	while (!atomic_load(&a->stop))
		if (tally_wait_ready(a->c, 5) == -TALLY_EDAEMONLOST) {
			a->lost = 1;
			break;
		}
	return NULL;
}

static void test_alloc_reply_is_not_death(void **state)
{
	struct test_daemon d;
	struct alloc_race a = { 0 };
	pthread_t th;
	(void)state;

	assert_int_equal(daemon_start(&d, 1, NULL), 0);
	assert_int_equal(tally_connect(d.sock, &a.c), 0);
	assert_int_equal(pthread_create(&th, NULL, sleeper_main, &a), 0);
	for (int i = 0; i < 200; i++) {
		void *p = tally_alloc(a.c, 4096);

		assert_non_null(p);
		tally_free(a.c, p);
	}
	atomic_store(&a.stop, true);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.lost, 0);
	tally_disconnect(a.c);
	assert_int_equal(daemon_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_progress_thread),
		cmocka_unit_test(test_alloc_reply_is_not_death),
		cmocka_unit_test(test_reaped_completion_is_ready),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
