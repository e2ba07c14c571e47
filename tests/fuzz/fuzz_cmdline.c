// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_cmdline.c - libFuzzer target for tallyd's command line
 * (config_parse_args in ctrl/cmdline.c): the input is argv, arguments
 * separated by NUL bytes.  Parsing the same arguments twice must give the
 * same result and configuration (getopt keeps global state).
 *
 * Inputs naming a configuration file (an argument starting "-c" or
 * "--con") are skipped: they would make the target read whatever path
 * the fuzzer spells; fuzz-config covers the file's contents.
 */
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/config.h"
#include "ctrl/log.h"

#define MAX_ARGS 32

/* Split a copy of @data at NULs into @argv after "tallyd"; argc, or -1
 * for an input to skip. */
static int split(const uint8_t *data, size_t size, char *buf, char **argv)
{
	int argc = 0;
	size_t i = 0;

	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[argc++] = (char *)"tallyd";
	while (i < size && argc < MAX_ARGS) {
		char *arg = buf + i;

		if (!strncmp(arg, "-c", 2) || !strncmp(arg, "--con", 5))
			return -1;
		argv[argc++] = arg;
		i += strlen(arg) + 1;
	}
	argv[argc] = NULL;
	return argc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_config a, b;
	char *argv[MAX_ARGS + 1];
	char *buf;
	int argc, ra, rb;

	if (size > 4096)
		return 0;
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	argc = split(data, size, buf, argv);
	if (argc < 0) {
		free(buf);
		return 0;
	}
	ra = config_parse_args(&a, argc, argv);
	split(data, size, buf, argv);	/* getopt permuted argv */
	rb = config_parse_args(&b, argc, argv);
	free(buf);
	if (ra != rb || (ra != CONFIG_ARGS_HELP && ra != CONFIG_ARGS_USAGE &&
			 memcmp(&a, &b, sizeof(a))))
		abort();
	if (ra == 0 && (a.local_size < 1 ||
			a.local_size > CONFIG_MAX_LOCAL_SIZE ||
			!memchr(a.socket, '\0', sizeof(a.socket)) ||
			!memchr(a.eal_args, '\0', sizeof(a.eal_args))))
		abort();
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	opterr = 0;		/* getopt's own complaints */
	log_set_level(LOG_ERR);
	return 0;
}
