// SPDX-License-Identifier: BSD-3-Clause
/*
 * bench_bytes.c - bytes each worker host sends and receives per all-reduce
 * of S bytes, from the fabric's per-node counters (tally header + payload,
 * i.e. UDP payload bytes; traffic a co-located daemon sends to itself does
 * not cross a wire and is not counted), on a loss-free fabric, for the
 * three roles.  Also the wire efficiency of a DATA frame by K.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../tests/dataplane/cluster.h"
#include "dataplane/engine/wire.h"

#define COUNT (1024 * 1024)	/* float32 elements: S = 4 MiB */

struct ratio {
	double tx, rx;		/* worst worker, bytes / S */
};

static struct ratio measure(enum cl_role role, uint16_t n)
{
	struct cl_cfg c = {
		.n_workers = n, .k = 256, .role = role, .n_slots = 8192,
		.n_fallback = 256, .window = 64, .confirm_batch = 256,
		.fab = { .seed = 1, .delay_ns = 2000 },
	};
	struct cluster *cl = cl_create(&c);
	struct ratio r = { 0, 0 };
	float *in[64], *out[64];
	uint16_t w;
	size_t i;

	if (!cl)
		exit(1);
	for (w = 0; w < n; w++) {
		in[w] = malloc(COUNT * 4);
		out[w] = malloc(COUNT * 4);
		if (!in[w] || !out[w])
			exit(1);
		for (i = 0; i < COUNT; i++)
			in[w][i] = (float)((i * 7 + w) % 1000) * 0.01f;
		struct tly_tensor_desc d = {
			.id = 42, .dtype = TLY_DT_F32,
			.algo = role == CL_RING ? TLY_ALGO_RING : TLY_ALGO_AGG,
			.src = in[w], .dst = out[w], .count = COUNT,
		};
		if (tly_worker_submit(cl->w[w], &d, 0))
			exit(1);
	}
	if (cl_run(cl, 1, 10000000000ull)) {
		fprintf(stderr, "bench_bytes: all-reduce did not finish\n");
		exit(1);
	}
	cl_settle(cl, 200000);	/* the last receipts */
	for (w = 0; w < n; w++) {
		uint64_t tx, rx;

		fab_node_bytes(cl->fab, w, &tx, &rx);
		if ((double)tx / (COUNT * 4.0) > r.tx)
			r.tx = (double)tx / (COUNT * 4.0);
		if ((double)rx / (COUNT * 4.0) > r.rx)
			r.rx = (double)rx / (COUNT * 4.0);
		free(in[w]);
		free(out[w]);
	}
	cl_destroy(cl);
	return r;
}

int main(void)
{
	static const char *const names[] = { "dedicated", "co-located",
					     "ring" };
	static const uint16_t ns[] = { 2, 4, 8 };
	double fig_ded = 0, fig_ring = 0;
	unsigned int k, i, role;

	printf("wire efficiency of a DATA frame (payload K*4 over Ethernet "
	       "frame + 24):\n");
	printf("%6s %8s %12s %16s\n", "K", "frame", "efficiency",
	       "hdr as payload");
	for (k = 64; k <= 1024; k *= 2) {
		double frame = TLY_L2L4_LEN + TLY_HDR_LEN + 4.0 * k +
			       TLY_WIRE_EXTRA;

		printf("%6u %8.0f %12.4f %16.4f\n", k, frame - TLY_WIRE_EXTRA,
		       4.0 * k / frame, (4.0 * k + TLY_HDR_LEN) / frame);
	}
	printf("\nbytes per worker host per all-reduce of S = %d MiB "
	       "(K = 256, no loss), worst host:\n", COUNT * 4 >> 20);
	printf("%-11s %3s %8s %8s %10s %12s\n", "role", "n", "tx/S", "rx/S",
	       "bound/S", "max/bound");
	for (role = 0; role < 3; role++)
		for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
			uint16_t n = ns[i];
			struct ratio r = measure((enum cl_role)role, n);
			double bound = role == CL_DEDICATED ? 1.0 :
				       2.0 * (n - 1) / n;
			double m = (r.tx > r.rx ? r.tx : r.rx) / bound;

			printf("%-11s %3u %8.4f %8.4f %10.4f %12.4f\n",
			       names[role], n, r.tx, r.rx, bound, m);
			if (n == 8 && role == CL_DEDICATED)
				fig_ded = m;
			if (n == 8 && role == CL_RING)
				fig_ring = m;
		}
	printf("figure-line wire_efficiency_k256 %.4f\n",
	       1024.0 / (TLY_L2L4_LEN + TLY_HDR_LEN + 1024 + TLY_WIRE_EXTRA));
	printf("figure-line bytes_per_host_ratio_dedicated %.4f\n", fig_ded);
	printf("figure-line bytes_per_host_ratio_ring %.4f\n", fig_ring);
	return 0;
}
