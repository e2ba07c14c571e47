// SPDX-License-Identifier: BSD-3-Clause
/*
 * tallyd.c - the per-host tally daemon: configuration, socket, event loop.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <tally/tally.h>
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/loop_tags.h"
#include "ctrl/watchdog.h"

static struct tallyd *the_daemon;

static void on_signal(int sig)
{
	(void)sig;
	if (the_daemon)
		the_daemon->stop = true;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tallyd [options]\n"
		"  -c, --config FILE       INI configuration file\n"
		"  -s, --socket PATH       client socket (default %s)\n"
		"  -n, --local-size N      training processes on this host\n"
		"      --idle-spin-us US   poll this long before sleeping\n"
		"      --reduce-threads N  cores one reduction uses (0: auto)\n"
		"cluster (world > 1):\n"
		"      --rank R --world N --role worker|aggregator|"
		"worker+aggregator\n"
		"      --schedule bsp|wfbp|mgwfbp|bytescheduler\n"
		"      --algorithm aggregate|ring --coordinator IP:PORT "
		"--job-key KEY\n"
		"      --transport udp|dpdk --address IP:PORT --mac MAC "
		"--eal-args ARGS\n"
		"      --set SECTION.KEY=VALUE   any key of the file\n"
		"  -l, --log-level LEVEL   error|warn|info|debug\n"
		"  -h, --help\n"
		"Command-line options override the file; see "
		"docs/configuration.md.\n", TALLY_DEFAULT_SOCKET);
}

/* --set section.key=value: any configuration key from the command line */
static int set_override(struct tally_config *cfg, const char *arg)
{
	char buf[600], err[512];
	char *dot, *eq;

	snprintf(buf, sizeof(buf), "%s", arg);
	dot = strchr(buf, '.');
	eq = strchr(buf, '=');
	if (!dot || !eq || dot > eq) {
		log_err("--set %s: expected SECTION.KEY=VALUE", arg);
		return -1;
	}
	*dot = *eq = '\0';
	if (config_set(cfg, buf, dot + 1, eq + 1, err, sizeof(err))) {
		log_err("--set: %s", err);
		return -1;
	}
	return 0;
}

/* Defaults, then the file, then the command line. */
static int parse_args(struct tally_config *cfg, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "local-size", required_argument, NULL, 'n' },
		{ "idle-spin-us", required_argument, NULL, 'i' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "reduce-threads", required_argument, NULL, 'r' },
		{ "rank", required_argument, NULL, 'R' },
		{ "world", required_argument, NULL, 'W' },
		{ "role", required_argument, NULL, 'O' },
		{ "algorithm", required_argument, NULL, 'A' },
		{ "coordinator", required_argument, NULL, 'C' },
		{ "job-key", required_argument, NULL, 'J' },
		{ "transport", required_argument, NULL, 'T' },
		{ "address", required_argument, NULL, 'a' },
		{ "mac", required_argument, NULL, 'm' },
		{ "eal-args", required_argument, NULL, 'E' },
		{ "set", required_argument, NULL, 'S' },
		{ "schedule", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const keys[128][2] = {
		['s'] = { "daemon", "socket" },
		['n'] = { "daemon", "local_size" },
		['i'] = { "daemon", "idle_spin_us" },
		['l'] = { "daemon", "log_level" },
		['r'] = { "daemon", "reduce_threads" },
		['R'] = { "cluster", "rank" },
		['W'] = { "cluster", "world" },
		['O'] = { "cluster", "role" },
		['A'] = { "cluster", "algorithm" },
		['C'] = { "cluster", "coordinator" },
		['J'] = { "cluster", "job_key" },
		['T'] = { "dataplane", "transport" },
		['a'] = { "dataplane", "address" },
		['m'] = { "dataplane", "mac" },
		['E'] = { "dataplane", "eal_args" },
		['D'] = { "cluster", "schedule" },
	};
	char err[512];
	int c;

	config_defaults(cfg);
	/* first pass: only the file, so the command line wins */
	while ((c = getopt_long(argc, argv, "c:s:n:l:h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == '?') {
			usage(stderr);
			return -1;
		}
		if (c == 'c' && config_load_file(cfg, optarg, err, sizeof(err))) {
			log_err("%s", err);
			return -1;
		}
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:s:n:l:h", opts, NULL)) != -1) {
		if (c == 'S') {		/* --set section.key=value */
			if (set_override(cfg, optarg))
				return -1;
			continue;
		}
		if (c == 'c' || c < 0 || c >= 128 || !keys[c][0])
			continue;
		if (config_set(cfg, keys[c][0], keys[c][1], optarg, err,
			       sizeof(err))) {
			log_err("command line: %s", err);
			return -1;
		}
	}
	if (optind < argc) {
		log_err("unexpected argument '%s'", argv[optind]);
		return -1;
	}
	if (config_check(cfg, err, sizeof(err))) {
		log_err("configuration: %s", err);
		return -1;
	}
	return 0;
}

static int daemon_init(struct tallyd *d)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_LISTEN };
	int threads;

	d->listen_fd = -1;
	d->epoll_fd = -1;
	if (local_group_init(&d->groups, (unsigned int)d->cfg.local_size,
			     (uint32_t)d->cfg.local_size * TALLY_MAX_INFLIGHT) ||
	    watchdog_init(d)) {
		log_err("out of memory");
		return -1;
	}
	threads = d->cfg.reduce_threads;
	if (threads == 0) {	/* auto: the cores we may run on, up to 4 */
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		threads = n < 1 ? 1 : n > 4 ? 4 : (int)n;
	}
	d->reducer = reduce_pool_create((unsigned int)threads);
	if (!d->reducer)
		return -1;
	d->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (d->epoll_fd < 0 || daemon_listen(d) ||
	    epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, d->listen_fd, &ev))
		return -1;
	if (config_is_cluster(&d->cfg) && cluster_start(d))
		return -1;
	return 0;
}

static void daemon_fini(struct tallyd *d)
{
	cluster_stop(d);
	daemon_conns_close(d);
	for (int r = 0; r < d->cfg.local_size; r++)
		daemon_client_drop(d, &d->clients[r], "closed at shutdown");
	if (d->listen_fd >= 0) {
		close(d->listen_fd);
		unlink(d->cfg.socket);
	}
	if (d->epoll_fd >= 0)
		close(d->epoll_fd);
	log_info("stopped: %llu operations done, %llu failed, %llu bytes "
		 "reduced, %llu reported stuck",
		 (unsigned long long)d->stat_ops_done,
		 (unsigned long long)d->stat_ops_failed,
		 (unsigned long long)d->stat_bytes_reduced,
		 (unsigned long long)watchdog_stats(d)->reports);
	watchdog_fini(d);
	local_group_destroy(&d->groups);
	reduce_pool_destroy(d->reducer);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct tallyd *d = calloc(1, sizeof(*d));
	int ret = 1;

	if (!d || parse_args(&d->cfg, argc, argv))
		return 2;
	log_set_level((enum log_level)d->cfg.log_level);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	the_daemon = d;

	if (daemon_init(d) == 0)
		ret = daemon_run(d);
	daemon_fini(d);
	free(d);
	return ret;
}
