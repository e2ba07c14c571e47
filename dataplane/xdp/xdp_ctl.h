/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xdp_ctl.h - the control plane of the XDP aggregator (agg.bpf.c): what a
 * switch leaves to its CPU (docs/switch-profile.md, "The control plane").
 * Loads the program (carried in the binary), writes the job into its
 * config map, attaches it to an interface, runs the eviction sweep and
 * reads the counters.  docs/xdp-aggregator.md.
 */
#ifndef TALLY_DATAPLANE_XDP_XDP_CTL_H
#define TALLY_DATAPLANE_XDP_XDP_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/xdp/xdp_agg.h"

/* the job as the control plane writes it at each epoch */
struct tly_xdp_job {
	uint32_t cookie;
	uint16_t job;		/* wire job key */
	uint16_t n_workers;	/* 1 .. TLY_XDP_MAX_WORKERS */
	uint16_t k;		/* 64, 128 or 256 */
	uint16_t port;		/* the job's UDP port */
	uint32_t n_slots;	/* at most the pool given to tly_xdp_open() */
	/* RESULT to every worker: the multicast group (host order) */
	uint32_t group_ip;
	uint16_t group_port;
	uint8_t group_mac[6];
};

struct tly_xdp_ctl;

/* the slot lock of the build to load (xdp_agg.h) */
enum tly_xdp_lock {
	TLY_XDP_LOCK_AUTO,	/* RES where the kernel has it, else SPIN */
	TLY_XDP_LOCK_RES,	/* bpf_res_spin_lock (Linux 6.15+) */
	TLY_XDP_LOCK_SPIN,	/* bpf_spin_lock */
};

/* what the kernel says of the loaded program */
struct tly_xdp_prog_info {
	uint32_t xlated_insns;	/* instructions after the verifier */
	uint32_t verified_insns;	/* the verifier's processed count */
	uint32_t jited_bytes;
	enum tly_xdp_lock lock;	/* the build loaded: RES or SPIN */
};

/* load the program with a pool of @n_slots slots; the lock as the
 * environment's TALLY_XDP_LOCK (auto, res, spin) says, auto if unset;
 * 0 or -errno */
int tly_xdp_open(struct tly_xdp_ctl **out, uint32_t n_slots);
/* the same with the lock given: AUTO falls back to SPIN when the RES
 * build does not load, RES and SPIN load that build or fail */
int tly_xdp_open_lock(struct tly_xdp_ctl **out, uint32_t n_slots,
		      enum tly_xdp_lock lock);
/* the same with a build of the program given (@obj, @len bytes: the
 * tests' build with the lock's failure on demand), which takes @lock
 * (RES or SPIN) */
int tly_xdp_open_mem(struct tly_xdp_ctl **out, uint32_t n_slots,
		     const void *obj, size_t len, enum tly_xdp_lock lock);
const char *tly_xdp_lock_name(enum tly_xdp_lock lock);
void tly_xdp_close(struct tly_xdp_ctl *c);

/* check @j; write it and free every slot (packets of the port are
 * dropped meanwhile); 0 or -errno */
int tly_xdp_set_job(struct tly_xdp_ctl *c, const struct tly_xdp_job *j);

/* attach to / detach from an interface: native XDP, or generic (skb)
 * mode when @skb_mode or when the driver has none; never replaces
 * another program; 0 or -errno */
int tly_xdp_attach(struct tly_xdp_ctl *c, int ifindex, int skb_mode);
int tly_xdp_detach(struct tly_xdp_ctl *c);

/*
 * Attach a program that passes every frame to @ifindex (native mode) and
 * return its fd (close it to let the program go with the interface), or
 * -errno.  veth's native XDP_TX hands a frame to the peer's NAPI, which
 * runs only while the peer has an XDP program too: on an emulated
 * cluster's veth pairs the aggregator's peer end needs this one.
 */
int tly_xdp_attach_pass(int ifindex);

/* free the job's AGG slots claimed @evict_ns or longer ago; *out (may be
 * NULL) tells how many were freed and what the job's pool holds; 0 or
 * -errno */
int tly_xdp_sweep(struct tly_xdp_ctl *c, uint64_t evict_ns,
		  struct tly_xdp_sweep *out);

/* the counters summed over the CPUs; 0 or -errno */
int tly_xdp_counters(struct tly_xdp_ctl *c, uint64_t v[TLY_XDP_C_COUNT]);
const char *tly_xdp_counter_name(unsigned int i);

int tly_xdp_prog_fd(const struct tly_xdp_ctl *c);
/* the fd of the program's map @name, or -ENOENT */
int tly_xdp_map_fd(const struct tly_xdp_ctl *c, const char *name);
int tly_xdp_info(const struct tly_xdp_ctl *c, struct tly_xdp_prog_info *i);

#endif /* TALLY_DATAPLANE_XDP_XDP_CTL_H */
