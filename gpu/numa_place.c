// SPDX-License-Identifier: BSD-3-Clause
/*
 * numa_place.c - NUMA placement of staging memory (numa_place.h).  Pinned
 * staging buffers are read and written by the GPU's copy engines across PCIe (or
 * NVLink-C2C): memory on the socket the GPU hangs off saves the
 * inter-socket hop on every byte (docs/gpu.md).
 */
#include "gpu/numa_place.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <numa.h>
#include <numaif.h>

int tcu_pci_numa_node(const char *sysfs_root, const char *bus_id)
{
	char id[32], path[PATH_MAX], buf[32], *end;
	size_t i;
	long node;
	FILE *f;

	for (i = 0; bus_id[i] && i < sizeof(id) - 1; i++) {
		if (!isxdigit((unsigned char)bus_id[i]) && bus_id[i] != ':' &&
		    bus_id[i] != '.')
			return -EINVAL;
		id[i] = (char)tolower((unsigned char)bus_id[i]);
	}
	if (!i || bus_id[i])
		return -EINVAL;
	id[i] = '\0';
	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node",
		 sysfs_root, id);
	f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EINVAL;
	}
	fclose(f);
	errno = 0;
	node = strtol(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n') || node < -1 ||
	    node > INT_MAX)
		return -EINVAL;
	return (int)node;
}

int tcu_bind_to_node(void *addr, size_t len, int node)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)addr & ~(uintptr_t)(page - 1);
	uintptr_t end = ((uintptr_t)addr + len + (uintptr_t)page - 1) &
			~(uintptr_t)(page - 1);
	struct bitmask *mask;
	int ret = 0;

	if (numa_available() < 0)
		return -ENOSYS;
	if (node < 0 || node > numa_max_node() || !numa_bitmask_isbitset(
			numa_all_nodes_ptr, (unsigned int)node))
		return -EINVAL;
	mask = numa_allocate_nodemask();
	if (!mask)
		return -ENOMEM;
	numa_bitmask_setbit(mask, (unsigned int)node);
	if (mbind((void *)start, end - start, MPOL_BIND, mask->maskp,
		  mask->size + 1, MPOL_MF_MOVE))
		ret = -errno;
	numa_bitmask_free(mask);
	return ret;
}

int tcu_node_of_page(const void *addr)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p = (void *)((uintptr_t)addr & ~(uintptr_t)(page - 1));
	int status = -1;

	if (move_pages(0, 1, &p, NULL, &status, 0))
		return -errno;
	return status;
}
