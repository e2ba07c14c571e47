/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment.h - shared-memory segments: a memfd, mapped and pre-faulted.
 *
 * Huge pages back a segment when the host has enough free ones (no page
 * faults, fewer TLB misses); otherwise normal pages, pre-faulted with
 * MAP_POPULATE because a first touch of a 4 KiB page costs ~20 us and would
 * land inside the first all-reduce.  Segments are created with mode 0600
 * semantics (memfds have no path) and shared only by passing the fd.
 *
 * Every segment is sealed against shrinking (F_SEAL_SHRINK): a process that
 * shares one can never truncate it under the other side's mapping, which
 * would make that side's next access raise SIGBUS.  segment_map_fd()
 * refuses any fd that is not such a memfd, and once it mapped one adds
 * F_SEAL_FUTURE_WRITE: no holes can be punched into it from then on (a
 * hole in a huge-page memfd could be a SIGBUS too); the mappings that
 * exist stay writable.
 */
#ifndef TALLY_SHM_SEGMENT_H
#define TALLY_SHM_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>

/* Largest segment a peer may hand us (TALLY_ELIMIT beyond). */
#define SEGMENT_MAX_BYTES (64ull << 30)

struct segment {
	int fd;
	void *base;
	size_t size;		/* mapped bytes, a multiple of the page size */
	bool huge;
};

/* Create and map a new segment of at least @bytes.  0 or -TALLY_E*.
 * TALLY_SHM_NO_HUGE=1 in the environment forces normal pages. */
int segment_create(struct segment *seg, size_t bytes, const char *name);

/* Map a segment received as @fd of @size bytes (takes ownership of fd).
 * Checks that it is a memfd sealed against shrinking (adding the seal when
 * the sender allowed sealing), that it really is that large, and that its
 * memory exists already; then seals it against future writes (holes).
 * The fd is closed once mapped (seg->fd is -1): the mapping is enough.
 * 0, -TALLY_EINVAL for an fd that is none of these or cannot be sealed,
 * -TALLY_ELIMIT above SEGMENT_MAX_BYTES, -TALLY_ENOMEM. */
int segment_map_fd(struct segment *seg, int fd, size_t size);

void segment_destroy(struct segment *seg);

/* Is [off, off + len) inside the segment? Overflow-safe. */
static inline bool segment_contains(const struct segment *seg,
				    unsigned long long off,
				    unsigned long long len)
{
	return off <= seg->size && len <= seg->size - off;
}

#endif /* TALLY_SHM_SEGMENT_H */
