/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frame.h - building and receiving whole frames (internal to the engine):
 * buffer from the transport, L2-L4 envelope when the job uses one, counters.
 */
#ifndef TALLY_DATAPLANE_ENGINE_FRAME_H
#define TALLY_DATAPLANE_ENGINE_FRAME_H

#include "dataplane/engine/engine.h"

struct tly_out {
	uint8_t *frame;		/* what goes to the transport */
	uint8_t *pkt;		/* the tally header inside it */
	size_t len;		/* frame length */
	uint16_t dst;
};

/* a frame for a tally packet of @tally_len bytes from @src to @dst */
int tly_out_begin(struct tly_out *o, const struct tly_tx_ops *ops,
		  const struct tly_net *net, struct tly_counters *c,
		  uint16_t src, uint16_t dst, uint8_t dscp, size_t tally_len);
/*
 * The same, copying the L2-L4 envelope from @cache when the last frame
 * built through it had the same ends, DSCP and length (a RESULT per
 * completed chunk: the checksum and the copies of the addresses are
 * computed once).  The address table must not change under the cache.
 */
struct tly_out_cache {
	uint8_t l2l4[TLY_L2L4_LEN];
	uint8_t valid;
	uint8_t dscp;
	uint16_t src, dst;
	size_t tally_len;
};

int tly_out_begin_cached(struct tly_out *o, const struct tly_tx_ops *ops,
			 const struct tly_net *net, struct tly_counters *c,
			 struct tly_out_cache *cache, uint16_t src,
			 uint16_t dst, uint8_t dscp, size_t tally_len);
void tly_out_send(struct tly_out *o, const struct tly_tx_ops *ops,
		  const struct tly_net *net, struct tly_counters *c);

/* strip and check the envelope and the header; counts what it drops */
enum tly_drop tly_frame_rx(const struct tly_net *net,
			   const struct tly_wire_limits *lim,
			   const uint8_t *frame, size_t len,
			   struct tly_hdr *h, const uint8_t **pkt,
			   uint8_t *dscp, struct tly_counters *c);

#endif /* TALLY_DATAPLANE_ENGINE_FRAME_H */
