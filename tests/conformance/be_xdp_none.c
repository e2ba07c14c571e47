// SPDX-License-Identifier: BSD-3-Clause
/*
 * be_xdp_none.c - the XDP backend where the build has no XDP aggregator
 * (no clang for BPF or no libbpf): asking for it fails the run.
 */
#include <stdio.h>

#include "conf.h"

struct cf_backend *cf_be_xdp(const struct cf_job *j)
{
	(void)j;
	fprintf(stderr, "xdp backend: not built (meson: xdp aggregator)\n");
	return NULL;
}
