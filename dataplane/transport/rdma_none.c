// SPDX-License-Identifier: BSD-3-Clause
/*
 * rdma_none.c - stands in for rdma.c when tally is built without
 * rdma-core, so that asking for kind "rdma" says why it cannot work.
 */
#include <errno.h>
#include <stdio.h>

#include "dataplane/dp_log.h"
#include "dataplane/transport/transport.h"

static int rdma_none_open(struct transport *tp,
			  const struct transport_config *cfg)
{
	(void)tp;
	(void)cfg;
	dp_err("transport rdma: this build has no RDMA (libibverbs not found at configure time)");
	return -ENOTSUP;
}

const struct transport_ops transport_rdma_ops = {
	.name = "rdma",
	.open = rdma_none_open,
};
