// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_rdma.c - the multi-host tests of test_cluster_udp.c over
 * the verbs transport: 4 worker hosts x 2 clients (and a dedicated
 * aggregator: 5 daemons) on one soft-RoCE port inside the QEMU guest of
 * tests/rdma/run-qemu.sh.  A dedicated aggregator, co-located shards,
 * ring all-reduce, the same under 1 % emulated loss with duplication and
 * reordering, two dataplane threads (a queue pair each) with a
 * dedicated aggregator and with the ring, and a daemon killed mid-run.
 * Results are exact (see cluster_clients.c).  The data address of every
 * daemon is $TALLY_RDMA_IP (default 10.0.0.1): its RoCEv2 GID.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "cluster_clients.h"

#define HOSTS 4

static const char *rdma_ip;

static const char *const plain[] = {
	"--set", "dataplane.rdma_device=rxe0",
	"--set", "dataplane.rdma_gid_index=1",
	"--set", "cluster.peer_timeout_ms=3000",
	NULL,
};

static const char *const lossy[] = {
	"--set", "dataplane.rdma_device=rxe0",
	"--set", "dataplane.rdma_gid_index=1",
	"--set", "cluster.peer_timeout_ms=3000",
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.dup_ppm=5000",
	"--set", "emulator.reorder_ppm=50000",
	"--set", "emulator.reorder_us=300",
	NULL,
};

static void spec_init(struct cluster_spec *s, int aggs, const char *role,
		      const char *algo, const char *const *extra)
{
	memset(s, 0, sizeof(*s));
	s->workers = HOSTS;
	s->aggregators = aggs;
	s->role = role;
	s->algorithm = algo;
	s->transport = "rdma";
	s->extra = extra;
	for (int i = 0; i < HOSTS + aggs; i++)
		s->ip[i] = rdma_ip;
}

static void run_job(const struct cluster_spec *spec, bool float_types)
{
	assert_int_equal(run_checked_job(spec, 1, float_types, 150000), 0);
}

static void test_dedicated_aggregator(void **state)
{
	struct cluster_spec s;

	(void)state;
	spec_init(&s, 1, "worker", "aggregate", plain);
	run_job(&s, true);
}

static void test_ring_allreduce(void **state)
{
	struct cluster_spec s;

	(void)state;
	spec_init(&s, 0, "worker", "ring", plain);
	run_job(&s, false);
}

static void test_colocated_shards(void **state)
{
	struct cluster_spec s;

	(void)state;
	spec_init(&s, 0, "worker+aggregator", "aggregate", plain);
	run_job(&s, true);
}

static void test_dedicated_aggregator_lossy(void **state)
{
	struct cluster_spec s;

	(void)state;
	spec_init(&s, 1, "worker", "aggregate", lossy);
	run_job(&s, false);
}

static void test_ring_lossy(void **state)
{
	struct cluster_spec s;

	(void)state;
	spec_init(&s, 0, "worker", "ring", lossy);
	run_job(&s, false);
}

/*
 * dataplane.threads = 2: a queue pair per thread, each reached through
 * the roster's table of thread MACs (docs/protocol.md section 14).
 * Exact sums, and in every daemon's closing counters both threads
 * received and sent: a thread addressed at another's queue pair would
 * get frames of tensors it does not own, and the job would not finish.
 */
static void run_threads_job(int aggs, const char *role, const char *algo)
{
	static const char *const two[] = {
		"--set", "dataplane.rdma_device=rxe0",
		"--set", "dataplane.rdma_gid_index=1",
		"--set", "cluster.peer_timeout_ms=3000",
		"--set", "dataplane.threads=2",
		NULL,
	};
	struct client_job job = { .hosts = HOSTS, .rounds = 1,
				  .float_types = true, .go_fd = -1 };
	unsigned long long out, in;
	struct cluster_spec s;
	struct test_cluster tc;
	int failed, bad;

	spec_init(&s, aggs, role, algo, two);
	s.port_stride = 2;
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = run_cluster_clients(&tc, HOSTS, job, 150000);
	if (failed)
		cluster_show_warnings(&tc);
	bad = cluster_stop_check_threads(&tc, 2, &out, &in);
	cluster_down(&tc);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
}

static void test_threads_dedicated_aggregator(void **state)
{
	(void)state;
	run_threads_job(1, "worker", "aggregate");
}

static void test_threads_ring(void **state)
{
	(void)state;
	run_threads_job(0, "worker", "ring");
}

/*
 * Kill one daemon while every client has work in flight: the clients of
 * the other hosts get TALLY_EPEERLOST, nothing hangs, and the survivors
 * run a new job among themselves.
 */
static void test_daemon_killed_mid_run(void **state)
{
	struct cluster_spec s;
	struct test_cluster tc;
	uint64_t took;
	int failed, bad;

	(void)state;
	spec_init(&s, 0, "worker+aggregator", "aggregate", plain);
	assert_int_equal(cluster_up(&tc, &s), 0);
	/* well into the run, even emulated */
	failed = kill_mid_run(&tc, HOSTS, 4000, &took);
	print_message("survivors' clients returned %llu ms after the kill\n",
		      (unsigned long long)took);
	bad = cluster_down(&tc);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
	assert_true(took < 20000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dedicated_aggregator),
		cmocka_unit_test(test_colocated_shards),
		cmocka_unit_test(test_ring_allreduce),
		cmocka_unit_test(test_dedicated_aggregator_lossy),
		cmocka_unit_test(test_ring_lossy),
		cmocka_unit_test(test_threads_dedicated_aggregator),
		cmocka_unit_test(test_threads_ring),
		cmocka_unit_test(test_daemon_killed_mid_run),
	};

	rdma_ip = getenv("TALLY_RDMA_IP") ? getenv("TALLY_RDMA_IP") :
					    "10.0.0.1";
	return cmocka_run_group_tests(tests, NULL, NULL);
}
