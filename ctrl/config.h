/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config.h - tallyd's configuration: defaults, an INI file, then
 * command-line overrides.  Every key is documented in
 * docs/configuration.md.
 */
#ifndef TALLY_CTRL_CONFIG_H
#define TALLY_CTRL_CONFIG_H

#include <stdbool.h>

#define CONFIG_PATH_MAX 108	/* sun_path */
#define CONFIG_MAX_LOCAL_SIZE 64

struct tally_config {
	char socket[CONFIG_PATH_MAX];	/* [daemon] socket */
	char socket_group[64];		/* [daemon] socket_group ("" = ours) */
	int local_size;			/* [daemon] local_size */
	int idle_spin_us;		/* [daemon] idle_spin_us */
	int reduce_threads;		/* [daemon] reduce_threads, 0 = auto */
	int log_level;			/* [daemon] log_level */
};

void config_defaults(struct tally_config *cfg);

/*
 * config_load_file - read an INI file over the current values.
 * Every error (unknown section or key, bad value, syntax) is reported as
 * "FILE:LINE: message" into @err; returns 0 or -1.
 */
int config_load_file(struct tally_config *cfg, const char *path,
		     char *err, int errlen);

/* config_set - set one "section.key" (or plain key of [daemon]) from text;
 * used by the INI parser and the command line.  0 or -1 with @err set. */
int config_set(struct tally_config *cfg, const char *section,
	       const char *key, const char *value, char *err, int errlen);

#endif /* TALLY_CTRL_CONFIG_H */
