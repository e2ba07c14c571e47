// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_udp_checksum.c - frames with UDP checksums, some corrupted on the
 * wire after the checksum was made (as a link or a switch's buffer may
 * do past the Ethernet FCS): every receiver drops exactly the corrupted
 * ones (counted as L4), recovery resends them, and every sum is exact.
 * Full Ethernet/IPv4/UDP frames, as the DPDK transports carry them, where
 * no kernel checks the checksum; the XDP aggregator sends checksums.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cluster.h"
#include "expect.h"

#define K 64
#define N_T 2

/* the "wire": a checksum on every frame, one in ten then corrupted */
struct wire {
	uint64_t rng;
	uint64_t frames, corrupted;
};

static void checksum_and_corrupt(void *ctx, uint16_t src, uint16_t dst,
				 uint8_t *frame, size_t len)
{
	struct wire *wr = ctx;
	uint8_t *ip = frame + TLY_ETH_LEN;

	(void)src;
	(void)dst;
	assert_true(len > TLY_L2L4_LEN);
	tly_put16(ip + TLY_IP_LEN + 6, tly_udp_checksum(ip));
	wr->frames++;
	if (fab_rand(&wr->rng) % 10)
		return;
	/* the last byte is the datagram's: payload, receipts or header */
	frame[len - 1] ^= (uint8_t)(1u << (fab_rand(&wr->rng) % 8));
	wr->corrupted++;
}

static uint64_t l4_drops(const struct cluster *cl, uint16_t n_workers)
{
	uint64_t n = 0;
	uint16_t i;

	for (i = 0; i < cl->n_nodes; i++) {
		if (i < n_workers)
			n += tly_worker_counters(cl->w[i])->drops[TLY_E_L4];
		if (cl->a[i])
			n += tly_agg_counters(cl->a[i])->drops[TLY_E_L4];
	}
	return n;
}

static void run_role(enum cl_role role, int multicast, uint64_t seed)
{
	static const size_t sizes[N_T] = { K * 37 + 5, K * 9 };
	struct wire wr = { .rng = seed };
	struct cl_cfg c = {
		.n_workers = 3, .k = K, .role = role, .n_slots = 256,
		.n_fallback = 32, .window = 8, .l2l4 = 1,
		.multicast = multicast,
		.fab = { .seed = seed, .delay_ns = 2000,
			 .mutate = checksum_and_corrupt, .mutate_ctx = &wr },
	};
	struct cluster *cl = cl_create(&c);
	struct dp_tensors b;
	uint16_t w;
	uint32_t t;

	assert_non_null(cl);
	dp_tensors_alloc(&b, TLY_DT_I32, c.n_workers, N_T, sizes, seed);
	for (w = 0; w < c.n_workers; w++)
		for (t = 0; t < N_T; t++) {
			struct tly_tensor_desc d = {
				.id = tly_tensor_id(0x2000 + t, 1, 0),
				.dtype = TLY_DT_I32,
				.algo = role == CL_RING ? TLY_ALGO_RING :
							  TLY_ALGO_AGG,
				.src = b.in[w][t], .dst = b.out[w][t],
				.count = sizes[t],
			};

			assert_int_equal(tly_worker_submit(cl->w[w], &d, 0),
					 0);
		}
	assert_int_equal(cl_run(cl, N_T, 2000000000ull), 0);
	for (t = 0; t < N_T; t++)
		for (w = 0; w < c.n_workers; w++)
			dp_check_int(c.n_workers, dp_tensor_inputs(&b, t),
				     b.out[w][t], sizes[t], t);
	/* no loss, no duplication: each corrupted frame reached one
	 * receiver, which dropped it; no other frame was dropped so */
	printf("%s: %llu frames, %llu corrupted and dropped\n",
	       role == CL_RING ? "ring" : role == CL_DEDICATED ? "dedicated" :
	       "co-located", (unsigned long long)wr.frames,
	       (unsigned long long)wr.corrupted);
	assert_true(wr.corrupted > 10);
	assert_int_equal(l4_drops(cl, c.n_workers), wr.corrupted);
	dp_tensors_free(&b);
	cl_destroy(cl);
}

static void test_dedicated_multicast(void **state)
{
	(void)state;
	run_role(CL_DEDICATED, 1, 11);
}

static void test_colocated(void **state)
{
	(void)state;
	run_role(CL_COLOCATED, 0, 12);
}

static void test_ring(void **state)
{
	(void)state;
	run_role(CL_RING, 0, 13);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dedicated_multicast),
		cmocka_unit_test(test_colocated),
		cmocka_unit_test(test_ring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
