// SPDX-License-Identifier: BSD-3-Clause
/*
 * config.c - defaults, INI file (libinih) and overrides (see config.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <arpa/inet.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tally/tally.h>
#include "ctrl/bootstrap.h"
#include "ctrl/config.h"

#include "dataplane/engine/codec.h"
#include "shm/proto.h"
#include "dataplane/engine/wire.h"
#include "dataplane/sched/sched.h"
#include "ctrl/log.h"
#include "shm/fast.h"

void config_defaults(struct tally_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->socket, sizeof(cfg->socket), "%s", TALLY_DEFAULT_SOCKET);
	cfg->local_size = 1;
	cfg->idle_spin_us = 50;
	cfg->stuck_ms = 10000;
	cfg->fast_path_bytes = 32768;
	cfg->fast_path_slots = 32;
	cfg->numa_node = -1;
	cfg->log_level = LOG_INFO;
	cfg->world = 1;
	cfg->role = ROLE_WORKER;
	cfg->algorithm = ALGO_AGGREGATE;
	cfg->heartbeat_ms = 200;
	cfg->peer_timeout_ms = 1000;
	cfg->connect_timeout_ms = 30000;
	cfg->schedule = SCHED_WFBP;
	cfg->partition_kib = 1024;
	cfg->credit_kib = 4096;
	snprintf(cfg->transport, sizeof(cfg->transport), "udp");
	cfg->mbufs = 8192;
	cfg->dp_threads = 1;
	cfg->rdma_port = 1;
	cfg->rdma_gid_index = 1;
	cfg->k = 0;		/* the profile's (config_k) */
	cfg->pool_slots = 4096;
	cfg->window = 64;
	cfg->congestion = true;
	cfg->cc_min_window = 8;
	cfg->cc_init_window = 16;
	cfg->cc_target_delay_us = 500;
	cfg->release_batch = TLY_SWITCH_RECEIPTS;
	cfg->ack_every = 16;
	cfg->busy_us = 100;
	cfg->cc_base_window_ms = 100;
	cfg->rto_us = 10000;
	cfg->emu_seed = 1;
	cfg->max_jobs = 16;
	cfg->max_clients_per_job = CONFIG_MAX_LOCAL_SIZE;
	cfg->max_segments = TALLY_MAX_SEGMENTS;
	cfg->max_outstanding = TALLY_MAX_INFLIGHT;
	cfg->rendezvous_port_base = 29700;
	cfg->rendezvous_ports = 256;
	cfg->job_linger_ms = 1000;
}

enum key_type { K_INT, K_U64, K_U32, K_STR, K_LOG, K_ROLE, K_ALGO, K_ADDR,
		K_MAC, K_TRANSPORT, K_SCHED, K_BOOL, K_CPUS, K_PROFILE,
		K_CODEC };

struct key_spec {
	const char *section;
	const char *key;
	enum key_type type;
	size_t off;
	long long min, max;	/* K_INT, K_U64, K_U32 */
	size_t cap;		/* K_STR */
};

#define F(field) offsetof(struct tally_config, field)
#define STR(sec, k, field) { sec, k, K_STR, F(field), 0, 0, \
			     sizeof(((struct tally_config *)0)->field) }

/* The single list of keys: docs/configuration.md follows it. */
static const struct key_spec keys[] = {
	STR("daemon", "socket", socket),
	STR("daemon", "socket_group", socket_group),
	{ "daemon", "local_size", K_INT, F(local_size), 1,
	  CONFIG_MAX_LOCAL_SIZE, 0 },
	{ "daemon", "idle_spin_us", K_INT, F(idle_spin_us), 0, 1000000, 0 },
	{ "daemon", "reduce_threads", K_INT, F(reduce_threads), 0, 16, 0 },
	{ "daemon", "numa_node", K_INT, F(numa_node), -1, CONFIG_NUMA_NODE_MAX,
	  0 },
	{ "daemon", "cpus", K_CPUS, F(cpus), 0, 0,
	  sizeof(((struct tally_config *)0)->cpus) },
	{ "daemon", "log_level", K_LOG, F(log_level), 0, 0, 0 },
	{ "daemon", "stuck_ms", K_INT, F(stuck_ms), 0, 86400000, 0 },
	{ "daemon", "fast_path_bytes", K_INT, F(fast_path_bytes), 0,
	  TALLY_FAST_MAX_BYTES, 0 },
	{ "daemon", "fast_path_slots", K_INT, F(fast_path_slots), 1,
	  TALLY_FAST_MAX_SLOTS, 0 },
	{ "cluster", "rank", K_INT, F(rank), 0, BOOT_MAX_MEMBERS - 1, 0 },
	{ "cluster", "world", K_INT, F(world), 1, BOOT_MAX_MEMBERS, 0 },
	{ "cluster", "role", K_ROLE, F(role), 0, 0, 0 },
	{ "cluster", "algorithm", K_ALGO, F(algorithm), 0, 0, 0 },
	{ "cluster", "coordinator", K_ADDR, F(coordinator), 0, 0, 0 },
	{ "cluster", "job_key", K_U32, F(job_key), 0, UINT32_MAX, 0 },
	STR("cluster", "secret_file", secret_file),
	{ "cluster", "heartbeat_ms", K_INT, F(heartbeat_ms), 10, 60000, 0 },
	{ "cluster", "peer_timeout_ms", K_INT, F(peer_timeout_ms), 50,
	  600000, 0 },
	{ "cluster", "connect_timeout_ms", K_INT, F(connect_timeout_ms), 0,
	  3600000, 0 },
	{ "cluster", "schedule", K_SCHED, F(schedule), 0, 0, 0 },
	{ "cluster", "partition_kib", K_INT, F(partition_kib), 4, 1 << 20, 0 },
	{ "cluster", "credit_kib", K_INT, F(credit_kib), 4, 1 << 22, 0 },
	{ "cluster", "credit_autotune", K_INT, F(credit_autotune), 0, 1, 0 },
	{ "dataplane", "transport", K_TRANSPORT, F(transport), 0, 0,
	  sizeof(((struct tally_config *)0)->transport) },
	{ "dataplane", "address", K_ADDR, F(address), 0, 0, 0 },
	{ "dataplane", "mac", K_MAC, F(mac), 0, 0, 0 },
	STR("dataplane", "eal_args", eal_args),
	{ "dataplane", "mbufs", K_INT, F(mbufs), 512, 1 << 20, 0 },
	STR("dataplane", "rdma_device", rdma_device),
	{ "dataplane", "rdma_port", K_INT, F(rdma_port), 1, 255, 0 },
	{ "dataplane", "rdma_gid_index", K_INT, F(rdma_gid_index), 0, 255, 0 },
	{ "dataplane", "k", K_INT, F(k), TLY_K_MIN, TLY_K_MAX, 0 },
	{ "dataplane", "pool_slots", K_INT, F(pool_slots), 1, TLY_MAX_SLOTS - 1,
	  0 },
	{ "dataplane", "window", K_INT, F(window), 1, 65536, 0 },
	{ "dataplane", "rto_us", K_INT, F(rto_us), 10, 10000000, 0 },
	{ "dataplane", "congestion", K_BOOL, F(congestion), 0, 0, 0 },
	{ "dataplane", "cc_min_window", K_INT, F(cc_min_window), 1, 65536, 0 },
	{ "dataplane", "cc_init_window", K_INT, F(cc_init_window), 1, 65536,
	  0 },
	{ "dataplane", "cc_target_delay_us", K_INT, F(cc_target_delay_us), 1,
	  1000000, 0 },
	{ "dataplane", "cc_base_window_ms", K_INT, F(cc_base_window_ms), 1,
	  60000, 0 },
	{ "dataplane", "held_max", K_INT, F(held_max), 0, TLY_MAX_SLOTS, 0 },
	{ "dataplane", "release_batch", K_INT, F(release_batch), 1,
	  TLY_SWITCH_RECEIPTS, 0 },
	{ "dataplane", "ack_every", K_INT, F(ack_every), 1, 64, 0 },
	{ "dataplane", "busy_us", K_INT, F(busy_us), 1, 10000000, 0 },
	{ "dataplane", "threads", K_INT, F(dp_threads), 1, 16, 0 },
	{ "dataplane", "profile", K_PROFILE, F(dp_profile), 0, 0, 0 },
	{ "compression", "method", K_CODEC, F(compression), 0, 0, 0 },
	{ "dataplane", "cpus", K_CPUS, F(dp_cpus), 0, 0,
	  sizeof(((struct tally_config *)0)->dp_cpus) },
	{ "dataplane", "result_group", K_ADDR, F(result_group), 0, 0, 0 },
	STR("dataplane", "xdp_ifname", xdp_ifname),
	{ "emulator", "rate_bps", K_U64, F(emu_rate_bps), 0,
	  1000000000000000LL, 0 },
	{ "emulator", "delay_us", K_INT, F(emu_delay_us), 0, 10000000, 0 },
	{ "emulator", "jitter_us", K_INT, F(emu_jitter_us), 0, 10000000, 0 },
	{ "emulator", "loss_ppm", K_INT, F(emu_loss_ppm), 0, 1000000, 0 },
	{ "emulator", "dup_ppm", K_INT, F(emu_dup_ppm), 0, 1000000, 0 },
	{ "emulator", "reorder_ppm", K_INT, F(emu_reorder_ppm), 0, 1000000,
	  0 },
	{ "emulator", "reorder_us", K_INT, F(emu_reorder_us), 0, 10000000, 0 },
	{ "emulator", "seed", K_U64, F(emu_seed), 0, INT64_MAX, 0 },
	{ "service", "enabled", K_BOOL, F(service), 0, 0, 0 },
	{ "service", "max_jobs", K_INT, F(max_jobs), 1, 1024, 0 },
	{ "service", "max_clients_per_job", K_INT, F(max_clients_per_job), 1,
	  CONFIG_MAX_LOCAL_SIZE, 0 },
	{ "service", "max_segments", K_INT, F(max_segments), 1,
	  TALLY_MAX_SEGMENTS, 0 },
	{ "service", "max_client_bytes", K_U64, F(max_client_bytes), 0,
	  INT64_MAX, 0 },
	{ "service", "max_outstanding", K_INT, F(max_outstanding), 1,
	  TALLY_MAX_INFLIGHT, 0 },
	{ "service", "rendezvous_port_base", K_INT, F(rendezvous_port_base),
	  1, 65535, 0 },
	{ "service", "rendezvous_ports", K_INT, F(rendezvous_ports), 1, 65535,
	  0 },
	{ "service", "job_linger_ms", K_INT, F(job_linger_ms), 0, 600000, 0 },
	{ "service", "require_secret", K_BOOL, F(require_secret), 0, 0, 0 },
	{ "metrics", "listen", K_ADDR, F(metrics_listen), 0, 0, 0 },
	{ "metrics", "allow_remote", K_BOOL, F(metrics_allow_remote), 0, 0, 0 },
};

static int parse_ll(const char *v, long long lo, long long hi,
		    long long *out)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(v, &end, 0);	/* 0x... for keys and seeds */
	if (errno || end == v || *end || n < lo || n > hi)
		return -1;
	*out = n;
	return 0;
}

static int parse_addr(const char *v, struct config_addr *a)
{
	char ip[64];
	const char *colon = strrchr(v, ':');
	struct in_addr in;
	long long port;

	if (!colon || (size_t)(colon - v) >= sizeof(ip))
		return -1;
	memcpy(ip, v, (size_t)(colon - v));
	ip[colon - v] = '\0';
	if (inet_pton(AF_INET, ip, &in) != 1 ||
	    parse_ll(colon + 1, 1, 65535, &port))
		return -1;
	a->ip = ntohl(in.s_addr);
	a->port = (uint16_t)port;
	return 0;
}

static int parse_mac(const char *v, uint8_t *mac)
{
	unsigned int b[6];
	char tail;

	if (sscanf(v, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3],
		   &b[4], &b[5], &tail) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (b[i] > 255)
			return -1;
		mac[i] = (uint8_t)b[i];
	}
	return 0;
}

/* One CPU number of a list: decimal, no sign, no leading zero (libnuma
 * would read "010" as octal 8), below CONFIG_CPUS_MAX.  Moves *s past it. */
static int cpu_number(const char **s, long *out)
{
	const char *p = *s;
	long n = 0;

	if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9'))
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		n = n * 10 + (*p - '0');
		if (n >= CONFIG_CPUS_MAX)
			return -1;
	}
	*s = p;
	*out = n;
	return 0;
}

/*
 * A CPU list in the kernel's format (cpuset(7) "List format"): "0-3,8",
 * ranges ascending, no blanks; "" unsets it.  Only the form is checked
 * here, the same on every host; whether the CPUs exist and are online is
 * checked when tallyd places its threads (dataplane/placement.c, which
 * parses the list with libnuma).  The forms libnuma takes beyond the
 * kernel's ("all", "!", "+", hex) are refused, so that a list means the
 * same to tallyd, taskset and the cpuset files.
 */
static int cpulist_valid(const char *s)
{
	long lo, hi;

	if (!*s)
		return 0;
	for (;;) {
		if (cpu_number(&s, &lo))
			return -1;
		hi = lo;
		if (*s == '-') {
			s++;
			if (cpu_number(&s, &hi) || hi < lo)
				return -1;
		}
		if (!*s)
			return 0;
		if (*s++ != ',')
			return -1;
	}
}

static int set_value(struct tally_config *cfg, const struct key_spec *k,
		     const char *v)
{
	char *field = (char *)cfg + k->off;
	long long n;
	int e;

	switch (k->type) {
	case K_INT:
		if (parse_ll(v, k->min, k->max, &n))
			return -1;
		*(int *)field = (int)n;
		return 0;
	case K_U32:
		if (parse_ll(v, k->min, k->max, &n))
			return -1;
		*(uint32_t *)field = (uint32_t)n;
		return 0;
	case K_U64:
		if (parse_ll(v, k->min, k->max, &n))
			return -1;
		*(uint64_t *)field = (uint64_t)n;
		return 0;
	case K_STR:
		if (strlen(v) >= k->cap)
			return -1;
		strcpy(field, v);
		return 0;
	case K_CPUS:
		if (strlen(v) >= k->cap || cpulist_valid(v))
			return -1;
		strcpy(field, v);
		return 0;
	case K_TRANSPORT:
		if (strcmp(v, "udp") && strcmp(v, "dpdk") && strcmp(v, "rdma") &&
		    strcmp(v, "xdp"))
			return -1;
		strcpy(field, v);
		return 0;
	case K_LOG:
		e = log_level_parse(v);
		break;
	case K_ROLE:
		e = boot_role_parse(v);
		break;
	case K_SCHED:
		e = sched_policy_parse(v);
		break;
	case K_ALGO:
		e = !strcmp(v, "aggregate") ? ALGO_AGGREGATE :
		    !strcmp(v, "ring") ? ALGO_RING : -1;
		break;
	case K_CODEC:
		e = tly_codec_from_name(v);
		break;
	case K_PROFILE:
		e = !strcmp(v, "software") ? TLY_PROFILE_SOFTWARE :
		    !strcmp(v, "switch") ? TLY_PROFILE_SWITCH : -1;
		break;
	case K_ADDR:
		/* fields only: a struct copy would carry stack bytes into the
		 * padding, and two equal configurations would differ */
		if (!*v && (!strcmp(k->section, "metrics") ||
			    !strcmp(k->key, "result_group"))) {	/* off */
			((struct config_addr *)field)->ip = 0;
			((struct config_addr *)field)->port = 0;
			return 0;
		}
		return parse_addr(v, (struct config_addr *)field);
	case K_BOOL:
		e = !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1") ?
		    1 : !strcmp(v, "false") || !strcmp(v, "no") ||
		    !strcmp(v, "0") ? 0 : -1;
		break;
	case K_MAC: {
		uint8_t mac[6];

		if (parse_mac(v, mac))
			return -1;
		memcpy(field, mac, 6);
		return 0;
	}
	default:
		return -1;
	}
	if (e < 0)
		return -1;
	*(int *)field = e;
	return 0;
}

int config_set(struct tally_config *cfg, const char *section,
	       const char *key, const char *value, char *err, int errlen)
{
	bool section_known = false;

	if (!strcmp(section, "cluster") && !strcmp(key, "secret")) {
		snprintf(err, (size_t)errlen, "cluster.secret cannot be set "
			 "here: command lines and configuration files are "
			 "readable by others; use cluster.secret_file (mode "
			 "0600) or the environment variable TALLY_JOB_SECRET");
		return -1;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(keys[i].section, section))
			continue;
		section_known = true;
		if (strcmp(keys[i].key, key))
			continue;
		if (set_value(cfg, &keys[i], value)) {
			snprintf(err, (size_t)errlen, "bad value '%s' for %s.%s",
				 value, section, key);
			return -1;
		}
		return 0;
	}
	if (!section_known)
		snprintf(err, (size_t)errlen, "unknown section [%s]", section);
	else
		snprintf(err, (size_t)errlen, "unknown key '%s' in [%s]", key,
			 section);
	return -1;
}

/* @k's value in @cfg as the file would spell it */
static void format_value(const struct tally_config *cfg,
			 const struct key_spec *k, char *buf, size_t len)
{
	const char *field = (const char *)cfg + k->off;
	const struct config_addr *a = (const void *)field;
	const uint8_t *mac = (const void *)field;
	static const char *const levels[] = { "error", "warn", "info",
					      "debug" };
	struct in_addr in;
	char ip[INET_ADDRSTRLEN];
	int v;

	switch (k->type) {
	case K_INT:
		snprintf(buf, len, "%d", *(const int *)field);
		return;
	case K_U32:
		snprintf(buf, len, "%u", *(const uint32_t *)field);
		return;
	case K_U64:
		snprintf(buf, len, "%llu",
			 (unsigned long long)*(const uint64_t *)field);
		return;
	case K_STR:
	case K_TRANSPORT:
	case K_CPUS:
		snprintf(buf, len, "'%s'", field);
		return;
	case K_LOG:
		v = *(const int *)field;
		snprintf(buf, len, "%s", v >= 0 && v <= LOG_DEBUG ?
			 levels[v] : "?");
		return;
	case K_ROLE:
		snprintf(buf, len, "%s", boot_role_name(*(const int *)field));
		return;
	case K_SCHED:
		snprintf(buf, len, "%s", sched_policy_name(
				 (enum sched_policy)*(const int *)field));
		return;
	case K_ALGO:
		v = *(const int *)field;
		snprintf(buf, len, "%s", v == ALGO_RING ? "ring" : "aggregate");
		return;
	case K_CODEC:
		snprintf(buf, len, "%s",
			 tly_codec((unsigned int)*(const int *)field)->name);
		return;
	case K_PROFILE:
		v = *(const int *)field;
		snprintf(buf, len, "%s", v == TLY_PROFILE_SWITCH ? "switch" :
			 "software");
		return;
	case K_ADDR:
		in.s_addr = htonl(a->ip);
		if (!a->ip || !inet_ntop(AF_INET, &in, ip, sizeof(ip)))
			snprintf(buf, len, "(unset)");
		else
			snprintf(buf, len, "%s:%u", ip, a->port);
		return;
	case K_BOOL:
		snprintf(buf, len, "%s", *(const int *)field ? "true" : "false");
		return;
	case K_MAC:
		snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0],
			 mac[1], mac[2], mac[3], mac[4], mac[5]);
		return;
	}
	snprintf(buf, len, "?");
}

static bool value_equal(const struct tally_config *a,
			const struct tally_config *b, const struct key_spec *k)
{
	const char *fa = (const char *)a + k->off;
	const char *fb = (const char *)b + k->off;
	const struct config_addr *aa = (const void *)fa, *ab = (const void *)fb;

	switch (k->type) {
	case K_U64:
		return !memcmp(fa, fb, sizeof(uint64_t));
	case K_STR:
	case K_TRANSPORT:
	case K_CPUS:
		return !strcmp(fa, fb);
	case K_ADDR:	/* fields only: never the padding */
		return aa->ip == ab->ip && aa->port == ab->port;
	case K_MAC:
		return !memcmp(fa, fb, 6);
	default:	/* int, uint32_t and the enums kept as int */
		return !memcmp(fa, fb, sizeof(int));
	}
}

int config_diff(const struct tally_config *a, const struct tally_config *b,
		config_diff_fn fn, void *ctx)
{
	char va[600], vb[600];
	int n = 0;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (value_equal(a, b, &keys[i]))
			continue;
		n++;
		if (!fn)
			continue;
		format_value(a, &keys[i], va, sizeof(va));
		format_value(b, &keys[i], vb, sizeof(vb));
		fn(ctx, keys[i].section, keys[i].key, va, vb);
	}
	return n;
}

/* 127.0.0.0/8 */
static bool is_loopback(uint32_t ip)
{
	return (ip >> 24) == 127;
}

/* what transport = xdp (the XDP aggregator in tallyd) cannot do */
static int xdp_check(const struct tally_config *cfg, char *err, int errlen)
{
	const char *why = NULL;

	if (strcmp(cfg->transport, "xdp"))
		return 0;
	if (cfg->dp_profile != TLY_PROFILE_SWITCH)
		why = "runs the switch profile only (set dataplane.profile = "
		      "switch)";
	else if (cfg->algorithm != ALGO_AGGREGATE)
		why = "is an aggregator: cluster.algorithm = ring has none";
	else if (cfg->role != ROLE_AGGREGATOR)
		why = "is the aggregator's transport: a worker (role worker "
		      "or colocated) takes udp, dpdk or rdma";
	else if (!cfg->result_group.ip)
		why = "sends each RESULT once to a multicast group: set "
		      "dataplane.result_group = 239.a.b.c:port";
	else if (cfg->dp_threads > 1)
		why = "has no dataplane thread: set dataplane.threads = 1";
	if (!why)
		return 0;
	snprintf(err, (size_t)errlen, "dataplane.transport = xdp %s", why);
	return -1;
}

int config_k(const struct tally_config *cfg)
{
	if (cfg->k)
		return cfg->k;
	if (cfg->dp_profile == TLY_PROFILE_SWITCH)
		return CONFIG_K_SWITCH;
	if (cfg->compression != TLY_CODEC_NONE)
		return CONFIG_K_COMPRESSED;
	return CONFIG_K_SOFTWARE;
}

int config_profile_check(const struct tally_config *cfg, char *err,
			 int errlen)
{
	if (xdp_check(cfg, err, errlen))
		return -1;
	if (cfg->result_group.ip &&
	    !tly_group_ok(cfg->result_group.ip, cfg->result_group.port)) {
		snprintf(err, (size_t)errlen, "dataplane.result_group must be "
			 "an IPv4 multicast address (224.0.0.0/4) with a port");
		return -1;
	}
	if (cfg->dp_profile != TLY_PROFILE_SWITCH)
		return 0;
	if (!tly_switch_k_ok((uint32_t)config_k(cfg))) {
		snprintf(err, (size_t)errlen, "dataplane.profile = switch needs "
			 "dataplane.k = a multiple of 32 up to %d (a switch "
			 "adds 64 lanes a pass, the last may be half; %d "
			 "fills a 1500-byte MTU, more needs jumbo frames), "
			 "not %d", TLY_SWITCH_K_MAX, TLY_SWITCH_K_MTU1500,
			 config_k(cfg));
		return -1;
	}
	if (cfg->algorithm != ALGO_AGGREGATE) {
		snprintf(err, (size_t)errlen, "dataplane.profile = switch is a "
			 "profile of aggregation: cluster.algorithm = ring has "
			 "no aggregator to run it");
		return -1;
	}
	return 0;
}

/* what docs/compression.md section 7 refuses at job start */
int config_compression_check(const struct tally_config *cfg, char *err,
			     int errlen)
{
	/* not yet with tallyd's aggregator either: untested (the XDP
	 * aggregator's lanes are int32 only) */
	if (cfg->compression != TLY_CODEC_NONE && cfg->result_group.ip) {
		snprintf(err, (size_t)errlen, "compression.method = %s: a job "
			 "with dataplane.result_group takes int32 lanes only "
			 "(the XDP aggregator's)",
			 tly_codec((unsigned int)cfg->compression)->name);
		return -1;
	}
	if (cfg->compression == TLY_CODEC_SIGN_EF &&
	    cfg->dp_profile == TLY_PROFILE_SWITCH) {
		snprintf(err, (size_t)errlen, "compression.method = sign_ef "
			 "needs dataplane.profile = software: a switch cannot "
			 "widen one bit into a count lane per element nor "
			 "flip a coin for each tied one");
		return -1;
	}
	if (tly_codec((unsigned int)cfg->compression)->topk_permille &&
	    cfg->dp_profile == TLY_PROFILE_SWITCH) {
		snprintf(err, (size_t)errlen, "compression.method = %s needs "
			 "dataplane.profile = software: partial blocks (m(b) "
			 "senders) and the non-senders' PULL are the software "
			 "aggregator's, not built for a switch yet",
			 tly_codec((unsigned int)cfg->compression)->name);
		return -1;
	}
	if (cfg->compression == TLY_CODEC_NONE ||
	    cfg->algorithm == ALGO_AGGREGATE)
		return 0;
	snprintf(err, (size_t)errlen, "compression.method = %s needs "
		 "cluster.algorithm = aggregate: ring hops carry float32 "
		 "partial sums without an exponent round, so compressed "
		 "lanes would be re-encoded at every hop",
		 tly_codec((unsigned int)cfg->compression)->name);
	return -1;
}

int config_check(const struct tally_config *cfg, char *err, int errlen)
{
	if (config_profile_check(cfg, err, errlen))
		return -1;
	if (config_compression_check(cfg, err, errlen))
		return -1;
	if (cfg->metrics_listen.ip && !is_loopback(cfg->metrics_listen.ip) &&
	    !cfg->metrics_allow_remote) {
		snprintf(err, (size_t)errlen, "metrics.listen is not a loopback "
			 "address: the endpoint has no authentication (set "
			 "metrics.allow_remote = true to serve it anyway)");
		return -1;
	}
	/* thread s uses the group's port + s */
	if (cfg->result_group.ip &&
	    cfg->result_group.port + cfg->dp_threads - 1 > 65535) {
		snprintf(err, (size_t)errlen, "dataplane.result_group's port "
			 "+ dataplane.threads goes past port 65535");
		return -1;
	}
	if (cfg->rendezvous_port_base + cfg->rendezvous_ports - 1 > 65535) {
		snprintf(err, (size_t)errlen, "service.rendezvous_port_base + "
			 "service.rendezvous_ports goes past port 65535");
		return -1;
	}
	if (cfg->service && cfg->world > 1) {
		snprintf(err, (size_t)errlen, "service.enabled: jobs come from "
			 "their clients; cluster.world belongs to a daemon "
			 "started for one job");
		return -1;
	}
	if (cfg->world == 1)
		return 0;
	if (cfg->rank >= cfg->world) {
		snprintf(err, (size_t)errlen, "cluster.rank %d is not below "
			 "cluster.world %d", cfg->rank, cfg->world);
		return -1;
	}
	if (!cfg->coordinator.ip) {
		snprintf(err, (size_t)errlen, "a cluster (world > 1) needs "
			 "cluster.coordinator = IP:PORT");
		return -1;
	}
	if (!cfg->address.ip) {
		snprintf(err, (size_t)errlen, "a cluster needs "
			 "dataplane.address = IP:PORT");
		return -1;
	}
	if (!strcmp(cfg->transport, "dpdk") && !cfg->eal_args[0]) {
		snprintf(err, (size_t)errlen, "transport dpdk needs "
			 "dataplane.eal_args");
		return -1;
	}
	return 0;
}

struct ini_ctx {
	struct tally_config *cfg;
	FILE *f;
	int line;		/* line the reader handed to inih last */
	int failed_line;	/* line of our first rejected key, or 0 */
	char msg[256];
};

/* Line reader for inih that counts lines, so a rejected key is reported
 * with its own line even when inih's first error was elsewhere. */
static char *read_line(char *buf, int size, void *stream)
{
	struct ini_ctx *ctx = stream;
	char *s;
	int c;

	ctx->line++;
	s = fgets(buf, size, ctx->f);
	if (s && !strchr(s, '\n') && !feof(ctx->f)) {
		/* inih would read the rest as another line: refuse it, and
		 * keep our line numbers right by eating the rest here */
		while ((c = fgetc(ctx->f)) != EOF && c != '\n')
			;
		if (!ctx->failed_line) {
			snprintf(ctx->msg, sizeof(ctx->msg),
				 "line longer than %d characters", size - 2);
			ctx->failed_line = ctx->line;
		}
	}
	return s;
}

static int on_ini_line(void *user, const char *section, const char *key,
		       const char *value)
{
	struct ini_ctx *ctx = user;
	char msg[256];

	if (!key)		/* a section header alone */
		return 1;
	if (config_set(ctx->cfg, section, key, value, msg, sizeof(msg))) {
		if (!ctx->failed_line) {
			memcpy(ctx->msg, msg, sizeof(msg));
			ctx->failed_line = ctx->line;
		}
		return 0;
	}
	return 1;
}

int config_load_stream(struct tally_config *cfg, FILE *f, const char *name,
		       char *err, int errlen)
{
	struct ini_ctx ctx = { .cfg = cfg, .f = f };
	int ret;

	/* returns the line of the first error: ours or a syntax error */
	ret = ini_parse_stream(read_line, &ctx, on_ini_line, &ctx);
	if (ret < 0 || ferror(f)) {
		snprintf(err, (size_t)errlen, "%s: cannot read", name);
		return -1;
	}
	/* the first error wins: ours (a bad key, a long line) or inih's */
	if (ctx.failed_line && (ret == 0 || ctx.failed_line <= ret))
		ret = ctx.failed_line;
	if (ret == 0)
		return 0;
	snprintf(err, (size_t)errlen, "%s:%d: %s", name, ret,
		 ctx.failed_line == ret ? ctx.msg : "syntax error");
	return -1;
}

int config_load_file(struct tally_config *cfg, const char *path,
		     char *err, int errlen)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	FILE *f;
	int ret;

	if (fd < 0) {
		snprintf(err, (size_t)errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* a directory reads as an empty file and /dev/zero as one endless
	 * line: only a regular file is a configuration */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, (size_t)errlen, "%s: not a regular file", path);
		close(fd);
		return -1;
	}
	f = fdopen(fd, "r");
	if (!f) {
		snprintf(err, (size_t)errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	ret = config_load_stream(cfg, f, path, err, errlen);
	fclose(f);
	return ret;
}
