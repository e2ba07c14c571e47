// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_link_emu.c - the link emulator with explicit time: rate, delay,
 * jitter, loss, duplication, reordering, pool exhaustion, ingress rate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dataplane/transport/link_emu.h"

#define US 1000ull
#define MS 1000000ull

struct got {
	uint32_t idx;		/* the frame's number, from its first bytes */
	uint64_t due;
	uint32_t len;
};

static void put_idx(uint8_t *p, uint32_t i)
{
	memcpy(p, &i, 4);
}

/* offer frame @i of @len bytes at @now to egress */
static int offer(struct link_emu *e, uint64_t now, uint32_t i, size_t len)
{
	uint8_t buf[2048];

	memset(buf, (int)(i & 0xff), len);
	put_idx(buf, i);
	return link_emu_egress(e, now, 7, buf, len);
}

/* take everything of @dir due at @now into @g; returns how many */
static uint32_t drain(struct link_emu *e, enum link_emu_dir dir,
		      uint64_t now, struct got *g, uint32_t max)
{
	uint32_t n = 0;

	while (link_emu_peek(e, dir, now)) {
		struct link_emu_frame f = link_emu_take(e, dir);

		assert_true(n < max);
		assert_true(f.due_ns <= now);
		memcpy(&g[n].idx, f.data, 4);
		g[n].due = f.due_ns;
		g[n].len = f.len;
		if (dir == LINK_EMU_EGRESS)
			assert_int_equal(f.dst, 7);
		link_emu_free(e, f.data);
		n++;
	}
	return n;
}

static void test_wanted(void **state)
{
	struct link_emu_config c = { 0 };

	(void)state;
	assert_false(link_emu_wanted(&c));
	c.seed = 5;		/* a seed alone changes nothing */
	assert_false(link_emu_wanted(&c));
	c.loss_ppm = 1;
	assert_true(link_emu_wanted(&c));
}

static void test_rate(void **state)
{
	/* 1 Gb/s, 1000 bytes + 24 overhead: 8192 ns a frame */
	struct link_emu_config c = { .rate_bps = 1000000000ull };
	const uint32_t n = 200, len = 1000, ft = 8192;
	struct link_emu *e = link_emu_create(&c, 512, 2048, 24);
	static struct got g[512];
	uint32_t i, k;

	(void)state;
	assert_non_null(e);
	for (i = 0; i < n; i++)
		assert_int_equal(offer(e, 0, i, len), 1);
	/* nothing leaves before the first frame is serialized */
	assert_int_equal(drain(e, LINK_EMU_EGRESS, ft - 1, g, 512), 0);
	k = drain(e, LINK_EMU_EGRESS, ft, g, 512);
	assert_int_equal(k, 1);
	/* half way: half of them, give or take one frame */
	k += drain(e, LINK_EMU_EGRESS, (uint64_t)n * ft / 2, g + k, 512);
	assert_in_range(k, n / 2 - 1, n / 2 + 1);
	k += drain(e, LINK_EMU_EGRESS, UINT64_MAX, g + k, 512);
	assert_int_equal(k, n);
	/* the burst took n * L * 8 / rate, within one frame time */
	assert_in_range(g[n - 1].due, (uint64_t)n * ft - ft,
			(uint64_t)n * ft + ft);
	for (i = 0; i < n; i++) {
		assert_int_equal(g[i].idx, i);
		assert_int_equal(g[i].len, len);
		if (i)	/* evenly paced */
			assert_in_range(g[i].due - g[i - 1].due, ft - 1,
					ft + 1);
	}
	/* an idle link starts fresh: no debt from the past */
	offer(e, 10 * MS, n, len);
	k = drain(e, LINK_EMU_EGRESS, UINT64_MAX, g, 512);
	assert_int_equal(k, 1);
	assert_int_equal(g[0].due, 10 * MS + ft);
	link_emu_destroy(e);
}

static void test_delay_jitter(void **state)
{
	struct link_emu_config c = {
		.delay_ns = 100 * US, .jitter_ns = 20 * US, .seed = 1,
	};
	struct link_emu *e = link_emu_create(&c, 4096, 64, 0);
	static struct got g[4096];
	uint64_t lo = UINT64_MAX, hi = 0, d;
	uint32_t i, k = 0;

	(void)state;
	/* spaced more than the jitter: FIFO clamping never applies */
	for (i = 0; i < 2000; i++) {
		offer(e, i * 50 * US, i, 64);
		k += drain(e, LINK_EMU_EGRESS, i * 50 * US, g + k, 4096 - k);
	}
	k += drain(e, LINK_EMU_EGRESS, UINT64_MAX, g + k, 4096 - k);
	assert_int_equal(k, 2000);
	for (i = 0; i < k; i++) {
		d = g[i].due - g[i].idx * 50 * US;
		assert_in_range(d, 100 * US, 120 * US);
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
	}
	/* the jitter is spread over its range */
	assert_true(lo < 101 * US);
	assert_true(hi > 119 * US);

	/* offered together, jitter must not reorder them */
	for (i = 0; i < 500; i++)
		offer(e, 1000 * MS, i, 64);
	k = drain(e, LINK_EMU_EGRESS, UINT64_MAX, g, 4096);
	assert_int_equal(k, 500);
	for (i = 0; i < k; i++) {
		assert_int_equal(g[i].idx, i);
		assert_in_range(g[i].due, 1000 * MS + 100 * US,
				1000 * MS + 120 * US);
	}
	link_emu_destroy(e);
}

/* indices that got through a loss of @ppm with @seed, as a bitmap */
static uint32_t lossy_run(uint64_t seed, uint32_t ppm, uint32_t n,
			  uint8_t *seen)
{
	struct link_emu_config c = { .loss_ppm = ppm, .seed = seed };
	struct link_emu *e = link_emu_create(&c, 64, 64, 0);
	struct got g[64];
	uint32_t i, j, k, total = 0;

	memset(seen, 0, n / 8 + 1);
	for (i = 0; i < n; i++) {
		offer(e, i, i, 64);
		k = drain(e, LINK_EMU_EGRESS, i, g, 64);
		for (j = 0; j < k; j++)
			seen[g[j].idx / 8] |= (uint8_t)(1u << (g[j].idx % 8));
		total += k;
	}
	assert_int_equal(link_emu_stats(e)->lost, n - total);
	link_emu_destroy(e);
	return total;
}

static void test_loss(void **state)
{
	const uint32_t n = 100000;
	static uint8_t a[100000 / 8 + 1], b[100000 / 8 + 1];
	uint32_t got, lost;

	(void)state;
	/* 1 %: 1000 expected, sd ~31.5; 5 sd either side */
	got = lossy_run(42, 10000, n, a);
	lost = n - got;
	assert_in_range(lost, 1000 - 160, 1000 + 160);
	/* the same seed replays exactly */
	assert_int_equal(lossy_run(42, 10000, n, b), got);
	assert_memory_equal(a, b, sizeof(a));
	/* another seed loses other frames */
	lossy_run(43, 10000, n, b);
	assert_memory_not_equal(a, b, sizeof(a));
	/* 0 loses nothing, 1e6 everything */
	assert_int_equal(lossy_run(1, 0, 1000, b), 1000);
	assert_int_equal(lossy_run(1, 1000000, 1000, b), 0);
}

static void test_dup(void **state)
{
	struct link_emu_config c = { .dup_ppm = 20000, .seed = 9 };
	struct link_emu *e = link_emu_create(&c, 64, 64, 0);
	const uint32_t n = 20000;
	uint32_t i, k, total = 0, dups = 0, prev = UINT32_MAX;
	struct got g[64];

	(void)state;
	for (i = 0; i < n; i++) {
		offer(e, i, i, 64);
		k = drain(e, LINK_EMU_EGRESS, i, g, 64);
		total += k;
		for (uint32_t j = 0; j < k; j++) {
			/* a copy follows its original at once */
			if (g[j].idx == prev)
				dups++;
			else
				assert_int_equal(g[j].idx, prev + 1);
			prev = g[j].idx;
		}
	}
	/* 2 %: 400 expected, sd ~20 */
	assert_int_equal(total, n + dups);
	assert_int_equal(link_emu_stats(e)->dup, dups);
	assert_in_range(dups, 400 - 100, 400 + 100);
	link_emu_destroy(e);
}

static void test_reorder(void **state)
{
	struct link_emu_config c = {
		.reorder_ppm = 50000, .reorder_ns = 1 * MS, .seed = 3,
	};
	struct link_emu *e = link_emu_create(&c, 512, 64, 0);
	const uint32_t n = 10000, step = 10 * US;
	static struct got g[10000];
	static uint8_t late[10000];
	uint32_t i, k = 0, held = 0, inversions = 0, max = 0;

	(void)state;
	for (i = 0; i < n; i++) {
		offer(e, (uint64_t)i * step, i, 64);
		k += drain(e, LINK_EMU_EGRESS, (uint64_t)i * step, g + k,
			   n - k);
	}
	k += drain(e, LINK_EMU_EGRESS, UINT64_MAX, g + k, n - k);
	assert_int_equal(k, n);
	for (i = 0; i < n; i++) {
		uint64_t d = g[i].due - (uint64_t)g[i].idx * step;

		assert_true(d == 0 || d == 1 * MS);
		late[g[i].idx] = d != 0;
		held += d != 0;
		if (i && g[i].idx < max)
			inversions++;
		max = g[i].idx > max ? g[i].idx : max;
	}
	/* 5 %: 500 expected, sd ~22 */
	assert_int_equal(held, link_emu_stats(e)->reordered);
	assert_in_range(held, 500 - 110, 500 + 110);
	/* every held frame not at the very end was overtaken */
	held = 0;
	for (i = 0; i < n - 200; i++)
		held += late[i];
	assert_true(inversions >= held);
	assert_true(inversions <= link_emu_stats(e)->reordered);
	link_emu_destroy(e);
}

static void test_pool_exhaustion(void **state)
{
	struct link_emu_config c = { .delay_ns = 1 * MS };
	struct link_emu *e = link_emu_create(&c, 16, 256, 0);
	struct got g[32];
	uint32_t i, queued = 0;

	(void)state;
	for (i = 0; i < 20; i++)
		queued += (uint32_t)offer(e, 0, i, 100);
	assert_int_equal(queued, 16);
	assert_int_equal(link_emu_held(e, LINK_EMU_EGRESS), 16);
	assert_int_equal(link_emu_stats(e)->pool_drops, 4);
	assert_null(link_emu_alloc(e, 10));
	assert_int_equal(link_emu_stats(e)->pool_drops, 5);
	/* too long for a buffer: refused and counted apart */
	assert_null(link_emu_alloc(e, 257));
	assert_int_equal(link_emu_stats(e)->too_long, 1);
	assert_int_equal(link_emu_next_due(e), 1 * MS);
	assert_int_equal(drain(e, LINK_EMU_EGRESS, 1 * MS, g, 32), 16);
	assert_int_equal(link_emu_next_due(e), UINT64_MAX);
	/* buffers came back */
	for (i = 0; i < 16; i++)
		assert_int_equal(offer(e, 2 * MS, i, 100), 1);
	link_emu_destroy(e);
}

static void test_ingress_rate(void **state)
{
	/* 1250 bytes at 1 Gb/s: 10 us a frame */
	struct link_emu_config c = { .rate_bps = 1000000000ull };
	struct link_emu *e = link_emu_create(&c, 128, 2048, 0);
	uint8_t buf[1250];
	struct got g[128];
	uint32_t i, k;

	(void)state;
	for (i = 0; i < 50; i++) {
		put_idx(buf, i);
		assert_int_equal(link_emu_ingress(e, 0, buf, sizeof(buf)), 1);
	}
	assert_int_equal(link_emu_held(e, LINK_EMU_INGRESS), 50);
	assert_int_equal(link_emu_held(e, LINK_EMU_EGRESS), 0);
	assert_null(link_emu_peek(e, LINK_EMU_INGRESS, 10 * US - 1));
	k = drain(e, LINK_EMU_INGRESS, 250 * US, g, 128);
	assert_int_equal(k, 25);
	k += drain(e, LINK_EMU_INGRESS, UINT64_MAX, g + k, 128 - k);
	assert_int_equal(k, 50);
	for (i = 0; i < 50; i++) {
		assert_int_equal(g[i].idx, i);
		assert_int_equal(g[i].due, (uint64_t)(i + 1) * 10 * US);
	}
	/* the egress serializer is independent of the ingress one */
	offer(e, 0, 99, 1250);
	assert_non_null(link_emu_peek(e, LINK_EMU_EGRESS, 10 * US));
	link_emu_destroy(e);
}

/* the whole schedule, not only counts, replays for a seed */
static void test_replay(void **state)
{
	struct link_emu_config c = {
		.rate_bps = 10000000000ull, .delay_ns = 5 * US,
		.jitter_ns = 3 * US, .loss_ppm = 30000, .dup_ppm = 30000,
		.reorder_ppm = 30000, .reorder_ns = 50 * US, .seed = 77,
	};
	static struct got a[4096], b[4096];
	uint32_t ka = 0, kb = 0, i, r;

	(void)state;
	for (r = 0; r < 2; r++) {
		struct link_emu *e = link_emu_create(&c, 4096, 2048, 24);
		struct got *g = r ? b : a;
		uint32_t *k = r ? &kb : &ka;

		for (i = 0; i < 2000; i++)
			offer(e, i * 700, i, 64 + i % 1400);
		*k = drain(e, LINK_EMU_EGRESS, UINT64_MAX, g, 4096);
		link_emu_destroy(e);
	}
	assert_int_equal(ka, kb);
	assert_memory_equal(a, b, ka * sizeof(a[0]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wanted),
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_delay_jitter),
		cmocka_unit_test(test_loss),
		cmocka_unit_test(test_dup),
		cmocka_unit_test(test_reorder),
		cmocka_unit_test(test_pool_exhaustion),
		cmocka_unit_test(test_ingress_rate),
		cmocka_unit_test(test_replay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
