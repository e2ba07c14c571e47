/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fdpass.h - send and receive one struct tally_msg with file descriptors
 * (SCM_RIGHTS) on a Unix stream socket.
 */
#ifndef TALLY_SHM_FDPASS_H
#define TALLY_SHM_FDPASS_H

#include "shm/proto.h"

struct msghdr;

/* Attach @nfds > 0 descriptors to @mh as one SCM_RIGHTS message, built in
 * @ctl, which holds at least CMSG_SPACE(nfds * sizeof(int)) bytes. */
void msg_put_fds(struct msghdr *mh, void *ctl, const int *fds, int nfds);

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

/*
 * A message being received piece by piece on a non-blocking socket (the
 * daemon's side: a peer that sends half a message must never stall it).
 */
struct msg_rx {
	struct tally_msg msg;
	size_t got;			/* bytes of msg received so far */
	int fds[TALLY_MSG_MAX_FDS];	/* -1 where unused */
	int nfds;
};

void msg_rx_init(struct msg_rx *rx);

/*
 * Read what is there of the next message, never past its end, so that a
 * following message's fds stay queued for it.  1 once the message is whole
 * (rx->msg and rx->fds are the caller's to use, then msg_rx_reset()),
 * -EAGAIN while incomplete, 0 on EOF before any byte, -ECONNRESET on EOF
 * inside a message, -EPROTO for a wrong magic or version, else -errno.
 * On an error the fds received so far are closed.
 */
int msg_recv_step(int sock, struct msg_rx *rx);

/* Close the fds the caller left in @rx and start on the next message. */
void msg_rx_reset(struct msg_rx *rx);

/* Fill the common header of a message. */
void msg_init(struct tally_msg *msg, enum tally_msg_type type);

#endif /* TALLY_SHM_FDPASS_H */
