// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_segment.c - unit tests of memfd segments (shm/segment.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "shm/segment.h"

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static bool fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

static int setup_no_huge(void **state)
{
	(void)state;
	/* keep the page-rounding checks deterministic on hosts with
	 * free huge pages */
	return setenv("TALLY_SHM_NO_HUGE", "1", 1);
}

static void test_segment_create_rounds_to_page(void **state)
{
	static const size_t sizes[] = { 1, 100, 4095, 4096, 4097, 3 * 4096 + 1,
					(1u << 20) + 7 };

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct segment seg;
		size_t pg = page_size();
		size_t want = (sizes[i] + pg - 1) / pg * pg;
		struct stat st;

		assert_int_equal(segment_create(&seg, sizes[i], "test-seg"), 0);
		assert_true(seg.fd >= 0);
		assert_non_null(seg.base);
		assert_false(seg.huge);
		assert_int_equal(seg.size, want);
		assert_int_equal(fstat(seg.fd, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal((size_t)st.st_size, want);
		/* close-on-exec: never leaks into children */
		assert_true(fcntl(seg.fd, F_GETFD) & FD_CLOEXEC);
		/* zero-filled and writable to the last byte */
		assert_int_equal(((unsigned char *)seg.base)[0], 0);
		assert_int_equal(((unsigned char *)seg.base)[want - 1], 0);
		memset(seg.base, 0x5a, want);
		segment_destroy(&seg);
		assert_null(seg.base);
		assert_int_equal(seg.fd, -1);
	}
}

static void test_segment_create_zero_bytes_fails(void **state)
{
	struct segment seg;

	(void)state;
	assert_int_equal(segment_create(&seg, 0, "zero"), -TALLY_EINVAL);
	assert_int_equal(seg.fd, -1);
	assert_null(seg.base);
	segment_destroy(&seg);		/* harmless on a failed segment */
}

static void test_segment_create_huge_request_fails(void **state)
{
	struct segment seg;

	(void)state;
	assert_int_equal(segment_create(&seg, SIZE_MAX / 2, "huge"),
			 -TALLY_ENOMEM);
	assert_int_equal(seg.fd, -1);
	assert_null(seg.base);
}

static void test_segment_map_fd_shares_contents(void **state)
{
	struct segment a, b;
	int dupfd;

	(void)state;
	assert_int_equal(segment_create(&a, 3 * page_size(), "shared"), 0);
	dupfd = dup(a.fd);
	assert_true(dupfd >= 0);
	assert_int_equal(segment_map_fd(&b, dupfd, a.size), 0);
	assert_int_equal(b.fd, -1);		/* the mapping is enough */
	assert_false(fd_is_open(dupfd));
	assert_int_equal(b.size, a.size);
	assert_ptr_not_equal(a.base, b.base);

	/* writes through one mapping show in the other, both ways */
	for (size_t i = 0; i < a.size; i += 997)
		((unsigned char *)a.base)[i] = (unsigned char)(i * 7 + 1);
	for (size_t i = 0; i < a.size; i += 997)
		assert_int_equal(((unsigned char *)b.base)[i],
				 (unsigned char)(i * 7 + 1));
	((uint64_t *)b.base)[a.size / 8 - 1] = 0x0123456789abcdefull;
	assert_int_equal(((uint64_t *)a.base)[a.size / 8 - 1],
			 0x0123456789abcdefull);

	/* one side going away leaves the other intact */
	segment_destroy(&a);
	assert_false(fd_is_open(a.fd));
	assert_int_equal(((uint64_t *)b.base)[b.size / 8 - 1],
			 0x0123456789abcdefull);
	segment_destroy(&b);
}

static void test_segment_map_fd_smaller_size_ok(void **state)
{
	struct segment a, b;

	(void)state;
	assert_int_equal(segment_create(&a, 4 * page_size(), "part"), 0);
	/* a peer may map less than the memfd holds */
	assert_int_equal(segment_map_fd(&b, dup(a.fd), page_size()), 0);
	assert_int_equal(b.size, page_size());
	segment_destroy(&b);
	segment_destroy(&a);
}

static void test_segment_map_fd_rejects_short_memfd(void **state)
{
	struct segment seg;
	int fd = memfd_create("short", MFD_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)page_size()), 0);
	assert_int_equal(segment_map_fd(&seg, fd, 2 * page_size()),
			 -TALLY_EINVAL);
	assert_null(seg.base);
	assert_int_equal(seg.fd, -1);
	assert_false(fd_is_open(fd));	/* ownership taken: closed */

	/* one byte more than the file also fails */
	fd = memfd_create("short", MFD_CLOEXEC);
	assert_int_equal(ftruncate(fd, 100), 0);
	assert_int_equal(segment_map_fd(&seg, fd, 101), -TALLY_EINVAL);
	assert_false(fd_is_open(fd));
}

static void test_segment_map_fd_rejects_zero_size(void **state)
{
	struct segment seg;
	int fd = memfd_create("zero", MFD_CLOEXEC);

	(void)state;
	assert_int_equal(ftruncate(fd, (off_t)page_size()), 0);
	assert_int_equal(segment_map_fd(&seg, fd, 0), -TALLY_EINVAL);
	assert_false(fd_is_open(fd));
}

static void test_segment_map_fd_rejects_pipe(void **state)
{
	struct segment seg;
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(segment_map_fd(&seg, p[0], page_size()),
			 -TALLY_EINVAL);
	assert_null(seg.base);
	assert_false(fd_is_open(p[0]));
	close(p[1]);
}

static void test_segment_map_fd_rejects_bad_fd(void **state)
{
	struct segment seg;
	int fd = memfd_create("gone", MFD_CLOEXEC);

	(void)state;
	close(fd);			/* now a closed descriptor number */
	assert_int_equal(segment_map_fd(&seg, fd, page_size()),
			 -TALLY_EINVAL);
	assert_null(seg.base);
	assert_int_equal(seg.fd, -1);
}

static void test_segment_destroy_twice_is_safe(void **state)
{
	struct segment seg;

	(void)state;
	assert_int_equal(segment_create(&seg, 10, "twice"), 0);
	segment_destroy(&seg);
	segment_destroy(&seg);
	assert_int_equal(seg.fd, -1);
	assert_null(seg.base);
}

static void test_segment_contains_edges(void **state)
{
	struct segment seg = { .fd = -1, .base = NULL, .size = 4096 };

	(void)state;
	assert_true(segment_contains(&seg, 0, 0));
	assert_true(segment_contains(&seg, 0, 4096));
	assert_true(segment_contains(&seg, 4095, 1));
	assert_true(segment_contains(&seg, 4096, 0));	/* empty at the end */
	assert_true(segment_contains(&seg, 100, 3996));
	assert_false(segment_contains(&seg, 0, 4097));
	assert_false(segment_contains(&seg, 4096, 1));
	assert_false(segment_contains(&seg, 4097, 0));
	assert_false(segment_contains(&seg, 100, 3997));
	assert_false(segment_contains(&seg, 1, 4096));
}

static void test_segment_contains_overflow(void **state)
{
	struct segment seg = { .fd = -1, .base = NULL, .size = 4096 };

	(void)state;
	/* off + len wraps around to something small: must still fail */
	assert_false(segment_contains(&seg, ULLONG_MAX, 1));
	assert_false(segment_contains(&seg, ULLONG_MAX, 0));
	assert_false(segment_contains(&seg, ULLONG_MAX - 10, 20));
	assert_false(segment_contains(&seg, 16, ULLONG_MAX - 15));
	assert_false(segment_contains(&seg, 1, ULLONG_MAX));
	assert_false(segment_contains(&seg, 0, ULLONG_MAX));
	assert_false(segment_contains(&seg, 1ull << 63, 1ull << 63));

	seg.size = 0;
	assert_true(segment_contains(&seg, 0, 0));
	assert_false(segment_contains(&seg, 0, 1));
	assert_false(segment_contains(&seg, 1, 0));
}

/* What a sender can do to the daemon's mapping: nothing that shrinks it. */
static void test_segment_created_sealed_against_shrink(void **state)
{
	struct segment a;

	(void)state;
	assert_int_equal(segment_create(&a, 2 * page_size(), "sealed"), 0);
	assert_true(fcntl(a.fd, F_GET_SEALS) & F_SEAL_SHRINK);
	assert_int_equal(ftruncate(a.fd, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(a.fd, (off_t)(4 * page_size())), 0);
	segment_destroy(&a);
}

/* A memfd that allows sealing but is not sealed: the receiver seals it. */
static void test_segment_map_fd_seals_unsealed_memfd(void **state)
{
	struct segment seg;
	int fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int keep;

	(void)state;
	assert_int_equal(ftruncate(fd, (off_t)page_size()), 0);
	memset(mmap(NULL, page_size(), PROT_WRITE, MAP_SHARED, fd, 0), 1,
	       page_size());	/* populated (the mapping leaks: a test) */
	keep = dup(fd);
	assert_int_equal(segment_map_fd(&seg, fd, page_size()), 0);
	assert_int_equal(seg.fd, -1);		/* mapped: fd not kept */
	assert_false(fd_is_open(fd));
	assert_int_equal(ftruncate(keep, 0), -1);	/* now it cannot */
	/* nor punch a hole: the pages under the mapping are fixed */
	assert_int_equal(fallocate(keep, FALLOC_FL_PUNCH_HOLE |
				   FALLOC_FL_KEEP_SIZE, 0, 4096), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(((unsigned char *)seg.base)[7], 1);
	segment_destroy(&seg);
	close(keep);
}

/* Refused: a memfd that forbids sealing, a sparse one, a disk file. */
static void test_segment_map_fd_rejects_unsafe_fds(void **s)
{
	struct segment seg;
	char path[] = "/tmp/tally-seg-XXXXXX";
	int fd = memfd_create("nosealing", MFD_CLOEXEC);

	(void)s;
	assert_int_equal(ftruncate(fd, (off_t)page_size()), 0);
	assert_int_equal(segment_map_fd(&seg, fd, page_size()),
			 -TALLY_EINVAL);
	assert_false(fd_is_open(fd));

	fd = memfd_create("sparse", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_int_equal(ftruncate(fd, (off_t)(1024 * page_size())), 0);
	assert_int_equal(segment_map_fd(&seg, fd, 1024 * page_size()),
			 -TALLY_EINVAL);

	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, (off_t)page_size()), 0);
	assert_int_equal(segment_map_fd(&seg, fd, page_size()),
			 -TALLY_EINVAL);
	assert_null(seg.base);
}

static void test_segment_map_fd_size_limit(void **state)
{
	struct segment seg;
	int fd = memfd_create("big", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	(void)state;
	assert_int_equal(segment_map_fd(&seg, fd, SEGMENT_MAX_BYTES + 1),
			 -TALLY_ELIMIT);
	assert_false(fd_is_open(fd));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_segment_create_rounds_to_page),
		cmocka_unit_test(test_segment_create_zero_bytes_fails),
		cmocka_unit_test(test_segment_create_huge_request_fails),
		cmocka_unit_test(test_segment_map_fd_shares_contents),
		cmocka_unit_test(test_segment_map_fd_smaller_size_ok),
		cmocka_unit_test(test_segment_map_fd_rejects_short_memfd),
		cmocka_unit_test(test_segment_map_fd_rejects_zero_size),
		cmocka_unit_test(test_segment_map_fd_rejects_pipe),
		cmocka_unit_test(test_segment_map_fd_rejects_bad_fd),
		cmocka_unit_test(test_segment_destroy_twice_is_safe),
		cmocka_unit_test(test_segment_contains_edges),
		cmocka_unit_test(test_segment_contains_overflow),
		cmocka_unit_test(test_segment_created_sealed_against_shrink),
		cmocka_unit_test(test_segment_map_fd_seals_unsealed_memfd),
		cmocka_unit_test(test_segment_map_fd_rejects_unsafe_fds),
		cmocka_unit_test(test_segment_map_fd_size_limit),
	};

	return cmocka_run_group_tests(tests, setup_no_huge, NULL);
}
