/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fdpass.h - send and receive one struct tally_msg with file descriptors
 * (SCM_RIGHTS) on a Unix stream socket.
 */
#ifndef TALLY_SHM_FDPASS_H
#define TALLY_SHM_FDPASS_H

#include "shm/proto.h"

/* 0, or -errno. Blocking socket: sends the whole message. */
int msg_send(int sock, const struct tally_msg *msg, const int *fds, int nfds);

/*
 * Receive one whole message and up to TALLY_MSG_MAX_FDS fds into @fds
 * (unused slots set to -1), their count in @nfds.  Returns 1 for a
 * message, 0 on a clean EOF before any byte (-ECONNRESET after a partial
 * message), or -errno; -EPROTO for a wrong magic or version.  On any error
 * the received fds are closed; fds beyond TALLY_MSG_MAX_FDS always are.
 */
int msg_recv(int sock, struct tally_msg *msg, int *fds, int *nfds);

/* Fill the common header of a message. */
void msg_init(struct tally_msg *msg, enum tally_msg_type type);

#endif /* TALLY_SHM_FDPASS_H */
