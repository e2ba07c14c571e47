/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * placement.h - where the daemon's reduction threads run and where its
 * memory comes from, on a NUMA host (libnuma).
 *
 * The configuration names the NIC's node (numa_node) and/or a CPU list
 * (cpus).  tly_placement_resolve() checks both against this host and
 * turns them into one CPU set; tly_placement_prefer_memory() makes the
 * calling thread, and every thread it creates afterwards, prefer the
 * node for new pages.  Pinning the threads is the thread pool's own call
 * (reduce_pool_pin()).  See docs/numa.md.
 */
#ifndef TALLY_DATAPLANE_PLACEMENT_H
#define TALLY_DATAPLANE_PLACEMENT_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

struct tly_placement {
	int numa_node;		/* memory's preferred node; -1: none */
	bool pinned;		/* cpus holds where the threads go */
	cpu_set_t cpus;
};

/*
 * tly_placement_resolve - @numa_node (-1: unset) and @cpus (a CPU list
 * in the kernel's format, "" or NULL: unset) into @p.  @cpus wins for the
 * threads; without it they go on @numa_node's CPUs.  Refused, with a
 * message naming the key and its value in @err: libnuma unavailable, a
 * node above numa_max_node() or absent, a node without CPUs (when it
 * places the threads), a list libnuma cannot parse, a CPU that is not
 * online or not in this process's affinity mask.  0 or -1.
 */
int tly_placement_resolve(struct tly_placement *p, int numa_node,
			  const char *cpus, char *err, size_t errlen);

/*
 * tly_placement_prefer_memory - MPOL_PREFERRED on p->numa_node for the
 * calling thread (a no-op without a node).  A thread's memory policy is
 * inherited by the threads it creates: call this before creating them.
 * 0, or -1 with the failing call named in @err.
 */
int tly_placement_prefer_memory(const struct tly_placement *p, char *err,
				size_t errlen);

/* The CPU list of @set in the kernel's format ("0-3,8"), into @buf; what
 * does not fit is left off at an item's boundary. */
void tly_cpuset_format(const cpu_set_t *set, char *buf, size_t len);

#endif /* TALLY_DATAPLANE_PLACEMENT_H */
