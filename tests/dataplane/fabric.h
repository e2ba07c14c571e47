/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fabric.h - an in-memory network for engine tests: frames between nodes of
 * one process on a virtual clock, with seeded faults (loss, duplication,
 * delay, and reordering through random extra delay within a window).
 *
 * With rate_bps set, every node hangs off one switch by a link of that
 * rate: a frame is serialized by its sender's NIC (an unbounded host
 * queue), travels delay_ns, and waits in the switch's output queue to
 * its receiver, which holds at most queue_bytes (tail drop; 0: no
 * limit) and drains at the same rate.  Without rate_bps links are
 * infinitely fast, as before.
 */
#ifndef TALLY_TESTS_DATAPLANE_FABRIC_H
#define TALLY_TESTS_DATAPLANE_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/engine.h"

struct fab_cfg {
	uint64_t seed;
	double loss;		/* probability a frame is dropped */
	double dup;		/* probability a frame is delivered twice */
	uint64_t delay_ns;	/* base one-way delay */
	uint64_t reorder_ns;	/* extra uniform delay: reorders frames */
	uint64_t rate_bps;	/* every node's link; 0: unlimited */
	uint64_t queue_bytes;	/* switch output queue per node; 0: unbounded */
	/* tests: 1 drops the frame @src sends to @dst (before the loss
	 * draw); NULL: none */
	int (*drop)(void *ctx, uint16_t src, uint16_t dst,
		    const uint8_t *frame, size_t len);
	void *drop_ctx;
	/* tests: may change the frame @src sends to @dst, on the wire
	 * (before the drop hook); NULL: none */
	void (*mutate)(void *ctx, uint16_t src, uint16_t dst,
		       uint8_t *frame, size_t len);
	void *mutate_ctx;
};

typedef void fab_rx_fn(void *ctx, const uint8_t *frame, size_t len,
		       uint64_t now);

struct fab;

struct fab *fab_create(uint16_t n_nodes, const struct fab_cfg *cfg);
void fab_destroy(struct fab *f);
void fab_attach(struct fab *f, uint16_t node, fab_rx_fn *rx, void *ctx);
/* tx ops for the engine instance on @node; multicast optional */
struct tly_tx_ops fab_ops(struct fab *f, uint16_t node, int multicast,
			  const struct tly_addr *addrs);
uint64_t fab_now(const struct fab *f);
/* deliver every frame due by now + @dt, advancing the clock to it */
void fab_advance(struct fab *f, uint64_t dt);
size_t fab_pending(const struct fab *f);
uint64_t fab_sent(const struct fab *f);
/* frame bytes a node sent to / received from other nodes */
void fab_node_bytes(const struct fab *f, uint16_t node, uint64_t *tx,
		    uint64_t *rx);
uint64_t fab_dropped(const struct fab *f);
uint64_t fab_duplicated(const struct fab *f);
/* frames the switch's full output queues dropped (rate_bps only) */
uint64_t fab_queue_drops(const struct fab *f);
/* the most bytes the switch's output queue to @node held (rate_bps) */
uint64_t fab_queue_max(const struct fab *f, uint16_t node);
/* the PRNG the fabric uses, for test data */
uint64_t fab_rand(uint64_t *state);

#endif /* TALLY_TESTS_DATAPLANE_FABRIC_H */
