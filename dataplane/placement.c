// SPDX-License-Identifier: BSD-3-Clause
/*
 * placement.c - a NUMA node and a CPU list checked against this host and
 * turned into a CPU set and a memory policy, through libnuma (see
 * placement.h).  Messages name the configuration key and its value: they
 * are what an operator sees when tallyd refuses to start.
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <stdio.h>
#include <string.h>

#include "dataplane/placement.h"

void tly_cpuset_format(const cpu_set_t *set, char *buf, size_t len)
{
	size_t used = 0;
	int cpu = 0, last, n;

	if (!len)
		return;
	buf[0] = '\0';
	while (cpu < CPU_SETSIZE) {
		if (!CPU_ISSET(cpu, set)) {
			cpu++;
			continue;
		}
		for (last = cpu; last + 1 < CPU_SETSIZE &&
		     CPU_ISSET(last + 1, set); last++)
			;
		if (last == cpu)
			n = snprintf(buf + used, len - used, "%s%d",
				     used ? "," : "", cpu);
		else
			n = snprintf(buf + used, len - used, "%s%d-%d",
				     used ? "," : "", cpu, last);
		if (n < 0 || (size_t)n >= len - used) {
			buf[used] = '\0';	/* whole items only */
			return;
		}
		used += (size_t)n;
		cpu = last + 1;
	}
}

static void bitmask_to_cpuset(const struct bitmask *bm, cpu_set_t *set)
{
	CPU_ZERO(set);
	for (unsigned long i = 0; i < bm->size && i < CPU_SETSIZE; i++)
		if (numa_bitmask_isbitset(bm, (unsigned int)i))
			CPU_SET((int)i, set);
}

static int check_node(int node, char *err, size_t errlen)
{
	if (numa_available() < 0) {
		snprintf(err, errlen, "daemon.numa_node = %d: this host has "
			 "no NUMA support (numa_available() < 0)", node);
		return -1;
	}
	if (node > numa_max_node()) {
		snprintf(err, errlen, "daemon.numa_node = %d: this host's "
			 "highest node is %d (numa_max_node())", node,
			 numa_max_node());
		return -1;
	}
	/* node numbers may have holes (0 and 2 on some boards) */
	if (!numa_bitmask_isbitset(numa_nodes_ptr, (unsigned int)node)) {
		snprintf(err, errlen, "daemon.numa_node = %d: this host has "
			 "no such node", node);
		return -1;
	}
	return 0;
}

/* The threads on node @node's CPUs that this process may use. */
static int node_cpus(struct tly_placement *p, int node,
		     const cpu_set_t *allowed, char *err, size_t errlen)
{
	struct bitmask *bm = numa_allocate_cpumask();
	char list[256];
	int e;

	if (numa_node_to_cpus(node, bm)) {
		e = errno;
		numa_bitmask_free(bm);
		snprintf(err, errlen, "daemon.numa_node = %d: "
			 "numa_node_to_cpus: %s", node, strerror(e));
		return -1;
	}
	bitmask_to_cpuset(bm, &p->cpus);
	numa_bitmask_free(bm);
	if (CPU_COUNT(&p->cpus) == 0) {
		snprintf(err, errlen, "daemon.numa_node = %d: the node has "
			 "no CPUs; name the reduce threads' CPUs with "
			 "daemon.cpus", node);
		return -1;
	}
	CPU_AND(&p->cpus, &p->cpus, allowed);
	if (CPU_COUNT(&p->cpus) == 0) {
		tly_cpuset_format(allowed, list, sizeof(list));
		snprintf(err, errlen, "daemon.numa_node = %d: none of the "
			 "node's CPUs is online and allowed to this process "
			 "(it may run on %s)", node, list);
		return -1;
	}
	return 0;
}

static int list_cpus(struct tly_placement *p, const char *cpus,
		     const cpu_set_t *allowed, char *err, size_t errlen)
{
	struct bitmask *bm = numa_parse_cpustring_all(cpus);
	char list[256];

	if (!bm) {
		snprintf(err, errlen, "daemon.cpus = '%s': names a CPU this "
			 "host does not have, or is no CPU list "
			 "(numa_parse_cpustring_all; this host's CPUs are "
			 "0-%d)", cpus, numa_num_configured_cpus() - 1);
		return -1;
	}
	bitmask_to_cpuset(bm, &p->cpus);
	numa_bitmask_free(bm);
	if (CPU_COUNT(&p->cpus) == 0) {
		snprintf(err, errlen, "daemon.cpus = '%s': names no CPU",
			 cpus);
		return -1;
	}
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &p->cpus) || CPU_ISSET(cpu, allowed))
			continue;
		tly_cpuset_format(allowed, list, sizeof(list));
		snprintf(err, errlen, "daemon.cpus = '%s': CPU %d is not "
			 "online or not allowed to this process (it may run "
			 "on %s)", cpus, cpu, list);
		return -1;
	}
	return 0;
}

int tly_placement_resolve(struct tly_placement *p, int numa_node,
			  const char *cpus, char *err, size_t errlen)
{
	cpu_set_t allowed;

	memset(p, 0, sizeof(*p));
	p->numa_node = -1;
	CPU_ZERO(&p->cpus);
	if (numa_node < 0 && (!cpus || !*cpus))
		return 0;
	if (numa_node >= 0 && check_node(numa_node, err, errlen))
		return -1;
	/* the kernel answers with the online CPUs of our mask: a CPU
	 * offline, or outside a cpuset or systemd's CPUAffinity=, is out */
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		snprintf(err, errlen, "sched_getaffinity: %s",
			 strerror(errno));
		return -1;
	}
	if (cpus && *cpus) {
		if (list_cpus(p, cpus, &allowed, err, errlen))
			return -1;
	} else if (node_cpus(p, numa_node, &allowed, err, errlen)) {
		return -1;
	}
	p->numa_node = numa_node;
	p->pinned = true;
	return 0;
}

int tly_placement_prefer_memory(const struct tly_placement *p, char *err,
				size_t errlen)
{
	struct bitmask *nodes;
	int ret, e;

	if (p->numa_node < 0)
		return 0;
	nodes = numa_allocate_nodemask();
	numa_bitmask_setbit(nodes, (unsigned int)p->numa_node);
	/* preferred, not bound: a full node spills to the others rather
	 * than failing the allocation (libnuma passes size + 1 too) */
	ret = set_mempolicy(MPOL_PREFERRED, nodes->maskp, nodes->size + 1);
	e = errno;
	numa_bitmask_free(nodes);
	if (ret) {
		snprintf(err, errlen, "daemon.numa_node = %d: "
			 "set_mempolicy(MPOL_PREFERRED): %s", p->numa_node,
			 strerror(e));
		return -1;
	}
	return 0;
}
