// SPDX-License-Identifier: BSD-3-Clause
/*
 * cmdline.c - tallyd's command line over its configuration: the file of
 * --config first, then every other option in order, each one a key of the
 * file (see config.h).  Kept apart from main so that tests and the fuzzer
 * call it without starting a daemon.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <tally/tally.h>
#include "ctrl/config.h"
#include "ctrl/log.h"

void config_usage(FILE *f)
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

int config_parse_args(struct tally_config *cfg, int argc, char **argv)
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
	/* first pass: only the file, so the command line wins; optind 0
	 * makes getopt start afresh, so this may be called again */
	optind = 0;
	while ((c = getopt_long(argc, argv, "c:s:n:l:h", opts, NULL)) != -1) {
		if (c == 'h')
			return CONFIG_ARGS_HELP;
		if (c == '?')
			return CONFIG_ARGS_USAGE;
		if (c != 'c')
			continue;
		if (config_load_file(cfg, optarg, err, sizeof(err))) {
			log_err("%s", err);
			return -1;
		}
		snprintf(cfg->config_file, sizeof(cfg->config_file), "%s",
			 optarg);
	}
	optind = 0;
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
