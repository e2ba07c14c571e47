/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * link_emu.h - a link emulator that sits under any transport: this node's
 * switch port with a rate, delay, jitter, loss, duplication and reordering
 * (see struct link_emu_config in transport.h for the knobs).
 *
 * Pure logic: time comes in as now_ns, nothing here reads a clock or does
 * I/O, so tests drive it deterministically.  Frames held by the emulator
 * live in a bounded pool of emulator-owned buffers; when the pool is empty
 * a frame is dropped and counted (a tail-drop switch buffer).
 *
 * Egress: link_emu_alloc() + link_emu_egress_buf() (or link_emu_egress(),
 * which copies), then link_emu_peek()/link_emu_take() of LINK_EMU_EGRESS
 * when due, and link_emu_free() once the frame was handed to the wire.
 * Ingress: link_emu_ingress() copies a received frame in; take the due
 * ones from LINK_EMU_INGRESS and free them when the consumer is done.
 */
#ifndef TALLY_DATAPLANE_TRANSPORT_LINK_EMU_H
#define TALLY_DATAPLANE_TRANSPORT_LINK_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/transport/transport.h"

enum link_emu_dir {
	LINK_EMU_EGRESS = 0,
	LINK_EMU_INGRESS = 1,
};

/* a frame held by the emulator; data is emulator-owned */
struct link_emu_frame {
	uint64_t due_ns;
	uint64_t seq;		/* tie-break: equal due times keep FIFO */
	uint8_t *data;
	uint32_t len;
	uint16_t dst;
};

struct link_emu_stats {
	uint64_t egress, ingress;	/* frames offered */
	uint64_t lost, dup, reordered;
	uint64_t pool_drops;		/* no free buffer */
	uint64_t too_long;		/* longer than a pool buffer */
};

struct link_emu;

/* true when any knob of @cfg is set (the emulator is wanted) */
bool link_emu_wanted(const struct link_emu_config *cfg);

/*
 * @n_bufs buffers of @buf_size bytes.  @wire_overhead bytes are added to
 * every frame's length for the rate (e.g. preamble, FCS and gap, plus the
 * L2-L4 headers when the transport sends bare tally packets).
 */
struct link_emu *link_emu_create(const struct link_emu_config *cfg,
				 uint32_t n_bufs, uint32_t buf_size,
				 uint32_t wire_overhead);
void link_emu_destroy(struct link_emu *e);

/* an emulator buffer for an egress frame of @len bytes, or NULL (counted) */
uint8_t *link_emu_alloc(struct link_emu *e, size_t len);
/* give @buf (from link_emu_alloc) to the egress link at @now_ns; returns
 * the copies queued (0: lost, or no buffer for it) */
int link_emu_egress_buf(struct link_emu *e, uint64_t now_ns, uint16_t dst,
			uint8_t *buf, size_t len);
/* the same for a frame that is not ours: copied in */
int link_emu_egress(struct link_emu *e, uint64_t now_ns, uint16_t dst,
		    const uint8_t *frame, size_t len);
/* a received frame, copied in and handed up no faster than rate_bps,
 * and with delay_on_ingress not before @arrival_ns + delay (@arrival_ns
 * 0: @now_ns); 1 queued, 0 dropped */
int link_emu_ingress(struct link_emu *e, uint64_t now_ns,
		     uint64_t arrival_ns, const uint8_t *frame, size_t len);

/* the earliest frame of @dir if due at @now_ns, else NULL */
const struct link_emu_frame *link_emu_peek(struct link_emu *e,
					   enum link_emu_dir dir,
					   uint64_t now_ns);
/* remove the earliest frame of @dir (after a peek said it is due); its
 * buffer stays valid until link_emu_free() */
struct link_emu_frame link_emu_take(struct link_emu *e, enum link_emu_dir dir);
void link_emu_free(struct link_emu *e, uint8_t *buf);

/* the due time of the earliest held frame, UINT64_MAX when none */
uint64_t link_emu_next_due(const struct link_emu *e);
/* frames held in @dir */
uint32_t link_emu_held(const struct link_emu *e, enum link_emu_dir dir);
const struct link_emu_stats *link_emu_stats(const struct link_emu *e);

#endif /* TALLY_DATAPLANE_TRANSPORT_LINK_EMU_H */
