/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config.h - tallyd's configuration: defaults, an INI file, then
 * command-line overrides.  Every key is documented in
 * docs/configuration.md; the table in config.c is the single list.
 */
#ifndef TALLY_CTRL_CONFIG_H
#define TALLY_CTRL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_PATH_MAX 108	/* sun_path */
#define CONFIG_MAX_LOCAL_SIZE 64
/* [daemon] numa_node and cpus: the kernel's limits (MAX_NUMNODES with
 * NODES_SHIFT 10) and what a cpu_set_t holds */
#define CONFIG_NUMA_NODE_MAX 1023
#define CONFIG_CPUS_MAX 1024

struct config_addr {
	uint32_t ip;		/* host byte order; 0 = unset */
	uint16_t port;
};

struct tally_config {
	/* the last file of --config, for a reload ("": none); not a key */
	char config_file[CONFIG_PATH_MAX * 2];
	/* [daemon] */
	char socket[CONFIG_PATH_MAX];
	char socket_group[64];
	int local_size;
	int idle_spin_us;
	int reduce_threads;		/* 0 = auto */
	int numa_node;			/* the NIC's node; -1 = unset */
	char cpus[256];			/* reduce threads' CPU list; "": unset */
	int stuck_ms;			/* watchdog bound; 0 = off */
	/* the local fast path of one-host jobs (docs/local-fast-path.md) */
	int fast_path_bytes;		/* largest all-reduce it takes; 0 off */
	int fast_path_slots;
	int log_level;
	/* [cluster]: world 1 means this host alone, no network */
	int rank;
	int world;
	int role;			/* enum boot_role */
	int algorithm;			/* enum boot_algorithm */
	struct config_addr coordinator;
	uint32_t job_key;
	/* the job secret's file; without one, $TALLY_JOB_SECRET */
	char secret_file[CONFIG_PATH_MAX * 2];
	int heartbeat_ms;
	int peer_timeout_ms;
	int connect_timeout_ms;
	int schedule;			/* enum sched_policy */
	int partition_kib;		/* bytescheduler partitions */
	int credit_kib;			/* bytescheduler credit */
	int credit_autotune;
	/* [dataplane] */
	char transport[16];		/* udp | dpdk | rdma | xdp (an
					 * aggregator of the switch profile) */
	struct config_addr address;	/* this daemon's data address */
	uint8_t mac[6];
	char eal_args[512];
	int mbufs;
	char rdma_device[64];		/* "": the first verbs device */
	int rdma_port;
	int rdma_gid_index;		/* the port's RoCEv2 IPv4 GID */
	int k;				/* 0: config_k() chooses */
	int pool_slots;
	int window;
	int rto_us;
	bool congestion;		/* adapt the window (cc.c) */
	int cc_min_window, cc_init_window;	/* packets */
	int held_max;		/* switch profile: chunks held at one
				 * aggregator (0: the engine's default) */
	int release_batch;	/* switch profile: chunks a CONFIRM names */
	int ack_every;		/* switch profile: one DATA in this many
				 * asks for its ACK */
	int busy_us;		/* switch profile: the wait after a BUSY */
	int cc_target_delay_us, cc_base_window_ms;
	int dp_threads;			/* dataplane threads per job */
	int dp_profile;			/* enum tly_profile: software |
					 * switch (docs/switch-profile.md) */
	char dp_cpus[256];		/* their CPU list; "": unset */
	/* [compression] (docs/compression.md): the job's float tensors */
	int compression;		/* enum tly_codec: none | int16 | int8 */
	/* the multicast group every RESULT goes to once (the XDP
	 * aggregator's, or a udp tallyd aggregator's RESULT to all, either
	 * profile); ip 0 = none */
	struct config_addr result_group;
	/* transport = xdp (an aggregator): the interface the program is
	 * attached to; "": the one holding dataplane.address */
	char xdp_ifname[16];
	/* [emulator]: the link emulator under the transport */
	uint64_t emu_rate_bps;
	int emu_delay_us;
	int emu_jitter_us;
	int emu_loss_ppm;
	int emu_dup_ppm;
	int emu_reorder_ppm;
	int emu_reorder_us;
	uint64_t emu_seed;
	/* [service]: a host service whose jobs come from their clients
	 * (docs/jobs.md); off: the one job of [cluster] and --local-size */
	int service;
	int max_jobs;
	int max_clients_per_job;
	int max_segments;		/* per client */
	uint64_t max_client_bytes;	/* per client; 0: no limit */
	int max_outstanding;		/* per client */
	int rendezvous_port_base;	/* a job's coordinator port when its */
	int rendezvous_ports;		/* clients name none: hashed into it */
	int job_linger_ms;		/* an empty job serves its peers' */
	int require_secret;		/* retransmissions this long */
	/* [metrics]: the Prometheus endpoint; ip 0 = off */
	struct config_addr metrics_listen;
	int metrics_allow_remote;	/* a non-loopback listen is refused
					 * unless this is set */
};

void config_defaults(struct tally_config *cfg);

/*
 * config_load_file - read an INI file over the current values.
 * Every error (unknown section or key, bad value, syntax) is reported as
 * "FILE:LINE: message" into @err; returns 0 or -1.
 */
int config_load_file(struct tally_config *cfg, const char *path,
		     char *err, int errlen);

/* config_load_stream - the same over an open stream; @name stands for the
 * file in messages.  config_load_file() refuses anything but a regular
 * file, then reads it with this. */
int config_load_stream(struct tally_config *cfg, FILE *f, const char *name,
		       char *err, int errlen);

/* config_set - set one key of a section from text; used by the INI parser
 * and the command line.  0 or -1 with @err set; a rejected value leaves
 * the old one. */
int config_set(struct tally_config *cfg, const char *section,
	       const char *key, const char *value, char *err, int errlen);

/* config_check - cross-key rules (e.g. a cluster needs a coordinator).
 * 0 or -1 with @err set. */
int config_check(const struct tally_config *cfg, char *err, int errlen);

/*
 * dataplane.k when the configuration does not set it.  The software
 * profile's int32 lanes: 360, the most a 1500-byte IP MTU carries (363)
 * rounded down to whole 8-lane vectors, 1440 bytes of payload a packet,
 * 40 % more than 256 for the same per-packet cost (docs/performance.md,
 * "Lanes a packet").  The switch profile: 352, the most whole 32-lane
 * half passes that fit the same MTU (docs/switch-profile.md; 10 % more
 * than 320 a frame, the XDP scenario 4-7 % faster); up to 832 on links
 * with jumbo frames, set by dataplane.k.  A compressed job
 * (compression.method other than none) of the software profile keeps
 * 256, the K its codecs were measured with (docs/compression.md).
 */
#define CONFIG_K_SOFTWARE 360
#define CONFIG_K_SWITCH TLY_SWITCH_K_MTU1500
#define CONFIG_K_COMPRESSED 256

/* config_k - the job's K: dataplane.k, or the profile's default */
int config_k(const struct tally_config *cfg);

/* config_profile_check - what dataplane.profile = switch cannot do, for
 * the keys known before the job's roster (K, the algorithm); the worker
 * count is checked against TLY_SWITCH_MAX_WORKERS once the roster is in.
 * 0 or -1 with @err set.  config_check() runs it too. */
/* config_compression_check - compression.method with what it cannot go
 * with (docs/compression.md section 7: narrow lanes and the ring) */
int config_compression_check(const struct tally_config *cfg, char *err,
			     int errlen);
int config_profile_check(const struct tally_config *cfg, char *err,
			 int errlen);

/*
 * config_diff - call @fn (when not NULL) for every key whose value differs
 * between @a and @b, in the order of the key table, with both values as
 * text (strings quoted).  Returns the number of keys that differ.
 * tallyd's SIGHUP reload uses it to apply and log what changed.
 */
typedef void (*config_diff_fn)(void *ctx, const char *section,
			       const char *key, const char *old_value,
			       const char *new_value);
int config_diff(const struct tally_config *a, const struct tally_config *b,
		config_diff_fn fn, void *ctx);

/* config_parse_args (cmdline.c) - tallyd's command line: defaults, then
 * the files of --config, then the other options in their order, then
 * config_check().  Errors are logged.  0, CONFIG_ARGS_HELP for --help, or
 * -1; CONFIG_ARGS_USAGE when the error is an unknown option or a missing
 * argument (the caller shows config_usage()). */
#define CONFIG_ARGS_HELP 1
#define CONFIG_ARGS_USAGE (-2)
int config_parse_args(struct tally_config *cfg, int argc, char **argv);
void config_usage(FILE *f);

/* Is this daemon part of a multi-host job? */
static inline bool config_is_cluster(const struct tally_config *cfg)
{
	return cfg->world > 1;
}

#endif /* TALLY_CTRL_CONFIG_H */
