/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * proto.h - what the client library and tallyd exchange on one host.
 *
 * Control path: fixed-size messages on a Unix stream socket, file
 * descriptors attached with SCM_RIGHTS.  Data path: a submission ring
 * (client -> daemon) and a completion ring (daemon -> client) in a shared
 * control segment, plus one doorbell pipe per direction.
 *
 *   client                                   tallyd
 *   HELLO  + [ctrl memfd]                 ->
 *                     <-  WELCOME (rank, size) + [sq doorbell, cq doorbell
 *                                              (, fast-path table)]
 *                         or WELCOME (error status), no fds
 *   SEG_ADD + [memfd] (id, size)          ->
 *                                         <-  SEG_ACK (status)
 *   SEG_DEL (id)                          ->
 *                                         <-  SEG_ACK (status)
 *   close()                               ->  client gone: its group fails
 *
 * The daemon never trusts anything in shared memory: ring sizes come from
 * HELLO, its own ring index is private, and every descriptor is validated.
 *
 * The doorbells are pipes the daemon creates: it keeps the read end of the
 * submission doorbell and the write end of the completion doorbell, both
 * non-blocking, and hands the client the other ends.  The daemon so never
 * reads or writes a file description a client can also change (a client's
 * eventfd could be switched back to blocking, or filled to its limit, and
 * stall the daemon's write forever).  A doorbell is one byte; a full pipe
 * means a wake-up is pending already.
 */
#ifndef TALLY_SHM_PROTO_H
#define TALLY_SHM_PROTO_H

#include <stdint.h>

#define TALLY_MSG_MAGIC 0x544c4c59u	/* "TLLY" */
/* 3: HELLO may carry a job description (struct tally_job_wire)
 * 4: WELCOME may carry the job's fast-path table (shm/fast.h) */
#define TALLY_PROTO_VERSION 4

enum tally_msg_type {
	TALLY_MSG_HELLO = 1,
	TALLY_MSG_WELCOME = 2,
	TALLY_MSG_SEG_ADD = 3,
	TALLY_MSG_SEG_DEL = 4,
	TALLY_MSG_SEG_ACK = 5,
	TALLY_MSG_CTL_QUERY = 6,
	TALLY_MSG_CTL_REPLY = 7,
};

struct tally_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	int32_t status;		/* 0 or -TALLY_E* in replies */
	uint32_t pad;
	uint64_t arg[4];	/* meaning per type, see below */
};

/* HELLO:    arg[0] = sq entries, arg[1] = cq entries, arg[2] = ctrl size,
 *           arg[3] = bytes of the job description that follow the message
 *           on the socket: 0 (the daemon's own job) or
 *           sizeof(struct tally_job_wire)
 * WELCOME:  arg[0] = rank, arg[1] = local size, arg[2] = the job's
 *           [compression] method as enum tally_compression (0 from a
 *           daemon of before the field: not sign_ef), arg[3] = bytes of
 *           the job's fast-path table (shm/fast.h), 0: none; fds: sq
 *           write end, cq read end, and the table's memfd when arg[3]
 * SEG_ADD:  arg[0] = segment id, arg[1] = size in bytes
 * SEG_DEL:  arg[0] = segment id
 * SEG_ACK:  arg[0] = segment id
 * CTL_QUERY: sent instead of HELLO (tally-ctl): arg[0] = TALLY_CTL_VERSION,
 *           no fds; the connection is never a client
 * CTL_REPLY: status; arg[0] = bytes that follow on the socket: the
 *           daemon's metrics in the Prometheus text format; then closed */

#define TALLY_CTL_VERSION 1
/* A CTL_REPLY's text is at most this long. */
#define TALLY_CTL_MAX_REPLY (4u << 20)

/*
 * The job a client belongs to, as resolved by the client library from
 * tally_connect_opts() and the launcher's environment.  Sent right after
 * a HELLO whose arg[3] says so.  The daemon checks every field: a
 * malformed description, or one that disagrees with the job's other
 * clients on this host, is refused with -TALLY_EDENIED.
 */
#define TALLY_JOB_ID_MAX 64		/* with the NUL */
#define TALLY_JOB_SECRET_MIN 16		/* when there is one */
#define TALLY_JOB_SECRET_MAX 64

enum tally_job_source {
	TALLY_JOB_SRC_OPTS = 1,		/* tally_connect_opts() / TALLY_* */
	TALLY_JOB_SRC_TORCHRUN = 2,
	TALLY_JOB_SRC_SLURM = 3,
	TALLY_JOB_SRC_OMPI = 4,
};

struct tally_job_wire {
	char id[TALLY_JOB_ID_MAX];	/* NUL-terminated, not empty */
	uint8_t secret[TALLY_JOB_SECRET_MAX];
	uint32_t secret_len;		/* 0: no secret */
	uint32_t coord_ip;		/* IPv4, host byte order; 0 unset */
	uint16_t coord_port;		/* 0: the daemon derives it */
	uint16_t hosts;			/* >= 1 */
	uint16_t host_rank;		/* < hosts */
	uint16_t local_size;		/* >= 1 */
	uint16_t local_rank;		/* < local_size */
	uint16_t source;		/* enum tally_job_source (logs) */
	uint32_t pad;			/* 0 */
};

/* Most fds one message may carry (WELCOME carries two); more are closed
 * unseen, and each message says how many it must have. */
#define TALLY_MSG_MAX_FDS 3

/* Connections the daemon lets wait for admission at once (a HELLO not yet
 * whole); more are answered WELCOME with -TALLY_ELIMIT. */
#define TALLY_MAX_PENDING 32

/* Segment id 0 is the control segment holding the rings. */
#define TALLY_CTRL_SEG_ID 0
#define TALLY_MAX_SEGMENTS 64

enum tally_opcode {
	TALLY_OP_NOP = 0,	/* completes at once: a ring round trip */
	TALLY_OP_ALLREDUCE = 1,
};

/* Submission queue entry: one cache line. */
struct tally_sqe {
	uint8_t opcode;
	uint8_t dtype;
	uint8_t redop;
	uint8_t flags;		/* TALLY_F_* */
	uint16_t priority;
	uint16_t group;
	uint64_t key;
	uint64_t iteration;
	uint64_t count;
	uint32_t send_seg;
	uint32_t recv_seg;
	uint64_t send_off;
	uint64_t recv_off;
	uint64_t user_data;
};

/* Completion queue entry. */
struct tally_cqe {
	uint64_t user_data;
	int32_t res;		/* 0 or -TALLY_E* */
	uint32_t flags;		/* TALLY_CQE_F_* */
};

/* sign_ef (docs/compression.md section 5): the daemon wrote into the
 * request's sendbuf what the host sent, decoded (NaN: a non-finite
 * chunk); the library sets its residual e := p - sent / local size.
 * Without it nothing was compressed: the residual is 0. */
#define TALLY_CQE_F_SENT 0x1u

_Static_assert(sizeof(struct tally_sqe) == 64, "sqe is one cache line");
_Static_assert(sizeof(struct tally_cqe) == 16, "cqe is 16 bytes");
_Static_assert(sizeof(struct tally_msg) == 48, "msg layout is fixed");
_Static_assert(sizeof(struct tally_job_wire) == 152, "job layout is fixed");

#endif /* TALLY_SHM_PROTO_H */
