// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_config.c - unit tests of tallyd's configuration (ctrl/config.c):
 * defaults, INI files and their error messages, config_set overrides.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "ctrl/bootstrap.h"
#include "dataplane/engine/wire.h"
#include "ctrl/config.h"
#include "dataplane/engine/codec.h"
#include "ctrl/daemon.h"
#include "ctrl/log.h"

struct cfg_file {
	char path[64];
};

static int file_setup(void **state)
{
	static struct cfg_file f;
	const char *dir = getenv("TMPDIR");
	int fd;

	snprintf(f.path, sizeof(f.path), "%s/tally-cfg-XXXXXX",
		 dir && *dir && strlen(dir) < 32 ? dir : "/tmp");
	fd = mkstemp(f.path);
	if (fd < 0)
		return -1;
	close(fd);
	*state = &f;
	return 0;
}

static int file_teardown(void **state)
{
	struct cfg_file *f = *state;

	unlink(f->path);
	return 0;
}

static void write_file(const struct cfg_file *f, const char *text)
{
	FILE *fp = fopen(f->path, "w");

	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

/* Load @text; expect failure with "PATH:LINE: " followed by text that
 * contains @needle.  Returns the config as it was left. */
static void expect_error(const struct cfg_file *f, const char *text,
			 int line, const char *needle)
{
	struct tally_config cfg;
	char err[512], prefix[128];

	write_file(f, text);
	config_defaults(&cfg);
	memset(err, 0, sizeof(err));
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 -1);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", f->path, line);
	if (strncmp(err, prefix, strlen(prefix)) != 0)
		fail_msg("error \"%s\" does not start with \"%s\"", err,
			 prefix);
	if (!strstr(err + strlen(prefix), needle))
		fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
}

/* dataplane.profile: its values, and what the switch profile refuses */
static void test_config_profile(void **state)
{
	struct tally_config cfg;
	char err[256];

	config_defaults(&cfg);
	assert_int_equal(cfg.dp_profile, TLY_PROFILE_SOFTWARE);
	write_file(*state, "[dataplane]\nprofile = switch\nk = 128\n");
	assert_int_equal(config_load_file(&cfg, ((struct cfg_file *)*state)->
					  path, err, sizeof(err)), 0);
	assert_int_equal(cfg.dp_profile, TLY_PROFILE_SWITCH);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(config_set(&cfg, "dataplane", "profile", "software",
				    err, sizeof(err)), 0);
	assert_int_equal(cfg.dp_profile, TLY_PROFILE_SOFTWARE);
	expect_error(*state, "[dataplane]\nprofile = p4\n", 2, "profile");
	/* K unset: each profile's own (config.h), and the switch's passes */
	config_defaults(&cfg);
	assert_int_equal(config_k(&cfg), CONFIG_K_SOFTWARE);
	assert_true(CONFIG_K_SOFTWARE <= TLY_K_MTU1500 &&
		    CONFIG_K_SOFTWARE % 8 == 0);
	cfg.compression = TLY_CODEC_INT8;
	assert_int_equal(config_k(&cfg), CONFIG_K_COMPRESSED);
	cfg.compression = TLY_CODEC_NONE;
	cfg.dp_profile = TLY_PROFILE_SWITCH;
	assert_int_equal(config_k(&cfg), CONFIG_K_SWITCH);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	cfg.k = 128;		/* set, it wins */
	assert_int_equal(config_k(&cfg), 128);
	/* the default fills a 1500-byte MTU with whole half passes */
	assert_true(CONFIG_K_SWITCH % 32 == 0 &&
		    CONFIG_K_SWITCH <= TLY_K_MTU1500 &&
		    CONFIG_K_SWITCH + 32 > TLY_K_MTU1500);
	/* K: half passes of 32 lanes, up to 832 (jumbo frames) */
	for (int k = 8; k <= 1024; k++) {
		cfg.k = k;
		assert_int_equal(config_check(&cfg, err, sizeof(err)),
				 k % 32 == 0 && k <= 832 ? 0 : -1);
	}
	cfg.k = 336;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "dataplane.k"));
	cfg.k = 256;
	cfg.algorithm = ALGO_RING;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ring"));
	assert_int_equal(config_profile_check(&cfg, err, sizeof(err)), -1);
	/* the software profile takes both */
	cfg.dp_profile = TLY_PROFILE_SOFTWARE;
	cfg.k = 96;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
}

/* compression.method (docs/compression.md): its values, and the ring
 * refused at job start */
static void test_config_compression(void **state)
{
	struct tally_config cfg;
	char err[256];

	config_defaults(&cfg);
	assert_int_equal(cfg.compression, TLY_CODEC_NONE);
	write_file(*state, "[compression]\nmethod = int8\n");
	assert_int_equal(config_load_file(&cfg, ((struct cfg_file *)*state)->
					  path, err, sizeof(err)), 0);
	assert_int_equal(cfg.compression, TLY_CODEC_INT8);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(config_set(&cfg, "compression", "method", "int16",
				    err, sizeof(err)), 0);
	assert_int_equal(cfg.compression, TLY_CODEC_INT16);
	expect_error(*state, "[compression]\nmethod = fp8\n", 2, "method");
	cfg.algorithm = ALGO_RING;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "compression.method = int16"));
	assert_non_null(strstr(err, "ring"));
	assert_int_equal(config_compression_check(&cfg, err, sizeof(err)),
			 -1);
	cfg.compression = TLY_CODEC_NONE;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	/* the switch profile takes the narrow lanes (section 7) */
	cfg.algorithm = ALGO_AGGREGATE;
	cfg.dp_profile = TLY_PROFILE_SWITCH;
	cfg.compression = TLY_CODEC_INT8;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	/* sign_ef (section 3): software profile, aggregation only */
	write_file(*state, "[compression]\nmethod = sign_ef\n");
	assert_int_equal(config_load_file(&cfg, ((struct cfg_file *)*state)->
					  path, err, sizeof(err)), 0);
	assert_int_equal(cfg.compression, TLY_CODEC_SIGN_EF);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "compression.method = sign_ef"));
	assert_non_null(strstr(err, "profile = software"));
	cfg.dp_profile = TLY_PROFILE_SOFTWARE;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	cfg.algorithm = ALGO_RING;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "compression.method = sign_ef"));
	assert_non_null(strstr(err, "ring"));
	/* block_topk (section 4): software profile, aggregation only */
	write_file(*state, "[compression]\nmethod = block_topk10_ef\n");
	assert_int_equal(config_load_file(&cfg, ((struct cfg_file *)*state)->
					  path, err, sizeof(err)), 0);
	assert_int_equal(cfg.compression, TLY_CODEC_TOPK10_EF);
	cfg.algorithm = ALGO_AGGREGATE;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	cfg.dp_profile = TLY_PROFILE_SWITCH;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "compression.method = block_topk10_ef"));
	assert_non_null(strstr(err, "profile = software"));
	cfg.dp_profile = TLY_PROFILE_SOFTWARE;
	cfg.algorithm = ALGO_RING;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "compression.method = block_topk10_ef"));
	assert_non_null(strstr(err, "ring"));
	write_file(*state, "[compression]\nmethod = block_topk1_ef\n");
	assert_int_equal(config_load_file(&cfg, ((struct cfg_file *)*state)->
					  path, err, sizeof(err)), 0);
	assert_int_equal(cfg.compression, TLY_CODEC_TOPK1_EF);
	write_file(*state, "[compression]\nmethod = block_topk5_ef\n");
	assert_int_equal(config_load_file(&cfg, ((struct cfg_file *)*state)->
					  path, err, sizeof(err)), -1);
}

/* dataplane.result_group, xdp_ifname and transport = xdp: what the
 * XDP aggregator under tallyd refuses at start */
static void test_config_xdp(void **state)
{
	struct tally_config cfg;
	char err[256];

	config_defaults(&cfg);
	assert_int_equal(cfg.result_group.ip, 0);
	write_file(*state, "[cluster]\nrole = aggregator\n[dataplane]\n"
		   "transport = xdp\nprofile = switch\nk = 256\n"
		   "result_group = 239.7.0.1:47001\nxdp_ifname = eth9\n");
	assert_int_equal(config_load_file(&cfg, ((struct cfg_file *)*state)->
					  path, err, sizeof(err)), 0);
	assert_string_equal(cfg.transport, "xdp");
	assert_int_equal(cfg.result_group.ip, 0xef070001u);
	assert_int_equal(cfg.result_group.port, 47001);
	assert_string_equal(cfg.xdp_ifname, "eth9");
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	/* each refusal names its reason */
	cfg.role = ROLE_WORKER;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "aggregator's transport"));
	cfg.role = ROLE_AGGREGATOR;
	cfg.dp_profile = TLY_PROFILE_SOFTWARE;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "switch profile only"));
	cfg.dp_profile = TLY_PROFILE_SWITCH;
	cfg.algorithm = ALGO_RING;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ring"));
	cfg.algorithm = ALGO_AGGREGATE;
	cfg.dp_threads = 2;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "threads"));
	cfg.dp_threads = 1;
	assert_int_equal(config_set(&cfg, "dataplane", "result_group", "",
				    err, sizeof(err)), 0);
	assert_int_equal(cfg.result_group.ip, 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "multicast group"));
	/* a group that is not multicast, for any transport */
	assert_int_equal(config_set(&cfg, "dataplane", "transport", "udp",
				    err, sizeof(err)), 0);
	assert_int_equal(config_set(&cfg, "dataplane", "result_group",
				    "10.0.0.1:5000", err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "result_group"));
	assert_int_equal(config_set(&cfg, "dataplane", "result_group",
				    "239.1.2.3:65534", err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	/* thread s takes the group's port + s */
	cfg.dp_threads = 3;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "past port 65535"));
	cfg.dp_threads = 1;
	assert_int_equal(config_set(&cfg, "dataplane", "result_group",
				    "239.1.2.3:5000", err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	/* the XDP aggregator's lanes are int32: no narrow lanes by group */
	assert_int_equal(config_set(&cfg, "compression", "method", "int8",
				    err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "int32 lanes only"));
	assert_int_equal(config_set(&cfg, "compression", "method", "sign_ef",
				    err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "int32 lanes only"));
	assert_int_equal(config_set(&cfg, "compression", "method",
				    "block_topk10_ef", err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "int32 lanes only"));
	/* and in the software profile (tallyd's aggregator to a group) */
	cfg.dp_profile = TLY_PROFILE_SOFTWARE;
	assert_int_equal(config_set(&cfg, "compression", "method", "int8",
				    err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "int32 lanes only"));
}

static void test_config_defaults(void **state)
{
	struct tally_config cfg;

	(void)state;
	memset(&cfg, 0x7f, sizeof(cfg));
	config_defaults(&cfg);
	assert_string_equal(cfg.socket, TALLY_DEFAULT_SOCKET);
	assert_string_equal(cfg.socket_group, "");
	assert_int_equal(cfg.local_size, 1);
	assert_int_equal(cfg.idle_spin_us, 50);
	assert_int_equal(cfg.reduce_threads, 0);
	assert_int_equal(cfg.log_level, LOG_INFO);
	assert_true(cfg.congestion);
	assert_int_equal(cfg.cc_min_window, 8);
	assert_int_equal(cfg.cc_target_delay_us, 500);
	assert_int_equal(cfg.held_max, 0);	/* the engine's default */
	assert_int_equal(cfg.release_batch, TLY_SWITCH_RECEIPTS);
	assert_int_equal(cfg.ack_every, 16);
	assert_int_equal(cfg.busy_us, 100);
}

static void test_config_valid_file(void **state)
{
	struct cfg_file *f = *state;
	struct tally_config cfg;
	char err[256] = "";

	write_file(f,
		   "; tallyd configuration\n"
		   "# another comment\n"
		   "\n"
		   "[daemon]\n"
		   "socket = /tmp/tally-test.sock\n"
		   "socket_group=tally\n"
		   "local_size = 8   ; inline comment\n"
		   "idle_spin_us = 0\n"
		   "reduce_threads = 16\n"
		   "log_level = debug\n");
	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 0);
	assert_string_equal(cfg.socket, "/tmp/tally-test.sock");
	assert_string_equal(cfg.socket_group, "tally");
	assert_int_equal(cfg.local_size, 8);
	assert_int_equal(cfg.idle_spin_us, 0);
	assert_int_equal(cfg.reduce_threads, 16);
	assert_int_equal(cfg.log_level, LOG_DEBUG);
}

/* A cluster member's file: every section and value type. */
static void test_config_cluster_file(void **state)
{
	struct cfg_file *f = *state;
	struct tally_config cfg;
	char err[256] = "";

	write_file(f,
		   "[daemon]\nlocal_size = 2\n"
		   "[cluster]\nrank = 3\nworld = 5\nrole = worker+aggregator\n"
		   "algorithm = ring\ncoordinator = 10.77.0.1:7700\n"
		   "job_key = 0xdeadbeef\nheartbeat_ms = 100\n"
		   "[dataplane]\ntransport = dpdk\naddress = 10.77.0.4:7701\n"
		   "mac = 02:0a:4d:00:00:04\neal_args = -l 0 --no-pci\n"
		   "k = 64\nwindow = 32\ncongestion = false\n"
		   "cc_min_window = 4\ncc_init_window = 12\n"
		   "cc_target_delay_us = 200\ncc_base_window_ms = 50\n"
		   "held_max = 512\nrelease_batch = 3\nack_every = 4\n"
		   "busy_us = 250\n"
		   "[emulator]\nrate_bps = 10000000000\nloss_ppm = 10000\n"
		   "seed = 0x10\n");
	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 0);
	assert_int_equal(cfg.rank, 3);
	assert_int_equal(cfg.world, 5);
	assert_int_equal(cfg.role, ROLE_COLOCATED);
	assert_int_equal(cfg.algorithm, ALGO_RING);
	assert_int_equal(cfg.coordinator.ip, 0x0a4d0001u);
	assert_int_equal(cfg.coordinator.port, 7700);
	assert_int_equal(cfg.job_key, 0xdeadbeefu);
	assert_string_equal(cfg.transport, "dpdk");
	assert_int_equal(cfg.address.ip, 0x0a4d0004u);
	assert_int_equal(cfg.mac[5], 4);
	assert_string_equal(cfg.eal_args, "-l 0 --no-pci");
	assert_int_equal(cfg.k, 64);
	assert_int_equal(cfg.window, 32);
	assert_false(cfg.congestion);
	assert_int_equal(cfg.cc_min_window, 4);
	assert_int_equal(cfg.cc_init_window, 12);
	assert_int_equal(cfg.cc_target_delay_us, 200);
	assert_int_equal(cfg.cc_base_window_ms, 50);
	assert_int_equal(cfg.held_max, 512);
	assert_int_equal(cfg.release_batch, 3);
	assert_int_equal(cfg.ack_every, 4);
	assert_int_equal(cfg.busy_us, 250);
	assert_true(cfg.emu_rate_bps == 10000000000ull);
	assert_int_equal(cfg.emu_loss_ppm, 10000);
	assert_true(cfg.emu_seed == 16);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
}

/* Each malformed value of the new types names its file and line. */
static void test_config_cluster_bad_values(void **state)
{
	expect_error(*state, "[cluster]\nrole = switch\n", 2, "cluster.role");
	expect_error(*state, "[cluster]\nalgorithm = tree\n", 2,
		     "cluster.algorithm");
	expect_error(*state, "[cluster]\ncoordinator = 10.77.0.1\n", 2,
		     "cluster.coordinator");
	expect_error(*state, "[cluster]\ncoordinator = 10.77.0.300:1\n", 2,
		     "cluster.coordinator");
	expect_error(*state, "[cluster]\ncoordinator = 10.0.0.1:70000\n", 2,
		     "cluster.coordinator");
	expect_error(*state, "[cluster]\njob_key = -1\n", 2,
		     "cluster.job_key");
	expect_error(*state, "[dataplane]\nmac = 02:0a:4d:00:00\n", 2,
		     "dataplane.mac");
	expect_error(*state, "[dataplane]\nmac = 02:0a:4d:00:00:1ff\n", 2,
		     "dataplane.mac");
	expect_error(*state, "[dataplane]\ntransport = tcp\n", 2,
		     "dataplane.transport");
	expect_error(*state, "[dataplane]\nk = 4\n", 2, "dataplane.k");
	/* up to TLY_K_MAX: above 363 the links need jumbo frames */
	expect_error(*state, "[dataplane]\nk = 1025\n", 2, "dataplane.k");
	expect_error(*state, "[dataplane]\ncongestion = maybe\n", 2,
		     "dataplane.congestion");
	expect_error(*state, "[dataplane]\ncc_min_window = 0\n", 2,
		     "dataplane.cc_min_window");
	expect_error(*state, "[dataplane]\ncc_target_delay_us = 0\n", 2,
		     "dataplane.cc_target_delay_us");
	expect_error(*state, "[dataplane]\nheld_max = -1\n", 2,
		     "dataplane.held_max");
	expect_error(*state, "[dataplane]\nheld_max = 65537\n", 2,
		     "dataplane.held_max");
	expect_error(*state, "[dataplane]\nrelease_batch = 0\n", 2,
		     "dataplane.release_batch");
	expect_error(*state, "[dataplane]\nrelease_batch = 9\n", 2,
		     "dataplane.release_batch");
	expect_error(*state, "[dataplane]\nack_every = 0\n", 2,
		     "dataplane.ack_every");
	expect_error(*state, "[dataplane]\nack_every = 65\n", 2,
		     "dataplane.ack_every");
	expect_error(*state, "[dataplane]\nbusy_us = 0\n", 2,
		     "dataplane.busy_us");
	expect_error(*state, "[emulator]\nloss_ppm = 2000000\n", 2,
		     "emulator.loss_ppm");
	expect_error(*state, "[emulator]\nbogus = 1\n", 2,
		     "unknown key 'bogus'");
}

/* Cross-key rules: a cluster needs a coordinator and an address. */
static void test_config_check_cluster(void **state)
{
	struct tally_config cfg;
	char err[256];

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	cfg.world = 4;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "coordinator"));
	cfg.coordinator.ip = 1;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "address"));
	cfg.address.ip = 1;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	cfg.rank = 4;
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	cfg.rank = 0;
	snprintf(cfg.transport, sizeof(cfg.transport), "dpdk");
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "eal_args"));
}

static void test_config_file_keeps_unset_values(void **state)
{
	struct cfg_file *f = *state;
	struct tally_config cfg;
	char err[256] = "";

	write_file(f, "[daemon]\nlocal_size = 4\n");
	config_defaults(&cfg);
	cfg.idle_spin_us = 123;		/* e.g. set before the file */
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 0);
	assert_int_equal(cfg.local_size, 4);
	assert_int_equal(cfg.idle_spin_us, 123);
	assert_string_equal(cfg.socket, TALLY_DEFAULT_SOCKET);
}

static void test_config_empty_file(void **state)
{
	struct cfg_file *f = *state;
	struct tally_config cfg, def;
	char err[256] = "";

	write_file(f, "");
	config_defaults(&cfg);
	config_defaults(&def);
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 0);
	assert_memory_equal(&cfg, &def, sizeof(cfg));
}

static void test_config_limits_accepted(void **state)
{
	struct cfg_file *f = *state;
	struct tally_config cfg;
	char err[256] = "";

	write_file(f, "[daemon]\nlocal_size = 64\nidle_spin_us = 1000000\n"
		      "reduce_threads = 0\n");
	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 0);
	assert_int_equal(cfg.local_size, 64);
	assert_int_equal(cfg.idle_spin_us, 1000000);
	write_file(f, "[daemon]\nlocal_size = 1\n");
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 0);
	assert_int_equal(cfg.local_size, 1);
}

static void test_config_unknown_section(void **state)
{
	expect_error(*state, "[daemon]\nlocal_size = 2\n[bogus]\nx = 1\n", 4,
		     "unknown section [bogus]");
}

static void test_config_key_before_any_section(void **state)
{
	expect_error(*state, "local_size = 2\n", 1, "unknown section");
}

static void test_config_unknown_key(void **state)
{
	expect_error(*state, "[daemon]\nlocal_size = 2\nlocl_size = 3\n", 3,
		     "unknown key 'locl_size'");
}

static void test_config_bad_integer(void **state)
{
	expect_error(*state, "[daemon]\nlocal_size = abc\n", 2,
		     "bad value 'abc' for daemon.local_size");
	expect_error(*state, "[daemon]\nlocal_size = 12x\n", 2, "'12x'");
	expect_error(*state, "[daemon]\nidle_spin_us = 1.5\n", 2,
		     "idle_spin_us");
	expect_error(*state, "[daemon]\nreduce_threads =\n", 2,
		     "reduce_threads");
	expect_error(*state,
		     "[daemon]\nidle_spin_us = 99999999999999999999999\n", 2,
		     "idle_spin_us");
}

static void test_config_out_of_range(void **state)
{
	expect_error(*state, "[daemon]\nlocal_size = 0\n", 2, "local_size");
	expect_error(*state, "[daemon]\nlocal_size = 65\n", 2, "'65'");
	expect_error(*state, "[daemon]\nlocal_size = -1\n", 2, "local_size");
	expect_error(*state, "[daemon]\nidle_spin_us = -1\n", 2,
		     "idle_spin_us");
	expect_error(*state, "[daemon]\nidle_spin_us = 1000001\n", 2,
		     "idle_spin_us");
	expect_error(*state, "[daemon]\nreduce_threads = 17\n", 2,
		     "reduce_threads");
	/* beyond int, but within long */
	expect_error(*state, "[daemon]\nlocal_size = 4294967297\n", 2,
		     "local_size");
}

static void test_config_bad_log_level(void **state)
{
	expect_error(*state, "[daemon]\nlog_level = loud\n", 2,
		     "bad value 'loud' for daemon.log_level");
	expect_error(*state, "[daemon]\nlog_level = INFO\n", 2, "log_level");
}

static void test_config_string_too_long(void **state)
{
	char text[512];
	char longval[CONFIG_PATH_MAX + 1];

	memset(longval, 'a', sizeof(longval) - 1);
	longval[sizeof(longval) - 1] = '\0';	/* 108 chars: one too many */
	snprintf(text, sizeof(text), "[daemon]\nlocal_size = 2\nsocket = %s\n",
		 longval);
	expect_error(*state, text, 3, "daemon.socket");
}

static void test_config_syntax_error(void **state)
{
	expect_error(*state, "[daemon]\nlocal_size = 2\njust some words\n", 3,
		     "syntax error");
	expect_error(*state, "[daemon\nlocal_size = 2\n", 1, "syntax error");
}

/* The line reported is the bad one, not the first of the file, even with
 * comments, blank lines and good keys before it. */
static void test_config_error_line_number(void **state)
{
	expect_error(*state,
		     "; comment\n"
		     "\n"
		     "[daemon]\n"
		     "local_size = 2\n"
		     "# comment\n"
		     "idle_spin_us = 10\n"
		     "\n"
		     "reduce_threads = many\n"
		     "log_level = warn\n",
		     8, "reduce_threads");
}

/* With several errors the first one is reported, with its own message. */
static void test_config_first_error_wins(void **state)
{
	expect_error(*state,
		     "[daemon]\nno equals here\nlocal_size = 2\nbogus = 1\n",
		     2, "syntax error");
	expect_error(*state,
		     "[daemon]\nbogus = 1\nlocal_size = 2\nno equals here\n",
		     2, "unknown key 'bogus'");
	expect_error(*state,
		     "[daemon]\nlocal_size = 2\nbogus = 1\nlog_level = x\n",
		     3, "unknown key 'bogus'");
}

static void test_config_missing_file(void **state)
{
	struct tally_config cfg;
	char err[512] = "";
	const char *path = "/nonexistent-dir/tallyd.conf";

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "No such file"));
	assert_int_equal(cfg.local_size, 1);
}

static void test_config_error_message_truncated_safely(void **state)
{
	struct cfg_file *f = *state;
	struct tally_config cfg;
	char err[16];

	write_file(f, "[daemon]\nbogus_key_with_a_long_name = 1\n");
	config_defaults(&cfg);
	memset(err, 'x', sizeof(err));
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 -1);
	assert_int_equal(strlen(err), sizeof(err) - 1);
	assert_memory_equal(err, f->path, sizeof(err) - 1);
}

static void test_config_set_override(void **state)
{
	struct tally_config cfg;
	char err[256] = "";

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(config_set(&cfg, "daemon", "local_size", "16", err,
				    sizeof(err)), 0);
	assert_int_equal(cfg.local_size, 16);
	assert_int_equal(config_set(&cfg, "daemon", "socket", "/run/x.sock",
				    err, sizeof(err)), 0);
	assert_string_equal(cfg.socket, "/run/x.sock");
	assert_int_equal(config_set(&cfg, "daemon", "log_level", "error", err,
				    sizeof(err)), 0);
	assert_int_equal(cfg.log_level, LOG_ERR);
	assert_int_equal(config_set(&cfg, "daemon", "log_level", "warn", err,
				    sizeof(err)), 0);
	assert_int_equal(cfg.log_level, LOG_WARN);
	assert_int_equal(config_set(&cfg, "daemon", "socket_group", "", err,
				    sizeof(err)), 0);
	assert_string_equal(cfg.socket_group, "");
}

struct diff_seen {
	int n;
	char lines[8][160];
};

static void record_diff(void *ctx, const char *section, const char *key,
			const char *old_value, const char *new_value)
{
	struct diff_seen *s = ctx;

	assert_true(s->n < 8);
	snprintf(s->lines[s->n++], sizeof(s->lines[0]), "%s.%s %s -> %s",
		 section, key, old_value, new_value);
}

/* config_diff names every changed key with both values, and only those */
static void test_config_diff(void **state)
{
	struct tally_config a, b;
	struct diff_seen seen = { 0 };
	char err[256] = "";

	(void)state;
	config_defaults(&a);
	config_defaults(&b);
	assert_int_equal(config_diff(&a, &b, record_diff, &seen), 0);
	/* the same address, other padding bytes: equal */
	memset(&b.coordinator, 0xa5, sizeof(b.coordinator));
	b.coordinator.ip = a.coordinator.ip;
	b.coordinator.port = a.coordinator.port;
	assert_int_equal(config_diff(&a, &b, NULL, NULL), 0);
	assert_int_equal(config_set(&b, "daemon", "log_level", "debug", err,
				    sizeof(err)), 0);
	assert_int_equal(config_set(&b, "daemon", "stuck_ms", "0", err,
				    sizeof(err)), 0);
	assert_int_equal(config_set(&b, "cluster", "coordinator",
				    "10.0.0.1:7000", err, sizeof(err)), 0);
	assert_int_equal(config_set(&b, "cluster", "schedule", "bsp", err,
				    sizeof(err)), 0);
	assert_int_equal(config_set(&b, "daemon", "socket_group", "tally",
				    err, sizeof(err)), 0);
	assert_int_equal(config_set(&b, "dataplane", "mac",
				    "02:00:00:00:00:0a", err, sizeof(err)), 0);
	assert_int_equal(config_diff(&a, &b, record_diff, &seen), 6);
	assert_int_equal(seen.n, 6);
	/* in the order of the key table */
	assert_string_equal(seen.lines[0], "daemon.socket_group '' -> 'tally'");
	assert_string_equal(seen.lines[1], "daemon.log_level info -> debug");
	assert_string_equal(seen.lines[2], "daemon.stuck_ms 10000 -> 0");
	assert_string_equal(seen.lines[3],
			    "cluster.coordinator (unset) -> 10.0.0.1:7000");
	assert_string_equal(seen.lines[4], "cluster.schedule wfbp -> bsp");
	assert_string_equal(seen.lines[5], "dataplane.mac 00:00:00:00:00:00 "
			    "-> 02:00:00:00:00:0a");
}

static void test_config_set_override_after_file(void **state)
{
	struct cfg_file *f = *state;
	struct tally_config cfg;
	char err[256] = "";

	write_file(f, "[daemon]\nlocal_size = 4\nidle_spin_us = 7\n");
	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 0);
	assert_int_equal(config_set(&cfg, "daemon", "local_size", "2", err,
				    sizeof(err)), 0);
	assert_int_equal(cfg.local_size, 2);	/* command line wins */
	assert_int_equal(cfg.idle_spin_us, 7);
}

/* [metrics]: listen off by default and when empty, loopback only unless
 * allow_remote, which takes true/false. */
static void test_config_metrics(void **state)
{
	struct tally_config cfg;
	char err[256];

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(cfg.metrics_listen.ip, 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(config_set(&cfg, "metrics", "listen",
				    "127.0.0.1:9464", err, sizeof(err)), 0);
	assert_int_equal(cfg.metrics_listen.ip, 0x7f000001);
	assert_int_equal(cfg.metrics_listen.port, 9464);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(config_set(&cfg, "metrics", "listen", "10.1.2.3:9464",
				    err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "allow_remote"));
	assert_int_equal(config_set(&cfg, "metrics", "allow_remote", "maybe",
				    err, sizeof(err)), -1);
	assert_int_equal(config_set(&cfg, "metrics", "allow_remote", "true",
				    err, sizeof(err)), 0);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(config_set(&cfg, "metrics", "listen", "", err,
				    sizeof(err)), 0);
	assert_int_equal(cfg.metrics_listen.ip, 0);
	assert_int_equal(config_set(&cfg, "metrics", "listen", "127.0.0.1",
				    err, sizeof(err)), -1);
}

static void test_config_set_rejects_and_keeps_value(void **state)
{
	struct tally_config cfg, before;
	char err[256];

	(void)state;
	config_defaults(&cfg);
	before = cfg;

	strcpy(err, "");
	assert_int_equal(config_set(&cfg, "net", "local_size", "2", err,
				    sizeof(err)), -1);
	assert_string_equal(err, "unknown section [net]");

	strcpy(err, "");
	assert_int_equal(config_set(&cfg, "daemon", "nope", "2", err,
				    sizeof(err)), -1);
	assert_string_equal(err, "unknown key 'nope' in [daemon]");

	strcpy(err, "");
	assert_int_equal(config_set(&cfg, "daemon", "local_size", "100", err,
				    sizeof(err)), -1);
	assert_string_equal(err, "bad value '100' for daemon.local_size");

	strcpy(err, "");
	assert_int_equal(config_set(&cfg, "daemon", "log_level", "verbose",
				    err, sizeof(err)), -1);
	assert_string_equal(err, "bad value 'verbose' for daemon.log_level");

	/* a rejected value changes nothing */
	assert_memory_equal(&cfg, &before, sizeof(cfg));
}

/* A line longer than inih's buffer is refused with its own number, and
 * the lines after it keep theirs. */
static void test_config_long_line(void **state)
{
	char text[1024];
	char pad[400];

	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	snprintf(text, sizeof(text), "[daemon]\n; %s\nlocal_size = 2\n", pad);
	expect_error(*state, text, 2, "line longer than");
	snprintf(text, sizeof(text), "[daemon]\n; short\nbogus = 1\n; %s\n",
		 pad);
	expect_error(*state, text, 3, "unknown key 'bogus'");
}

/* ---- [daemon] numa_node and cpus ---- */

static void test_config_placement_defaults(void **state)
{
	struct tally_config cfg;

	(void)state;
	memset(&cfg, 0x7f, sizeof(cfg));
	config_defaults(&cfg);
	assert_int_equal(cfg.numa_node, -1);
	assert_string_equal(cfg.cpus, "");
}

static void test_config_placement_file(void **state)
{
	struct cfg_file *f = *state;
	struct tally_config cfg;
	char err[256] = "";

	write_file(f, "[daemon]\nnuma_node = 1\ncpus = 0-3,8,10-11\n");
	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, f->path, err, sizeof(err)),
			 0);
	assert_int_equal(cfg.numa_node, 1);
	assert_string_equal(cfg.cpus, "0-3,8,10-11");
	/* a bad value is reported with its line */
	expect_error(f, "[daemon]\nnuma_node = 0\ncpus = 0-x\n", 3,
		     "bad value '0-x' for daemon.cpus");
	expect_error(f, "[daemon]\nnuma_node = two\n", 2,
		     "bad value 'two' for daemon.numa_node");
}

/* Set @value; expect it taken as is, or refused with the old value kept. */
static void check_set(const char *key, const char *value, bool ok)
{
	struct tally_config cfg, before;
	char err[1024] = "", want[1024];
	int ret;

	config_defaults(&cfg);
	/* something other than the default, to see a refusal keep it */
	assert_int_equal(config_set(&cfg, "daemon", "numa_node", "3", err,
				    sizeof(err)), 0);
	assert_int_equal(config_set(&cfg, "daemon", "cpus", "5", err,
				    sizeof(err)), 0);
	before = cfg;
	ret = config_set(&cfg, "daemon", key, value, err, sizeof(err));
	if (ok) {
		if (ret)
			fail_msg("%s = '%s' refused: %s", key, value, err);
		if (!strcmp(key, "cpus"))
			assert_string_equal(cfg.cpus, value);
		else
			assert_int_equal(cfg.numa_node, atoi(value));
		return;
	}
	if (ret != -1)
		fail_msg("%s = '%s' accepted", key, value);
	snprintf(want, sizeof(want), "bad value '%s' for daemon.%s", value,
		 key);
	assert_string_equal(err, want);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
}

static void test_config_numa_node_values(void **state)
{
	static const char *const good[] = { "-1", "0", "1", "7", "1023" };
	static const char *const bad[] = { "-2", "1024", "", "two", "1.5",
		"0 1", "99999999999999999999", "-" };
	char big[16];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		check_set("numa_node", good[i], true);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_set("numa_node", bad[i], false);
	snprintf(big, sizeof(big), "%d", CONFIG_NUMA_NODE_MAX + 1);
	check_set("numa_node", big, false);
}

static void test_config_cpus_values(void **state)
{
	/* the kernel's list format (cpuset(7)) */
	static const char *const good[] = { "", "0", "1", "0-3",
		"0-3,8,10-11", "3-3", "1,0", "1023", "0-1023", "2,2" };
	/* libnuma takes some of these ("all", "!0", "+0", 0x1, 010 as 8,
	 * 3-1 as nothing); the kernel's format has none of them */
	static const char *const bad[] = { "all", "!0", "+0", "0x1", "010",
		"00", "3-1", "-1", "1-", "-", ",", "0,", ",0", "0,,1", " 0",
		"0 ", "0 - 1", "0-1-2", "1024", "0-1024", "1:2", "a", "1a",
		"99999999999999999999", "0;1" };
	char list[512], num[16];
	size_t used = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		check_set("cpus", good[i], true);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_set("cpus", bad[i], false);
	snprintf(num, sizeof(num), "%d", CONFIG_CPUS_MAX);
	check_set("cpus", num, false);
	snprintf(num, sizeof(num), "%d", CONFIG_CPUS_MAX - 1);
	check_set("cpus", num, true);
	/* a well-formed list longer than the field is refused whole */
	while (used < sizeof(((struct tally_config *)0)->cpus) + 8)
		used += (size_t)snprintf(list + used, sizeof(list) - used,
					 "%s%zu", used ? "," : "", used % 100);
	check_set("cpus", list, false);
}

static void test_config_placement_not_reloadable(void **state)
{
	struct tally_config a, b;
	struct diff_seen seen = { 0 };
	char err[256] = "";

	(void)state;
	config_defaults(&a);
	config_defaults(&b);
	assert_int_equal(config_set(&b, "daemon", "numa_node", "1", err,
				    sizeof(err)), 0);
	assert_int_equal(config_set(&b, "daemon", "cpus", "2-3", err,
				    sizeof(err)), 0);
	assert_int_equal(config_diff(&a, &b, record_diff, &seen), 2);
	assert_string_equal(seen.lines[0], "daemon.numa_node -1 -> 1");
	assert_string_equal(seen.lines[1], "daemon.cpus '' -> '2-3'");
	/* a reload keeps them: the threads were placed at start */
	assert_false(daemon_key_reloadable("daemon", "numa_node"));
	assert_false(daemon_key_reloadable("daemon", "cpus"));
	assert_true(daemon_key_reloadable("daemon", "log_level"));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, file_setup, file_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_defaults),
		T(test_config_valid_file),
		T(test_config_file_keeps_unset_values),
		T(test_config_empty_file),
		T(test_config_limits_accepted),
		T(test_config_unknown_section),
		T(test_config_key_before_any_section),
		T(test_config_unknown_key),
		T(test_config_bad_integer),
		T(test_config_out_of_range),
		T(test_config_bad_log_level),
		T(test_config_string_too_long),
		T(test_config_syntax_error),
		T(test_config_error_line_number),
		T(test_config_first_error_wins),
		T(test_config_long_line),
		T(test_config_cluster_file),
		T(test_config_cluster_bad_values),
		cmocka_unit_test(test_config_check_cluster),
		cmocka_unit_test(test_config_missing_file),
		T(test_config_error_message_truncated_safely),
		cmocka_unit_test(test_config_set_override),
		cmocka_unit_test(test_config_diff),
		T(test_config_set_override_after_file),
		cmocka_unit_test(test_config_set_rejects_and_keeps_value),
		cmocka_unit_test(test_config_metrics),
		cmocka_unit_test(test_config_placement_defaults),
		T(test_config_placement_file),
		cmocka_unit_test(test_config_numa_node_values),
		cmocka_unit_test(test_config_cpus_values),
		cmocka_unit_test(test_config_placement_not_reloadable),
		cmocka_unit_test_setup_teardown(test_config_profile,
						file_setup, file_teardown),
		cmocka_unit_test_setup_teardown(test_config_compression,
						file_setup, file_teardown),
		cmocka_unit_test_setup_teardown(test_config_xdp,
						file_setup, file_teardown),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
