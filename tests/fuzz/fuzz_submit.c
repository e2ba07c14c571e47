// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_submit.c - libFuzzer target for the submission descriptors tallyd
 * takes from its clients' rings (ctrl/submit.c): validation, resolving
 * buffers in the clients' segments, matching members into local groups,
 * reducing and completing, with segments freed, clients lost and ring
 * indices overwritten in between.  After every step the daemon's books
 * must balance (fake_daemon_check): every submission taken is completed
 * or pending in exactly one group, and every segment reference is held
 * by the client or by a pending member.
 *
 * Set-up (from the first byte): 2 or 3 clients admitted through the real
 * handshake, with 8-entry rings (so completions back up) and segments 1
 * and 2 of 4 KiB each, filled with bytes derived from that byte.
 *
 * Records, an op byte and its fields:
 *   op & 7 < 4   submit   [rank] [key] [iteration] [count] [dtype] [redop]
 *                         [segs: send << 4 | recv] [send_off: 2] [recv_off: 2]
 *                count is shifted left by (op >> 4) & 7; op & 8 takes the
 *                opcode from key's low bits instead of ALLREDUCE
 *   op & 7 == 4  raw      [rank] [sqe: 64]
 *   op & 7 == 5  segment  [rank] [id]  op & 8: SEG_ADD of [pages] pages,
 *                                      else SEG_DEL
 *   op & 7 == 6  corrupt  [rank] [which] [u32]
 *   op & 7 == 7  hang up  [rank]
 * op & 0x80: the daemon drains that client's ring now (else at the next
 * drain); op & 0x40: the client reaps its completions now.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/tally.h>
#include "fake_daemon.h"
#include "fuzz_input.h"
#include "shm/fdpass.h"

#define RING_N 8
#define SEG_BYTES 4096

static int admit_one(struct fake_daemon *f)
{
	size_t cq_off = (ring_bytes(RING_N, sizeof(struct tally_sqe)) +
			 RING_CACHELINE - 1) & ~(size_t)(RING_CACHELINE - 1);
	size_t need = cq_off + ring_bytes(RING_N, sizeof(struct tally_cqe));
	struct tally_msg m;
	int fd, rank;

	msg_init(&m, TALLY_MSG_HELLO);
	m.arg[0] = RING_N;
	m.arg[1] = RING_N;
	m.arg[2] = need;
	fd = fake_fd(FD_MEMFD, need);
	rank = fake_connect(f, &m, sizeof(m), &fd, 1);
	close(fd);
	return rank;
}

static int add_segment(struct fake_daemon *f, int rank, uint32_t id,
		       size_t bytes, uint32_t seed)
{
	struct tally_msg m;
	int fd = fake_fd(FD_MEMFD, bytes), ret;

	fake_fill(fd, bytes, 0x9e3779b97f4a7c15ull * (seed + 1));
	msg_init(&m, TALLY_MSG_SEG_ADD);
	m.arg[0] = id;
	m.arg[1] = bytes;
	ret = fake_control(f, rank, &m, sizeof(m), &fd, 1);
	close(fd);
	return ret;
}

static void del_segment(struct fake_daemon *f, int rank, uint32_t id)
{
	struct tally_msg m;

	msg_init(&m, TALLY_MSG_SEG_DEL);
	m.arg[0] = id;
	fake_control(f, rank, &m, sizeof(m), NULL, 0);
}

static void compact_sqe(struct fuzz_in *in, uint8_t op, struct tally_sqe *s)
{
	uint8_t key = fuzz_u8(in), segs;

	memset(s, 0, sizeof(*s));
	s->opcode = op & 8 ? key & 3 : TALLY_OP_ALLREDUCE;
	s->key = key;
	s->iteration = fuzz_u8(in);
	s->count = (uint64_t)fuzz_u8(in) << ((op >> 4) & 7);
	s->dtype = fuzz_u8(in);
	s->redop = fuzz_u8(in);
	segs = fuzz_u8(in);
	s->send_seg = segs >> 4;
	s->recv_seg = segs & 15;
	s->send_off = fuzz_u16(in);
	s->recv_off = fuzz_u16(in);
	s->user_data = (uint64_t)key << 32 | s->iteration;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct fake_daemon f;
	uint8_t setup = fuzz_u8(&in);
	int n = 2 + (setup & 1);

	if (fake_daemon_init(&f, n))
		return 0;
	for (int i = 0; i < n; i++) {
		if (admit_one(&f) != i ||
		    add_segment(&f, i, 1, SEG_BYTES, setup + 2u * i) ||
		    add_segment(&f, i, 2, SEG_BYTES, setup + 2u * i + 1))
			abort();
	}
	while (fuzz_more(&in)) {
		uint8_t op = fuzz_u8(&in);
		int rank = fuzz_u8(&in) % n;
		struct tally_sqe sqe;
		uint8_t id;

		switch (op & 7) {
		case 4:
			fuzz_bytes(&in, &sqe, sizeof(sqe));
			fake_submit(&f, rank, &sqe, 1);
			break;
		case 5:
			id = fuzz_u8(&in);
			if (op & 8)
				add_segment(&f, rank, id,
					    4096u * (1 + fuzz_u8(&in) % 4),
					    id);
			else
				del_segment(&f, rank, id);
			break;
		case 6:
			id = fuzz_u8(&in);
			fake_corrupt(&f, rank, id % 6, fuzz_u32(&in));
			break;
		case 7:
			fake_hangup(&f, rank, 0);
			break;
		default:
			compact_sqe(&in, op, &sqe);
			fake_submit(&f, rank, &sqe, 1);
			break;
		}
		if (op & 0x80)
			fake_drain(&f, rank);
		if (op & 0x40)
			fake_reap(&f, rank);
		fake_daemon_check(&f);
	}
	for (int r = 0; r < n; r++) {
		fake_drain(&f, r);
		fake_daemon_check(&f);
	}
	fake_daemon_fini(&f);
	return 0;
}
