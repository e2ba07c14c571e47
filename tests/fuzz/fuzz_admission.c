// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_admission.c - libFuzzer target for what tallyd reads from a
 * client's Unix socket: the HELLO handshake with its control memfd, sent
 * whole or piece by piece over a pending connection, then SEG_ADD /
 * SEG_DEL control messages with theirs (also in pieces), hang-ups and
 * expired HELLO deadlines at any point, and a first look at the rings the
 * handshake set up.  The real ctrl/admission.c runs on non-blocking
 * socketpairs (see fake_daemon.h), with fds of every kind in place of the
 * sealable memfd a client should pass.
 *
 * Input: one byte, the local size (1 + its low 2 bits), then records,
 * each an op byte and its fields:
 *   op & 3 == 0  connect  [fds] [msg]         op & 0x40: [slot] first, more
 *                                             of pending connection slot
 *   op & 3 == 1  control  [rank] [fds] [msg]
 *   op & 3 == 2  hang up  [rank]              op & 4: shut down writing only
 *                op & 0x40: [slot], end pending connection slot: op >> 2 & 3
 *                0 close, 1 shut down writing, else its deadline passes
 *   op & 3 == 3  ring     [rank] [sqe: 64]    op & 4: [which] [u32] written
 *                                             over a shared ring index
 * [fds] = [n] and n & 7 times [kind] [size in 4 KiB pages] (memfds)
 * [msg] = [len] and min(len, 64) bytes; op & 8 writes a valid magic and
 *         version over them, op & 0x10 the type (HELLO when connecting,
 *         op & 0x20 ? SEG_DEL : SEG_ADD otherwise).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "fake_daemon.h"
#include "fuzz_input.h"
#include "shm/fdpass.h"

#define MAX_FDS 7

struct fuzz_msg {
	uint8_t bytes[64];
	size_t len;
	int fds[MAX_FDS];
	int nfds;
};

static void read_fds(struct fuzz_in *in, struct fuzz_msg *m)
{
	int n = fuzz_u8(in) & 7;

	m->nfds = 0;
	for (int i = 0; i < n; i++) {
		uint8_t kind = fuzz_u8(in);
		size_t pages = fuzz_u8(in);
		int fd = fake_fd((enum fake_fd_kind)(kind % FD_KINDS),
				 pages * 4096);

		if (fd >= 0)
			m->fds[m->nfds++] = fd;
	}
}

static void read_msg(struct fuzz_in *in, struct fuzz_msg *m, uint8_t op,
		     uint16_t type)
{
	struct tally_msg h;

	m->len = fuzz_u8(in);
	if (m->len > sizeof(m->bytes))
		m->len = sizeof(m->bytes);
	fuzz_bytes(in, m->bytes, m->len);
	msg_init(&h, (enum tally_msg_type)type);
	if (op & 8)		/* magic and version */
		memcpy(m->bytes, &h, offsetof(struct tally_msg, type));
	if (op & 0x10)
		memcpy(m->bytes + offsetof(struct tally_msg, type), &h.type,
		       sizeof(h.type));
}

static void close_fds(struct fuzz_msg *m)
{
	for (int i = 0; i < m->nfds; i++)
		close(m->fds[i]);
	m->nfds = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct fake_daemon f;
	int local_size = 1 + (fuzz_u8(&in) & 3);

	if (fake_daemon_init(&f, local_size))
		return 0;
	while (fuzz_more(&in)) {
		uint8_t op = fuzz_u8(&in);
		struct fuzz_msg m;
		struct tally_sqe sqe;
		int rank = 0;

		if ((op & 3) != 0 || (op & 0x40))
			rank = fuzz_u8(&in);
		switch (op & 3) {
		case 0:
			read_fds(&in, &m);
			read_msg(&in, &m, op, TALLY_MSG_HELLO);
			if (op & 0x40)
				fake_more(&f, rank % DAEMON_MAX_PENDING,
					  m.bytes, m.len, m.fds, m.nfds);
			else
				fake_connect(&f, m.bytes, m.len, m.fds,
					     m.nfds);
			close_fds(&m);
			break;
		case 1:
			read_fds(&in, &m);
			read_msg(&in, &m, op, op & 0x20 ? TALLY_MSG_SEG_DEL :
					      TALLY_MSG_SEG_ADD);
			fake_control(&f, rank % local_size, m.bytes, m.len,
				     m.fds, m.nfds);
			close_fds(&m);
			break;
		case 2:
			if (op & 0x40)
				fake_pending_end(&f, rank % DAEMON_MAX_PENDING,
						 op >> 2 & 3);
			else
				fake_hangup(&f, rank % local_size, op & 4);
			break;
		default:
			rank %= local_size;
			if (op & 4) {
				uint8_t which = fuzz_u8(&in);

				fake_corrupt(&f, rank, which % 6,
					     fuzz_u32(&in));
			} else {
				fuzz_bytes(&in, &sqe, sizeof(sqe));
				fake_submit(&f, rank, &sqe, 1);
			}
			fake_drain(&f, rank);
			fake_reap(&f, rank);
			break;
		}
		fake_daemon_check(&f);
	}
	fake_daemon_fini(&f);
	return 0;
}
