/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * numa_place.h - where libtally-cuda's staging memory lives: the NUMA node
 * of the GPU's PCI device, and binding a shared segment to a node.  No CUDA:
 * built and tested everywhere.
 */
#ifndef TALLY_GPU_NUMA_PLACE_H
#define TALLY_GPU_NUMA_PLACE_H

#include <stddef.h>

/*
 * The NUMA node sysfs gives the PCI device @bus_id ("0000:3B:00.0", any
 * case, as cudaDeviceGetPCIBusId() writes it) under @sysfs_root ("/sys").
 * Returns the node, -1 when the platform names none (one-node hosts write
 * -1), or -ENOENT / -EINVAL when there is no such device or the file does
 * not hold a number.
 */
int tcu_pci_numa_node(const char *sysfs_root, const char *bus_id);

/*
 * Bind the pages of [@addr, @addr + @len) to @node (MPOL_BIND), moving
 * those already there.  A shared segment's policy belongs to the segment,
 * so the daemon's mapping of it follows.  Returns 0, -ENOSYS when the
 * kernel has no NUMA, -EINVAL for a node the host does not have, or the
 * mbind() errno negated.
 */
int tcu_bind_to_node(void *addr, size_t len, int node);

/* the node of the page holding @addr, or a negative errno */
int tcu_node_of_page(const void *addr);

#endif /* TALLY_GPU_NUMA_PLACE_H */
