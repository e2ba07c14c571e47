/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loop_tags.h - what an epoll event's data.u64 names: a kind in the high
 * 32 bits; below, a client's slot, or for a job's sockets (membership,
 * transport) the job's slot in bits 16-31 and a connection slot below.
 */
#ifndef TALLY_CTRL_LOOP_TAGS_H
#define TALLY_CTRL_LOOP_TAGS_H

#define TAG_LISTEN (1ull << 32)
#define TAG_SOCK (2ull << 32)
#define TAG_KICK (3ull << 32)
#define TAG_BOOT_LISTEN (4ull << 32)
#define TAG_BOOT (5ull << 32)		/* | membership connection slot */
#define TAG_NET (6ull << 32)		/* the transport's wait fd */
#define TAG_CONN (7ull << 32)		/* | pending connection slot */
#define TAG_SIGNAL (8ull << 32)		/* SIGINT or SIGTERM: stop */
#define TAG_METRICS (9ull << 32)	/* libmicrohttpd's epoll fd */
#define TAG_KIND(t) ((t) & ~0xffffffffull)
#define TAG_RANK(t) ((int)((t) & 0xffffffffull))
#define TAG_JOB(t) ((int)(((t) >> 16) & 0xffffull))
#define TAG_SLOT(t) ((int)((t) & 0xffffull))
/* A job's socket: kind | job slot | connection slot. */
#define TAG_JOB_SOCK(kind, job, slot) \
	((kind) | ((uint64_t)(job) << 16) | (uint64_t)(slot))

#endif /* TALLY_CTRL_LOOP_TAGS_H */
