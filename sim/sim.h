/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sim.h - tally-sim: a discrete-event simulator of data-parallel training
 * iterations on H hosts x G GPUs.  What is sent when is decided by
 * tally's own scheduler (dataplane/sched/, linked) and MG-WFBP plan
 * (dataplane/sched/mg_plan.c); only time, compute and the network are
 * simulated.  The model and the source of every constant:
 * docs/simulator.md.
 */
#ifndef TALLY_SIM_H
#define TALLY_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/sched/sched.h"

/* ---- model profile (tools/models/, one CSV per model) ------------------ */

struct sim_tensor {
	int layer;
	uint64_t bytes;		/* float32: 4 x elements */
	double fwd_ns, bwd_ns;	/* on the layer's first row, else 0 */
};

struct sim_profile {
	int n, layers;
	struct sim_tensor *t;	/* backward order */
	double compute_ns;	/* one iteration on one GPU */
};

int sim_profile_load(const char *path, struct sim_profile *p);
void sim_profile_free(struct sim_profile *p);

/* ---- network and hosts ------------------------------------------------ */

enum sim_algo {
	SIM_RING = 1,		/* ring all-reduce between the hosts */
	SIM_AGG_DEDICATED,	/* n_agg dedicated aggregators */
	SIM_AGG_COLOCATED,	/* every host is the shard of 1/H of a tensor */
};

struct sim_net {
	double rate_bps;	/* line rate of every link, bit/s */
	double lat_ns;		/* one-way host-to-host latency */
	uint32_t k;		/* int32 lanes per packet */
	uint32_t hdr_bytes;	/* tally + L2-L4 + wire overhead per packet */
	uint32_t window;	/* packets in flight per worker */
	double host_pkt_ns;	/* a worker's CPU per packet it handles */
	double agg_pkt_ns;	/* an aggregator's CPU per packet it receives */
	double unit_ns;		/* per unit (network tensor) software cost */
	uint32_t n_agg;		/* dedicated aggregators (0: as many as hosts) */
	/* the intra-host step */
	double pcie_Bps;	/* per GPU, device <-> host (0: no GPU copy) */
	double reduce_Bps;	/* local reduce, input bytes per second */
};

/* The time of one unit's all-reduce of bytes over hosts hosts:
 * *occupy_ns the links and CPUs are busy with it (the next unit may start
 * after), *total_ns from its start to its completion (occupy + latency). */
void sim_unit_time(const struct sim_net *net, enum sim_algo algo,
		   uint32_t hosts, uint64_t bytes, double *occupy_ns,
		   double *total_ns);
/* The wire time of one packet on a link and the per-packet time the
 * engine can sustain (wire, CPU or window bound) */
double sim_packet_ns(const struct sim_net *net, double lat_ns);
uint64_t sim_packets(const struct sim_net *net, uint64_t bytes);

/* The published networks: "10g", "100g" (docs/simulator.md). */
int sim_net_preset(const char *name, struct sim_net *net);

/* ---- one simulation ----------------------------------------------------- */

struct sim_method {
	const char *name;	/* bsp-a2a, ... */
	enum sim_algo algo;	/* SIM_RING or an aggregation */
	enum sched_policy policy;
	bool plan;		/* MG-WFBP: send the merge plan */
};

/* The seven methods of tools/experiment, in its order. */
extern const struct sim_method sim_methods[7];
const struct sim_method *sim_method_find(const char *name);

struct sim_cfg {
	const struct sim_profile *prof;
	struct sim_method method;
	struct sim_net net;
	uint32_t hosts, gpus;		/* per host */
	uint32_t batch;			/* per GPU */
	double dilation;		/* tools/experiment's D (1: none) */
	int iterations, warmup;
	/* ByteScheduler, as tallyd's [cluster] keys */
	uint64_t partition_bytes, credit_bytes;
	bool autotune;
	/* override the daemon's MG-WFBP plan cost model (0: derive a and b
	 * from the network model, as replay measures them) */
	double plan_a_ns, plan_b_ns_per_byte;
	/* time as tools/replay does: from the end of the warm-up's backward
	 * to the last gradient back (one more exposed all-reduce than the
	 * iterations have); false: steady state, from the forward of the
	 * first measured iteration to that of the one after the last */
	bool replay_timing;
};

void sim_cfg_default(struct sim_cfg *c);

struct sim_result {
	double iteration_ns;	/* undilated */
	double samples_per_s;
	double efficiency;	/* over GPUs x one GPU's samples/s */
	struct sched_stats st;	/* the scheduler's own counters */
	uint32_t groups;	/* MG-WFBP plan */
	double plan_a_ns, plan_b;	/* the plan's cost model */
};

int sim_run(const struct sim_cfg *c, struct sim_result *r);

#endif /* TALLY_SIM_H */
