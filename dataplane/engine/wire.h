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
	TLY_F_ALL = 0x3f,
};

/* parse verdicts; each has a drop counter (tly_drop_name()) */
enum tly_drop {
	TLY_OK = 0,
	TLY_E_SHORT,		/* shorter than the headers */
	TLY_E_L2,		/* not IPv4 in Ethernet */
	TLY_E_L3,		/* bad IPv4: options, fragment, checksum */
	TLY_E_L4,		/* not UDP to our port, bad UDP length */
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
	uint8_t aux;		/* CONFIRM: number of ranges; RING_ACK: chunks
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
};

/* L2-L4 address of a node (IPv4 and port in host byte order) */
struct tly_addr {
	uint8_t mac[6];
	uint32_t ip;
	uint16_t port;
};

static inline size_t tly_payload_len(uint8_t type, uint16_t k, uint8_t aux)
{
	switch (type) {
	case TLY_T_DATA:
	case TLY_T_RESULT:
	case TLY_T_RING:
		return (size_t)k * 4;
	case TLY_T_CONFIRM:
		return (size_t)aux * 8;
	default:
		return 0;
	}
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
const char *tly_drop_name(enum tly_drop d);

/*
 * Identifiers every worker computes alike without coordination.
 * tly_tensor_id: from the application's tensor key, the iteration and the
 * partition.  tly_chunk_hash: picks the slot in an aggregator's pool.
 */
uint32_t tly_tensor_id(uint64_t key, uint32_t iteration, uint32_t partition);

static inline uint64_t tly_chunk_hash(uint32_t tensor, uint16_t chunk,
				      uint8_t exp)
{
	uint64_t x = ((uint64_t)tensor << 32) | ((uint32_t)chunk << 1) | exp;

	/* splitmix64 finaliser */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
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

#endif /* TALLY_DATAPLANE_ENGINE_WIRE_H */
