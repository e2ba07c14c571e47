// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cluster_xdp.c - tallyd as the XDP aggregator of the switch profile
 * (dataplane.transport = xdp, docs/xdp-aggregator.md "Under tallyd"):
 * 4 worker hosts x 2 clients and an aggregator host whose tallyd attaches
 * the XDP program to its eth0, all network namespaces on one bridge with
 * multicast snooping off and GRO on the aggregator's port (tools/netlab;
 * the control connections on its management network).  The workers over
 * kernel UDP at K = 832 (jumbo frames: the lab's links carry 3400-byte
 * IP packets), then over DPDK (net_af_xdp on their eth0) at K = 128.
 * Each RESULT
 * reaches the workers once, to the job's multicast group.  The workers'
 * links lose 1 % and reorder 5 % (the link emulator); the aggregator's
 * pool (64 slots) is smaller than the chunks in flight (4 x 256), so
 * BUSY and the sweep are exercised.  Results exact for float32, int32,
 * float16 and bfloat16, sum and avg (cluster_clients.c).  Then the
 * program is detached when the daemon stops (SIGTERM), and what
 * transport = xdp cannot do is refused at start.  Needs root (suite
 * integration).
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

static char lab[32], ip[LAB_HOSTS][32], ns[LAB_HOSTS][64];
static char mac[LAB_HOSTS][32], eal[HOSTS][256], coord[32];
static char group[64];

static int lab_up(void **state)
{
	char cmd[256];

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "the XDP cluster test needs root\n");
		return -1;
	}
	snprintf(lab, sizeof(lab), "tx%d", getpid() % 100000);
	/* the management network: af_xdp takes every frame of its queue,
	 * the control connections' TCP too */
	if (netlab_run(lab, "up 5 --mgmt --subnet 10.83.0 --mtu 3400 --force",
		       NULL, 0) ||
	    netlab_run(lab, "mgmt-ip 0", coord, sizeof(coord)))
		return -1;
	for (int i = 0; i < LAB_HOSTS; i++) {
		snprintf(cmd, sizeof(cmd), "ip %d", i);
		netlab_run(lab, cmd, ip[i], sizeof(ip[i]));
		snprintf(cmd, sizeof(cmd), "mac %d", i);
		netlab_run(lab, cmd, mac[i], sizeof(mac[i]));
		snprintf(cmd, sizeof(cmd), "ns %d", i);
		netlab_run(lab, cmd, ns[i], sizeof(ns[i]));
		if (i < HOSTS)
			snprintf(eal[i], sizeof(eal[i]),
				 "-l %d --no-huge -m 128 --no-shconf "
				 "--no-telemetry --no-pci --file-prefix=%s_%d "
				 "--vdev=net_af_xdp0,iface=eth0", i % 2, lab, i);
	}
	/* the aggregator's port: multicast flooded, a pass-all program on
	 * the link's bridge end (veth's XDP_TX), GRO there so the UDP
	 * workers take runs of RESULTs (docs/netlab.md, "A port facing an
	 * XDP aggregator") */
	if (!getenv("TALLY_XDP_AGG")) {
		fprintf(stderr, "TALLY_XDP_AGG (tally-xdp-agg) is not set\n");
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "agg-port %d --xdp-pass %s", HOSTS,
		 getenv("TALLY_XDP_AGG"));
	if (netlab_run(lab, cmd, NULL, 0))
		return -1;
	snprintf(group, sizeof(group), "dataplane.result_group=239.83.%d.%d:"
		 "%d", getpid() % 200, getpid() % 250 + 1,
		 40000 + getpid() % 20000);
	return 0;
}

static int lab_down(void **state)
{
	(void)state;
	/* the pass program goes with the link, which goes with the lab */
	return netlab_run(lab, "down", NULL, 0);
}

/* @dpdk: the workers drive their eth0 through net_af_xdp */
static void make_spec(struct cluster_spec *s, bool dpdk)
{
	s->coord_ip = coord;
	for (int i = 0; i < LAB_HOSTS; i++) {
		s->netns[i] = ns[i];
		s->ip[i] = ip[i];
		/* dpdk workers address the aggregator by its MAC */
		s->mac[i] = mac[i];
		if (dpdk && i < HOSTS)
			s->eal_args[i] = eal[i];
	}
}

/* does the aggregator's eth0 carry an XDP program? 1, 0, or -1 */
static int agg_has_xdp(void)
{
	char cmd[160], line[256];
	FILE *p;
	int found = 0;

	snprintf(cmd, sizeof(cmd), "ip -n %s link show dev eth0", ns[HOSTS]);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		found |= strstr(line, "xdp") != NULL;
	pclose(p);
	return found;
}

/* the aggregator daemon's XDP counter @name as `tally-ctl counters`
 * prints it, or -1 */
static double xdp_counter(const struct test_daemon *d, const char *name)
{
	char cmd[400], line[512], want[96];
	double v = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s --socket %s counters",
		 getenv("TALLY_CTL"), d->sock);
	snprintf(want, sizeof(want), "counter=%s}", name);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (strstr(line, "tally_xdp_agg_total") && strstr(line, want))
			sscanf(strrchr(line, ' ') + 1, "%lf", &v);
	pclose(p);
	return v;
}

static void run_xdp_job(bool dpdk, const char *k)
{
	const char *const common[] = {
		"--set", "dataplane.profile=switch",
		"--set", k,
		"--set", "dataplane.pool_slots=64",
		"--set", "dataplane.window=256",
		/* five daemons and eight clients on two shared cores: the
		 * heartbeats may wait their turn for seconds */
		"--set", "cluster.peer_timeout_ms=20000",
		"--set", group,
		NULL,
	};
	const char *const workers[] = {
		"--set", "emulator.loss_ppm=10000",
		"--set", "emulator.reorder_ppm=50000",
		"--set", "emulator.reorder_us=300",
		"--set", dpdk ? "dataplane.transport=dpdk" :
				"dataplane.transport=udp",
		/* every DATA asks for its ACK in one of the two, one in
		 * sixteen (the default) in the other */
		"--set", dpdk ? "dataplane.ack_every=1" :
				"dataplane.ack_every=16",
		NULL,
	};
	const char *const agg[] = {
		"--set", "dataplane.transport=xdp",
		NULL,
	};
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = common, .extra_worker = workers,
				  .extra_agg = agg };
	struct test_cluster tc;
	struct client_job proto = { .hosts = HOSTS, .float_types = true,
				    .rounds = 2, .go_fd = -1 };
	int failed, attached, counted;
	double completions, data, busy;
	int st, left, detached;
	char cmd[200];

	make_spec(&s, dpdk);
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = run_cluster_clients(&tc, HOSTS, proto, 240000);
	attached = agg_has_xdp();
	counted = daemon_log_count(&tc.d[HOSTS], "xdp aggregator attached");
	completions = xdp_counter(&tc.d[HOSTS], "completions");
	data = xdp_counter(&tc.d[HOSTS], "data");
	busy = xdp_counter(&tc.d[HOSTS], "busy");
	fprintf(stderr, "xdp aggregator: data %.0f completions %.0f busy %.0f "
		"result_retx %.0f evictions %.0f\n", data, completions, busy,
		xdp_counter(&tc.d[HOSTS], "result_retx"),
		xdp_counter(&tc.d[HOSTS], "evictions"));
	if (failed)
		cluster_show_warnings(&tc);
	/* SIGTERM to the aggregator first: it detaches on the way out
	 * (within 5 s, or it is killed and fails), and its log stays until
	 * daemon_stop() removes its directory */
	st = daemon_terminate(&tc.d[HOSTS], 5000);
	left = agg_has_xdp();
	detached = daemon_log_count(&tc.d[HOSTS], "xdp aggregator detached");
	if (st) {
		snprintf(cmd, sizeof(cmd), "tail -20 %s >&2", tc.d[HOSTS].log);
		(void)!system(cmd);
	}
	failed += daemon_stop(&tc.d[HOSTS]);
	failed += cluster_down(&tc);
	assert_int_equal(st, 0);
	assert_int_equal(left, 0);
	assert_int_equal(detached, 1);
	assert_int_equal(attached, 1);
	assert_int_equal(counted, 1);
	assert_int_equal(failed, 0);
	/* the data went through the program: at least one DATA of each
	 * worker per completion, and the small pool refused some */
	assert_true(completions > 0);
	assert_true(data >= HOSTS * completions);
	assert_true(busy > 0);
}

static void test_xdp_aggregator_lossy(void **state)
{
	(void)state;
	run_xdp_job(false, "dataplane.k=832");
}

/* the same with DPDK workers (net_af_xdp): they take the group's RESULT
 * by its MAC and port (dpdk.c, frame_queue()) */
static void test_xdp_aggregator_dpdk_workers(void **state)
{
	(void)state;
	run_xdp_job(true, "dataplane.k=128");
}

/*
 * Jumbo frames on every link but host 0's: its route to the aggregator
 * cannot carry K = 832's 3376-byte packets, which may not be fragmented
 * (the program takes whole frames).  Its daemon says so when the roster
 * comes and aborts the job: its clients' operations fail at once with
 * peer-lost instead of waiting for RESULTs that would never come.
 */
static void test_xdp_route_mtu(void **state)
{
	const char *const common[] = {
		"--set", "dataplane.profile=switch",
		"--set", "dataplane.k=832",
		"--set", "cluster.peer_timeout_ms=20000",
		"--set", group,
		NULL,
	};
	const char *const workers[] = {
		"--set", "dataplane.transport=udp", NULL,
	};
	const char *const agg[] = {
		"--set", "dataplane.transport=xdp", NULL,
	};
	struct cluster_spec s = { .workers = HOSTS, .aggregators = 1,
				  .role = "worker", .algorithm = "aggregate",
				  .extra = common, .extra_worker = workers,
				  .extra_agg = agg };
	struct client_job proto = { .hosts = HOSTS, .rounds = 1, .go_fd = -1,
				    .expect_error = -TALLY_EPEERLOST };
	struct test_cluster tc;
	char cmd[160];
	int failed, said;

	(void)state;
	snprintf(cmd, sizeof(cmd), "ip -n %s link set eth0 mtu 1500", ns[0]);
	assert_int_equal(system(cmd), 0);
	make_spec(&s, false);
	assert_int_equal(cluster_up(&tc, &s), 0);
	failed = run_cluster_clients(&tc, 1, proto, 60000);
	said = daemon_log_count(&tc.d[0], "need an IP MTU of 3376");
	failed += cluster_down(&tc);
	snprintf(cmd, sizeof(cmd), "ip -n %s link set eth0 mtu 3400", ns[0]);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(failed, 0);
	assert_true(said >= 1);
}

/* a daemon that must refuse to start, saying @why */
static void refused(const char *role, const char *profile,
		    const char *grp, const char *why)
{
	char prof[64];
	const char *args[] = { "--rank", "0", "--world", "2", "--role", role,
			       "--coordinator", "127.0.0.1:9", "--address",
			       "127.0.0.1:10", "--set",
			       "dataplane.transport=xdp", "--set", prof,
			       "--set", grp, NULL };

	snprintf(prof, sizeof(prof), "dataplane.profile=%s", profile);
	cluster_default_secret();
	assert_int_equal(daemon_refuses(args, why), 0);
}

static void test_xdp_refused(void **state)
{
	(void)state;
	refused("aggregator", "software", group,
		"transport = xdp runs the switch profile only");
	refused("worker", "switch", group,
		"transport = xdp is the aggregator's transport");
	refused("aggregator", "switch", "dataplane.result_group=",
		"transport = xdp sends each RESULT once to a multicast group");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xdp_aggregator_lossy),
		cmocka_unit_test(test_xdp_aggregator_dpdk_workers),
		cmocka_unit_test(test_xdp_route_mtu),
		cmocka_unit_test(test_xdp_refused),
	};

	return cmocka_run_group_tests(tests, lab_up, lab_down);
}
