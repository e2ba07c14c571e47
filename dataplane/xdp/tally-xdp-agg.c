// SPDX-License-Identifier: BSD-3-Clause
/*
 * tally-xdp-agg - the XDP aggregator of the switch profile as a tool:
 * loads agg.bpf.c, writes the job, attaches to an interface, runs the
 * eviction sweep every evict_ns, prints the counters, detaches on
 * SIGINT/SIGTERM (or after --seconds).  docs/xdp-aggregator.md.
 *
 *   tally-xdp-agg --ifname eth0 --config job.conf
 *   tally-xdp-agg --ifname eth0 --job 0x1234 --cookie 0xdeadbeef \
 *       --workers 4 --k 352 --port 47000 --slots 4096 \
 *       --group 239.7.0.1:47001 --evict-ms 200
 *
 * A config file holds the same keys, one "key = value" a line ('#'
 * starts a comment).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataplane/clock.h"
#include "dataplane/xdp/xdp_ctl.h"

struct opts {
	char ifname[IF_NAMESIZE];
	struct tly_xdp_job job;
	uint64_t evict_ns;
	uint64_t stats_ns;
	uint64_t seconds;
	int skb;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *v)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 0);
	if (errno || end == s || *end || x > max)
		return -1;
	*v = x;
	return 0;
}

static int parse_group(const char *s, struct tly_xdp_job *j)
{
	char ip[32];
	const char *colon = strchr(s, ':');
	struct in_addr a;
	uint64_t port;

	if (!colon || (size_t)(colon - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = 0;
	if (inet_pton(AF_INET, ip, &a) != 1 ||
	    parse_u64(colon + 1, 65535, &port) || !port)
		return -1;
	j->group_ip = ntohl(a.s_addr);
	j->group_port = (uint16_t)port;
	tly_group_mac(j->group_ip, j->group_mac);
	return 0;
}

/* one option, from the command line or a config file; 0 or -1 */
static int set_opt(struct opts *o, const char *key, const char *val)
{
	uint64_t v;

	if (!strcmp(key, "ifname")) {
		if (strlen(val) >= sizeof(o->ifname))
			return -1;
		strcpy(o->ifname, val);
		return 0;
	}
	if (!strcmp(key, "group"))
		return parse_group(val, &o->job);
	if (!strcmp(key, "skb")) {
		o->skb = 1;
		return 0;
	}
	if (parse_u64(val, UINT32_MAX, &v))
		return -1;
	if (!strcmp(key, "job") && v <= 0xffff)
		o->job.job = (uint16_t)v;
	else if (!strcmp(key, "cookie"))
		o->job.cookie = (uint32_t)v;
	else if (!strcmp(key, "workers") && v <= TLY_XDP_MAX_WORKERS)
		o->job.n_workers = (uint16_t)v;
	else if (!strcmp(key, "k") && tly_switch_k_ok((uint32_t)v))
		o->job.k = (uint16_t)v;
	else if (!strcmp(key, "port") && v <= 0xffff)
		o->job.port = (uint16_t)v;
	else if (!strcmp(key, "slots") && v <= TLY_MAX_SLOTS)
		o->job.n_slots = (uint32_t)v;
	else if (!strcmp(key, "evict-ms"))
		o->evict_ns = v * 1000000ull;
	else if (!strcmp(key, "stats-ms"))
		o->stats_ns = v * 1000000ull;
	else if (!strcmp(key, "seconds"))
		o->seconds = v;
	else
		return -1;
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
			 e[-1] == '\r'))
		*--e = 0;
	return s;
}

static int read_config(struct opts *o, const char *path)
{
	char line[256];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "tally-xdp-agg: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *eq, *key;

		n++;
		line[strcspn(line, "#")] = 0;
		key = trim(line);
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (eq)
			*eq = 0;
		if (set_opt(o, trim(key), eq ? trim(eq + 1) : "")) {
			fprintf(stderr, "tally-xdp-agg: %s:%d: bad line\n",
				path, n);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: tally-xdp-agg --ifname IF [--config FILE] [--job KEY]\n"
		"  [--cookie C] [--workers N] [--k 32..832, step 32]\n"
		"  [--port P] [--slots S] [--group IP:PORT] [--evict-ms MS]\n"
		"  [--stats-ms MS] [--seconds S] [--skb]\n"
		"       tally-xdp-agg --pass IF   (a pass-all program on IF,\n"
		"  the veth peer of the aggregator's port; stays until IF goes)\n");
}

static void print_counters(struct tly_xdp_ctl *c)
{
	uint64_t v[TLY_XDP_C_COUNT];
	unsigned int i;

	if (tly_xdp_counters(c, v))
		return;
	printf("counters");
	for (i = 1; i < TLY_XDP_C_COUNT; i++)
		if (v[i])
			printf(" %s=%llu", tly_xdp_counter_name(i),
			       (unsigned long long)v[i]);
	printf("\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "config", required_argument, 0, 'c' },
		{ "ifname", required_argument, 0, 0 },
		{ "job", required_argument, 0, 0 },
		{ "cookie", required_argument, 0, 0 },
		{ "workers", required_argument, 0, 0 },
		{ "k", required_argument, 0, 0 },
		{ "port", required_argument, 0, 0 },
		{ "slots", required_argument, 0, 0 },
		{ "group", required_argument, 0, 0 },
		{ "evict-ms", required_argument, 0, 0 },
		{ "stats-ms", required_argument, 0, 0 },
		{ "seconds", required_argument, 0, 0 },
		{ "skb", no_argument, 0, 0 },
		{ "pass", required_argument, 0, 'p' },
		{ 0, 0, 0, 0 },
	};
	struct opts o = {
		.job = { .n_workers = 0, .k = TLY_SWITCH_K_MTU1500,
			 .n_slots = 4096 },
		.evict_ns = 200000000ull,
		.stats_ns = 1000000000ull,
	};
	struct tly_xdp_prog_info info;
	struct tly_xdp_ctl *c;
	uint64_t start, next_sweep, next_stats;
	int idx, opt, err, ifindex;

	while ((opt = getopt_long(argc, argv, "c:", lo, &idx)) != -1) {
		if (opt == 'c') {
			if (read_config(&o, optarg))
				return 2;
		} else if (opt == 'p') {
			/* attached over netlink: it outlives this process */
			ifindex = (int)if_nametoindex(optarg);
			err = ifindex ? tly_xdp_attach_pass(ifindex) : -ENODEV;
			if (err < 0) {
				fprintf(stderr, "tally-xdp-agg: --pass %s: %s\n",
					optarg, strerror(-err));
				return 1;
			}
			return 0;
		} else if (opt == 0) {
			if (set_opt(&o, lo[idx].name, optarg ? optarg : "")) {
				fprintf(stderr, "tally-xdp-agg: bad --%s\n",
					lo[idx].name);
				return 2;
			}
		} else {
			usage();
			return 2;
		}
	}
	ifindex = (int)if_nametoindex(o.ifname);
	if (!ifindex) {
		usage();
		return 2;
	}
	err = tly_xdp_open(&c, o.job.n_slots);
	if (err) {
		fprintf(stderr, "tally-xdp-agg: load: %s\n", strerror(-err));
		return 1;
	}
	err = tly_xdp_set_job(c, &o.job);
	if (err) {
		fprintf(stderr, "tally-xdp-agg: job: %s\n", strerror(-err));
		tly_xdp_close(c);
		return 2;
	}
	err = tly_xdp_attach(c, ifindex, o.skb);
	if (err) {
		fprintf(stderr, "tally-xdp-agg: attach %s: %s\n", o.ifname,
			strerror(-err));
		tly_xdp_close(c);
		return 1;
	}
	if (!tly_xdp_info(c, &info))
		printf("attached to %s: %u instructions, %u verified, %s\n",
		       o.ifname, info.xlated_insns, info.verified_insns,
		       tly_xdp_lock_name(info.lock));
	fflush(stdout);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	start = tly_now_ns();
	next_sweep = start + o.evict_ns;
	next_stats = start + o.stats_ns;
	while (!stop) {
		struct timespec ts = { 0, 1000000 };	/* 1 ms */
		uint64_t now = tly_now_ns();

		if (o.seconds && now - start >= o.seconds * 1000000000ull)
			break;
		if (now >= next_sweep) {
			tly_xdp_sweep(c, o.evict_ns, NULL);
			next_sweep = now + o.evict_ns;
		}
		if (now >= next_stats) {
			print_counters(c);
			next_stats = now + o.stats_ns;
		}
		nanosleep(&ts, NULL);
	}
	print_counters(c);
	err = tly_xdp_detach(c);
	tly_xdp_close(c);
	return err ? 1 : 0;
}
