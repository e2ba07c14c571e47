// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_dpdk.c - 4 hosts x 2 clients with DPDK ports: every host is
 * a network namespace of a netlab (tools/netlab), its daemon drives the
 * namespace's eth0 through net_af_packet or net_af_xdp, and the daemons'
 * control connections use the lab's management network (af_xdp takes
 * every frame of its queue, TCP included).  Dedicated aggregator,
 * co-located shards and ring, clean and lossy, and a daemon killed
 * mid-run.  With dataplane.threads = 2 over net_af_packet qpairs=2 (a
 * queue pair per thread, the software split of dpdk.c), and over
 * net_af_xdp (one queue pair on a veth, which both threads share): 2
 * hosts co-located and 2 hosts with a dedicated aggregator, exact sums,
 * and every daemon's both threads carried frames.  Over net_memif (the
 * dedicated aggregator a server port per worker): 4 workers lossy, 2
 * workers with 2 threads, and a worker daemon killed mid-run.  Needs
 * root, as CI has.
 */
#include <errno.h>
#include <setjmp.h>
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
#define LAB_HOSTS 5		/* + a dedicated aggregator */

static char lab[16];
static char ip[LAB_HOSTS][32], mac[LAB_HOSTS][32], ns[LAB_HOSTS][32];
static char coord[32];
/* [af_packet, af_xdp, af_packet with 2 queue pairs, memif][host] */
#define EAL_MEMIF 3
static char eal[4][LAB_HOSTS][512];
/* a fresh directory for each memif job's socket: a killed server leaves
 * its socket file, which a new server cannot bind */
static char memif_dir[64];
static int memif_run;

static const char *const lossy[] = {
	"--set", "emulator.loss_ppm=10000",
	"--set", "emulator.reorder_ppm=50000",
	"--set", "emulator.reorder_us=300",
	NULL,
};

static int lab_up(void **state)
{
	char cmd[64];

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "DPDK cluster tests need root (namespaces)\n");
		return -1;
	}
	snprintf(lab, sizeof(lab), "td%d", getpid() % 100000);
	if (netlab_run(lab, "up 5 --mgmt --subnet 10.79.0 --force", NULL, 0))
		return -1;
	for (int i = 0; i < LAB_HOSTS; i++) {
		snprintf(cmd, sizeof(cmd), "ip %d", i);
		netlab_run(lab, cmd, ip[i], sizeof(ip[i]));
		snprintf(cmd, sizeof(cmd), "mac %d", i);
		netlab_run(lab, cmd, mac[i], sizeof(mac[i]));
		snprintf(cmd, sizeof(cmd), "ns %d", i);
		netlab_run(lab, cmd, ns[i], sizeof(ns[i]));
		for (int x = 0; x < 3; x++)
			snprintf(eal[x][i], sizeof(eal[x][i]),
				 "-l %d --no-huge -m 128 --no-shconf "
				 "--no-telemetry --no-pci --file-prefix=%s_%d%s "
				 "--vdev=%s", i % 2, lab, i, x == 1 ? "x" :
				 x == 2 ? "q" : "p",
				 x == 1 ? "net_af_xdp0,iface=eth0" :
				 x == 2 ? "net_af_packet0,iface=eth0,qpairs=2" :
				     "net_af_packet0,iface=eth0");
	}
	return netlab_run(lab, "mgmt-ip 0", coord, sizeof(coord));
}

static int lab_down(void **state)
{
	(void)state;
	if (memif_dir[0]) {
		char cmd[96];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", memif_dir);
		if (system(cmd))
			fprintf(stderr, "cannot remove %s\n", memif_dir);
	}
	return netlab_run(lab, "down", NULL, 0);
}

/*
 * The memif EAL arguments for @workers workers and a dedicated aggregator
 * (host @workers): the aggregator has a server port per worker on one
 * socket, as a switch has a port per host; each worker a client port
 * with its id.  The control connections use the lab's management network.
 */
static void memif_eal(int workers)
{
	char sock[96];
	size_t off;

	if (!memif_dir[0]) {
		snprintf(memif_dir, sizeof(memif_dir), "/tmp/tally-cmemif-XXXXXX");
		assert_non_null(mkdtemp(memif_dir));
	}
	snprintf(sock, sizeof(sock), "%s/m%d.sock", memif_dir, memif_run++);
	for (int i = 0; i <= workers; i++) {
		off = (size_t)snprintf(eal[EAL_MEMIF][i], sizeof(eal[0][0]),
				       "-l %d --no-huge -m 128 --no-shconf --no-telemetry --no-pci --file-prefix=%s_%dm",
				       i % 2, lab, i);
		for (int w = 0; w < workers; w++) {
			if (i < workers && w != i)
				continue;
			off += (size_t)snprintf(eal[EAL_MEMIF][i] + off,
				sizeof(eal[0][0]) - off,
				" --vdev=net_memif%d,role=%s,id=%d,socket=%s,socket-abstract=no",
				i < workers ? 0 : w,
				i < workers ? "client" : "server", w, sock);
		}
		assert_true(off < sizeof(eal[0][0]));
	}
}

/* @s's workers and @aggs aggregators on the lab's first hosts, with the
 * EAL arguments of set @xdp (memif: a fresh socket for this job) */
static void make_spec(struct cluster_spec *s, int xdp, int aggs)
{
	if (xdp == EAL_MEMIF)
		memif_eal(s->workers);
	s->transport = "dpdk";
	s->coord_ip = coord;
	for (int i = 0; i < s->workers + aggs; i++) {
		s->netns[i] = ns[i];
		s->ip[i] = ip[i];
		s->mac[i] = mac[i];
		s->eal_args[i] = eal[xdp][i];
	}
}

static void run_job(int xdp, int aggs, const char *role, const char *algo,
		    const char *const *extra, bool floats)
{
	struct cluster_spec s = { .workers = HOSTS, .aggregators = aggs,
				  .role = role, .algorithm = algo,
				  .extra = extra };

	make_spec(&s, xdp, aggs);
	assert_int_equal(run_checked_job(&s, 1, floats, 180000), 0);
}

static void test_af_packet_dedicated(void **state)
{
	(void)state;
	run_job(0, 1, "worker", "aggregate", NULL, true);
}

static void test_af_packet_colocated_lossy(void **state)
{
	(void)state;
	run_job(0, 0, "worker+aggregator", "aggregate", lossy, false);
}

static void test_af_packet_ring(void **state)
{
	(void)state;
	run_job(0, 0, "worker", "ring", NULL, false);
}

static void test_af_xdp_colocated(void **state)
{
	(void)state;
	run_job(1, 0, "worker+aggregator", "aggregate", NULL, true);
}

static void test_af_xdp_dedicated_lossy(void **state)
{
	(void)state;
	run_job(1, 1, "worker", "aggregate", lossy, false);
}

static void test_af_xdp_ring_lossy(void **state)
{
	(void)state;
	run_job(1, 0, "worker", "ring", lossy, false);
}

/* A daemon killed mid-run: the others' clients fail, nothing hangs, the
 * survivors run a new job. */
static void test_af_xdp_daemon_killed(void **state)
{
	struct cluster_spec s = { .workers = HOSTS, .role = "worker+aggregator",
				  .algorithm = "aggregate" };
	struct test_cluster tc;
	uint64_t took;
	int failed, bad;

	(void)state;
	make_spec(&s, 1, 0);
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = kill_mid_run(&tc, HOSTS, 2000, &took);
	bad = cluster_down(&tc);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
	assert_true(took < 5000);
}

/*
 * dataplane.threads = 2, a queue pair each: exact sums, and in every
 * daemon's closing counters both threads received and sent frames.
 * Frames one queue passed to the other are reported, not required: the
 * kernel's fanout hash may put every flow on its own shard's queue.
 */
static void run_threads_job(int x, int workers, int aggs, const char *role)
{
	static const char *const two[] = {
		"--set", "dataplane.threads=2",
		NULL,
	};
	struct cluster_spec s = { .workers = workers, .aggregators = aggs,
				  .role = role, .algorithm = "aggregate",
				  .extra = two, .port_stride = 2 };
	struct client_job job = { .hosts = workers, .rounds = 2,
				  .float_types = true, .go_fd = -1 };
	unsigned long long out_sum = 0, in_sum = 0;
	struct test_cluster tc;
	int failed, bad;

	make_spec(&s, x, aggs);
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = run_cluster_clients(&tc, workers, job, 120000);
	if (failed)
		cluster_show_warnings(&tc);
	/* stop the daemons (their counters are logged on the way out) and
	 * read the logs before cluster_down() removes them */
	bad = cluster_stop_check_threads(&tc, 2, &out_sum, &in_sum);
	cluster_down(&tc);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
	/* every frame passed on was taken, once (the counters are the
	 * threads' last published copy: published within 5 ms of work) */
	fprintf(stderr, "frames passed between threads: %llu on, %llu taken\n",
		out_sum, in_sum);
	assert_true(out_sum == in_sum);
}

static void test_af_packet_threads_colocated(void **state)
{
	(void)state;
	run_threads_job(2, 2, 0, "worker+aggregator");
}

static void test_af_packet_threads_dedicated(void **state)
{
	(void)state;
	run_threads_job(2, 2, 1, "worker");
}

/* net_af_xdp has one queue pair on a veth: thread 1 of every daemon gets
 * its frames through the split and sends on queue 0 (dpdk.c) */
static void test_af_xdp_threads_colocated(void **state)
{
	(void)state;
	run_threads_job(1, 2, 0, "worker+aggregator");
}

static void test_af_xdp_threads_dedicated(void **state)
{
	(void)state;
	run_threads_job(1, 2, 1, "worker");
}

/* net_memif: the 4 workers and the dedicated aggregator joined by memif
 * ports (the aggregator forwards between its ports by learned MACs),
 * with loss and reordering from the emulator */
static void test_memif_dedicated_lossy(void **state)
{
	(void)state;
	run_job(EAL_MEMIF, 1, "worker", "aggregate", lossy, true);
}

/* a memif queue pair per thread (memif delivers queue q to queue q) */
static void test_memif_threads_dedicated(void **state)
{
	(void)state;
	run_threads_job(EAL_MEMIF, 2, 1, "worker");
}

/* every daemon's log shows the whole world once more (within 10 s):
 * the restarted one's first roster, the others' second */
static bool full_roster_again(const struct test_cluster *tc)
{
	for (int i = 0; i < 1000; i++) {
		bool all = true;

		for (int r = 0; r <= HOSTS && all; r++)
			all = daemon_log_count(&tc->d[r],
					       "4 workers, 1 aggregators") >=
			      (r == HOSTS - 1 ? 1 : 2);
		if (all)
			return true;
		usleep(10000);
	}
	fprintf(stderr, "the restarted daemon is not in every roster\n");
	return false;
}

/* A worker daemon killed mid-run: its memif port goes down under the
 * aggregator, the others' clients fail, nothing hangs or crashes, and
 * the survivors (the aggregator among them) run a new job.  Then the
 * daemon starts again, its port reconnects, and all 4 run a job. */
static void memif_worker_killed(const char *const *extra)
{
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = extra, .port_stride = 2 };
	struct client_job all = { .hosts = HOSTS, .rounds = 2,
				  .first_iteration = 1u << 29, .go_fd = -1 };
	struct test_cluster tc;
	uint64_t took;
	int failed, bad;

	make_spec(&s, EAL_MEMIF, 1);
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = kill_mid_run(&tc, HOSTS, 2000, &took);
	/* the host comes back: its port reconnects to the aggregator's
	 * server port, and once every daemon has the roster with it again
	 * (before that the others' operations are the 3 workers' job) the
	 * whole world runs a job */
	if (!failed && cluster_restart(&tc, &s, HOSTS - 1))
		failed = -1;
	if (!failed && !full_roster_again(&tc))
		failed = -1;
	if (!failed)
		failed = run_cluster_clients(&tc, HOSTS, all, 120000);
	if (failed)
		cluster_show_warnings(&tc);
	bad = cluster_down(&tc);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
	assert_true(took < 5000);
}

static void test_memif_worker_killed(void **state)
{
	(void)state;
	memif_worker_killed(NULL);
}

/* the same with a memif queue pair per thread, where the PMD's
 * connect and disconnect path has crashed before (docs/performance.md) */
static void test_memif_threads_worker_killed(void **state)
{
	static const char *const two[] = {
		"--set", "dataplane.threads=2",
		NULL,
	};

	(void)state;
	memif_worker_killed(two);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_af_packet_dedicated),
		cmocka_unit_test(test_af_packet_colocated_lossy),
		cmocka_unit_test(test_af_packet_ring),
		cmocka_unit_test(test_af_xdp_colocated),
		cmocka_unit_test(test_af_xdp_dedicated_lossy),
		cmocka_unit_test(test_af_xdp_ring_lossy),
		cmocka_unit_test(test_af_xdp_daemon_killed),
		cmocka_unit_test(test_af_packet_threads_colocated),
		cmocka_unit_test(test_af_packet_threads_dedicated),
		cmocka_unit_test(test_af_xdp_threads_colocated),
		cmocka_unit_test(test_af_xdp_threads_dedicated),
		cmocka_unit_test(test_memif_dedicated_lossy),
		cmocka_unit_test(test_memif_threads_dedicated),
		cmocka_unit_test(test_memif_worker_killed),
		cmocka_unit_test(test_memif_threads_worker_killed),
	};

	/* TALLY_TEST_FILTER=pattern runs only the matching tests */
	if (getenv("TALLY_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TALLY_TEST_FILTER"));
	return cmocka_run_group_tests(tests, lab_up, lab_down);
}
