// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_group.c - tallyd's own aggregator sending each RESULT
 * once to the job's result group (dataplane.result_group over udp, the
 * software profile; docs/transport-udp.md, "One RESULT for every
 * worker"): 4 worker hosts x 2 clients on a netlab bridge (tools/netlab,
 * one network namespace a host, as the group needs), results exact for
 * float32, int32, float16 and bfloat16, sum and avg (cluster_clients.c).
 *   - a dedicated aggregator, every link losing 1 % and reordering 5 %
 *     (the link emulator: a lost group datagram is lost for every
 *     worker at once, and the RESULTs come again one by one);
 *   - co-located shards, each daemon's own copy through its self loop;
 *   - the same job with the group's datagrams dropped at the bridge:
 *     every RESULT then comes one by one, on request, and the job still
 *     ends exact.
 * The daemons' metrics say the group carried the RESULTs.  Needs root
 * (suite integration).
 */
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
#define LAB_HOSTS (HOSTS + 1)

static char lab[32], ip[LAB_HOSTS][32], ns[LAB_HOSTS][64], coord[32];
static char group[64], group_ip[32];
static char swns[64];

static int lab_up(void **state)
{
	char cmd[256];
	int pid = (int)getpid();

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "the result group test needs root\n");
		return -1;
	}
	snprintf(lab, sizeof(lab), "tg%d", pid % 100000);
	if (netlab_run(lab, "up 5 --subnet 10.86.0 --force", NULL, 0))
		return -1;
	for (int i = 0; i < LAB_HOSTS; i++) {
		snprintf(cmd, sizeof(cmd), "ip %d", i);
		netlab_run(lab, cmd, ip[i], sizeof(ip[i]));
		snprintf(cmd, sizeof(cmd), "ns %d", i);
		netlab_run(lab, cmd, ns[i], sizeof(ns[i]));
	}
	strcpy(coord, ip[0]);
	if (netlab_run(lab, "ns switch", swns, sizeof(swns)))
		return -1;
	snprintf(group_ip, sizeof(group_ip), "239.86.%d.%d", pid % 200,
		 pid % 250 + 1);
	snprintf(group, sizeof(group), "dataplane.result_group=%s:%d",
		 group_ip, 40000 + pid % 20000);
	return 0;
}

static int lab_down(void **state)
{
	(void)state;
	return netlab_run(lab, "down", NULL, 0);
}

/* the sum of metric @name's samples in daemon @d's `tally-ctl counters` */
static double metric(const struct test_daemon *d, const char *name)
{
	char cmd[400], line[512], want[128];
	double v = 0, x;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s --socket %s counters",
		 getenv("TALLY_CTL"), d->sock);
	snprintf(want, sizeof(want), "%s{", name);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (!strncmp(line, want, strlen(want)) &&
		    sscanf(strrchr(line, ' ') + 1, "%lf", &x) == 1)
			v += x;
	pclose(p);
	return v;
}

/* drop (@on) or pass the group's datagrams on the lab's bridge */
static int bridge_drops_group(bool on)
{
	char cmd[512];

	if (on)
		snprintf(cmd, sizeof(cmd), "ip netns exec %s nft -f - <<'EOF'\n"
			 "table bridge tally_group_test {\n"
			 " chain drop_group { type filter hook forward priority 0;\n"
			 "  ip daddr %s drop; }\n}\nEOF", swns, group_ip);
	else
		snprintf(cmd, sizeof(cmd), "ip netns exec %s nft delete table "
			 "bridge tally_group_test", swns);
	return system(cmd) ? -1 : 0;
}

/*
 * The job on the lab: @role of the workers, a dedicated aggregator when
 * @dedicated, @lossy links.  Checks the results, and that the group
 * carried (@group_wire) or did not carry the RESULTs to the workers.
 */
static void run_group_job(const char *role, bool dedicated, bool lossy,
			  bool group_wire)
{
	const char *const common[] = {
		"--set", "dataplane.k=128",
		"--set", "dataplane.pool_slots=256",
		/* five daemons and eight clients on two shared cores */
		"--set", "cluster.peer_timeout_ms=20000",
		"--set", group,
		NULL,
	};
	const char *const loss[] = {
		"--set", "emulator.loss_ppm=10000",
		"--set", "emulator.reorder_ppm=50000",
		"--set", "emulator.reorder_us=300",
		NULL,
	};
	struct cluster_spec s = { .workers = HOSTS,
				  .aggregators = dedicated ? 1 : 0,
				  .role = role, .algorithm = "aggregate",
				  .extra = common,
				  .extra_worker = lossy ? loss : NULL,
				  .extra_agg = lossy ? loss : NULL };
	struct test_cluster tc;
	struct client_job proto = { .hosts = HOSTS, .float_types = true,
				    .rounds = 2, .go_fd = -1 };
	double sent[LAB_HOSTS], grp[LAB_HOSTS], looped[LAB_HOSTS];
	double rx_workers = 0, grp_all = 0;
	int failed, n = HOSTS + (dedicated ? 1 : 0);

	s.coord_ip = coord;
	for (int i = 0; i < n; i++) {
		s.netns[i] = ns[i];
		s.ip[i] = ip[i];
	}
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = run_cluster_clients(&tc, HOSTS, proto, 240000);
	for (int i = 0; i < n; i++) {
		sent[i] = metric(&tc.d[i], "tally_transport_sent_packets_total");
		grp[i] = metric(&tc.d[i],
				"tally_transport_group_packets_total");
		looped[i] = metric(&tc.d[i],
				   "tally_transport_looped_packets_total");
		grp_all += grp[i];
		if (i < HOSTS)
			rx_workers += metric(&tc.d[i],
				"tally_transport_received_packets_total");
		fprintf(stderr, "daemon %d: sent %.0f, to the group %.0f, "
			"looped %.0f\n", i, sent[i], grp[i], looped[i]);
	}
	if (failed)
		cluster_show_warnings(&tc);
	failed += cluster_down(&tc);
	assert_int_equal(failed, 0);
	/* every aggregator sent to the group, workers did not */
	for (int i = 0; i < n; i++) {
		bool agg = dedicated ? i == HOSTS : true;

		assert_true(agg ? grp[i] > 0 : grp[i] == 0);
		assert_true(grp[i] <= sent[i]);
	}
	if (!dedicated)		/* our own copies through the self loop */
		for (int i = 0; i < HOSTS; i++)
			assert_true(looped[i] > 0);
	/*
	 * A group datagram reaches each worker that is not its sender: the
	 * workers received at least that (their DATA's ACKs and unicast
	 * RESULTs come on top) when the bridge passed the group, and no
	 * more than the unicast RESULTs and the rest when it dropped it.
	 */
	if (group_wire)
		assert_true(rx_workers >= grp_all * (dedicated ? HOSTS :
						     HOSTS - 1));
	/*
	 * The dedicated aggregator sends little but RESULTs.  With the group
	 * on the wire the workers took its datagrams (else each had asked
	 * for every RESULT again: 4 unicast ones a datagram); without, they
	 * asked, and got each one by one.
	 */
	if (dedicated && group_wire)
		assert_true(sent[HOSTS] - grp[HOSTS] < grp[HOSTS]);
	if (dedicated && !group_wire)
		assert_true(sent[HOSTS] - grp[HOSTS] >= HOSTS * grp[HOSTS]);
}

static void test_group_dedicated_lossy(void **state)
{
	(void)state;
	run_group_job("worker", true, true, true);
}

static void test_group_colocated(void **state)
{
	(void)state;
	run_group_job("worker+aggregator", false, false, true);
}

/* the network loses every group datagram: RESULTs one by one, exact */
static void test_group_dropped_by_network(void **state)
{
	(void)state;
	assert_int_equal(bridge_drops_group(true), 0);
	run_group_job("worker", true, false, false);
	assert_int_equal(bridge_drops_group(false), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_dedicated_lossy),
		cmocka_unit_test(test_group_colocated),
		cmocka_unit_test(test_group_dropped_by_network),
	};

	return cmocka_run_group_tests(tests, lab_up, lab_down);
}
