/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_daemon.h - tallyd without its event loop, for the fuzz targets of
 * the client protocol: the real admission (ctrl/admission.c) and
 * submission (ctrl/submit.c) code, driven over socketpairs whose client
 * ends, and the client side of the shared rings, the harness holds.
 *
 * The daemon runs one static job, as tallyd without [service] does
 * (ctrl/tallyd.c): every admitted client is a member of it, on this host
 * alone (its cluster functions are stubs that must not be reached).
 *
 * Everything is created per input and torn down after it, so a finding
 * reproduces from its input alone; fake_daemon_fini() aborts if a file
 * descriptor outlived the daemon (a leak a hostile client could repeat
 * until tallyd runs out of them), and fake_daemon_check() aborts if the
 * daemon's bookkeeping (clients, completions owed, segment references)
 * disagrees with itself.
 */
#ifndef TALLY_TESTS_FUZZ_FAKE_DAEMON_H
#define TALLY_TESTS_FUZZ_FAKE_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "ctrl/daemon.h"

/* Kinds of file descriptor a fuzzed message can carry. */
enum fake_fd_kind {
	FD_MEMFD,		/* of the given size, sealable, allocated */
	FD_EVENTFD,
	FD_DEVNULL,
	FD_PIPE_READ,
	FD_PIPE_WRITE,		/* its reader closed */
	FD_SOCKET,
	FD_DIRECTORY,
	FD_MEMFD_RDONLY,	/* a memfd reopened read-only */
	FD_MEMFD_UNSEALABLE,	/* a memfd without MFD_ALLOW_SEALING */
	FD_MEMFD_SEALED,	/* sealed against writes already */
	FD_MEMFD_SPARSE,	/* sealable, its memory not allocated */
	FD_KINDS
};

/* A connection's client end, and the control segment it offered, mapped
 * before the HELLO went out (as libtally does: once the daemon mapped it,
 * it is sealed against new writable mappings). */
struct fake_conn {
	int sock;		/* -1 when none */
	void *base;		/* the first fd it sent, mapped; or NULL */
	size_t size;
	uint8_t hello[sizeof(struct tally_msg)];	/* bytes sent so far */
	size_t sent;
};

struct fake_client {
	int sock;		/* our end; -1 when not connected */
	void *base;		/* our mapping of the rings once admitted */
	size_t size;
	int sq_bell, cq_bell;	/* the doorbell ends WELCOME gave us */
	struct ring sq, cq;	/* producer of sq, consumer of cq */
	uint32_t sq_n, cq_n;
	uint64_t sent, acks;	/* control bytes sent, SEG_ACKs received */
};

struct fake_daemon {
	struct tallyd *d;
	struct job *job;	/* the daemon's static job: every client's */
	struct fake_client c[CONFIG_MAX_LOCAL_SIZE];	/* by local rank */
	struct fake_conn pend[DAEMON_MAX_PENDING];	/* by daemon slot */
	int fds_at_start;
};

/* A daemon for @local_size clients.  0 or -1. */
int fake_daemon_init(struct fake_daemon *f, int local_size);
/* Drop every client as shutdown does, free all; abort on a leaked fd. */
void fake_daemon_fini(struct fake_daemon *f);
/* Abort if the daemon's state is inconsistent. */
void fake_daemon_check(struct fake_daemon *f);

/* A new fd of @kind (@size bytes for memfds); -1 if it cannot be made. */
int fake_fd(enum fake_fd_kind kind, size_t size);
/* Fill @bytes of memfd @fd with pseudo-random bytes from @seed. */
void fake_fill(int fd, size_t bytes, uint64_t seed);

/*
 * Connect a new client: send @len bytes (a struct tally_msg, part of one,
 * or more) with @fds attached, then run the daemon's admission on the
 * other end (daemon_admit, as after accept).  The fds are the caller's and
 * stay open.  Returns the rank the daemon admitted, -2 if the connection
 * is still pending (half a HELLO: see fake_more), or -1 if it was refused
 * (checked against its reply).
 */
int fake_connect(struct fake_daemon *f, const void *msg, size_t len,
		 const int *fds, int nfds);
/* Send more of pending connection @slot's HELLO (as fake_connect) and let
 * the daemon read it; the same returns, -1 also when no @slot is pending. */
int fake_more(struct fake_daemon *f, int slot, const void *msg, size_t len,
	      const int *fds, int nfds);
/* Pending connection @slot: @how 0 closes it, 1 shuts down its writing
 * side, 2 lets its HELLO deadline pass (the daemon's sweep). */
void fake_pending_end(struct fake_daemon *f, int slot, int how);

/* Send a control message (or part of one, or more) from admitted client
 * @rank and let the daemon handle what arrived.  Returns the status of the
 * last SEG_ACK, 2 if the message is incomplete, or 1 if it dropped the
 * client (which the harness then forgets too). */
int fake_control(struct fake_daemon *f, int rank, const void *msg,
		 size_t len, const int *fds, int nfds);

/* Client @rank goes away: closes its end (@half: only shuts down its
 * writing side) and the daemon notices, after what was queued. */
void fake_hangup(struct fake_daemon *f, int rank, int half);

/* Put @n submissions into client @rank's ring (those that fit). */
void fake_submit(struct fake_daemon *f, int rank,
		 const struct tally_sqe *sqe, int n);
/* Let the daemon drain @rank's ring, as its loop does; drops a client
 * that broke the ring protocol. */
void fake_drain(struct fake_daemon *f, int rank);
/* Take the completions the daemon wrote for @rank; how many. */
int fake_reap(struct fake_daemon *f, int rank);
/* Overwrite one shared word of @rank's rings: 0..2 the SQ's tail, head,
 * asleep; 3..5 the CQ's. */
void fake_corrupt(struct fake_daemon *f, int rank, int which,
		  uint32_t value);

/* Is @rank admitted (in the daemon and here)? */
int fake_active(const struct fake_daemon *f, int rank);

#endif /* TALLY_TESTS_FUZZ_FAKE_DAEMON_H */
