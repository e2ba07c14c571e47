/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * udp_frames.h - what the UDP offload tests share (test_udp_offload over
 * loopback, test_udp_netns between namespaces):
 *   - a sendmmsg wrapper (link with -Wl,--wrap=sendmmsg) that records
 *     every message the transport sends (segments, UDP_SEGMENT size) and
 *     injects errors: a script per call, or a refusal of GSO messages;
 *   - self-checking frames of any length: [seq u32][dst u16][len u16]
 *     and a pattern of seq, so a frame cut or glued at the wrong place,
 *     or sent to the wrong node, fails the check;
 *   - a receiver's expectations (each frame's length, in order) and the
 *     loop that checks them.
 */
#ifndef TALLY_TESTS_TRANSPORT_UDP_FRAMES_H
#define TALLY_TESTS_TRANSPORT_UDP_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/transport/transport.h"

#define UF_MS 1000000ull
#define UF_MAX_FRAMES 4096

struct uf_mmsg_log {
	/* recorded */
	uint32_t calls;
	uint32_t msgs;			/* messages sent */
	uint32_t gso_msgs;		/* of them with a UDP_SEGMENT cmsg */
	uint32_t gso_tries;		/* cmsg messages offered, sent or not */
	uint32_t segs[1024];		/* iovecs of each message sent */
	uint16_t seg_size[1024];	/* its UDP_SEGMENT, 0 without */
	/* injected: call i of a script fails with err[i] (when nonzero)
	 * or sends at most cut[i] messages (when nonzero) */
	int fail_gso_errno;		/* refuse cmsg messages with this */
	int err[8];
	unsigned int cut[8];
	int n_script, pos;
};

/* the wrapper's log and knobs; zero it between tests */
extern struct uf_mmsg_log uf_mmsg;

void uf_fill(uint8_t *p, uint32_t seq, uint16_t dst, uint16_t len);
/* the frame's seq, after checking (cmocka asserts) it is whole and for
 * @self */
uint32_t uf_check(const uint8_t *p, size_t len, uint16_t self);
/* alloc, fill and send one frame through the engine's tx ops */
void uf_send(struct transport *tp, uint16_t dst, uint32_t seq, uint16_t len);

/* what one receiver expects: its frames' lengths by seq, in order */
struct uf_expect {
	uint16_t len[UF_MAX_FRAMES];
	uint32_t n;			/* frames sent to it */
	uint32_t got;			/* received, in order */
	uint32_t contiguous;		/* frames right after the previous
					 * one of their burst in memory */
};

/* receive until @e->n frames came (or 2 s passed), checking order,
 * length and contents of each */
void uf_recv_expected(struct transport *tp, struct uf_expect *e);
/* nothing more arrives within 20 ms */
void uf_assert_no_more(struct transport *tp);

/* a reproducible PRNG */
uint32_t uf_rnd(uint64_t *s);
/* queue @n frames to @dst in runs of 10 of one length (one GSO message
 * each) */
void uf_queue_runs(struct transport *tp, uint16_t dst, struct uf_expect *e,
		   uint32_t n);
/* queue at least @min frames to @dst in runs of 1..80 of one random
 * length in 8..@max_len, a third with a shorter last one; returns the
 * frames queued and adds their bytes to *@bytes */
uint32_t uf_queue_random_runs(struct transport *tp, uint16_t dst,
			      struct uf_expect *e, uint32_t min,
			      uint16_t max_len, uint64_t *seed,
			      uint64_t *bytes);

#endif /* TALLY_TESTS_TRANSPORT_UDP_FRAMES_H */
