// SPDX-License-Identifier: BSD-3-Clause
/*
 * xdp_ctl.c - the XDP aggregator's control plane (libbpf: load, maps,
 * attach).
 */
#include "dataplane/xdp/xdp_ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "dataplane/dp_log.h"

/* the compiled agg.bpf.c (embed.py), with each slot lock */
extern const unsigned char tly_xdp_agg_obj[];
extern const size_t tly_xdp_agg_obj_len;
extern const unsigned char tly_xdp_agg_rq_obj[];
extern const size_t tly_xdp_agg_rq_obj_len;

struct tly_xdp_ctl {
	struct bpf_object *obj;
	struct bpf_program *agg;
	struct bpf_program *sweep;
	int cfg_fd;
	int slots_fd;
	int counters_fd;
	uint32_t pool;		/* entries of the slots map */
	uint32_t n_slots;	/* the job's */
	int ncpu;
	int ifindex;		/* attached to; 0 if not */
	__u32 flags;		/* XDP_FLAGS_* it was attached with */
	enum tly_xdp_lock lock;	/* RES or SPIN: the build loaded */
};

/* libbpf's messages go to the dataplane's log; its debug chatter not */
static int libbpf_log(enum libbpf_print_level level, const char *fmt,
		      va_list ap)
{
	char line[512];

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = 0;
	dp_log(level == LIBBPF_WARN ? DP_LOG_WARN : DP_LOG_INFO, "%s", line);
	return 0;
}

/* open and load one build of the program (@obj, @len bytes, taking
 * @lock) into @c; 0 or -errno */
static int load(struct tly_xdp_ctl *c, const void *obj, size_t len,
		enum tly_xdp_lock lock, uint32_t n_slots)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "tly_xdp_agg");
	struct bpf_map *m;
	int err;

	c->obj = bpf_object__open_mem(obj, len, &opts);
	err = libbpf_get_error(c->obj);
	if (err) {
		c->obj = NULL;
		return err;
	}
	m = bpf_object__find_map_by_name(c->obj, "tly_slots");
	c->agg = bpf_object__find_program_by_name(c->obj, "tly_xdp_agg");
	c->sweep = bpf_object__find_program_by_name(c->obj, "tly_xdp_sweep");
	if (!m || !c->agg || !c->sweep)
		return -ENOENT;
	err = bpf_map__set_max_entries(m, n_slots);
	if (err)
		return err;
	err = bpf_object__load(c->obj);
	if (err)
		return err;
	c->lock = lock;
	c->slots_fd = bpf_map__fd(m);
	return 0;
}

/* TALLY_XDP_LOCK: auto (or unset), res or spin; anything else warns */
static enum tly_xdp_lock lock_from_env(void)
{
	const char *v = getenv("TALLY_XDP_LOCK");

	if (!v || !*v || !strcmp(v, "auto"))
		return TLY_XDP_LOCK_AUTO;
	if (!strcmp(v, "res"))
		return TLY_XDP_LOCK_RES;
	if (!strcmp(v, "spin"))
		return TLY_XDP_LOCK_SPIN;
	dp_warn("xdp: TALLY_XDP_LOCK=%s is not auto, res or spin: auto", v);
	return TLY_XDP_LOCK_AUTO;
}

int tly_xdp_open(struct tly_xdp_ctl **out, uint32_t n_slots)
{
	return tly_xdp_open_lock(out, n_slots, lock_from_env());
}

/* the embedded build that takes @lock (RES or SPIN) */
static int load_build(struct tly_xdp_ctl *c, enum tly_xdp_lock lock,
		      uint32_t n_slots)
{
	if (lock == TLY_XDP_LOCK_RES)
		return load(c, tly_xdp_agg_rq_obj, tly_xdp_agg_rq_obj_len,
			    lock, n_slots);
	return load(c, tly_xdp_agg_obj, tly_xdp_agg_obj_len, lock, n_slots);
}

/* @obj NULL: the embedded builds, as @lock says; else that object,
 * which takes @lock (RES or SPIN) */
static int open_ctl(struct tly_xdp_ctl **out, uint32_t n_slots,
		    const void *obj, size_t len, enum tly_xdp_lock lock)
{
	struct tly_xdp_ctl *c;
	int err;

	*out = NULL;
	if (n_slots == 0 || n_slots > TLY_MAX_SLOTS ||
	    lock > TLY_XDP_LOCK_SPIN || (obj && lock == TLY_XDP_LOCK_AUTO))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	libbpf_set_print(libbpf_log);
	if (obj)
		err = load(c, obj, len, lock, n_slots);
	else
		err = load_build(c, lock == TLY_XDP_LOCK_SPIN ?
				    TLY_XDP_LOCK_SPIN : TLY_XDP_LOCK_RES,
				 n_slots);
	if (err && !obj && lock == TLY_XDP_LOCK_AUTO) {
		/* a kernel before 6.15 has no resilient lock */
		dp_info("xdp: no bpf_res_spin_lock here (%s): the build "
			"with bpf_spin_lock", strerror(-err));
		bpf_object__close(c->obj);
		c->obj = NULL;
		err = load_build(c, TLY_XDP_LOCK_SPIN, n_slots);
	}
	if (err) {
		dp_err("xdp: the kernel refused the aggregator program (%s)",
		       strerror(-err));
		goto fail;
	}
	c->pool = n_slots;
	c->cfg_fd = bpf_object__find_map_fd_by_name(c->obj, "tly_cfg");
	c->counters_fd = bpf_object__find_map_fd_by_name(c->obj,
							 "tly_counters");
	c->ncpu = libbpf_num_possible_cpus();
	if (c->cfg_fd < 0 || c->counters_fd < 0 || c->ncpu <= 0) {
		err = -ENOENT;
		goto fail;
	}
	*out = c;
	return 0;
fail:
	tly_xdp_close(c);
	return err < 0 ? err : -EINVAL;
}

int tly_xdp_open_lock(struct tly_xdp_ctl **out, uint32_t n_slots,
		      enum tly_xdp_lock lock)
{
	return open_ctl(out, n_slots, NULL, 0, lock);
}

int tly_xdp_open_mem(struct tly_xdp_ctl **out, uint32_t n_slots,
		     const void *obj, size_t len, enum tly_xdp_lock lock)
{
	return obj ? open_ctl(out, n_slots, obj, len, lock) : -EINVAL;
}

void tly_xdp_close(struct tly_xdp_ctl *c)
{
	if (!c)
		return;
	if (c->ifindex)
		tly_xdp_detach(c);
	bpf_object__close(c->obj);
	free(c);
}

static int write_cfg(struct tly_xdp_ctl *c, const struct tly_xdp_cfg *cfg)
{
	uint32_t key = 0;

	return bpf_map_update_elem(c->cfg_fd, &key, cfg, BPF_ANY) ? -errno
								  : 0;
}

int tly_xdp_set_job(struct tly_xdp_ctl *c, const struct tly_xdp_job *j)
{
	struct tly_xdp_cfg cfg = { 0 };
	struct tly_xdp_slot *zero;
	uint32_t i;
	int err;

	if (j->n_workers == 0 || j->n_workers > TLY_XDP_MAX_WORKERS ||
	    !tly_switch_k_ok(j->k) ||
	    j->n_slots == 0 || j->n_slots > c->pool || j->port == 0 ||
	    !tly_group_ok(j->group_ip, j->group_port))
		return -EINVAL;
	/* packets of the port are dropped while the slots are cleared */
	cfg.port = j->port;
	err = write_cfg(c, &cfg);
	if (err)
		return err;
	zero = calloc(1, sizeof(*zero));
	if (!zero)
		return -ENOMEM;
	/* the job reaches slots below its n_slots only */
	for (i = 0; i < j->n_slots; i++) {
		/* BPF_F_LOCK takes a bpf_spin_lock only; with the resilient
		 * lock nothing else writes the slots now (the port's
		 * packets are dropped) but a packet already past that check */
		if (bpf_map_update_elem(c->slots_fd, &i, zero,
					c->lock == TLY_XDP_LOCK_SPIN ?
					BPF_F_LOCK : BPF_ANY)) {
			err = -errno;
			break;
		}
	}
	free(zero);
	if (err)
		return err;
	cfg.cookie = j->cookie;
	cfg.job = j->job;
	cfg.n_workers = j->n_workers;
	cfg.k = j->k;
	cfg.n_slots = j->n_slots;
	cfg.group_ip = j->group_ip;
	cfg.group_port = j->group_port;
	memcpy(cfg.group_mac, j->group_mac, 6);
	cfg.enabled = 1;
	c->n_slots = j->n_slots;
	return write_cfg(c, &cfg);
}

/*
 * libbpf's netlink attach, one program per interface.  libxdp's
 * multi-program dispatcher would need a bpffs mount and an freplace of
 * this program; the aggregator owns its port, so it is not used.
 * UPDATE_IF_NOEXIST: never replace another program.
 */
int tly_xdp_attach(struct tly_xdp_ctl *c, int ifindex, int skb_mode)
{
	int fd = bpf_program__fd(c->agg), err;

	if (c->ifindex)
		return -EBUSY;
	c->flags = XDP_FLAGS_UPDATE_IF_NOEXIST |
		   (skb_mode ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE);
	err = bpf_xdp_attach(ifindex, fd, c->flags, NULL);
	if (err == -EOPNOTSUPP && !skb_mode) {
		dp_warn("xdp: no native XDP on ifindex %d: generic mode",
			ifindex);
		c->flags = XDP_FLAGS_UPDATE_IF_NOEXIST | XDP_FLAGS_SKB_MODE;
		err = bpf_xdp_attach(ifindex, fd, c->flags, NULL);
	}
	if (err)
		return err;
	c->ifindex = ifindex;
	return 0;
}

/* only if ours is still the one attached (REPLACE with old_prog_fd) */
int tly_xdp_detach(struct tly_xdp_ctl *c)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, o,
		    .old_prog_fd = bpf_program__fd(c->agg));
	__u32 mode = c->flags & (XDP_FLAGS_SKB_MODE | XDP_FLAGS_DRV_MODE);
	int err;

	if (!c->ifindex)
		return -ENOENT;
	err = bpf_xdp_attach(c->ifindex, -1, mode | XDP_FLAGS_REPLACE, &o);
	c->ifindex = 0;
	return err;
}

int tly_xdp_attach_pass(int ifindex)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0,
		  .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int fd, err;

	fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "tally_pass", "GPL", insns, 2,
			   NULL);
	if (fd < 0)
		return fd;
	err = bpf_xdp_attach(ifindex, fd, XDP_FLAGS_DRV_MODE, NULL);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int tly_xdp_sweep(struct tly_xdp_ctl *c, uint64_t evict_ns,
		  struct tly_xdp_sweep *out)
{
	struct tly_xdp_sweep w = {
		.start = 0, .count = c->n_slots, .evict_ns = evict_ns,
	};
	LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = &w,
		    .data_size_in = sizeof(w), .data_out = &w,
		    .data_size_out = sizeof(w), .repeat = 1);

	if (bpf_prog_test_run_opts(bpf_program__fd(c->sweep), &t))
		return -errno;
	if (t.retval != XDP_PASS)
		return -EIO;
	if (out)
		*out = w;
	return 0;
}

int tly_xdp_counters(struct tly_xdp_ctl *c, uint64_t v[TLY_XDP_C_COUNT])
{
	uint64_t *cpu = calloc((size_t)c->ncpu, sizeof(*cpu));
	uint32_t i;
	int j;

	if (!cpu)
		return -ENOMEM;
	for (i = 0; i < TLY_XDP_C_COUNT; i++) {
		v[i] = 0;
		if (bpf_map_lookup_elem(c->counters_fd, &i, cpu)) {
			free(cpu);
			return -errno;
		}
		for (j = 0; j < c->ncpu; j++)
			v[i] += cpu[j];
	}
	free(cpu);
	return 0;
}

const char *tly_xdp_counter_name(unsigned int i)
{
	static const char *const names[] = {
		[TLY_XDP_C_RX - TLY_E_COUNT] = "rx",
		[TLY_XDP_C_PASS - TLY_E_COUNT] = "pass",
		[TLY_XDP_C_DATA - TLY_E_COUNT] = "data",
		[TLY_XDP_C_CONFIRM - TLY_E_COUNT] = "confirm",
		[TLY_XDP_C_CLAIMS - TLY_E_COUNT] = "claims",
		[TLY_XDP_C_COMPLETIONS - TLY_E_COUNT] = "completions",
		[TLY_XDP_C_RESULT_RETX - TLY_E_COUNT] = "result_retx",
		[TLY_XDP_C_ACK - TLY_E_COUNT] = "acks",
		[TLY_XDP_C_BUSY - TLY_E_COUNT] = "busy",
		[TLY_XDP_C_DUPS - TLY_E_COUNT] = "dups",
		[TLY_XDP_C_FREED - TLY_E_COUNT] = "freed",
		[TLY_XDP_C_CONFIRM_NONE - TLY_E_COUNT] = "confirm_freed",
		[TLY_XDP_C_EVICTIONS - TLY_E_COUNT] = "evictions",
		[TLY_XDP_C_TX_ERR - TLY_E_COUNT] = "tx_err",
		[TLY_XDP_C_LOCK - TLY_E_COUNT] = "lock",
	};

	if (i < TLY_E_COUNT)
		return tly_drop_name((enum tly_drop)i);
	if (i < TLY_XDP_C_COUNT)
		return names[i - TLY_E_COUNT];
	return "?";
}

int tly_xdp_prog_fd(const struct tly_xdp_ctl *c)
{
	return bpf_program__fd(c->agg);
}

int tly_xdp_map_fd(const struct tly_xdp_ctl *c, const char *name)
{
	int fd = bpf_object__find_map_fd_by_name(c->obj, name);

	return fd < 0 ? -ENOENT : fd;
}

int tly_xdp_info(const struct tly_xdp_ctl *c, struct tly_xdp_prog_info *i)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(c->agg), &info, &len))
		return -errno;
	i->xlated_insns = info.xlated_prog_len / 8;
	i->verified_insns = info.verified_insns;
	i->jited_bytes = info.jited_prog_len;
	i->lock = c->lock;
	return 0;
}

const char *tly_xdp_lock_name(enum tly_xdp_lock lock)
{
	switch (lock) {
	case TLY_XDP_LOCK_RES:
		return "bpf_res_spin_lock";
	case TLY_XDP_LOCK_SPIN:
		return "bpf_spin_lock";
	default:
		return "auto";
	}
}
