/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.h - what the aggregator, the worker and the ring share: how frames
 * leave the engine, how nodes are addressed, and the counters.
 *
 * The engine is pure logic.  It never reads a clock (time comes in as
 * now_ns) and never calls a transport: frames come in through *_rx() and
 * leave through struct tly_tx_ops, built in place in buffers the transport
 * hands out, in the transport's format: full Ethernet/IPv4/UDP frames when
 * an address table is given, bare tally packets (the UDP payload) when not.
 */
#ifndef TALLY_DATAPLANE_ENGINE_ENGINE_H
#define TALLY_DATAPLANE_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/wire.h"

struct tly_tx_ops {
	/* a buffer for one frame of @len bytes; NULL drops it (counted) */
	uint8_t *(*alloc)(void *ctx, size_t len);
	/* queue the frame for node @dst; the buffer is the transport's again */
	void (*send)(void *ctx, uint16_t dst, uint8_t *frame, size_t len);
	/*
	 * Optional: replicate one RESULT to every worker in @mask, the way a
	 * switch multicasts.  The frame is addressed to the lowest worker of
	 * the mask; tly_frame_readdress() re-points a copy.  Without it the
	 * engine builds one frame per worker.
	 */
	void (*multicast)(void *ctx, uint64_t mask, uint8_t *frame,
			  size_t len);
	/* 1: multicast sends the very bytes to every worker (a result
	 * group): the RESULT is built with rank TLY_RANK_ALL instead */
	uint8_t multicast_group;
	void *ctx;
};

/* node ids index the address table; workers are nodes 0 .. n_workers-1 */
struct tly_net {
	const struct tly_addr *addrs;	/* NULL: bare tally packets */
	uint16_t n_nodes;
	uint16_t port;			/* UDP port of received frames */
	/* and this one too (full frames): the switch profile's result
	 * group, whose RESULT comes to every worker (0: none) */
	uint16_t group_port;
};

struct tly_counters {
	uint64_t rx_pkts, rx_bytes;	/* bytes: tally header + payload */
	uint64_t tx_pkts, tx_bytes;
	uint64_t tx_frame_bytes;	/* whole frames plus 24 (wire) */
	uint64_t drops[TLY_E_COUNT];
	uint64_t tx_nobuf;		/* alloc() returned NULL */
	uint64_t dups;			/* duplicate contributions/results */
	uint64_t retx;			/* retransmissions / result probes */
	uint64_t acks, busy;		/* ACK and BUSY sent or received */
	uint64_t fallback;		/* contributions held by the fallback */
	uint64_t evictions;		/* idle partial sums dropped */
	uint64_t completions;		/* slots completed / tensors done */
	uint64_t confirms;		/* result receipts sent / applied */
};

static inline size_t tly_l2l4_off(const struct tly_net *net)
{
	return net->addrs ? TLY_L2L4_LEN : 0;
}

/* tally packet type of a frame (for a co-located daemon to dispatch) */
int tly_frame_type(const struct tly_net *net, const uint8_t *frame,
		   size_t len);

#endif /* TALLY_DATAPLANE_ENGINE_ENGINE_H */
