/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bootstrap.h - messages between daemons on the control connection.
 *
 * Every daemon of a job keeps one TCP connection to the coordinator
 * (rank 0).  The coordinator opens it with a CHALLENGE (its nonce); the
 * member REGISTERs (rank, role, data-plane address, job key); once
 * all ranks have registered the coordinator answers everyone with the
 * ROSTER (every member's address and role, K, pool size, algorithm, the
 * epoch).  HEARTBEATs flow both ways; a member that stops answering is
 * announced with PEER_DOWN, and the survivors receive a new ROSTER (next
 * epoch) without it.  REFUSE says why a registration was rejected.
 *
 * Wire format: a 16-byte header (magic, version, type, payload length,
 * epoch), then a fixed payload per type (ROSTER: a fixed part and one
 * 16-byte entry per member; REGISTER and ROSTER may end in a table of
 * per-thread MACs, see boot_member), then a 32-byte MAC tag (auth.h;
 * zero in a CHALLENGE, whose nonce needs none: a forged one only makes
 * the first authenticated message fail).  Network byte order, fixed offsets; the
 * decoder checks every field before anything is used, the caller checks
 * the tag (auth_open) before the message is acted on.
 */
#ifndef TALLY_CTRL_BOOTSTRAP_H
#define TALLY_CTRL_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrl/auth.h"

#define BOOT_MAGIC 0x544c5942u	/* "TLYB" */
#define BOOT_VERSION 2		/* 2: MAC tags, CHALLENGE */
#define BOOT_HDR_LEN 16
#define BOOT_MAX_MEMBERS 256
#define BOOT_ENTRY_LEN 16
#define BOOT_ROSTER_FIXED 20
#define BOOT_TAG_LEN AUTH_TAG_LEN
/* [dataplane] threads at most; threads 1 .. 15 may have a MAC each */
#define BOOT_MAX_THREADS 16
#define BOOT_THREAD_MACS (BOOT_MAX_THREADS - 1)
#define BOOT_MAX_MSG (BOOT_HDR_LEN + BOOT_ROSTER_FIXED + \
		      BOOT_MAX_MEMBERS * (BOOT_ENTRY_LEN + \
					  6 * BOOT_THREAD_MACS) + \
		      BOOT_TAG_LEN)

enum boot_type {
	BOOT_REGISTER = 1,
	BOOT_ROSTER = 2,
	BOOT_HEARTBEAT = 3,
	BOOT_PEER_DOWN = 4,
	BOOT_REFUSE = 5,
	BOOT_ABORT = 6,		/* a member's local job broke: end the epoch */
	BOOT_CHALLENGE = 7,	/* the coordinator's nonce, first message */
};

enum boot_role {
	ROLE_WORKER = 1,	/* serves local clients, sends to aggregators */
	ROLE_AGGREGATOR = 2,	/* holds slots only (stands in for a switch) */
	ROLE_COLOCATED = 3,	/* worker + a shard of the slot space */
};

enum boot_algorithm {
	ALGO_AGGREGATE = 1,
	ALGO_RING = 2,
};

enum boot_refusal {
	REFUSE_JOB_KEY = 1,	/* another job's key */
	REFUSE_RANK = 2,	/* rank out of range or already taken */
	REFUSE_CONFIG = 3,	/* disagrees with the coordinator's job */
	REFUSE_AUTH = 4,	/* its MAC failed: another job secret */
};

struct boot_member {
	uint16_t rank;
	uint8_t role;
	uint8_t local_size;	/* training processes on it (0: aggregator) */
	uint8_t mac[6];		/* dataplane thread 0's */
	uint32_t ip;		/* host byte order */
	uint16_t port;		/* thread s uses port + s */
	/*
	 * The MAC of dataplane thread s (s = 1 .. threads - 1) at
	 * thread_mac[s - 1], for a transport whose threads are not told
	 * apart by port + s: rdma's queue pair per thread (02:LL:LL:QQ:QQ:QQ,
	 * dataplane/transport/rdma.c).  All zero: none (udp, dpdk); then
	 * REGISTER and ROSTER carry no table.
	 */
	uint8_t thread_mac[BOOT_THREAD_MACS][6];
};

struct boot_msg {
	uint16_t type;
	uint32_t epoch;
	union {
		struct {		/* REGISTER */
			struct boot_member self;
			uint32_t job_key;
			uint16_t world;
			uint8_t algorithm;
			uint8_t threads;	/* [dataplane] threads (0: 1) */
			uint8_t profile;	/* [dataplane] profile */
			uint8_t compression;	/* [compression] method
						 * (enum tly_codec, 0..5) */
			uint8_t nonce[AUTH_NONCE_LEN];	/* member's */
		} reg;
		struct {		/* ROSTER */
			uint32_t job_key;
			uint16_t k;
			uint32_t pool_slots;
			uint8_t algorithm;
			/* the width of the members' thread_mac tables:
			 * [dataplane] threads, or 0 when no member has one */
			uint8_t threads;
			uint16_t n;
			struct boot_member m[BOOT_MAX_MEMBERS];
		} roster;
		struct {		/* HEARTBEAT, PEER_DOWN, ABORT */
			uint16_t rank;
		} peer;
		struct {		/* REFUSE */
			uint16_t reason;
		} refuse;
		struct {		/* CHALLENGE */
			uint8_t nonce[AUTH_NONCE_LEN];
		} challenge;
	};
};

/* Encode into @buf (BOOT_MAX_MSG bytes) with a zero tag for the caller
 * to seal (auth_seal).  Returns the length, tag included, or -1 if the
 * message itself is invalid. */
int boot_encode(const struct boot_msg *m, uint8_t *buf, size_t cap);

/*
 * Decode one message from @buf of @len bytes.  Returns the message length
 * (tag included; the tag is not checked here) when a whole valid message
 * is there, 0 when more bytes are needed, and
 * a negative boot_error when it is malformed (the connection must be
 * closed: a stream cannot resynchronise).
 */
enum boot_error {
	BOOT_E_MAGIC = -1,
	BOOT_E_VERSION = -2,
	BOOT_E_TYPE = -3,
	BOOT_E_LENGTH = -4,
	BOOT_E_FIELD = -5,	/* a field out of range */
};
int boot_decode(const uint8_t *buf, size_t len, struct boot_msg *m);

/* whether @e has a MAC for any of its threads 1 .. @threads - 1 */
bool boot_has_thread_macs(const struct boot_member *e, unsigned int threads);

const char *boot_error_str(int err);
const char *boot_role_name(int role);
int boot_role_parse(const char *s);

#endif /* TALLY_CTRL_BOOTSTRAP_H */
