// SPDX-License-Identifier: BSD-3-Clause
/*
 * udp_frames.c - frames, expectations and the sendmmsg wrapper shared by
 * the UDP offload tests (see udp_frames.h).
 */
#include <errno.h>
#include <netinet/udp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "udp_frames.h"

int __real_sendmmsg(int fd, struct mmsghdr *msg, unsigned int vlen,
		    int flags);

struct uf_mmsg_log uf_mmsg;

static uint16_t msg_gso_size(const struct msghdr *h)
{
	struct cmsghdr *c;
	uint16_t seg;

	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR((struct msghdr *)h, c))
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_SEGMENT) {
			memcpy(&seg, CMSG_DATA(c), sizeof(seg));
			return seg;
		}
	return 0;
}

int __wrap_sendmmsg(int fd, struct mmsghdr *msg, unsigned int vlen,
		    int flags);
int __wrap_sendmmsg(int fd, struct mmsghdr *msg, unsigned int vlen,
		    int flags)
{
	unsigned int i, n = vlen, tried;
	int r, err = 0;

	uf_mmsg.calls++;
	if (uf_mmsg.pos < uf_mmsg.n_script) {
		int k = uf_mmsg.pos++;

		if (uf_mmsg.err[k]) {
			errno = uf_mmsg.err[k];
			return -1;
		}
		if (uf_mmsg.cut[k] && n > uf_mmsg.cut[k])
			n = vlen = uf_mmsg.cut[k];
	}
	/* an injected refusal of the first GSO message: as the kernel's,
	 * the messages before it go and the call reports them */
	for (i = 0; uf_mmsg.fail_gso_errno && i < n; i++)
		if (msg_gso_size(&msg[i].msg_hdr)) {
			n = i;
			err = uf_mmsg.fail_gso_errno;
			break;
		}
	r = n ? __real_sendmmsg(fd, msg, n, flags) : 0;
	if (r >= 0 && (unsigned int)r == n && err) {
		if (!r) {
			r = -1;
			errno = err;
		}
	}
	/* what the kernel looked at: what went, and the one refused */
	tried = r < 0 ? 1 : (unsigned int)r + ((unsigned int)r < vlen);
	for (i = 0; i < tried && i < vlen; i++)
		if (msg_gso_size(&msg[i].msg_hdr))
			uf_mmsg.gso_tries++;
	for (i = 0; r > 0 && i < (unsigned int)r; i++) {
		uint16_t g = msg_gso_size(&msg[i].msg_hdr);

		if (uf_mmsg.msgs < 1024) {
			uf_mmsg.segs[uf_mmsg.msgs] =
				(uint32_t)msg[i].msg_hdr.msg_iovlen;
			uf_mmsg.seg_size[uf_mmsg.msgs] = g;
		}
		uf_mmsg.msgs++;
		uf_mmsg.gso_msgs += g ? 1 : 0;
	}
	return r;
}

/* frame: [seq u32][dst u16][len u16][pattern of seq] */
void uf_fill(uint8_t *p, uint32_t seq, uint16_t dst, uint16_t len)
{
	memcpy(p, &seq, 4);
	memcpy(p + 4, &dst, 2);
	memcpy(p + 6, &len, 2);
	for (size_t i = 8; i < len; i++)
		p[i] = (uint8_t)(seq * 13 + i * 7);
}

/* the frame's seq, after checking it is whole and for @self */
uint32_t uf_check(const uint8_t *p, size_t len, uint16_t self)
{
	uint32_t seq;
	uint16_t dst, l;

	assert_true(len >= 8);
	memcpy(&seq, p, 4);
	memcpy(&dst, p + 4, 2);
	memcpy(&l, p + 6, 2);
	assert_int_equal(dst, self);
	assert_int_equal(l, len);
	for (size_t i = 8; i < len; i++)
		if (p[i] != (uint8_t)(seq * 13 + i * 7))
			fail_msg("frame %u: byte %zu differs", seq, i);
	return seq;
}

void uf_send(struct transport *tp, uint16_t dst, uint32_t seq, uint16_t len)
{
	struct tly_tx_ops ops = transport_tx_ops(tp);
	uint8_t *f = ops.alloc(ops.ctx, len);

	assert_non_null(f);
	uf_fill(f, seq, dst, len);
	ops.send(ops.ctx, dst, f, len);
}

void uf_recv_expected(struct transport *tp, struct uf_expect *e)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	uint64_t end = transport_now_ns() + 2000 * UF_MS;
	int i, k;

	while (e->got < e->n && transport_now_ns() < end) {
		k = transport_rx_burst(tp, rx, TRANSPORT_RX_BURST);
		for (i = 0; i < k; i++) {
			uint32_t seq = uf_check(rx[i].data, rx[i].len,
						   tp->cfg.self);

			assert_int_equal(seq, e->got);
			assert_int_equal(rx[i].len, e->len[seq]);
			if (i && rx[i].data == rx[i - 1].data + rx[i - 1].len)
				e->contiguous++;
			e->got++;
		}
		if (k > 0)
			transport_rx_release(tp, rx, k);
		else
			transport_idle_wait(tp, transport_now_ns(), 1 * UF_MS);
	}
	assert_int_equal(e->got, e->n);
}

uint32_t uf_rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

void uf_assert_no_more(struct transport *tp)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];

	transport_idle_wait(tp, transport_now_ns(), 20 * UF_MS);
	assert_int_equal(transport_rx_burst(tp, rx, TRANSPORT_RX_BURST), 0);
}

void uf_queue_runs(struct transport *tp, uint16_t dst, struct uf_expect *e,
		   uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		e->len[e->n] = (uint16_t)(200 + (e->n / 10) * 40 % 1200);
		uf_send(tp, dst, e->n, e->len[e->n]);
		e->n++;
	}
}

uint32_t uf_queue_random_runs(struct transport *tp, uint16_t dst,
			      struct uf_expect *e, uint32_t min,
			      uint16_t max_len, uint64_t *seed,
			      uint64_t *bytes)
{
	uint32_t queued = 0;

	while (queued < min) {
		uint32_t run = 1 + uf_rnd(seed) % 80, i;
		uint16_t len = (uint16_t)(8 + uf_rnd(seed) % (max_len - 7));
		bool short_last = uf_rnd(seed) % 3 == 0;

		for (i = 0; i < run; i++) {
			uint16_t l = len;

			if (i == run - 1 && short_last)
				l = (uint16_t)(8 + uf_rnd(seed) % len);
			e->len[e->n] = l;
			uf_send(tp, dst, e->n++, l);
			*bytes += l;
			queued++;
		}
	}
	return queued;
}
