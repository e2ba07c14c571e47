// SPDX-License-Identifier: BSD-3-Clause
/*
 * dpdk_none.c - stands in for dpdk.c when tally is built without DPDK, so
 * that asking for kind "dpdk" says why it cannot work.
 */
#include <errno.h>
#include <stdio.h>

#include "dataplane/dp_log.h"
#include "dataplane/transport/transport.h"

static int dpdk_none_open(struct transport *tp,
			  const struct transport_config *cfg)
{
	(void)tp;
	(void)cfg;
	dp_err("transport dpdk: this build has no DPDK (libdpdk not found at configure time)");
	return -ENOTSUP;
}

const struct transport_ops transport_dpdk_ops = {
	.name = "dpdk",
	.open = dpdk_none_open,
};
