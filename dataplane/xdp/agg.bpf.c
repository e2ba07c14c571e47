// SPDX-License-Identifier: BSD-3-Clause
/*
 * agg.bpf.c - the aggregator of the switch profile (docs/switch-profile.md)
 * as an eBPF program in the XDP hook.  docs/xdp-aggregator.md describes
 * it; xdp_ctl.c loads it and is its control plane.
 *
 * Per packet: the envelope and header checks of tly_l2l4_parse() and
 * tly_hdr_parse() (the cookie first; the slot hash is wire.h's own
 * tly_slot_of(), compiled for BPF), one slot look-up at the slot the
 * header names, one row of the slot table under the slot's spin lock, at
 * most K lane operations (a CONFIRM: the same for each of its at most 7
 * receipts), and at most one frame out (XDP_TX): ACK, BUSY or a re-sent
 * RESULT to the sender with the addresses swapped, or the RESULT to every
 * worker as one frame to the job's multicast group.
 * Frames that are not IPv4/UDP to the job's port go to the kernel.
 *
 * No floating point, no timers; the only loops are the K lanes, a
 * CONFIRM's receipts (and the sweep program's bounded batch, run by the
 * control plane).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "dataplane/xdp/xdp_agg.h"

char _license[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tly_xdp_cfg);
} tly_cfg SEC(".maps");

/* max_entries is set to the job's n_slots by the loader */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct tly_xdp_slot);
} tly_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TLY_XDP_C_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} tly_counters SEC(".maps");

#define INLINE static __always_inline

/*
 * The slot's lock (xdp_agg.h).  slot_lock() is 0 when taken; the
 * resilient lock can also fail (a deadlock or a timeout the kernel
 * detected), and then the packet is dropped unanswered, as a lost one
 * is, and counted (TLY_XDP_C_LOCK): its sender sends it again.
 */
#ifdef TLY_XDP_RQLOCK
extern int bpf_res_spin_lock(struct bpf_res_spin_lock *lock) __ksym;
extern void bpf_res_spin_unlock(struct bpf_res_spin_lock *lock) __ksym;
extern int bpf_res_spin_lock_irqsave(struct bpf_res_spin_lock *lock,
				     unsigned long *flags__irq_flag) __ksym;
extern void bpf_res_spin_unlock_irqrestore(struct bpf_res_spin_lock *lock,
					   unsigned long *flags__irq_flag)
	__ksym;
#define slot_lock(s)		bpf_res_spin_lock(&(s)->lock)
#define slot_unlock(s)		bpf_res_spin_unlock(&(s)->lock)
/* the sweep runs in process context, where the packet path can interrupt
 * it on its CPU: it keeps interrupts off while it holds a slot */
#define sweep_lock(s, f)	bpf_res_spin_lock_irqsave(&(s)->lock, (f))
#define sweep_unlock(s, f)	bpf_res_spin_unlock_irqrestore(&(s)->lock, (f))
#ifdef TLY_XDP_LOCK_FAULT
/* tests only (xdp_agg.h, struct tly_xdp_lock_fault): the lock's failure
 * on demand, before the lock is tried */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tly_xdp_lock_fault);
} tly_lock_fault SEC(".maps");

INLINE int lock_fault(void)
{
	__u32 key = 0;
	struct tly_xdp_lock_fault *f = bpf_map_lookup_elem(&tly_lock_fault,
							    &key);

	if (!f)
		return 0;
	if (f->skip) {
		f->skip--;
		return 0;
	}
	if (f->fail) {
		f->fail--;
		return -1;
	}
	return 0;
}
#undef slot_lock
#undef sweep_lock
#define slot_lock(s)		(lock_fault() ? -1 :				\
				 bpf_res_spin_lock(&(s)->lock))
#define sweep_lock(s, f)	(lock_fault() ? -1 :				\
				 bpf_res_spin_lock_irqsave(&(s)->lock, (f)))
#endif
#else
#define slot_lock(s)		(bpf_spin_lock(&(s)->lock), 0)
#define slot_unlock(s)		bpf_spin_unlock(&(s)->lock)
#define sweep_lock(s, f)	((void)(f), slot_lock(s))
#define sweep_unlock(s, f)	((void)(f), slot_unlock(s))
#endif

INLINE void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&tly_counters, &idx);

	if (c)
		*c += 1;
}

INLINE int drop(__u32 reason)
{
	count(reason);
	return XDP_DROP;
}

/* one's complement sum of the 20-byte IPv4 header (0xffff: good) */
INLINE __u16 ip_sum(const __u8 *ip)
{
	__u32 sum = 0;
	int i;

	for (i = 0; i < TLY_IP_LEN; i += 2)
		sum += (__u32)ip[i] << 8 | ip[i + 1];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/*
 * Every frame out: TTL 64, an atomic datagram (DF, RFC 6864) with ID 0,
 * and its header checksum.  The kernel's GRO merges a run of datagrams
 * only if their IDs are all the same or count up; the DATA's ID, which
 * the frame would otherwise keep, is neither.
 */
INLINE void ip_out(__u8 *ip)
{
	__u16 c;

	ip[4] = 0;
	ip[5] = 0;
	ip[6] = 0x40;
	ip[7] = 0;
	ip[8] = 64;
	ip[10] = 0;
	ip[11] = 0;
	c = (__u16)~ip_sum(ip);
	ip[10] = (__u8)(c >> 8);
	ip[11] = (__u8)c;
}

/*
 * Lanes are taken in blocks of TLY_SWITCH_K_STEP (half a switch pass): K
 * is at most BLOCKS of them.  The lane loops go a block at a time.
 */
#define BLOCK		TLY_SWITCH_K_STEP
#define BLOCKS		(TLY_SWITCH_K_MAX / TLY_SWITCH_K_STEP)

/*
 * The UDP checksum, written last (the field is 0 until then, and stays 0
 * where it cannot be taken), over the addresses, the UDP and tally
 * headers and @n blocks of @block bytes after them (the RESULT's 32-lane
 * blocks, or an ACK's receipts).  Zero ("none", RFC 768) is what a switch
 * may send, but the kernel's GRO merges no UDP datagram without a
 * checksum, so every frame would reach a worker's socket on its own; with
 * one, a port that runs GRO hands the socket a run of them at a time
 * (docs/xdp-aggregator.md, "Checksums").
 *
 * bpf_csum_diff() sums at most CSUM_MAX bytes a call, and the verifier
 * checks each call's size, a constant, against the packet's end.  So the
 * payload goes in whole CSUM_MAX calls, then the rest (a multiple of
 * @block, itself a power of two) in at most one call of each smaller
 * power of two: at K = 352 (1408 bytes) 512 + 512 + 256 + 128, four
 * calls for the payload rather than eleven, one a 32-lane block; at
 * K = 832 (3328 bytes) six of 512, then 256.
 */
#define CSUM_MAX	512
#define POW2(x)		((x) && !((x) & ((x) - 1)))
_Static_assert(POW2(4 * BLOCK) && CSUM_MAX % (4 * BLOCK) == 0 &&
	       POW2(TLY_RECEIPT_LEN) && CSUM_MAX % TLY_RECEIPT_LEN == 0,
	       "udp_csum() takes blocks of a power of two dividing CSUM_MAX");

INLINE void udp_csum(__u8 *ip, const void *end, __u32 block, __u32 n,
		     __u32 n_max)
{
	__u8 *udp = ip + TLY_IP_LEN;
	__u8 *b = udp + TLY_UDP_LEN + TLY_HDR_LEN;
	__u32 left = block * n, size, i;
	__u32 udp_len = TLY_UDP_LEN + TLY_HDR_LEN + left;
	__s64 part;
	__u64 sum;

	if ((void *)b > end || n > n_max)
		return;
	part = bpf_csum_diff(NULL, 0, (__be32 *)(ip + 12),
			     8 + TLY_UDP_LEN + TLY_HDR_LEN, 0);
	for (i = 0; i < block * n_max / CSUM_MAX; i++) {
		if (part < 0 || left < CSUM_MAX)
			break;
		if ((void *)(b + CSUM_MAX) > end)
			return;
		part = bpf_csum_diff(NULL, 0, (__be32 *)b, CSUM_MAX,
				     (__u32)part);
		b += CSUM_MAX;
		left -= CSUM_MAX;
	}
#pragma unroll
	for (size = CSUM_MAX / 2; size >= block; size /= 2) {
		if (part < 0 || !(left & size))
			continue;
		if ((void *)(b + size) > end)
			return;
		part = bpf_csum_diff(NULL, 0, (__be32 *)b, size, (__u32)part);
		b += size;
	}
	if (part < 0)
		return;		/* cannot happen: the sizes are whole words */
	/* the pseudo-header's protocol and length, in the words' order */
	sum = (__u32)part + bpf_htons(17) + bpf_htons((__u16)udp_len);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (__u16)~sum;
	*(__u16 *)(udp + 6) = sum ? (__u16)sum : 0xffff;
}

/* what the slot machine decided; the frame is written after the unlock */
enum act {
	ACT_NONE,		/* absorbed, nothing to send */
	ACT_ACK,
	ACT_BUSY,
	ACT_RESULT_ALL,		/* payload written under the lock */
	ACT_RESULT_ONE,		/* payload written under the lock */
	ACT_MISMATCH,
	ACT_ERR,		/* cannot happen: the length was checked */
	ACT_LOCK,		/* the slot's lock was not taken */
};

/*
 * The lane loops, a block at a time; K is @nb blocks.  The caller checked
 * the payload's length against K, so the bound each block checks for the
 * verifier does not fail and a slot is never left half written.
 */

#define FOR_EACH_BLOCK(b, nb, pl, end)					\
	for ((b) = 0; (b) < BLOCKS; (b)++)				\
		if ((b) >= (nb) ||					\
		    (const void *)((pl) + BLOCK * ((b) + 1)) > (end))	\
			break;						\
		else

INLINE void lanes_copy(struct tly_xdp_slot *s, const __be32 *pl,
		       const void *end, __u32 nb)
{
	__u32 b, i;

	FOR_EACH_BLOCK(b, nb, pl, end)
		for (i = 0; i < BLOCK; i++)
			s->lanes[BLOCK * b + i] =
				(__s32)__builtin_bswap32(pl[BLOCK * b + i]);
}

INLINE void lanes_add(struct tly_xdp_slot *s, const __be32 *pl,
		      const void *end, __u32 nb)
{
	__u32 b, i;

	/* wrapping int32 sum, as the software aggregator's */
	FOR_EACH_BLOCK(b, nb, pl, end)
		for (i = 0; i < BLOCK; i++)
			s->lanes[BLOCK * b + i] = (__s32)(
				(__u32)s->lanes[BLOCK * b + i] +
				__builtin_bswap32(pl[BLOCK * b + i]));
}

INLINE void lanes_max(struct tly_xdp_slot *s, const __be32 *pl,
		      const void *end, __u32 nb)
{
	__u32 b, i;

	FOR_EACH_BLOCK(b, nb, pl, end)
		for (i = 0; i < BLOCK; i++) {
			__s32 v = (__s32)__builtin_bswap32(
				pl[BLOCK * b + i]);

			if (v > s->lanes[BLOCK * b + i])
				s->lanes[BLOCK * b + i] = v;
		}
}

INLINE void lanes_emit(const struct tly_xdp_slot *s, __be32 *pl,
		       const void *end, __u32 nb)
{
	__u32 b, i;

	FOR_EACH_BLOCK(b, nb, pl, end)
		for (i = 0; i < BLOCK; i++)
			pl[BLOCK * b + i] =
				__builtin_bswap32((__u32)s->lanes[BLOCK * b + i]);
}

/*
 * The DATA rows of the slot table, under the lock.  @pl is the packet's
 * payload (@nb blocks, its length checked by the caller); the RESULT's
 * payload is written over it.
 */
INLINE enum act slot_data(struct tly_xdp_slot *s, __be32 *pl,
			  const void *end, __u32 nb,
			  __u32 tensor, __u32 chunk_exp, __u8 flags,
			  __s8 shift, __u32 bit, __u16 n, __u64 now,
			  __s8 *out_shift, __u8 *out_mode, __u32 *ctr)
{
	__u8 mode = flags & (TLY_F_EXP | TLY_F_INT);

	if (s->state == TLY_XDP_FREE) {
		s->tensor = tensor;
		s->chunk_exp = chunk_exp;
		s->mode = mode;
		s->shift = shift;
		s->contrib = bit;
		s->confirmed = 0;
		s->count = 1;
		s->claim_ns = now;
		lanes_copy(s, pl, end, nb);
		*ctr = TLY_XDP_C_CLAIMS;
		if (n == 1) {
			s->state = TLY_XDP_DONE;
			*out_shift = s->shift;
			*out_mode = s->mode;
			return ACT_RESULT_ALL;	/* the payload: the sum */
		}
		s->state = TLY_XDP_AGG;
		return flags & TLY_F_ACK_REQ ? ACT_ACK : ACT_NONE;
	}
	if (s->tensor != tensor || s->chunk_exp != chunk_exp)
		return ACT_BUSY;
	if (s->state == TLY_XDP_DONE) {
		*out_shift = s->shift;
		*out_mode = s->mode;
		lanes_emit(s, pl, end, nb);
		return ACT_RESULT_ONE;
	}
	if (s->mode != mode || s->shift != shift)
		return ACT_MISMATCH;
	if (s->contrib & bit) {
		*ctr = TLY_XDP_C_DUPS;
		return flags & (TLY_F_ACK_REQ | TLY_F_RETX) ? ACT_ACK :
							       ACT_NONE;
	}
	if (mode & TLY_F_EXP)
		lanes_max(s, pl, end, nb);
	else
		lanes_add(s, pl, end, nb);
	s->contrib |= bit;
	s->count++;
	if (s->count >= n) {
		s->state = TLY_XDP_DONE;
		*out_shift = s->shift;
		*out_mode = s->mode;
		lanes_emit(s, pl, end, nb);
		return ACT_RESULT_ALL;
	}
	return flags & TLY_F_ACK_REQ ? ACT_ACK : ACT_NONE;
}

/* the DATA path: the slot's row under its lock */
INLINE enum act data_row(struct xdp_md *ctx, struct tly_xdp_slot *s,
			 __u32 nb, __u32 tensor, __u32 chunk_exp, __u8 flags,
			 __s8 shift, __u32 bit, __u16 n, __u64 now,
			 __s8 *out_shift, __u8 *out_mode, __u32 *ctr)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__be32 *pl = data + TLY_L2L4_LEN + TLY_HDR_LEN;
	__u32 frame_len = ctx->data_end - ctx->data;
	enum act a;

	/* cannot fail: the job's K and the DATA's length were checked */
	if (!nb || nb > BLOCKS ||
	    frame_len < TLY_L2L4_LEN + TLY_HDR_LEN + nb * BLOCK * 4)
		return ACT_ERR;
	if (slot_lock(s))
		return ACT_LOCK;
	a = slot_data(s, pl, end, nb, tensor, chunk_exp, flags, shift, bit,
		      n, now, out_shift, out_mode, ctr);
	slot_unlock(s);
	return a;
}

/*
 * Trim the frame to @len bytes (Ethernet padding, or a DATA turned into a
 * header-only reply).  0 or -1.
 */
INLINE int trim(struct xdp_md *ctx, __u32 len)
{
	__u32 have = ctx->data_end - ctx->data;

	if (have == len)
		return 0;
	if (have < len)
		return -1;
	return bpf_xdp_adjust_tail(ctx, -(int)(have - len)) ? -1 : 0;
}

/* the reply to the sender: swap the addresses, set the lengths */
INLINE void swap_addrs(__u8 *f, __u16 tally_len)
{
	__u8 *ip = f + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;
	__u8 t[6];
	__u16 ip_len = TLY_IP_LEN + TLY_UDP_LEN + tally_len;
	__u16 udp_len = TLY_UDP_LEN + tally_len;

	__builtin_memcpy(t, f, 6);
	__builtin_memcpy(f, f + 6, 6);
	__builtin_memcpy(f + 6, t, 6);
	__builtin_memcpy(t, ip + 12, 4);
	__builtin_memcpy(ip + 12, ip + 16, 4);
	__builtin_memcpy(ip + 16, t, 4);
	__builtin_memcpy(t, udp, 2);
	__builtin_memcpy(udp, udp + 2, 2);
	__builtin_memcpy(udp + 2, t, 2);
	ip[2] = (__u8)(ip_len >> 8);
	ip[3] = (__u8)ip_len;
	udp[4] = (__u8)(udp_len >> 8);
	udp[5] = (__u8)udp_len;
	udp[6] = 0;
	udp[7] = 0;
	ip_out(ip);
}

/* ACK or BUSY: a 20-byte header echoing the key, EXP and INT, plus
 * @extra (RELEASED on the ACK that answers a CONFIRM), and @plen bytes of
 * the packet after it (that ACK echoes the CONFIRM's receipts and aux) */
INLINE int reply_hdr(struct xdp_md *ctx, __u8 type, __u8 extra, __u32 plen)
{
	void *data, *end;
	__u8 *f, *h;

	if (trim(ctx, TLY_L2L4_LEN + TLY_HDR_LEN + plen))
		return drop(TLY_XDP_C_TX_ERR);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	f = data;
	if ((void *)(f + TLY_L2L4_LEN + TLY_HDR_LEN) > end)
		return drop(TLY_XDP_C_TX_ERR);
	h = f + TLY_L2L4_LEN;
	h[0] = TLY_VERSION << 4 | type;
	h[1] = (h[1] & (TLY_F_EXP | TLY_F_INT)) | extra;
	h[14] = 0;
	if (!plen)
		h[15] = 0;
	swap_addrs(f, (__u16)(TLY_HDR_LEN + plen));
	udp_csum(f + TLY_ETH_LEN, end, TLY_RECEIPT_LEN, plen / TLY_RECEIPT_LEN,
		 TLY_SWITCH_RECEIPTS - 1);
	count(type == TLY_T_ACK ? TLY_XDP_C_ACK : TLY_XDP_C_BUSY);
	return XDP_TX;
}

/* a RESULT whose payload is in place: to the sender, or to the group */
INLINE int result_out(struct xdp_md *ctx, const struct tly_xdp_cfg *cfg,
		      __u8 mode, __s8 shift, int all)
{
	__u16 tl = TLY_HDR_LEN + 4 * cfg->k;
	void *data, *end;
	__u8 *f, *h, *ip, *udp;

	if (trim(ctx, TLY_L2L4_LEN + tl))
		return drop(TLY_XDP_C_TX_ERR);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	f = data;
	if ((void *)(f + TLY_L2L4_LEN + TLY_HDR_LEN) > end)
		return drop(TLY_XDP_C_TX_ERR);
	h = f + TLY_L2L4_LEN;
	ip = f + TLY_ETH_LEN;
	udp = ip + TLY_IP_LEN;
	h[0] = TLY_VERSION << 4 | TLY_T_RESULT;
	h[1] = mode | (all ? 0 : TLY_F_RETX);
	h[14] = (__u8)shift;
	h[15] = 0;
	if (!all) {
		swap_addrs(f, tl);
		udp_csum(ip, end, 4 * BLOCK, cfg->k / BLOCK, BLOCKS);
		count(TLY_XDP_C_RESULT_RETX);
		return XDP_TX;
	}
	/* one frame to the group; rank "all"; from the job's address */
	h[4] = TLY_XDP_RANK_ALL >> 8;
	h[5] = TLY_XDP_RANK_ALL & 0xff;
	__builtin_memcpy(f + 6, f, 6);
	__builtin_memcpy(f, cfg->group_mac, 6);
	__builtin_memcpy(ip + 12, ip + 16, 4);
	ip[16] = (__u8)(cfg->group_ip >> 24);
	ip[17] = (__u8)(cfg->group_ip >> 16);
	ip[18] = (__u8)(cfg->group_ip >> 8);
	ip[19] = (__u8)cfg->group_ip;
	ip_out(ip);
	udp[0] = (__u8)(cfg->port >> 8);
	udp[1] = (__u8)cfg->port;
	udp[2] = (__u8)(cfg->group_port >> 8);
	udp[3] = (__u8)cfg->group_port;
	udp[6] = 0;
	udp[7] = 0;
	udp_csum(ip, end, 4 * BLOCK, cfg->k / BLOCK, BLOCKS);
	count(TLY_XDP_C_COMPLETIONS);
	return XDP_TX;
}

INLINE __u16 get16(const __u8 *p)
{
	return (__u16)(p[0] << 8 | p[1]);
}

INLINE __u32 get32(const __u8 *p)
{
	return (__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 |
	       p[3];
}

/* one receipt of a CONFIRM: a DONE slot of that chunk takes it, its n-th
 * frees it; elsewhere the chunk was freed before.  0, or -1 when the
 * slot's lock was not taken (the CONFIRM must then go unanswered) */
INLINE int receipt(__u32 slot, __u32 tensor, __u32 chunk_exp, __u32 bit,
		   __u32 all)
{
	struct tly_xdp_slot *s = bpf_map_lookup_elem(&tly_slots, &slot);
	int freed = 0, held = 0;

	if (!s) {
		count(TLY_E_SLOT);	/* below n_slots: cannot happen */
		return 0;
	}
	if (slot_lock(s))
		return -1;
	if (s->state == TLY_XDP_DONE && s->tensor == tensor &&
	    s->chunk_exp == chunk_exp) {
		held = 1;
		s->confirmed |= bit;
		if ((s->confirmed & all) == all) {
			s->state = TLY_XDP_FREE;
			freed = 1;
		}
	}
	slot_unlock(s);
	if (freed)
		count(TLY_XDP_C_FREED);
	if (!held)
		count(TLY_XDP_C_CONFIRM_NONE);
	return 0;
}

/* the receipts after a CONFIRM's header: each chunk at its hashed slot
 * (1), else 0; each is checked before any is taken, as the parser does */
INLINE int receipts_ok(const __u8 *h, const void *end, __u8 aux, __u8 exp,
		       __u32 n_slots)
{
	int i;

	for (i = 0; i < TLY_SWITCH_RECEIPTS - 1; i++) {
		const __u8 *r = h + TLY_HDR_LEN + TLY_RECEIPT_LEN * i;
		__u16 slot;

		if (i >= aux)
			break;
		if ((const void *)(r + TLY_RECEIPT_LEN) > end)
			return 0;
		slot = get16(r + 6);
		if (slot >= n_slots ||
		    slot != tly_slot_of(get32(r), get16(r + 4), exp, n_slots))
			return 0;
	}
	return 1;
}

/* 0, or -1 when a receipt's lock was not taken (the others are taken:
 * a receipt again is harmless, so the CONFIRM's re-send repeats them) */
INLINE int receipts_take(const __u8 *h, const void *end, __u8 aux,
			 __u8 exp, __u32 bit, __u32 all)
{
	int i, err = 0;

	for (i = 0; i < TLY_SWITCH_RECEIPTS - 1; i++) {
		const __u8 *r = h + TLY_HDR_LEN + TLY_RECEIPT_LEN * i;

		if (i >= aux)
			break;
		if ((const void *)(r + TLY_RECEIPT_LEN) > end)
			break;
		if (receipt(get16(r + 6), get32(r),
			    (__u32)get16(r + 4) << 1 | exp, bit, all))
			err = -1;
	}
	return err;
}

SEC("xdp")
int tly_xdp_agg(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *f = data, *ip = f + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;
	__u8 *h = udp + TLY_UDP_LEN;
	struct tly_xdp_cfg *cfg;
	struct tly_xdp_slot *s;
	__u32 key = 0, frame_len, ip_len, udp_len, tally_len, tensor;
	__u32 ctr = 0, want_len;
	__u16 rank, slot, chunk;
	__u8 type, flags, aux, exp;
	__s8 shift, out_shift = 0;
	__u8 out_mode = 0;
	enum act a;
	__u64 now;

	cfg = bpf_map_lookup_elem(&tly_cfg, &key);
	if (!cfg)
		return XDP_PASS;
	/* not IPv4/UDP to the job's port: not ours */
	if ((void *)(h + TLY_HDR_LEN) > end) {
		if ((void *)(udp + 4) <= end && get16(f + 12) == ETH_P_IP &&
		    ip[0] == 0x45 && ip[9] == 17 &&
		    get16(udp + 2) == cfg->port) {
			count(TLY_XDP_C_RX);
			return drop(TLY_E_SHORT);
		}
		count(TLY_XDP_C_PASS);
		return XDP_PASS;
	}
	if (get16(f + 12) != ETH_P_IP || ip[0] != 0x45 || ip[9] != 17 ||
	    get16(udp + 2) != cfg->port) {
		count(TLY_XDP_C_PASS);
		return XDP_PASS;
	}
	count(TLY_XDP_C_RX);
	if (!cfg->enabled)
		return drop(TLY_E_JOB);
	/* the rest of tly_l2l4_parse() */
	frame_len = ctx->data_end - ctx->data;
	if (get16(ip + 6) & 0x3fff)
		return drop(TLY_E_L3);
	ip_len = get16(ip + 2);
	if (ip_len < TLY_IP_LEN + TLY_UDP_LEN ||
	    ip_len > frame_len - TLY_ETH_LEN)
		return drop(TLY_E_L3);
	if (ip_sum(ip) != 0xffff)
		return drop(TLY_E_L3);
	udp_len = get16(udp + 4);
	if (udp_len != ip_len - TLY_IP_LEN)
		return drop(TLY_E_L4);
	tally_len = udp_len - TLY_UDP_LEN;
	/* tly_hdr_parse(): the cookie first, then the job key */
	if (tally_len < TLY_HDR_LEN)
		return drop(TLY_E_SHORT);
	if (get32(h + TLY_COOKIE_OFF) != cfg->cookie)
		return drop(get16(h + 2) != cfg->job ? TLY_E_JOB :
						       TLY_E_COOKIE);
	if (get16(h + 2) != cfg->job)
		return drop(TLY_E_JOB);
	if (h[0] >> 4 != TLY_VERSION)
		return drop(TLY_E_VERSION);
	type = h[0] & 0x0f;
	flags = h[1];
	rank = get16(h + 4);
	slot = get16(h + 6);
	tensor = get32(h + 8);
	chunk = get16(h + 12);
	shift = (__s8)h[14];
	aux = h[15];
	if (type == 0 || type > TLY_T_MAX)
		return drop(TLY_E_TYPE);
	if (flags & ~tly_type_flags(type, TLY_PROFILE_SWITCH))
		return drop(TLY_E_FLAGS);
	if ((flags & TLY_F_EXP) && (flags & TLY_F_INT))
		return drop(TLY_E_FLAGS);
	/* narrow lanes and sign_ef (docs/compression.md) are not carried
	 * here: every lane code is dropped */
	if (flags & TLY_F_LANES)
		return drop(TLY_E_FLAGS);
	if (type != TLY_T_CONFIRM && type != TLY_T_RING_ACK && aux)
		return drop(TLY_E_LEN);
	/* the switch profile's CONFIRM names at most 8 chunks */
	if (type == TLY_T_CONFIRM && aux >= TLY_SWITCH_RECEIPTS)
		return drop(TLY_E_CONFIRM);
	want_len = TLY_HDR_LEN;
	if (type == TLY_T_DATA || type == TLY_T_RESULT || type == TLY_T_RING)
		want_len += 4 * (__u32)cfg->k;
	if (type == TLY_T_CONFIRM)
		want_len += TLY_RECEIPT_LEN * (__u32)aux;
	if (tally_len != want_len)
		return drop(TLY_E_LEN);
	if (rank >= cfg->n_workers)
		return drop(TLY_E_RANK);
	if (shift) {
		if (shift < -TLY_SHIFT_MAX)
			return drop(TLY_E_SHIFT);
		if ((type != TLY_T_DATA && type != TLY_T_RESULT) ||
		    (flags & (TLY_F_EXP | TLY_F_INT)))
			return drop(TLY_E_SHIFT);
	}
	if (type != TLY_T_DATA && type != TLY_T_CONFIRM)
		return drop(TLY_E_ROLE);
	exp = flags & TLY_F_EXP;
	if (slot >= cfg->n_slots ||
	    slot != tly_slot_of(tensor, chunk, exp, cfg->n_slots))
		return drop(TLY_E_SLOT);
	key = slot;
	s = bpf_map_lookup_elem(&tly_slots, &key);
	if (!s)
		return drop(TLY_E_SLOT);
	now = bpf_ktime_get_ns();

	if (type == TLY_T_CONFIRM) {
		__u32 all = cfg->n_workers >= 32 ? ~0u :
						   (1u << cfg->n_workers) - 1;

		if (!receipts_ok(h, end, aux, exp, cfg->n_slots))
			return drop(TLY_E_SLOT);
		count(TLY_XDP_C_CONFIRM);
		/* an ACK would release every chunk it echoes: none if a
		 * receipt was not taken (the worker sends them all again) */
		if (receipt(slot, tensor, (__u32)chunk << 1 | exp,
			    1u << rank, all) |
		    receipts_take(h, end, aux, exp, 1u << rank, all)) {
			count(TLY_XDP_C_LOCK);
			return XDP_DROP;
		}
		if (flags & TLY_F_ACK_REQ)
			return reply_hdr(ctx, TLY_T_ACK, TLY_F_RELEASED,
					 TLY_RECEIPT_LEN * (__u32)aux);
		return XDP_DROP;
	}

	count(TLY_XDP_C_DATA);
	/* cannot happen: the control plane takes only whole blocks */
	if (cfg->k % BLOCK)
		return drop(TLY_E_LEN);
	a = data_row(ctx, s, cfg->k / BLOCK, tensor, (__u32)chunk << 1 | exp,
		     flags, shift, 1u << rank, cfg->n_workers, now, &out_shift,
		     &out_mode, &ctr);
	if (ctr)
		count(ctr);
	switch (a) {
	case ACT_NONE:
		return XDP_DROP;
	case ACT_ACK:
		return reply_hdr(ctx, TLY_T_ACK, 0, 0);
	case ACT_BUSY:
		return reply_hdr(ctx, TLY_T_BUSY, 0, 0);
	case ACT_RESULT_ALL:
		return result_out(ctx, cfg, out_mode, out_shift, 1);
	case ACT_RESULT_ONE:
		return result_out(ctx, cfg, out_mode, out_shift, 0);
	case ACT_MISMATCH:
		return drop(TLY_E_MISMATCH);
	case ACT_LOCK:
		count(TLY_XDP_C_LOCK);
		return XDP_DROP;
	default:
		return drop(TLY_E_LEN);
	}
}

/* the sweep's state across bpf_loop() iterations */
struct sweep_ctx {
	__u32 start;
	__u32 freed;
	__u32 n_agg;
	__u32 n_done;
	__u64 evict_ns;
};

static long sweep_one(__u32 i, void *arg)
{
	struct sweep_ctx *c = arg;
	__u32 idx = c->start + i;
	struct tly_xdp_slot *s = bpf_map_lookup_elem(&tly_slots, &idx);
	unsigned long irq = 0;
	__u64 now;

	if (!s)
		return 1;	/* past the pool: stop */
	now = bpf_ktime_get_ns();
	if (sweep_lock(s, &irq))
		return 0;	/* the next sweep looks again */
	/* signed: a claim after now was read is younger than now */
	if (s->state == TLY_XDP_AGG &&
	    (__s64)(now - s->claim_ns) >= (__s64)c->evict_ns) {
		s->state = TLY_XDP_FREE;
		c->freed++;
	} else if (s->state == TLY_XDP_AGG) {
		c->n_agg++;
	} else if (s->state == TLY_XDP_DONE) {
		c->n_done++;
	}
	sweep_unlock(s, &irq);
	return 0;
}

/*
 * The control plane's eviction sweep (docs/switch-profile.md), run with
 * BPF_PROG_TEST_RUN on a struct tly_xdp_sweep: AGG slots of
 * [start, start + count) claimed evict_ns or longer ago are freed, under
 * the same lock as the packet path.  Also counts what the range holds.
 */
SEC("xdp")
int tly_xdp_sweep(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct tly_xdp_sweep *w = data;
	struct sweep_ctx c = { 0 };
	__u32 n;

	if ((void *)(w + 1) > end)
		return XDP_ABORTED;
	c.start = w->start;
	c.evict_ns = w->evict_ns;
	n = w->count;
	if (n > TLY_XDP_SWEEP_BATCH)
		n = TLY_XDP_SWEEP_BATCH;
	bpf_loop(n, sweep_one, &c, 0);
	w->freed = c.freed;
	w->n_agg = c.n_agg;
	w->n_done = c.n_done;
	if (c.freed) {
		__u32 k = TLY_XDP_C_EVICTIONS;
		__u64 *v = bpf_map_lookup_elem(&tly_counters, &k);

		if (v)
			*v += c.freed;
	}
	return XDP_PASS;
}
