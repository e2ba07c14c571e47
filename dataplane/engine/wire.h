/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h - the tally packet: a fixed 20-byte header after Ethernet/IPv4/UDP,
 * then a payload whose length is fixed by the packet type (see
 * docs/protocol.md for the offset table and the state machines).
 *
 * The header's last word is the epoch's cookie, derived from the job's
 * secret by the control plane (ctrl/auth.h); the parser compares it first,
 * before any other field is believed.
 *
 * Every field sits at a fixed offset in network byte order.  Parsing
 * validates everything a receiver later relies on, so the engine never
 * trusts a byte it did not check.
 */
#ifndef TALLY_DATAPLANE_ENGINE_WIRE_H
#define TALLY_DATAPLANE_ENGINE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TLY_VERSION		2	/* 2: the cookie */
#define TLY_HDR_LEN		20
#define TLY_COOKIE_OFF		16
#define TLY_ETH_LEN		14
#define TLY_IP_LEN		20
#define TLY_UDP_LEN		8
#define TLY_L2L4_LEN		(TLY_ETH_LEN + TLY_IP_LEN + TLY_UDP_LEN)
/* preamble + SFD (8), FCS (4) and inter-frame gap (12) */
#define TLY_WIRE_EXTRA		24
#define TLY_MAX_WORKERS		64
#define TLY_MAX_NODES		1024
#define TLY_K_MIN		8
#define TLY_K_MAX		1024
/* the largest K whose DATA packet fits a 1500-byte IP MTU (363) */
#define TLY_K_MTU1500		((1500 - TLY_IP_LEN - TLY_UDP_LEN - \
				  TLY_HDR_LEN) / 4)
/* a CONFIRM names at most this many ranges (aux is one byte) */
#define TLY_CONFIRM_MAX		255
#define TLY_CONFIRM_RANGE_MAX	256
#define TLY_SHIFT_MAX		127
/* chunks per tensor, and slots per pool: both fields are 16 bits wide */
#define TLY_MAX_CHUNKS		65536
#define TLY_MAX_SLOTS		65536
/* the switch profile (docs/switch-profile.md): every bitmap one 32-bit
 * register, K one pipeline pass of 64 lanes plus recirculations */
#define TLY_SWITCH_MAX_WORKERS	32
#define TLY_SWITCH_PASS_LANES	64
/* K is whole half passes: a K that is not whole passes takes its last
 * pass at half width */
#define TLY_SWITCH_K_STEP	(TLY_SWITCH_PASS_LANES / 2)
/* the largest K whose DATA frame a 1500-byte IP MTU carries: 11 half
 * passes, 1408 bytes of payload (12 would be 1536); the default */
#define TLY_SWITCH_K_MTU1500	352
_Static_assert(TLY_SWITCH_K_MTU1500 <= TLY_K_MTU1500 &&
	       TLY_SWITCH_K_MTU1500 % TLY_SWITCH_K_STEP == 0,
	       "TLY_SWITCH_K_MTU1500");
/*
 * The largest K on links with jumbo frames: 26 half passes, a 3376-byte
 * IP packet (3390-byte frame), which one XDP buffer holds.  Without
 * multi-buffer XDP a driver takes frames of one 4 KiB page less its
 * 256-byte headroom and the skb's shared info: an IP MTU of 3506 on veth
 * here (docs/switch-profile.md, "Jumbo frames").
 */
#define TLY_SWITCH_K_MAX	832
_Static_assert(TLY_SWITCH_K_MAX <= TLY_K_MAX &&
	       TLY_SWITCH_K_MAX % TLY_SWITCH_K_STEP == 0, "TLY_SWITCH_K_MAX");
/* the IP packet of a DATA of @k lanes: what the links' MTU must carry */
#define TLY_DATA_IP_LEN(k)	(TLY_IP_LEN + TLY_UDP_LEN + TLY_HDR_LEN + 4 * (k))
/*
 * The switch profile's CONFIRM names up to this many chunks: the header's
 * and aux (at most 7) more, 8 bytes each (tensor, chunk, slot), one slot
 * look-up each: a pipeline pass plus a recirculation per extra chunk.  Its
 * ACK with RELEASED echoes them.
 */
#define TLY_SWITCH_RECEIPTS	8
#define TLY_RECEIPT_LEN		8

/* what the aggregator's per-packet work may be (tly_wire_limits.profile) */
enum tly_profile {
	TLY_PROFILE_SOFTWARE = 0,	/* docs/protocol.md sections 3, 4 */
	TLY_PROFILE_SWITCH = 1,		/* docs/switch-profile.md */
};

/* K values the switch profile allows: whole half passes, 32 .. 832 (above
 * 352 the links need jumbo frames) */
static inline int tly_switch_k_ok(uint32_t k)
{
	return k && k <= TLY_SWITCH_K_MAX && k % TLY_SWITCH_K_STEP == 0;
}

enum tly_type {
	TLY_T_DATA = 1,		/* worker -> aggregator: a contribution */
	TLY_T_RESULT = 2,	/* aggregator -> worker: the sum */
	TLY_T_ACK = 3,		/* aggregator -> worker: contribution held */
	TLY_T_BUSY = 4,		/* aggregator -> worker: no room, retry later */
	TLY_T_CONFIRM = 5,	/* worker -> aggregator: results received */
	TLY_T_RING = 6,		/* ring hop: partial or final chunk */
	TLY_T_RING_ACK = 7,	/* ring hop received */
	TLY_T_MAX = 7,
};

enum tly_flag {
	TLY_F_EXP = 0x01,	/* exponent round: combine by max, not sum */
	TLY_F_INT = 0x02,	/* exact int32 mode: no scale */
	TLY_F_ACK_REQ = 0x04,	/* sender wants an ACK even if no result */
	TLY_F_RETX = 0x08,	/* retransmission or probe */
	TLY_F_FALLBACK = 0x10,	/* held by the aggregator's fallback store */
	TLY_F_REFUSE = 0x20,	/* RING_ACK: not taken, send again later */
	TLY_F_RELEASED = 0x40,	/* switch profile, ACK: answers a CONFIRM
				 * (the chunk's receipt is in, or it was
				 * freed before), not a DATA */
	TLY_F_ALL = 0x7f,
	/* DATA and RESULT: the lane code (docs/compression.md, section 7):
	 * 00 int32 words, 01 (LANE16) 2K int16 lanes, 10 (LANE8) 4K int8
	 * lanes, 11 (SIGN) sign_ef: a scale word and 1-bit signs up, the
	 * scale sum and the 1-bit vote down.
	 * Never with EXP or INT; ACK and BUSY never carry it (0x40 is the
	 * switch profile's RELEASED there) */
	TLY_F_LANE16 = 0x40,
	TLY_F_LANE8 = 0x80,
	TLY_F_LANES = 0xc0,
	TLY_F_SIGN = 0xc0,
};

/* bytes per lane of a DATA/RESULT's lane code (4: int32) */
static inline unsigned int tly_lane_bytes(uint8_t flags)
{
	switch (flags & TLY_F_LANES) {
	case TLY_F_LANE16:
		return 2;
	case TLY_F_LANE8:
	case TLY_F_SIGN:	/* the aggregator's count lanes */
		return 1;
	default:
		return 4;
	}
}

/* whether the flags' lane code is one this engine carries, and allowed
 * with the rest of the flags */
static inline int tly_lanes_ok(uint8_t flags)
{
	if (!(flags & TLY_F_LANES))
		return 1;
	return !(flags & (TLY_F_EXP | TLY_F_INT));
}

/*
 * The aux byte of DATA, RESULT and their EXP forms
 * (docs/compression.md, section 7): an exponent round's combine
 * (TLY_AUX_COUNT: max and count of the lanes that are not TLY_EXP_NONE,
 * block_topk); a sparse block's DATA (lane code 00, not EXP or INT): its
 * sender count m(b), 1 <= m <= @n_ranks, with TLY_AUX_PULL for a
 * non-sender's PULL.  A RESULT of a data chunk carries no aux.
 */
#define TLY_AUX_COUNT	0x01	/* EXP: max-and-count round */
#define TLY_AUX_PULL	0x80	/* sparse DATA: fetch the RESULT, add nothing */
#define TLY_AUX_M	0x7f	/* sparse DATA: m(b) */

static inline int tly_aux_ok(uint8_t type, uint8_t flags, uint8_t aux,
			     uint16_t n_ranks)
{
	if (!aux)
		return 1;
	if (type != TLY_T_DATA && type != TLY_T_RESULT)
		return 0;
	if (flags & TLY_F_EXP)
		return aux == TLY_AUX_COUNT;
	if (type != TLY_T_DATA || (flags & (TLY_F_LANES | TLY_F_INT)))
		return 0;
	return (aux & TLY_AUX_M) >= 1 && (aux & TLY_AUX_M) <= n_ranks;
}

/* parse verdicts; each has a drop counter (tly_drop_name()) */
enum tly_drop {
	TLY_OK = 0,
	TLY_E_SHORT,		/* shorter than the headers */
	TLY_E_L2,		/* not IPv4 in Ethernet */
	TLY_E_L3,		/* bad IPv4: options, fragment, checksum */
	TLY_E_L4,		/* not UDP to our port, bad UDP length or
				 * a non-zero UDP checksum that is wrong */
	TLY_E_VERSION,
	TLY_E_TYPE,
	TLY_E_FLAGS,
	TLY_E_JOB,		/* another job's key (or epoch) */
	TLY_E_COOKIE,		/* the job's key, not its epoch's cookie */
	TLY_E_LEN,		/* length does not match the type */
	TLY_E_RANK,
	TLY_E_SLOT,		/* slot out of range or not the chunk's slot */
	TLY_E_SHIFT,
	TLY_E_CONFIRM,		/* malformed confirm range */
	TLY_E_ROLE,		/* a type this endpoint never receives */
	TLY_E_STALE,		/* well formed, but nothing to apply it to */
	TLY_E_MISMATCH,		/* disagrees with the slot (shift or mode) */
	TLY_E_COUNT
};

/* decoded header, host byte order */
struct tly_hdr {
	uint8_t type;
	uint8_t flags;
	uint16_t job;
	uint16_t rank;		/* worker: DATA sender, RESULT target */
	uint16_t slot;		/* slot index; the hop for ring packets */
	uint32_t tensor;
	uint16_t chunk;
	int8_t shift;		/* block scale: value = int * 2^-shift */
	uint8_t aux;		/* CONFIRM: number of ranges (the switch
				 * profile: of chunks after the one the
				 * header names; its ACK with RELEASED
				 * echoes them); RING_ACK: chunks
				 * chunk .. chunk + aux are acknowledged */
	uint32_t cookie;	/* the epoch's, from the job secret */
};

/* what a receiver checks a header against */
struct tly_wire_limits {
	uint16_t job;
	uint32_t cookie;
	uint16_t k;		/* 32-bit payload words of DATA/RESULT/RING */
	uint16_t n_ranks;	/* rank must be below this */
	uint32_t n_slots;	/* slot must be below this (aggregator pool) */
	uint16_t n_hops;	/* ring hop must be below this */
	uint8_t profile;	/* enum tly_profile: which CONFIRM and ACK
				 * forms are accepted */
	uint8_t rank_all;	/* 1: a RESULT of rank TLY_RANK_ALL is
				 * accepted (the aggregator's RESULT to a
				 * multicast result group, either profile:
				 * docs/switch-profile.md,
				 * docs/transport-udp.md) */
};

/* the rank of a RESULT sent once to every worker (the result group) */
#define TLY_RANK_ALL	0xffff

/* L2-L4 address of a node (IPv4 and port in host byte order) */
struct tly_addr {
	uint8_t mac[6];
	uint32_t ip;
	uint16_t port;
};

/*
 * Network byte order: the one set of helpers.  tly_be16/tly_be32 convert a
 * value (each is its own inverse); tly_get and tly_put read and write a
 * field at any alignment.
 */
static inline uint16_t tly_be16(uint16_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return __builtin_bswap16(v);
#else
	return v;
#endif
}

static inline uint32_t tly_be32(uint32_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return __builtin_bswap32(v);
#else
	return v;
#endif
}

static inline uint16_t tly_get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return tly_be16(v);
}

static inline uint32_t tly_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return tly_be32(v);
}

static inline void tly_put16(uint8_t *p, uint16_t v)
{
	v = tly_be16(v);
	memcpy(p, &v, 2);
}

static inline void tly_put32(uint8_t *p, uint32_t v)
{
	v = tly_be32(v);
	memcpy(p, &v, 4);
}

/* a result group is an IPv4 multicast address (224.0.0.0/4, host order)
 * with a port */
static inline int tly_group_ok(uint32_t group_ip, uint16_t group_port)
{
	return (group_ip >> 28) == 0xe && group_port != 0;
}

/* the MAC of a multicast IPv4 group (RFC 1112: 01:00:5e and the low 23
 * bits of the address, host order): the switch profile's result group */
static inline void tly_group_mac(uint32_t group_ip, uint8_t mac[6])
{
	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = (uint8_t)(group_ip >> 16 & 0x7f);
	mac[4] = (uint8_t)(group_ip >> 8);
	mac[5] = (uint8_t)group_ip;
}

/* the flag bits each type may carry in each profile (docs/protocol.md,
 * section 1; docs/switch-profile.md): the one table, the XDP aggregator's
 * too */
static inline uint8_t tly_type_flags(uint8_t type, uint8_t profile)
{
	switch (type) {
	case TLY_T_DATA:
		return TLY_F_EXP | TLY_F_INT | TLY_F_ACK_REQ | TLY_F_RETX |
		       TLY_F_LANES;
	case TLY_T_RESULT:
		return TLY_F_EXP | TLY_F_INT | TLY_F_RETX | TLY_F_FALLBACK |
		       TLY_F_LANES;
	case TLY_T_ACK:
		if (profile == TLY_PROFILE_SWITCH)
			return TLY_F_EXP | TLY_F_INT | TLY_F_RELEASED;
		return TLY_F_EXP | TLY_F_INT | TLY_F_FALLBACK;
	case TLY_T_BUSY:
		if (profile == TLY_PROFILE_SWITCH)
			return TLY_F_EXP | TLY_F_INT;
		return TLY_F_EXP | TLY_F_INT | TLY_F_FALLBACK;
	case TLY_T_CONFIRM:
		/* the switch profile's: chunks named as DATA names them */
		if (profile == TLY_PROFILE_SWITCH)
			return TLY_F_EXP | TLY_F_ACK_REQ | TLY_F_RETX;
		return 0;
	case TLY_T_RING:
		return TLY_F_INT | TLY_F_RETX;
	case TLY_T_RING_ACK:
		return TLY_F_INT | TLY_F_REFUSE;
	default:
		return 0;
	}
}

static inline size_t tly_payload_len(uint8_t type, uint16_t k, uint8_t aux)
{
	switch (type) {
	case TLY_T_DATA:
	case TLY_T_RESULT:
	case TLY_T_RING:
		return (size_t)k * 4;
	case TLY_T_CONFIRM:
	case TLY_T_ACK:		/* aux > 0 only with RELEASED */
		return (size_t)aux * 8;
	default:
		return 0;
	}
}

/* the switch profile's receipt after a CONFIRM's header (and in its
 * ACK): tensor, chunk, the chunk's hashed slot; EXP is the header's */
static inline void tly_receipt_put(uint8_t *p, uint32_t tensor,
				   uint16_t chunk, uint16_t slot)
{
	tly_put32(p, tensor);
	tly_put16(p + 4, chunk);
	tly_put16(p + 6, slot);
}

void tly_hdr_write(uint8_t *p, const struct tly_hdr *h);
enum tly_drop tly_hdr_parse(const uint8_t *p, size_t len,
			    const struct tly_wire_limits *lim,
			    struct tly_hdr *h);

/*
 * The L2-L4 part.  tly_l2l4_write() fills TLY_L2L4_LEN bytes for a tally
 * packet of @tally_len bytes; DSCP carries the priority class.
 * tly_l2l4_parse() validates a frame and returns the offset of the tally
 * header and the tally packet's length in *@tally_len.
 */
void tly_l2l4_write(uint8_t *p, const struct tly_addr *src,
		    const struct tly_addr *dst, uint8_t dscp,
		    size_t tally_len);
enum tly_drop tly_l2l4_parse(const uint8_t *p, size_t len, uint16_t port,
			     size_t *tally_len);
/* point a built frame at another node (multicast replication) */
void tly_frame_readdress(uint8_t *frame, const struct tly_addr *dst,
			 uint16_t dst_rank);
/* the same for a bare tally packet: only the rank field */
void tly_frame_readdress_bare(uint8_t *pkt, uint16_t dst_rank);

uint16_t tly_ip_checksum(const uint8_t *ip_hdr);
/*
 * The UDP checksum (RFC 768) of the datagram after the 20-byte IPv4
 * header @ip_hdr, its length from the UDP header: tly_udp_sum() is the
 * one's complement sum over the pseudo-header and the datagram, checksum
 * field included (0xffff: a checksum that is right); tly_udp_checksum()
 * the value to store (the field's content ignored; never 0, which means
 * none).
 */
uint16_t tly_udp_sum(const uint8_t *ip_hdr);
uint16_t tly_udp_checksum(const uint8_t *ip_hdr);

/*
 * One's complement sum of a 20-byte IPv4 header (0xffff: checksum good).
 * Five 32-bit halves into 64 bits (at most 35 bits), then end-around
 * carries at 16 bits: 2^16 = 1 mod 0xffff, and three folds bring 35 bits
 * down to 16.
 */
static inline uint16_t tly_ip_sum(const uint8_t *ip)
{
	uint64_t a, b, sum;
	uint32_t c;

	memcpy(&a, ip, 8);
	memcpy(&b, ip + 8, 8);
	memcpy(&c, ip + 16, 4);
	sum = (uint32_t)a + (a >> 32) + (uint32_t)b + (b >> 32) + c;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return tly_be16((uint16_t)sum);
}
const char *tly_drop_name(enum tly_drop d);

/*
 * Identifiers every worker computes alike without coordination.
 * tly_tensor_id: from the application's tensor key, the iteration and the
 * partition.  tly_chunk_hash: picks the slot in an aggregator's pool.
 */
uint32_t tly_tensor_id(uint64_t key, uint32_t iteration, uint32_t partition);

/* a chunk's key: what a slot holds and what tly_chunk_hash() mixes */
static inline uint64_t tly_chunk_key(uint32_t tensor, uint16_t chunk,
				     uint8_t exp)
{
	return ((uint64_t)tensor << 32) | ((uint32_t)chunk << 1) | exp;
}

static inline uint64_t tly_key_hash(uint64_t x)
{
	/* splitmix64 finaliser */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t tly_chunk_hash(uint32_t tensor, uint16_t chunk,
				      uint8_t exp)
{
	return tly_key_hash(tly_chunk_key(tensor, chunk, exp));
}

/* Lemire's multiply-shift maps a 32-bit hash onto [0, n) without a divide */
static inline uint32_t tly_hash_range(uint32_t h, uint32_t n)
{
	return (uint32_t)(((uint64_t)h * n) >> 32);
}

static inline uint32_t tly_slot_of(uint32_t tensor, uint16_t chunk,
				   uint8_t exp, uint32_t n_slots)
{
	return tly_hash_range((uint32_t)tly_chunk_hash(tensor, chunk, exp),
			      n_slots);
}

/*
 * Co-located shards: consecutive chunks of a tensor go round-robin over the
 * aggregators from a start the tensor id hashes to, so every daemon owns
 * the same share (+-1 chunk) of every tensor; a hash per chunk would leave
 * the busiest daemon with several percent more than the mean.
 */
static inline uint32_t tly_shard_of(uint32_t tensor, uint16_t chunk,
				    uint8_t exp, uint32_t n_shards)
{
	uint32_t start = (uint32_t)(tly_chunk_hash(tensor, 0, 0) >> 32);

	return (uint32_t)(((uint64_t)start + chunk + (exp ? n_shards / 2 : 0)) %
			  n_shards);
}

/*
 * Where an aggregator's fallback store starts probing for a chunk
 * (hash2 % n_fallback, docs/protocol.md section 11): bits 40..63 of the
 * chunk's hash, modulo the store's size.  tly_fallback_hash() is what the
 * aggregator reduces (with a divide-free modulo).
 */
static inline uint32_t tly_fallback_hash(uint64_t hash)
{
	return (uint32_t)(hash >> 40);
}

static inline uint32_t tly_fallback_of(uint32_t tensor, uint16_t chunk,
				       uint8_t exp, uint32_t n_fallback)
{
	return tly_fallback_hash(tly_chunk_hash(tensor, chunk, exp)) %
	       n_fallback;
}

/*
 * The 16-bit job key of the wire for a job's 32-bit key and a roster
 * epoch (a new value per epoch, so a stray of the last epoch is counted
 * as another job's).
 */
static inline uint16_t tly_wire_job(uint32_t job_key, uint32_t epoch)
{
	return (uint16_t)((job_key * 0x9e3779b1u) ^ (epoch * 0x85ebca6bu) ^
			  (job_key >> 16));
}

/*
 * The dataplane thread (shard) that carries a tensor when a job runs
 * @n_threads of them: shard s of every daemon talks to shard s of the
 * others, on UDP port base + s.  The id is mixed first: the engine picks
 * slots from its own bits.
 */
static inline uint32_t tly_thread_shard(uint32_t id, uint32_t n_threads)
{
	uint32_t h = (id ^ (id >> 15)) * 0x2c1b3c6du;

	return tly_hash_range(h ^ (h >> 12), n_threads);
}

/*
 * The common case on an aggregator, checked in a few word compares: a DATA
 * frame of this job.  tly_data_rx_init() precomputes what each fixed field
 * of such a frame must hold (masks and values in wire order).
 *
 * tly_data_rx() checks all the general path does but one: envelope
 * (EtherType, IPv4 without options or fragments, checksum, UDP port and
 * lengths), version and type, flags, job key, cookie, length, aux, rank,
 * shift, and the slot's bound.  It fills *h as tly_hdr_parse() would,
 * *key (tly_chunk_key()) and *dscp.  The one left is that the slot is the
 * chunk's hashed slot, which costs a hash: tly_data_slot_ok() checks it,
 * and a receiver that can prove it otherwise may skip the hash (the
 * aggregator: a slot already holding this very key was checked when it
 * was claimed).  A frame is a DATA with aux 0 the general path
 * (tly_l2l4_parse() and tly_hdr_parse()) accepts exactly when both say 1;
 * for any other frame one says 0, and the general path names the drop or
 * takes it (a DATA with aux: block_topk's m(b), PULL, a counted round; a
 * frame with a UDP checksum, which the general path verifies).
 */
struct tly_data_rx {
	uint64_t mask[5];	/* frame bytes 12, 20, 34; header bytes 0, 8 */
	uint64_t want[5];
	uint32_t cookie;	/* wire order */
	uint32_t n_slots;
	uint16_t n_ranks;
	uint16_t off;		/* the tally header's offset in the frame */
	uint32_t len_min;	/* frame length bounds */
	uint32_t len_max;
};

void tly_data_rx_init(struct tly_data_rx *f,
		      const struct tly_wire_limits *lim, int l2l4,
		      uint16_t port);

static inline uint64_t tly_load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline int tly_data_rx(const struct tly_data_rx *f,
			      const uint8_t *frame, size_t len,
			      struct tly_hdr *h, uint64_t *key,
			      uint8_t *dscp)
{
	const uint8_t *p = frame + f->off;
	uint64_t bad;
	uint32_t cookie;
	uint8_t flags;
	int8_t shift;

	if (len < f->len_min || len > f->len_max)
		return 0;
	/* bare packets: the three envelope masks are 0 (the bytes exist:
	 * a DATA packet is at least 52 bytes long) */
	memcpy(&cookie, p + TLY_COOKIE_OFF, 4);
	bad = (uint64_t)(cookie ^ f->cookie);
	bad |= (tly_load64(frame + 12) & f->mask[0]) ^ f->want[0];
	bad |= (tly_load64(frame + 20) & f->mask[1]) ^ f->want[1];
	bad |= (tly_load64(frame + 34) & f->mask[2]) ^ f->want[2];
	bad |= (tly_load64(p) & f->mask[3]) ^ f->want[3];
	bad |= (tly_load64(p + 8) & f->mask[4]) ^ f->want[4];
	if (bad)
		return 0;
	if (f->off && tly_ip_sum(frame + TLY_ETH_LEN) != 0xffff)
		return 0;
	flags = p[1];
	shift = (int8_t)p[14];
	h->type = TLY_T_DATA;
	h->flags = flags;
	h->job = tly_get16(p + 2);
	h->rank = tly_get16(p + 4);
	h->slot = tly_get16(p + 6);
	h->tensor = tly_get32(p + 8);
	h->chunk = tly_get16(p + 12);
	h->shift = shift;
	h->aux = 0;
	h->cookie = tly_be32(cookie);
	if ((flags & (TLY_F_EXP | TLY_F_INT)) == (TLY_F_EXP | TLY_F_INT) ||
	    !tly_lanes_ok(flags) || h->rank >= f->n_ranks || h->slot >= f->n_slots)
		return 0;
	if (shift && (shift < -TLY_SHIFT_MAX ||
		      (flags & (TLY_F_EXP | TLY_F_INT))))
		return 0;
	*key = tly_chunk_key(h->tensor, h->chunk, flags & TLY_F_EXP);
	*dscp = f->off ? frame[TLY_ETH_LEN + 1] >> 2 : 0;
	return 1;
}

/* the rest of tly_data_rx(): the slot is the chunk's hashed slot */
static inline int tly_data_slot_ok(const struct tly_data_rx *f,
				   const struct tly_hdr *h, uint64_t key,
				   uint64_t *hash)
{
	*hash = tly_key_hash(key);
	return h->slot == tly_hash_range((uint32_t)*hash, f->n_slots);
}

#endif /* TALLY_DATAPLANE_ENGINE_WIRE_H */
