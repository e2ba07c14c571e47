// SPDX-License-Identifier: BSD-3-Clause
/*
 * config.c - defaults, INI file (libinih) and overrides (see config.h).
 */
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/tally.h>
#include "ctrl/config.h"
#include "ctrl/log.h"

void config_defaults(struct tally_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->socket, sizeof(cfg->socket), "%s", TALLY_DEFAULT_SOCKET);
	cfg->local_size = 1;
	cfg->idle_spin_us = 50;
	cfg->log_level = LOG_INFO;
}

static int parse_int(const char *v, long lo, long hi, int *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < lo || n > hi)
		return -1;
	*out = (int)n;
	return 0;
}

static int set_string(char *dst, size_t cap, const char *v)
{
	if (strlen(v) >= cap)
		return -1;
	strcpy(dst, v);
	return 0;
}

int config_set(struct tally_config *cfg, const char *section,
	       const char *key, const char *value, char *err, int errlen)
{
	int ret = -1;

	if (strcmp(section, "daemon")) {
		snprintf(err, (size_t)errlen, "unknown section [%s]", section);
		return -1;
	}
	if (!strcmp(key, "socket")) {
		ret = set_string(cfg->socket, sizeof(cfg->socket), value);
	} else if (!strcmp(key, "socket_group")) {
		ret = set_string(cfg->socket_group, sizeof(cfg->socket_group),
				 value);
	} else if (!strcmp(key, "local_size")) {
		ret = parse_int(value, 1, CONFIG_MAX_LOCAL_SIZE,
				&cfg->local_size);
	} else if (!strcmp(key, "idle_spin_us")) {
		ret = parse_int(value, 0, 1000000, &cfg->idle_spin_us);
	} else if (!strcmp(key, "reduce_threads")) {
		ret = parse_int(value, 0, 16, &cfg->reduce_threads);
	} else if (!strcmp(key, "log_level")) {
		int level = log_level_parse(value);

		if (level >= 0)		/* a bad value leaves the old one */
			cfg->log_level = level;
		ret = level < 0 ? -1 : 0;
	} else {
		snprintf(err, (size_t)errlen, "unknown key '%s' in [%s]", key,
			 section);
		return -1;
	}
	if (ret)
		snprintf(err, (size_t)errlen, "bad value '%s' for %s.%s", value,
			 section, key);
	return ret;
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

int config_load_file(struct tally_config *cfg, const char *path,
		     char *err, int errlen)
{
	struct ini_ctx ctx = { .cfg = cfg, .f = fopen(path, "r") };
	int ret;

	if (!ctx.f) {
		snprintf(err, (size_t)errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* returns the line of the first error: ours or a syntax error */
	ret = ini_parse_stream(read_line, &ctx, on_ini_line, &ctx);
	fclose(ctx.f);
	if (ret < 0) {
		snprintf(err, (size_t)errlen, "%s: cannot read", path);
		return -1;
	}
	/* the first error wins: ours (a bad key, a long line) or inih's */
	if (ctx.failed_line && (ret == 0 || ctx.failed_line <= ret))
		ret = ctx.failed_line;
	if (ret == 0)
		return 0;
	snprintf(err, (size_t)errlen, "%s:%d: %s", path, ret,
		 ctx.failed_line == ret ? ctx.msg : "syntax error");
	return -1;
}
