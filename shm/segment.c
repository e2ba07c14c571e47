// SPDX-License-Identifier: BSD-3-Clause
/*
 * segment.c - memfd-backed shared segments (see segment.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <tally/tally.h>
#include "shm/segment.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

/* The creator's seal: the memfd can never shrink, so no access inside a
 * mapping of it can raise SIGBUS.  Growing is harmless (mappings keep
 * their size).  No F_SEAL_SEAL: the receiver adds F_SEAL_FUTURE_WRITE
 * once it has mapped the memfd (see freeze()). */
#define SEGMENT_SEALS F_SEAL_SHRINK

#define HUGE_PAGE_SIZE (2UL << 20)

static size_t round_up(size_t n, size_t align)
{
	return (n + align - 1) / align * align;
}

/* Free 2 MiB pages in the default pool, 0 if none or unknown. */
static unsigned long free_huge_pages(void)
{
	unsigned long n = 0;
	FILE *f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
			"r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu", &n) != 1)
		n = 0;
	fclose(f);
	return n;
}

static bool huge_allowed(void)
{
	const char *no = getenv("TALLY_SHM_NO_HUGE");

	return !(no && *no && strcmp(no, "0") != 0);
}

/* Seal a memfd we created: nobody, us included, may shrink it. */
static int seal(int fd)
{
	return fcntl(fd, F_ADD_SEALS, SEGMENT_SEALS);
}

static int map_and_fault(struct segment *seg)
{
	seg->base = mmap(NULL, seg->size, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, seg->fd, 0);
	if (seg->base == MAP_FAILED) {
		seg->base = NULL;
		return -TALLY_ENOMEM;
	}
	return 0;
}

int segment_create(struct segment *seg, size_t bytes, const char *name)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
	if (bytes == 0)
		return -TALLY_EINVAL;

	if (huge_allowed() && bytes >= HUGE_PAGE_SIZE / 2 &&
	    free_huge_pages() >= round_up(bytes, HUGE_PAGE_SIZE) /
				 HUGE_PAGE_SIZE) {
		seg->fd = memfd_create(name, MFD_CLOEXEC | MFD_HUGETLB |
					       MFD_ALLOW_SEALING);
		seg->size = round_up(bytes, HUGE_PAGE_SIZE);
		if (seg->fd >= 0 && (ftruncate(seg->fd, (off_t)seg->size) ||
				     seal(seg->fd) || map_and_fault(seg))) {
			close(seg->fd);
			seg->fd = -1;
		}
		seg->huge = seg->fd >= 0;
	}
	if (seg->fd < 0) {
		seg->size = round_up(bytes, page);
		seg->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (seg->fd < 0)
			return -TALLY_ENOMEM;
		if (ftruncate(seg->fd, (off_t)seg->size) || seal(seg->fd) ||
		    map_and_fault(seg)) {
			close(seg->fd);
			seg->fd = -1;
			return -TALLY_ENOMEM;
		}
	}
	return 0;
}

/*
 * Is @fd a memfd that can hold @size bytes for as long as we map it?
 * It must be a memfd (only shmem and hugetlbfs files take seals), sealed
 * against shrinking (we add the seal if the sender allowed sealing), at
 * least @size long after the seal (so the check cannot race a truncate),
 * and, for normal pages, already backed by memory: mapping it with
 * MAP_POPULATE must not make us allocate a sparse file's memory.
 */
static int check_memfd(int fd, size_t size)
{
	struct statfs sfs;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
		return -TALLY_EINVAL;	/* not a memfd, or read-only */
	if (!(seals & F_SEAL_SHRINK) && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK))
		return -TALLY_EINVAL;		/* unsealed, and unsealable */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (unsigned long long)st.st_size < size || fstatfs(fd, &sfs))
		return -TALLY_EINVAL;
	if ((unsigned long)sfs.f_type != HUGETLBFS_MAGIC &&
	    (unsigned long long)st.st_blocks * 512 < size)
		return -TALLY_EINVAL;		/* not populated */
	return 0;
}

/* Are all pages of the huge-page mapping present? (mincore counts in
 * base pages; hugetlb pages are never swapped out, so absent means a
 * hole.) */
static bool all_present(const struct segment *seg)
{
	unsigned char vec[4096];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (size_t off = 0; off < seg->size; off += sizeof(vec) * page) {
		size_t len = seg->size - off;

		if (len > sizeof(vec) * page)
			len = sizeof(vec) * page;
		if (mincore((char *)seg->base + off, len, vec))
			return false;
		for (size_t i = 0; i < (len + page - 1) / page; i++)
			if (!(vec[i] & 1))
				return false;
	}
	return true;
}

/*
 * Once mapped: F_SEAL_FUTURE_WRITE, so that nobody can punch holes into the
 * memfd any more (or map it writable anew; existing mappings, ours and the
 * sender's, stay writable).  A hole in a huge-page memfd would be refilled
 * from the host's pool on our next access, and an empty pool is a SIGBUS;
 * so for huge pages every page must also be there now.
 */
static int freeze(const struct segment *seg)
{
	struct statfs sfs;
	int seals = fcntl(seg->fd, F_GET_SEALS);

	if (seals < 0 || (!(seals & F_SEAL_FUTURE_WRITE) &&
			  fcntl(seg->fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE)))
		return -TALLY_EINVAL;
	if (fstatfs(seg->fd, &sfs))
		return -TALLY_EINVAL;
	if ((unsigned long)sfs.f_type == HUGETLBFS_MAGIC && !all_present(seg))
		return -TALLY_EINVAL;
	return 0;
}

int segment_map_fd(struct segment *seg, int fd, size_t size)
{
	int ret;

	memset(seg, 0, sizeof(*seg));
	seg->fd = fd;
	seg->size = size;
	if (size == 0)
		ret = -TALLY_EINVAL;
	else if (size > SEGMENT_MAX_BYTES)
		ret = -TALLY_ELIMIT;
	else
		ret = check_memfd(fd, size);
	if (!ret && map_and_fault(seg))
		ret = -TALLY_ENOMEM;
	if (!ret)
		ret = freeze(seg);
	if (ret) {
		segment_destroy(seg);
		seg->size = size;
		return ret;
	}
	/* the mapping is all the receiver needs: one fd less per segment */
	close(seg->fd);
	seg->fd = -1;
	return 0;
}

void segment_destroy(struct segment *seg)
{
	if (seg->base)
		munmap(seg->base, seg->size);
	if (seg->fd >= 0)
		close(seg->fd);
	seg->base = NULL;
	seg->fd = -1;
}
