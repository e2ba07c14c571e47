// SPDX-License-Identifier: BSD-3-Clause
/*
 * wire.c - encode and validate tally headers and their L2-L4 envelope.
 */
#include "dataplane/engine/wire.h"

#include <arpa/inet.h>
#include <string.h>

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return ntohs(v);
}

static inline uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

void tly_hdr_write(uint8_t *p, const struct tly_hdr *h)
{
	p[0] = (uint8_t)(TLY_VERSION << 4 | (h->type & 0x0f));
	p[1] = h->flags;
	put16(p + 2, h->job);
	put16(p + 4, h->rank);
	put16(p + 6, h->slot);
	put32(p + 8, h->tensor);
	put16(p + 12, h->chunk);
	p[14] = (uint8_t)h->shift;
	p[15] = h->aux;
	put32(p + TLY_COOKIE_OFF, h->cookie);
}

/* allowed flag bits per type */
static uint8_t type_flags(uint8_t type)
{
	switch (type) {
	case TLY_T_DATA:
		return TLY_F_EXP | TLY_F_INT | TLY_F_ACK_REQ | TLY_F_RETX;
	case TLY_T_RESULT:
		return TLY_F_EXP | TLY_F_INT | TLY_F_RETX | TLY_F_FALLBACK;
	case TLY_T_ACK:
	case TLY_T_BUSY:
		return TLY_F_EXP | TLY_F_INT | TLY_F_FALLBACK;
	case TLY_T_RING:
		return TLY_F_INT | TLY_F_RETX;
	case TLY_T_RING_ACK:
		return TLY_F_INT | TLY_F_REFUSE;
	default:
		return 0;
	}
}

static enum tly_drop confirm_check(const uint8_t *p, const struct tly_hdr *h)
{
	unsigned int i;

	if (h->aux == 0 || h->slot || h->tensor || h->chunk)
		return TLY_E_CONFIRM;
	for (i = 0; i < h->aux; i++) {
		uint32_t w = get32(p + TLY_HDR_LEN + 8 * i + 4);
		uint32_t first = w >> 16, count = (w & 0xff) + 1;

		if (w & 0x7f00)
			return TLY_E_CONFIRM;
		if (first + count > 0x10000)
			return TLY_E_CONFIRM;
	}
	return TLY_OK;
}

/* the checks on a decoded header (a local copy: no aliasing with @p) */
static inline enum tly_drop hdr_check(const struct tly_hdr *h,
				      const uint8_t *p, size_t len,
				      const struct tly_wire_limits *lim)
{
	if (h->type == 0 || h->type > TLY_T_MAX)
		return TLY_E_TYPE;
	if (h->flags & ~type_flags(h->type))
		return TLY_E_FLAGS;
	if ((h->flags & TLY_F_EXP) && (h->flags & TLY_F_INT))
		return TLY_E_FLAGS;
	if (h->type != TLY_T_CONFIRM && h->type != TLY_T_RING_ACK && h->aux)
		return TLY_E_LEN;
	if (len != TLY_HDR_LEN + tly_payload_len(h->type, lim->k, h->aux))
		return TLY_E_LEN;
	if (h->rank >= lim->n_ranks)
		return TLY_E_RANK;
	if (h->shift) {
		if (h->shift < -TLY_SHIFT_MAX)
			return TLY_E_SHIFT;
		if ((h->type != TLY_T_DATA && h->type != TLY_T_RESULT) ||
		    (h->flags & (TLY_F_EXP | TLY_F_INT)))
			return TLY_E_SHIFT;
	}
	switch (h->type) {
	case TLY_T_DATA:
	case TLY_T_RESULT:
	case TLY_T_ACK:
	case TLY_T_BUSY:
		if (h->slot >= lim->n_slots ||
		    h->slot != tly_slot_of(h->tensor, h->chunk,
					   !!(h->flags & TLY_F_EXP),
					   lim->n_slots))
			return TLY_E_SLOT;
		break;
	case TLY_T_RING:
	case TLY_T_RING_ACK:
		if (h->slot >= lim->n_hops)
			return TLY_E_SLOT;
		if ((uint32_t)h->chunk + h->aux > 0xffff)
			return TLY_E_LEN;
		break;
	case TLY_T_CONFIRM:
		return confirm_check(p, h);
	}
	return TLY_OK;
}

enum tly_drop tly_hdr_parse(const uint8_t *p, size_t len,
			    const struct tly_wire_limits *lim,
			    struct tly_hdr *out)
{
	struct tly_hdr h = { 0 };
	enum tly_drop d;

	if (len < TLY_HDR_LEN)
		return TLY_E_SHORT;
	/*
	 * First check: one 32-bit equality at a fixed offset, as a switch
	 * would do it.  Nothing else of a packet without the epoch's cookie
	 * is believed; the job key only names the drop (another job or
	 * epoch, or a guessed key without the secret).
	 */
	h.cookie = get32(p + TLY_COOKIE_OFF);
	h.job = get16(p + 2);
	if (h.cookie != lim->cookie) {
		*out = h;
		return h.job != lim->job ? TLY_E_JOB : TLY_E_COOKIE;
	}
	if (h.job != lim->job) {
		*out = h;
		return TLY_E_JOB;
	}
	if (p[0] >> 4 != TLY_VERSION)
		return TLY_E_VERSION;
	h.type = p[0] & 0x0f;
	h.flags = p[1];
	h.rank = get16(p + 4);
	h.slot = get16(p + 6);
	h.tensor = get32(p + 8);
	h.chunk = get16(p + 12);
	h.shift = (int8_t)p[14];
	h.aux = p[15];
	d = hdr_check(&h, p, len, lim);
	*out = h;
	return d;
}

/* one's complement sum of the 20-byte header, in host order words */
static uint16_t ip_sum(const uint8_t *ip)
{
	uint32_t w[5];
	uint64_t sum = 0;
	int i;

	memcpy(w, ip, sizeof(w));
	for (i = 0; i < 5; i++)
		sum += w[i];
	sum = (sum & 0xffffffffu) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)ntohs((uint16_t)sum);
}

/* the checksum to store (the header's checksum field is ignored) */
uint16_t tly_ip_checksum(const uint8_t *ip)
{
	uint32_t sum = ip_sum(ip) + (uint32_t)(uint16_t)~get16(ip + 10);

	sum = (sum & 0xffff) + (sum >> 16);	/* minus the old field */
	return (uint16_t)~sum;
}

void tly_l2l4_write(uint8_t *p, const struct tly_addr *src,
		    const struct tly_addr *dst, uint8_t dscp,
		    size_t tally_len)
{
	uint8_t *ip = p + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;

	memcpy(p, dst->mac, 6);
	memcpy(p + 6, src->mac, 6);
	put16(p + 12, 0x0800);
	ip[0] = 0x45;
	ip[1] = (uint8_t)(dscp << 2);
	put16(ip + 2, (uint16_t)(TLY_IP_LEN + TLY_UDP_LEN + tally_len));
	put16(ip + 4, 0);
	put16(ip + 6, 0x4000);		/* don't fragment */
	ip[8] = 64;
	ip[9] = 17;
	put32(ip + 12, src->ip);
	put32(ip + 16, dst->ip);
	put16(ip + 10, tly_ip_checksum(ip));
	put16(udp, src->port);
	put16(udp + 2, dst->port);
	put16(udp + 4, (uint16_t)(TLY_UDP_LEN + tally_len));
	put16(udp + 6, 0);		/* no UDP checksum (IPv4 allows it) */
}

enum tly_drop tly_l2l4_parse(const uint8_t *p, size_t len, uint16_t port,
			     size_t *tally_len)
{
	const uint8_t *ip = p + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;
	uint16_t ip_len, udp_len;

	if (len < TLY_L2L4_LEN)
		return TLY_E_SHORT;
	if (get16(p + 12) != 0x0800)
		return TLY_E_L2;
	if (ip[0] != 0x45 || ip[9] != 17 || (get16(ip + 6) & 0x3fff))
		return TLY_E_L3;
	ip_len = get16(ip + 2);
	/* Ethernet may pad short frames: the IP length is authoritative */
	if (ip_len < TLY_IP_LEN + TLY_UDP_LEN || ip_len > len - TLY_ETH_LEN)
		return TLY_E_L3;
	if (ip_sum(ip) != 0xffff)	/* checksum included: all ones */
		return TLY_E_L3;
	udp_len = get16(udp + 4);
	if (get16(udp + 2) != port || udp_len != ip_len - TLY_IP_LEN)
		return TLY_E_L4;
	*tally_len = udp_len - TLY_UDP_LEN;
	return TLY_OK;
}

void tly_frame_readdress(uint8_t *frame, const struct tly_addr *dst,
			 uint16_t dst_rank)
{
	uint8_t *ip = frame + TLY_ETH_LEN;

	memcpy(frame, dst->mac, 6);
	put32(ip + 16, dst->ip);
	put16(ip + 10, tly_ip_checksum(ip));
	put16(ip + TLY_IP_LEN + 2, dst->port);
	put16(frame + TLY_L2L4_LEN + 4, dst_rank);
}

void tly_frame_readdress_bare(uint8_t *pkt, uint16_t dst_rank)
{
	put16(pkt + 4, dst_rank);
}

uint32_t tly_tensor_id(uint64_t key, uint32_t iteration, uint32_t partition)
{
	uint64_t x = key ^ ((uint64_t)iteration << 32 | partition) *
		     0x9e3779b97f4a7c15ull;

	x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
	x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)(x ^ (x >> 32));
}

const char *tly_drop_name(enum tly_drop d)
{
	static const char *const names[TLY_E_COUNT] = {
		[TLY_OK] = "ok", [TLY_E_SHORT] = "short", [TLY_E_L2] = "l2",
		[TLY_E_L3] = "l3", [TLY_E_L4] = "l4",
		[TLY_E_VERSION] = "version", [TLY_E_TYPE] = "type",
		[TLY_E_FLAGS] = "flags", [TLY_E_JOB] = "job_key",
		[TLY_E_COOKIE] = "cookie",
		[TLY_E_LEN] = "length", [TLY_E_RANK] = "rank",
		[TLY_E_SLOT] = "slot", [TLY_E_SHIFT] = "shift",
		[TLY_E_CONFIRM] = "confirm", [TLY_E_ROLE] = "role",
		[TLY_E_STALE] = "stale", [TLY_E_MISMATCH] = "mismatch",
	};

	return (unsigned int)d < TLY_E_COUNT ? names[d] : "?";
}
