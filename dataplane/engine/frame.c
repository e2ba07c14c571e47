// SPDX-License-Identifier: BSD-3-Clause
/*
 * frame.c - frames in and out of the engine, with their counters.
 */
#include "dataplane/engine/frame.h"

#include <string.h>

int tly_out_begin(struct tly_out *o, const struct tly_tx_ops *ops,
		  const struct tly_net *net, struct tly_counters *c,
		  uint16_t src, uint16_t dst, uint8_t dscp, size_t tally_len)
{
	size_t off = tly_l2l4_off(net);

	o->len = off + tally_len;
	o->dst = dst;
	o->frame = ops->alloc(ops->ctx, o->len);
	if (!o->frame) {
		c->tx_nobuf++;
		return -1;
	}
	o->pkt = o->frame + off;
	if (net->addrs)
		tly_l2l4_write(o->frame, &net->addrs[src], &net->addrs[dst],
			       dscp, tally_len);
	return 0;
}

int tly_out_begin_cached(struct tly_out *o, const struct tly_tx_ops *ops,
			 const struct tly_net *net, struct tly_counters *c,
			 struct tly_out_cache *cache, uint16_t src,
			 uint16_t dst, uint8_t dscp, size_t tally_len)
{
	if (!net->addrs)
		return tly_out_begin(o, ops, net, c, src, dst, dscp, tally_len);
	o->len = TLY_L2L4_LEN + tally_len;
	o->dst = dst;
	o->frame = ops->alloc(ops->ctx, o->len);
	if (!o->frame) {
		c->tx_nobuf++;
		return -1;
	}
	o->pkt = o->frame + TLY_L2L4_LEN;
	if (!cache->valid || cache->src != src || cache->dst != dst ||
	    cache->dscp != dscp || cache->tally_len != tally_len) {
		tly_l2l4_write(cache->l2l4, &net->addrs[src],
			       &net->addrs[dst], dscp, tally_len);
		cache->valid = 1;
		cache->src = src;
		cache->dst = dst;
		cache->dscp = dscp;
		cache->tally_len = tally_len;
	}
	memcpy(o->frame, cache->l2l4, TLY_L2L4_LEN);
	return 0;
}

void tly_out_send(struct tly_out *o, const struct tly_tx_ops *ops,
		  const struct tly_net *net, struct tly_counters *c)
{
	size_t off = tly_l2l4_off(net);

	c->tx_pkts++;
	c->tx_bytes += o->len - off;
	c->tx_frame_bytes += TLY_L2L4_LEN + o->len - off + TLY_WIRE_EXTRA;
	ops->send(ops->ctx, o->dst, o->frame, o->len);
}

enum tly_drop tly_frame_rx(const struct tly_net *net,
			   const struct tly_wire_limits *lim,
			   const uint8_t *frame, size_t len,
			   struct tly_hdr *h, const uint8_t **pkt,
			   uint8_t *dscp, struct tly_counters *c)
{
	enum tly_drop d = TLY_OK;
	size_t tlen = len;

	*dscp = 0;
	*pkt = frame;
	if (net->addrs) {
		d = tly_l2l4_parse(frame, len, net->port, &tlen);
		if (d == TLY_E_L4 && net->group_port)
			d = tly_l2l4_parse(frame, len, net->group_port, &tlen);
		if (d == TLY_OK) {
			*dscp = frame[TLY_ETH_LEN + 1] >> 2;
			*pkt = frame + TLY_L2L4_LEN;
		}
	}
	if (d == TLY_OK)
		d = tly_hdr_parse(*pkt, tlen, lim, h);
	c->rx_pkts++;
	if (d != TLY_OK) {
		c->drops[d]++;
		return d;
	}
	c->rx_bytes += tlen;
	return TLY_OK;
}

int tly_frame_type(const struct tly_net *net, const uint8_t *frame,
		   size_t len)
{
	size_t off = tly_l2l4_off(net);

	if (len <= off)
		return -1;
	return frame[off] & 0x0f;
}
