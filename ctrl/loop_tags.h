/* SPDX-License-Identifier: BSD-3-Clause */
/* loop_tags.h - what an epoll event's data.u64 names: kind | client rank. */
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

#endif /* TALLY_CTRL_LOOP_TAGS_H */
