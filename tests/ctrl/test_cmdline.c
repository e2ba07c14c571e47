// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cmdline.c - unit tests of tallyd's command line (ctrl/cmdline.c)
 * and of what config_load_file() accepts as a file.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "ctrl/config.h"
#include "ctrl/log.h"

struct tmp {
	char dir[64];
	char file[96];
};

static int tmp_setup(void **state)
{
	static struct tmp t;
	const char *base = getenv("TMPDIR");

	snprintf(t.dir, sizeof(t.dir), "%s/tally-cmdline-XXXXXX",
		 base && *base && strlen(base) < 32 ? base : "/tmp");
	if (!mkdtemp(t.dir))
		return -1;
	snprintf(t.file, sizeof(t.file), "%s/tallyd.conf", t.dir);
	*state = &t;
	return 0;
}

static int tmp_teardown(void **state)
{
	struct tmp *t = *state;

	unlink(t->file);
	rmdir(t->dir);
	return 0;
}

static void write_conf(const struct tmp *t, const char *text)
{
	FILE *f = fopen(t->file, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* Parse a NULL-terminated argument list (argv[0] is added). */
static int parse(struct tally_config *cfg, const char *const *args)
{
	char *argv[32];
	int argc = 0;

	argv[argc++] = (char *)"tallyd";
	while (*args && argc < 31)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	return config_parse_args(cfg, argc, argv);
}

/* A directory read as an empty file: tallyd started on defaults. */
static void test_config_file_directory_refused(void **state)
{
	struct tmp *t = *state;
	struct tally_config cfg;
	char err[256] = "";

	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, t->dir, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a regular file"));
	assert_non_null(strstr(err, t->dir));
}

/* /dev/zero is one endless line: the reader never returned. */
static void test_config_file_device_refused(void **state)
{
	struct tally_config cfg;
	char err[256] = "";

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, "/dev/zero", err,
					  sizeof(err)), -1);
	assert_non_null(strstr(err, "not a regular file"));
}

/* Opening a FIFO without a writer blocked before the type was known. */
static void test_config_file_fifo_refused(void **state)
{
	struct tmp *t = *state;
	struct tally_config cfg;
	char err[256] = "";

	assert_int_equal(mkfifo(t->file, 0600), 0);
	config_defaults(&cfg);
	assert_int_equal(config_load_file(&cfg, t->file, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "not a regular file"));
}

static void test_config_stream(void **state)
{
	static const char text[] = "[daemon]\nlocal_size = 3\nbogus = 1\n";
	struct tally_config cfg;
	char err[256] = "";
	FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");

	(void)state;
	assert_non_null(f);
	config_defaults(&cfg);
	assert_int_equal(config_load_stream(&cfg, f, "<mem>", err,
					    sizeof(err)), -1);
	fclose(f);
	assert_int_equal(cfg.local_size, 3);
	assert_string_equal(err, "<mem>:3: unknown key 'bogus' in [daemon]");
}

/* The file first, whatever its place; then the options in order. */
static void test_cmdline_file_then_options(void **state)
{
	struct tmp *t = *state;
	struct tally_config cfg;
	const char *args[] = { "-n", "5", "--idle-spin-us", "9",
			       "--set", "daemon.idle_spin_us=11",
			       "-c", t->file, "--log-level", "debug", NULL };

	write_conf(t, "[daemon]\nlocal_size = 2\nreduce_threads = 3\n"
		   "idle_spin_us = 1\n");
	assert_int_equal(parse(&cfg, args), 0);
	assert_int_equal(cfg.local_size, 5);		/* option wins */
	assert_int_equal(cfg.reduce_threads, 3);	/* from the file */
	assert_int_equal(cfg.idle_spin_us, 11);	/* last one wins */
	assert_int_equal(cfg.log_level, LOG_DEBUG);
}

static void test_cmdline_every_short_and_long_key(void **state)
{
	struct tally_config cfg;
	const char *args[] = { "--socket", "/run/t.sock", "--world", "2",
			       "--rank", "1", "--role", "aggregator",
			       "--algorithm", "ring",
			       "--coordinator", "10.0.0.1:7000",
			       "--job-key", "0x10", "--transport", "udp",
			       "--address", "10.0.0.2:9000",
			       "--mac", "02:00:00:00:00:02",
			       "--schedule", "bsp", "--reduce-threads", "2",
			       NULL };

	(void)state;
	assert_int_equal(parse(&cfg, args), 0);
	assert_string_equal(cfg.socket, "/run/t.sock");
	assert_int_equal(cfg.world, 2);
	assert_int_equal(cfg.rank, 1);
	assert_int_equal(cfg.job_key, 0x10);
	assert_int_equal(cfg.coordinator.ip, 0x0a000001);
	assert_int_equal(cfg.coordinator.port, 7000);
	assert_int_equal(cfg.address.port, 9000);
	assert_int_equal(cfg.mac[5], 2);
	assert_int_equal(cfg.reduce_threads, 2);
}

static void test_cmdline_errors(void **state)
{
	struct tally_config cfg;
	const char *help[] = { "-n", "2", "-h", NULL };
	const char *unknown[] = { "--bogus", NULL };
	const char *missing[] = { "-n", NULL };
	const char *bad_value[] = { "-n", "0", NULL };
	const char *bad_set[] = { "--set", "daemon-local_size=2", NULL };
	const char *stray[] = { "-n", "2", "extra", NULL };
	const char *cluster[] = { "--world", "2", NULL };
	const char *no_file[] = { "-c", "/nonexistent-dir/x.conf", NULL };

	(void)state;
	opterr = 0;	/* getopt's own messages are not under test */
	assert_int_equal(parse(&cfg, help), CONFIG_ARGS_HELP);
	assert_int_equal(parse(&cfg, unknown), CONFIG_ARGS_USAGE);
	assert_int_equal(parse(&cfg, missing), CONFIG_ARGS_USAGE);
	assert_int_equal(parse(&cfg, bad_value), -1);
	assert_int_equal(parse(&cfg, bad_set), -1);
	assert_int_equal(parse(&cfg, stray), -1);
	assert_int_equal(parse(&cfg, cluster), -1);	/* no coordinator */
	assert_int_equal(parse(&cfg, no_file), -1);
	opterr = 1;
}

/* Each call starts afresh: no getopt state leaks from one to the next. */
static void test_cmdline_parse_twice(void **state)
{
	struct tally_config a, b;
	const char *args[] = { "-n", "4", "-s", "/run/a.sock",
			       "--address", "10.0.0.9:9",
			       "--coordinator", "10.0.0.1:7", NULL };
	const char *stray[] = { "x", NULL };

	(void)state;
	assert_int_equal(parse(&a, args), 0);
	assert_int_equal(parse(&b, stray), -1);
	assert_int_equal(parse(&b, args), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(a.local_size, 4);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, tmp_setup, tmp_teardown)
	const struct CMUnitTest tests[] = {
		T(test_config_file_directory_refused),
		cmocka_unit_test(test_config_file_device_refused),
		T(test_config_file_fifo_refused),
		cmocka_unit_test(test_config_stream),
		T(test_cmdline_file_then_options),
		cmocka_unit_test(test_cmdline_every_short_and_long_key),
		cmocka_unit_test(test_cmdline_errors),
		cmocka_unit_test(test_cmdline_parse_twice),
	};
#undef T

	log_set_level(LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
