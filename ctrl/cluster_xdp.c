// SPDX-License-Identifier: BSD-3-Clause
/*
 * cluster_xdp.c - dataplane.transport = xdp: tallyd as the switch
 * profile's aggregator through the XDP program (docs/xdp-aggregator.md,
 * "Under tallyd").  No transport and no dataplane thread: the kernel runs
 * the data path; this file is the control plane a switch has beside it.
 * It loads the program and attaches it to the interface that holds
 * dataplane.address (or dataplane.xdp_ifname), writes the job at each
 * epoch, runs the eviction sweep from the daemon's loop, reads the
 * counters for the metrics, and detaches when the job stops.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/auth.h"
#include "ctrl/cluster_internal.h"
#include "ctrl/config.h"
#include "ctrl/log.h"
#include "dataplane/clock.h"

#ifdef TALLY_HAVE_XDP
#include "dataplane/xdp/xdp_ctl.h"

struct cluster_xdp {
	struct tly_xdp_ctl *ctl;
	char ifname[IF_NAMESIZE];
	bool attached, job_set;
	uint64_t evict_ns, next_sweep;
};

/* the interface holding @ip (host order), or -1 */
static int ifname_of(uint32_t ip, char *name)
{
	struct ifaddrs *ifa, *i;
	int ret = -1;

	if (getifaddrs(&ifa))
		return -1;
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr)
		    == ip) {
			snprintf(name, IF_NAMESIZE, "%s", i->ifa_name);
			ret = 0;
			break;
		}
	freeifaddrs(ifa);
	return ret;
}

int cluster_xdp_open(struct cluster *c)
{
	const struct tally_config *cfg = c->cfg;
	struct cluster_xdp *x = calloc(1, sizeof(*x));
	struct tly_xdp_prog_info info = { 0 };
	int err, ifindex;

	if (!x)
		return -1;
	c->xdp = x;
	if (cfg->xdp_ifname[0])
		snprintf(x->ifname, sizeof(x->ifname), "%s", cfg->xdp_ifname);
	else if (ifname_of(cfg->address.ip, x->ifname)) {
		log_err("dataplane.transport = xdp: no interface holds "
			"dataplane.address (set dataplane.xdp_ifname)");
		return -1;
	}
	ifindex = (int)if_nametoindex(x->ifname);
	if (!ifindex) {
		log_err("dataplane.transport = xdp: no interface '%s'",
			x->ifname);
		return -1;
	}
	err = tly_xdp_open(&x->ctl, (uint32_t)cfg->pool_slots);
	if (err) {
		log_err("dataplane.transport = xdp: cannot load the program: "
			"%s (needs CAP_BPF and CAP_NET_ADMIN)", strerror(-err));
		return -1;
	}
	/* native XDP where the driver has it, else generic */
	err = tly_xdp_attach(x->ctl, ifindex, 0);
	if (err) {
		log_err("dataplane.transport = xdp: cannot attach to %s: %s",
			x->ifname, strerror(-err));
		return -1;
	}
	x->attached = true;
	/* the switch profile's sweep age, as the software aggregator's */
	x->evict_ns = (uint64_t)cfg->rto_us * 1000 * 256;
	tly_xdp_info(x->ctl, &info);
	log_info("xdp aggregator attached to %s: %u instructions (%u "
		 "verified, %s), %d slots, evict %llu ms", x->ifname,
		 info.xlated_insns, info.verified_insns,
		 tly_xdp_lock_name(info.lock), cfg->pool_slots,
		 (unsigned long long)(x->evict_ns / 1000000));
	return 0;
}

int cluster_xdp_epoch(struct cluster *c)
{
	const struct tally_config *cfg = c->cfg;
	struct cluster_xdp *x = c->xdp;
	struct tly_xdp_job j = {
		.cookie = auth_cookie(&c->mb.cfg.keys, cfg->job_key, c->epoch),
		.job = tly_wire_job(cfg->job_key, c->epoch),
		.n_workers = c->n_workers,
		.k = (uint16_t)config_k(cfg),
		.port = c->addrs[c->self_node].port,
		.n_slots = (uint32_t)cfg->pool_slots,
		.group_ip = cfg->result_group.ip,
		.group_port = cfg->result_group.port,
	};
	int err;

	/* the program answers a worker at the address its DATA came from,
	 * and numbers it by the header's rank: the roster's order, workers
	 * first (cluster.c) */
	for (uint16_t a = 0; a < c->n_aggs; a++)
		if (c->agg_nodes[a] < c->n_workers) {
			log_err("epoch %u: dataplane.transport = xdp needs "
				"every aggregator after the workers in the "
				"roster", c->epoch);
			return -1;
		}
	tly_group_mac(j.group_ip, j.group_mac);
	err = tly_xdp_set_job(x->ctl, &j);
	if (err) {
		log_err("epoch %u: the xdp aggregator refused the job (%u "
			"workers, k %u, %u slots): %s", c->epoch, j.n_workers,
			j.k, j.n_slots, strerror(-err));
		return -1;
	}
	x->job_set = true;
	x->next_sweep = tly_now_ns() + x->evict_ns;
	return 0;
}

void cluster_xdp_poll(struct cluster *c, uint64_t now_ns)
{
	struct cluster_xdp *x = c->xdp;

	if (!x->job_set || now_ns < x->next_sweep)
		return;
	tly_xdp_sweep(x->ctl, x->evict_ns, NULL);
	x->next_sweep = now_ns + x->evict_ns;
}

uint64_t cluster_xdp_idle_ns(const struct cluster *c, uint64_t now_ns)
{
	const struct cluster_xdp *x = c->xdp;

	if (!x->job_set)
		return UINT64_MAX;
	return x->next_sweep > now_ns ? x->next_sweep - now_ns : 0;
}

unsigned int cluster_xdp_counters(const struct cluster *c, uint64_t *v,
				  const char **names, unsigned int max)
{
	const struct cluster_xdp *x = c ? c->xdp : NULL;
	uint64_t all[TLY_XDP_C_COUNT];
	unsigned int i, n = 0;

	if (!x || !x->ctl || tly_xdp_counters(x->ctl, all))
		return 0;
	for (i = 1; i < TLY_XDP_C_COUNT && n < max; i++, n++) {
		v[n] = all[i];
		names[n] = tly_xdp_counter_name(i);
	}
	return n;
}

void cluster_xdp_close(struct cluster *c)
{
	struct cluster_xdp *x = c->xdp;
	int err;

	if (!x)
		return;
	if (x->attached) {
		err = tly_xdp_detach(x->ctl);
		if (err)
			log_err("xdp aggregator: detach from %s: %s",
				x->ifname, strerror(-err));
		else
			log_info("xdp aggregator detached from %s",
				 x->ifname);
	}
	if (x->ctl)
		tly_xdp_close(x->ctl);
	free(x);
	c->xdp = NULL;
}

#else	/* built without the XDP aggregator (meson option xdp) */

int cluster_xdp_open(struct cluster *c)
{
	(void)c;
	log_err("dataplane.transport = xdp: this tallyd was built without "
		"the XDP aggregator (meson option xdp: clang and libbpf-dev)");
	return -1;
}

int cluster_xdp_epoch(struct cluster *c)
{
	(void)c;
	return -1;
}

void cluster_xdp_poll(struct cluster *c, uint64_t now_ns)
{
	(void)c;
	(void)now_ns;
}

uint64_t cluster_xdp_idle_ns(const struct cluster *c, uint64_t now_ns)
{
	(void)c;
	(void)now_ns;
	return UINT64_MAX;
}

unsigned int cluster_xdp_counters(const struct cluster *c, uint64_t *v,
				  const char **names, unsigned int max)
{
	(void)c;
	(void)v;
	(void)names;
	(void)max;
	return 0;
}

void cluster_xdp_close(struct cluster *c)
{
	(void)c;
}
#endif
