/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frames.h - numbered test frames sent and received through a transport,
 * shared by the transport tests (UDP here, RDMA in tests/rdma).
 *
 * Frame @seq for @dst: [seq u32][dst u16][pattern], 20 .. 20 + span - 1
 * bytes, so lengths vary and every byte is checked.
 */
#ifndef TALLY_TESTS_TRANSPORT_FRAMES_H
#define TALLY_TESTS_TRANSPORT_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/transport/transport.h"

/* The length span (the transport's MTU bounds it) and how long a receive
 * loop sleeps when nothing came; once per test program. */
void tp_frames_init(uint32_t span, uint64_t idle_ns);

size_t tp_frame_len(uint32_t seq);
void tp_frame_fill(uint8_t *p, uint32_t seq, uint16_t dst, size_t len);
/* 0 if @p is a well-formed frame for @self (its seq in *seq), else -1 */
int tp_frame_check(const uint8_t *p, size_t len, uint16_t self,
		   uint32_t *seq);

/* Queue frames first .. first+n-1 to @dst; returns how many were queued. */
uint32_t tp_send_frames(struct transport *tp, uint16_t dst, uint32_t first,
			uint32_t n);
/* Receive until @want frames came or @timeout_ns passed (flushing @peer's
 * emulator meanwhile); seqs land in @seq.  Bad contents fail the test. */
uint32_t tp_recv_frames(struct transport *tp, struct transport *peer,
			uint32_t *seq, uint32_t want, uint64_t timeout_ns);
void tp_assert_in_order(const uint32_t *seq, uint32_t n, uint32_t first);

#endif /* TALLY_TESTS_TRANSPORT_FRAMES_H */
