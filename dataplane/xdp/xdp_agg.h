/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xdp_agg.h - what the XDP aggregator (agg.bpf.c) and its control plane
 * (xdp_ctl.c) share: the maps' value layouts and the counter indices.
 * The switch profile of the protocol (docs/switch-profile.md);
 * docs/xdp-aggregator.md describes the program.
 *
 * Built for both targets: BPF (clang -target bpf) and the host.
 */
#ifndef TALLY_DATAPLANE_XDP_XDP_AGG_H
#define TALLY_DATAPLANE_XDP_XDP_AGG_H

#include <linux/bpf.h>
#include <linux/types.h>

#include "dataplane/engine/wire.h"

/* the switch profile: every bitmap is one 32-bit register */
#define TLY_XDP_MAX_WORKERS	32
#define TLY_XDP_K_MAX		TLY_SWITCH_K_MAX
/* RESULT to every worker: the rank field of the multicast frame */
#define TLY_XDP_RANK_ALL	TLY_RANK_ALL
/* slots one run of the sweep program looks at: the largest pool */
#define TLY_XDP_SWEEP_BATCH	TLY_MAX_SLOTS

enum tly_xdp_state {
	TLY_XDP_FREE = 0,
	TLY_XDP_AGG = 1,
	TLY_XDP_DONE = 2,
};

/* the job, written by the control plane at each epoch (array map, key 0) */
struct tly_xdp_cfg {
	__u32 cookie;		/* host order */
	__u16 job;		/* wire job key */
	__u16 n_workers;	/* 1 .. 32 */
	__u16 k;		/* 32 .. 832, a multiple of 32 */
	__u16 port;		/* the job's UDP port (DATA's destination) */
	__u32 n_slots;		/* slot pool; the map has at least this */
	/* where the RESULT to every worker goes: an IPv4 multicast group
	 * every worker's socket joins (host order), and its MAC */
	__u32 group_ip;
	__u16 group_port;
	__u8 group_mac[6];
	__u32 enabled;		/* 0: every packet of the port dropped */
};

/*
 * The slot's lock.  Two builds of agg.bpf.c (docs/xdp-aggregator.md,
 * "The slot lock"): TLY_XDP_RQLOCK takes the kernel's resilient spin lock
 * (bpf_res_spin_lock, Linux 6.15+), which leaves interrupts alone; the
 * other takes bpf_spin_lock, which saves and restores them on every
 * packet.  Both are one 32-bit word, so the slot's layout is the same and
 * the host side, which never touches the lock, uses the older name.
 * TLY_HAVE_RES_SPIN_LOCK: <linux/bpf.h> declares the struct (meson).
 */
#if defined(TLY_XDP_RQLOCK) && !defined(TLY_HAVE_RES_SPIN_LOCK)
struct bpf_res_spin_lock {
	__u32 val;
};
#endif
/* a macro, not a typedef: the verifier finds the lock by its struct name */
#ifdef TLY_XDP_RQLOCK
#define TLY_XDP_SLOT_LOCK struct bpf_res_spin_lock
#else
#define TLY_XDP_SLOT_LOCK struct bpf_spin_lock
#endif

/*
 * One aggregation slot.  Registers of at most 32 bits, plus the claim
 * time (written on the packet path, read only by the sweep) and the lanes.
 * The lock orders both CPUs' packets and the sweep.
 */
struct tly_xdp_slot {
	TLY_XDP_SLOT_LOCK lock;
	__u32 tensor;		/* key word 1 */
	__u32 chunk_exp;	/* key word 2: chunk << 1 | EXP */
	__u32 contrib;		/* workers whose DATA is in the sum */
	__u32 confirmed;	/* DONE: workers whose CONFIRM came */
	__u16 count;
	__u8 state;		/* enum tly_xdp_state */
	__u8 mode;		/* TLY_F_EXP / TLY_F_INT */
	__s8 shift;
	__u8 pad[3];
	__u64 claim_ns;		/* bpf_ktime_get_ns() at the claim */
	__s32 lanes[TLY_XDP_K_MAX];	/* host order */
};

/*
 * Counters (per-CPU array, one __u64 each): the drop reasons of wire.h
 * first (index = enum tly_drop; TLY_OK unused), then these.
 */
enum tly_xdp_counter {
	TLY_XDP_C_RX = TLY_E_COUNT,	/* frames to the job's UDP port */
	TLY_XDP_C_PASS,		/* not ours: to the kernel's stack */
	TLY_XDP_C_DATA,
	TLY_XDP_C_CONFIRM,
	TLY_XDP_C_CLAIMS,
	TLY_XDP_C_COMPLETIONS,	/* RESULT to every worker */
	TLY_XDP_C_RESULT_RETX,	/* RESULT again to one worker */
	TLY_XDP_C_ACK,
	TLY_XDP_C_BUSY,
	TLY_XDP_C_DUPS,		/* duplicate DATA without ACK_REQ/RETX */
	TLY_XDP_C_FREED,	/* slots freed by a receipt of a CONFIRM */
	TLY_XDP_C_CONFIRM_NONE,	/* a receipt of a chunk already freed */
	TLY_XDP_C_EVICTIONS,	/* partials freed by the sweep */
	TLY_XDP_C_TX_ERR,	/* a reply could not be built */
	TLY_XDP_C_LOCK,		/* dropped: a slot's lock was not taken */
	TLY_XDP_C_COUNT
};

/*
 * Tests only: the value of the map tly_lock_fault in the build with
 * TLY_XDP_LOCK_FAULT (the resilient lock's build with its failure on
 * demand; never loaded by the daemon).  The next @skip slot locks (the
 * packet path's or the sweep's) are taken, the @fail after them fail as
 * a deadlock or timeout would.
 */
struct tly_xdp_lock_fault {
	__u32 skip;
	__u32 fail;
};

/* the sweep program's input and output (its test-run packet) */
struct tly_xdp_sweep {
	__u32 start;		/* first slot */
	__u32 count;		/* slots, at most TLY_XDP_SWEEP_BATCH */
	__u64 evict_ns;		/* AGG slots claimed earlier are freed */
	__u32 freed;		/* out */
	__u32 n_agg;		/* out: AGG slots left in the range */
	__u32 n_done;		/* out: DONE slots in the range */
	__u32 pad;
};

#endif /* TALLY_DATAPLANE_XDP_XDP_AGG_H */
