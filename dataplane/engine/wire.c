// SPDX-License-Identifier: BSD-3-Clause
/*
 * wire.c - encode and validate tally headers and their L2-L4 envelope.
 */
#include "dataplane/engine/wire.h"

#include <string.h>

void tly_hdr_write(uint8_t *p, const struct tly_hdr *h)
{
	p[0] = (uint8_t)(TLY_VERSION << 4 | (h->type & 0x0f));
	p[1] = h->flags;
	tly_put16(p + 2, h->job);
	tly_put16(p + 4, h->rank);
	tly_put16(p + 6, h->slot);
	tly_put32(p + 8, h->tensor);
	tly_put16(p + 12, h->chunk);
	p[14] = (uint8_t)h->shift;
	p[15] = h->aux;
	tly_put32(p + TLY_COOKIE_OFF, h->cookie);
}

/* the switch profile's receipts after the header (CONFIRM, and the ACK
 * with RELEASED that echoes it): each chunk at its hashed slot */
static enum tly_drop receipts_check(const uint8_t *p, const struct tly_hdr *h,
				    const struct tly_wire_limits *lim)
{
	const uint8_t *r = p + TLY_HDR_LEN;
	unsigned int i;

	for (i = 0; i < h->aux; i++, r += TLY_RECEIPT_LEN) {
		uint16_t slot = tly_get16(r + 6);

		if (slot >= lim->n_slots ||
		    slot != tly_slot_of(tly_get32(r), tly_get16(r + 4),
					!!(h->flags & TLY_F_EXP),
					lim->n_slots))
			return TLY_E_SLOT;
	}
	return TLY_OK;
}

static enum tly_drop confirm_check(const uint8_t *p, const struct tly_hdr *h,
				   const struct tly_wire_limits *lim)
{
	unsigned int i;

	if (lim->profile == TLY_PROFILE_SWITCH) {
		/* the chunk in the header, aux more after it, each at its
		 * hashed slot */
		if (h->aux >= TLY_SWITCH_RECEIPTS)
			return TLY_E_CONFIRM;
		if (h->slot >= lim->n_slots ||
		    h->slot != tly_slot_of(h->tensor, h->chunk,
					   !!(h->flags & TLY_F_EXP),
					   lim->n_slots))
			return TLY_E_SLOT;
		return receipts_check(p, h, lim);
	}
	if (h->aux == 0 || h->slot || h->tensor || h->chunk)
		return TLY_E_CONFIRM;
	for (i = 0; i < h->aux; i++) {
		uint32_t w = tly_get32(p + TLY_HDR_LEN + 8 * i + 4);
		uint32_t first = w >> 16, count = (w & 0xff) + 1;

		if (w & 0x7f00)
			return TLY_E_CONFIRM;
		if (first + count > TLY_MAX_CHUNKS)
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
	if (h->flags & ~tly_type_flags(h->type, lim->profile))
		return TLY_E_FLAGS;
	if ((h->flags & TLY_F_EXP) && (h->flags & TLY_F_INT))
		return TLY_E_FLAGS;
	if ((h->type == TLY_T_DATA || h->type == TLY_T_RESULT) &&
	    !tly_lanes_ok(h->flags))
		return TLY_E_FLAGS;
	if (h->type == TLY_T_ACK && (h->flags & TLY_F_RELEASED)) {
		/* the switch profile's (the flags table): aux echoes the
		 * CONFIRM's receipts */
		if (h->aux >= TLY_SWITCH_RECEIPTS)
			return TLY_E_LEN;
	} else if (h->type != TLY_T_CONFIRM && h->type != TLY_T_RING_ACK &&
		   !tly_aux_ok(h->type, h->flags, h->aux, lim->n_ranks)) {
		return TLY_E_LEN;
	}
	if (len != TLY_HDR_LEN + tly_payload_len(h->type, lim->k, h->aux))
		return TLY_E_LEN;
	if (h->rank >= lim->n_ranks &&
	    !(h->rank == TLY_RANK_ALL && h->type == TLY_T_RESULT &&
	      lim->rank_all))
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
		if (h->type == TLY_T_ACK && h->aux)
			return receipts_check(p, h, lim);
		break;
	case TLY_T_RING:
	case TLY_T_RING_ACK:
		if (h->slot >= lim->n_hops)
			return TLY_E_SLOT;
		if ((uint32_t)h->chunk + h->aux > 0xffff)
			return TLY_E_LEN;
		break;
	case TLY_T_CONFIRM:
		return confirm_check(p, h, lim);
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
	h.cookie = tly_get32(p + TLY_COOKIE_OFF);
	h.job = tly_get16(p + 2);
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
	h.rank = tly_get16(p + 4);
	h.slot = tly_get16(p + 6);
	h.tensor = tly_get32(p + 8);
	h.chunk = tly_get16(p + 12);
	h.shift = (int8_t)p[14];
	h.aux = p[15];
	d = hdr_check(&h, p, len, lim);
	*out = h;
	return d;
}

/* the checksum to store (the header's checksum field is ignored) */
uint16_t tly_ip_checksum(const uint8_t *ip)
{
	uint32_t sum = tly_ip_sum(ip) + (uint32_t)(uint16_t)~tly_get16(ip + 10);

	sum = (sum & 0xffff) + (sum >> 16);	/* minus the old field */
	return (uint16_t)~sum;
}

/* one's complement sum of @len bytes in host order, not folded (byte
 * order does not matter to it: RFC 1071) */
static uint64_t ones_sum(const uint8_t *p, size_t len, uint64_t sum)
{
	uint32_t w;
	uint16_t h;

	for (; len >= 4; p += 4, len -= 4) {
		memcpy(&w, p, 4);
		sum += w;
	}
	if (len >= 2) {
		memcpy(&h, p, 2);
		sum += h;
		p += 2;
		len -= 2;
	}
	if (len) {		/* the odd byte, padded with a zero byte */
		uint8_t pad[2] = { *p, 0 };

		memcpy(&h, pad, 2);
		sum += h;
	}
	return sum;
}

static uint16_t ones_fold(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return tly_be16((uint16_t)sum);
}

/* the pseudo-header (addresses, protocol, UDP length) and the datagram */
static uint64_t udp_sum_raw(const uint8_t *ip)
{
	const uint8_t *udp = ip + TLY_IP_LEN;
	uint16_t udp_len = tly_get16(udp + 4);
	uint8_t pseudo[4] = { 0, 17, (uint8_t)(udp_len >> 8),
			      (uint8_t)udp_len };

	return ones_sum(udp, udp_len,
			ones_sum(pseudo, 4, ones_sum(ip + 12, 8, 0)));
}

uint16_t tly_udp_sum(const uint8_t *ip)
{
	return ones_fold(udp_sum_raw(ip));
}

uint16_t tly_udp_checksum(const uint8_t *ip)
{
	const uint8_t *udp = ip + TLY_IP_LEN;
	/* minus the field's content: add its complement */
	uint16_t sum = ones_fold(udp_sum_raw(ip) +
				 (uint16_t)~tly_be16(tly_get16(udp + 6)));

	sum = (uint16_t)~sum;
	return sum ? sum : 0xffff;
}

void tly_l2l4_write(uint8_t *p, const struct tly_addr *src,
		    const struct tly_addr *dst, uint8_t dscp,
		    size_t tally_len)
{
	uint8_t *ip = p + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;

	memcpy(p, dst->mac, 6);
	memcpy(p + 6, src->mac, 6);
	tly_put16(p + 12, 0x0800);
	ip[0] = 0x45;
	ip[1] = (uint8_t)(dscp << 2);
	tly_put16(ip + 2, (uint16_t)(TLY_IP_LEN + TLY_UDP_LEN + tally_len));
	tly_put16(ip + 4, 0);
	tly_put16(ip + 6, 0x4000);		/* don't fragment */
	ip[8] = 64;
	ip[9] = 17;
	tly_put32(ip + 12, src->ip);
	tly_put32(ip + 16, dst->ip);
	tly_put16(ip + 10, tly_ip_checksum(ip));
	tly_put16(udp, src->port);
	tly_put16(udp + 2, dst->port);
	tly_put16(udp + 4, (uint16_t)(TLY_UDP_LEN + tally_len));
	tly_put16(udp + 6, 0);		/* no UDP checksum (IPv4 allows it) */
}

enum tly_drop tly_l2l4_parse(const uint8_t *p, size_t len, uint16_t port,
			     size_t *tally_len)
{
	const uint8_t *ip = p + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;
	uint16_t ip_len, udp_len;

	if (len < TLY_L2L4_LEN)
		return TLY_E_SHORT;
	if (tly_get16(p + 12) != 0x0800)
		return TLY_E_L2;
	if (ip[0] != 0x45 || ip[9] != 17 || (tly_get16(ip + 6) & 0x3fff))
		return TLY_E_L3;
	ip_len = tly_get16(ip + 2);
	/* Ethernet may pad short frames: the IP length is authoritative */
	if (ip_len < TLY_IP_LEN + TLY_UDP_LEN || ip_len > len - TLY_ETH_LEN)
		return TLY_E_L3;
	if (tly_ip_sum(ip) != 0xffff)	/* checksum included: all ones */
		return TLY_E_L3;
	udp_len = tly_get16(udp + 4);
	if (tly_get16(udp + 2) != port || udp_len != ip_len - TLY_IP_LEN)
		return TLY_E_L4;
	/* 0: no checksum (IPv4, tally's own frames); any other is checked,
	 * as the kernel's UDP does for the socket transport */
	if (tly_get16(udp + 6) && tly_udp_sum(ip) != 0xffff)
		return TLY_E_L4;
	*tally_len = udp_len - TLY_UDP_LEN;
	return TLY_OK;
}

void tly_data_rx_init(struct tly_data_rx *f,
		      const struct tly_wire_limits *lim, int l2l4,
		      uint16_t port)
{
	/* a frame's image (want) and which of its bits are fixed (mask) */
	uint8_t want[TLY_L2L4_LEN + 16] = { 0 }, mask[sizeof(want)] = { 0 };
	uint8_t *hw = want + TLY_L2L4_LEN, *hm = mask + TLY_L2L4_LEN;
	size_t tl = TLY_HDR_LEN + 4u * lim->k;
	uint32_t cookie = tly_be32(lim->cookie);
	int i;

	memset(f, 0, sizeof(*f));
	if (l2l4) {
		uint8_t *ip = want + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;
		uint8_t *ipm = mask + TLY_ETH_LEN, *udpm = ipm + TLY_IP_LEN;

		tly_put16(want + 12, 0x0800);
		tly_put16(mask + 12, 0xffff);
		ip[0] = 0x45;
		ipm[0] = 0xff;
		tly_put16(ip + 2, (uint16_t)(TLY_IP_LEN + TLY_UDP_LEN + tl));
		tly_put16(ipm + 2, 0xffff);
		tly_put16(ipm + 6, 0x3fff);	/* no fragment */
		ip[9] = 17;
		ipm[9] = 0xff;
		tly_put16(udp + 2, port);
		tly_put16(udpm + 2, 0xffff);
		tly_put16(udp + 4, (uint16_t)(TLY_UDP_LEN + tl));
		tly_put16(udpm + 4, 0xffff);
		/* checksum 0: a DATA that carries one is checked on the
		 * general path (tly_l2l4_parse()) */
		tly_put16(udpm + 6, 0xffff);
		f->off = TLY_L2L4_LEN;
		f->len_min = (uint32_t)(TLY_L2L4_LEN + tl);
		f->len_max = UINT32_MAX;	/* Ethernet padding */
	} else {
		f->len_min = f->len_max = (uint32_t)tl;
	}
	hw[0] = TLY_VERSION << 4 | TLY_T_DATA;
	hm[0] = 0xff;
	hm[1] = (uint8_t)~(TLY_F_EXP | TLY_F_INT | TLY_F_ACK_REQ | TLY_F_RETX |
			   TLY_F_LANES);
	tly_put16(hw + 2, lim->job);
	tly_put16(hm + 2, 0xffff);
	hm[15] = 0xff;			/* aux: 0 */
	memcpy(&f->mask[0], mask + 12, 8);
	memcpy(&f->want[0], want + 12, 8);
	memcpy(&f->mask[1], mask + 20, 8);
	memcpy(&f->want[1], want + 20, 8);
	memcpy(&f->mask[2], mask + 34, 8);
	memcpy(&f->want[2], want + 34, 8);
	for (i = 0; i < 2; i++) {
		memcpy(&f->mask[3 + i], hm + 8 * i, 8);
		memcpy(&f->want[3 + i], hw + 8 * i, 8);
	}
	memcpy(&f->cookie, &cookie, 4);
	f->n_slots = lim->n_slots;
	f->n_ranks = lim->n_ranks;
}

void tly_frame_readdress(uint8_t *frame, const struct tly_addr *dst,
			 uint16_t dst_rank)
{
	uint8_t *ip = frame + TLY_ETH_LEN;

	memcpy(frame, dst->mac, 6);
	tly_put32(ip + 16, dst->ip);
	tly_put16(ip + 10, tly_ip_checksum(ip));
	tly_put16(ip + TLY_IP_LEN + 2, dst->port);
	tly_put16(frame + TLY_L2L4_LEN + 4, dst_rank);
}

void tly_frame_readdress_bare(uint8_t *pkt, uint16_t dst_rank)
{
	tly_put16(pkt + 4, dst_rank);
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
