// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_config.c - libFuzzer target for tallyd's configuration file: the
 * input is the file, read by config_load_stream() (libinih and our line
 * reader and value parsers), then checked with config_check().  What was
 * accepted must be within the documented limits, every string terminated,
 * and loading the same text twice must give the same configuration.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/config.h"
#include "ctrl/log.h"
#include "dataplane/engine/wire.h"

static int load(struct tally_config *cfg, const uint8_t *data, size_t size)
{
	char err[256];
	FILE *f;
	int ret;

	config_defaults(cfg);
	if (size == 0)
		return 0;
	f = fmemopen((void *)data, size, "r");
	if (!f)
		abort();
	ret = config_load_stream(cfg, f, "fuzz.conf", err, sizeof(err));
	fclose(f);
	if (ret == 0 && config_check(cfg, err, sizeof(err)))
		ret = -1;
	if (ret && !memchr(err, '\0', sizeof(err)))
		abort();	/* an unterminated message */
	return ret;
}

static void check_string(const char *s, size_t cap)
{
	if (!memchr(s, '\0', cap))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_config a, b;
	int ret = load(&a, data, size);

	check_string(a.socket, sizeof(a.socket));
	check_string(a.socket_group, sizeof(a.socket_group));
	check_string(a.transport, sizeof(a.transport));
	check_string(a.eal_args, sizeof(a.eal_args));
	check_string(a.rdma_device, sizeof(a.rdma_device));
	check_string(a.cpus, sizeof(a.cpus));
	if (a.local_size < 1 || a.local_size > CONFIG_MAX_LOCAL_SIZE ||
	    a.world < 1 || a.rank < 0 || a.k < 0 ||
	    config_k(&a) < TLY_K_MIN || config_k(&a) > TLY_K_MAX ||
	    a.pool_slots < 1 ||
	    a.window < 1 || a.log_level < LOG_ERR || a.log_level > LOG_DEBUG)
		abort();
	if (ret == 0 && a.world > 1 && a.rank >= a.world)
		abort();	/* config_check lets a bad cluster through */
	if (load(&b, data, size) != ret || memcmp(&a, &b, sizeof(a)))
		abort();	/* state carried from one load to the next */
	return 0;
}
