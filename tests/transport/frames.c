// SPDX-License-Identifier: BSD-3-Clause
/*
 * frames.c - numbered test frames through a transport (see frames.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "frames.h"

static uint32_t frame_span = 1380;
static uint64_t idle_wait_ns = 1000000;

void tp_frames_init(uint32_t span, uint64_t idle_ns)
{
	frame_span = span;
	idle_wait_ns = idle_ns;
}

size_t tp_frame_len(uint32_t seq)
{
	return 20 + (seq * 37) % frame_span;
}

void tp_frame_fill(uint8_t *p, uint32_t seq, uint16_t dst, size_t len)
{
	memcpy(p, &seq, 4);
	memcpy(p + 4, &dst, 2);
	for (size_t i = 6; i < len; i++)
		p[i] = (uint8_t)(seq * 7 + i);
}

int tp_frame_check(const uint8_t *p, size_t len, uint16_t self,
		   uint32_t *seq)
{
	uint16_t dst;

	if (len < 6)
		return -1;
	memcpy(seq, p, 4);
	memcpy(&dst, p + 4, 2);
	if (dst != self || len != tp_frame_len(*seq))
		return -1;
	for (size_t i = 6; i < len; i++)
		if (p[i] != (uint8_t)(*seq * 7 + i))
			return -1;
	return 0;
}

uint32_t tp_send_frames(struct transport *tp, uint16_t dst, uint32_t first,
			uint32_t n)
{
	struct tly_tx_ops ops = transport_tx_ops(tp);
	uint32_t ok = 0;

	for (uint32_t i = first; i < first + n; i++) {
		size_t len = tp_frame_len(i);
		uint8_t *f = ops.alloc(ops.ctx, len);

		if (!f)
			continue;
		tp_frame_fill(f, i, dst, len);
		ops.send(ops.ctx, dst, f, len);
		ok++;
	}
	return ok;
}

uint32_t tp_recv_frames(struct transport *tp, struct transport *peer,
			uint32_t *seq, uint32_t want, uint64_t timeout_ns)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t end = transport_now_ns() + timeout_ns;
	uint32_t got = 0;
	int i, n;

	while (got < want && transport_now_ns() < end) {
		if (peer)
			transport_tx_flush(peer, transport_now_ns());
		n = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (i = 0; i < n; i++) {
			assert_true(got < want);
			assert_int_equal(tp_frame_check(rx[i].data, rx[i].len,
							tp->cfg.self,
							&seq[got]), 0);
			got++;
		}
		if (n > 0)
			transport_rx_release(tp, rx, n);
		else
			transport_idle_wait(tp, transport_now_ns(),
					    idle_wait_ns);
	}
	return got;
}

void tp_assert_in_order(const uint32_t *seq, uint32_t n, uint32_t first)
{
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(seq[i], first + i);
}
