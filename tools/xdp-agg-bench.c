// SPDX-License-Identifier: BSD-3-Clause
/*
 * xdp-agg-bench - packets per second the XDP aggregator's program
 * (dataplane/xdp/agg.bpf.c) absorbs on one core, K in the switch profile.
 *
 * The program runs through BPF_PROG_TEST_RUN, one frame a call, on the
 * stream a job sends it: per chunk n DATA (the last completes the slot
 * and becomes the RESULT to the group), and per 8 chunks n CONFIRM of the
 * 8 (the default release_batch; the last frees them), chunk after chunk.
 * The time is the kernel's own measure of the program (the run's
 * duration, without the system call); the packet count is the
 * program's counter (rx).  Each run's duration includes the test run's
 * own cost (printed: a run of a frame the program passes at once), so
 * the figures are below what the program alone would do.  Needs root
 * (CAP_BPF).
 *
 *   figure xdp_agg_mpps <Mpps at the profile's default K = 352, n = 4>
 *   figure xdp_agg_mpps_k64, _k128, _k256, _k832 (jumbo frames)
 *   figure xdp_agg_data_ns <ns per DATA at K = 352>
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "dataplane/xdp/xdp_ctl.h"

#define PORT	47700
#define N	4
#define CHUNKS	20000
#define RECEIPTS TLY_SWITCH_RECEIPTS

static struct tly_xdp_ctl *ctl;

/* chunk @c of the stream: its tensor and index */
static uint32_t tensor_of(uint32_t c)
{
	return 1000 + c / 1024;
}

static uint16_t index_of(uint32_t c)
{
	return (uint16_t)(c % 1024);
}

/*
 * A frame from worker @rank as tally's worker sends them: an int32 DATA
 * of chunk @cs[0], or a CONFIRM of the @n chunks @cs that asks for its ACK
 * (docs/switch-profile.md: a CONFIRM with any other flag, INT included,
 * is dropped).
 */
static uint32_t frame(uint8_t *f, const struct tly_xdp_job *j, uint8_t type,
		      const uint32_t *cs, unsigned int n, uint16_t rank)
{
	struct tly_addr w = { { 2, 0, 0, 0, 1, (uint8_t)rank },
			      0x0a640100u + rank, 47800 };
	struct tly_addr a = { { 2, 0, 0, 0, 0, 1 }, 0x0a640001, PORT };
	struct tly_hdr h = {
		.type = type,
		.flags = type == TLY_T_DATA ? TLY_F_INT : TLY_F_ACK_REQ,
		.job = j->job, .rank = rank, .tensor = tensor_of(cs[0]),
		.chunk = index_of(cs[0]), .cookie = j->cookie,
	};
	size_t i, lanes = type == TLY_T_DATA ? j->k : 0;
	size_t tl = TLY_HDR_LEN + 4 * lanes;

	h.slot = (uint16_t)tly_slot_of(h.tensor, h.chunk, 0, j->n_slots);
	if (type == TLY_T_CONFIRM) {
		h.aux = (uint8_t)(n - 1);
		tl += TLY_RECEIPT_LEN * h.aux;
		for (i = 1; i < n; i++)
			tly_receipt_put(f + TLY_L2L4_LEN + TLY_HDR_LEN +
						TLY_RECEIPT_LEN * (i - 1),
					tensor_of(cs[i]), index_of(cs[i]),
					(uint16_t)tly_slot_of(tensor_of(cs[i]),
							      index_of(cs[i]),
							      0, j->n_slots));
	}
	tly_hdr_write(f + TLY_L2L4_LEN, &h);
	for (i = 0; i < lanes; i++)
		tly_put32(f + TLY_L2L4_LEN + TLY_HDR_LEN + 4 * i,
			  (uint32_t)(i + rank));
	tly_l2l4_write(f, &w, &a, 0, tl);
	return (uint32_t)(TLY_L2L4_LEN + tl);
}

/* one run; adds its duration (ns) to *ns; the program's verdict, and in
 * *busy (if not NULL) whether its answer was a BUSY */
static uint32_t run(const uint8_t *f, uint32_t len, uint64_t *ns, int *busy)
{
	uint8_t out[4096];
	LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = f, .data_size_in = len,
		    .data_out = out, .data_size_out = sizeof(out),
		    .repeat = 1);

	if (bpf_prog_test_run_opts(tly_xdp_prog_fd(ctl), &t)) {
		perror("xdp-agg-bench: BPF_PROG_TEST_RUN");
		exit(1);
	}
	*ns += t.duration;
	if (busy)
		*busy = t.retval == XDP_TX &&
			t.data_size_out > TLY_L2L4_LEN &&
			(out[TLY_L2L4_LEN] & 0x0f) == TLY_T_BUSY;
	return t.retval;
}

/* Mpps over the whole stream; *data_ns: ns per DATA */
static double bench(uint16_t k, double *data_ns)
{
	struct tly_xdp_job j = {
		.cookie = 0xc0ffee01, .job = 0x0bad, .n_workers = N, .k = k,
		.port = PORT, .n_slots = 4096, .group_ip = 0xef070009,
		.group_port = PORT + 1,
	};
	uint64_t before[TLY_XDP_C_COUNT], after[TLY_XDP_C_COUNT];
	uint64_t ns = 0, ns_data = 0, n_data = 0, ns_conf = 0, n_conf = 0;
	uint64_t pkts;
	uint32_t retry[RECEIPTS], next = 0, len;
	unsigned int n_retry = 0;
	uint8_t f[4096];
	uint16_t r;

	tly_group_mac(j.group_ip, j.group_mac);
	if (tly_xdp_set_job(ctl, &j) || tly_xdp_counters(ctl, before)) {
		fprintf(stderr, "xdp-agg-bench: job\n");
		exit(1);
	}
	/* groups of RECEIPTS chunks, refused ones (BUSY: their slot is
	 * still held by a chunk of the group) first in the next group, as
	 * the worker offers them again */
	while (next < CHUNKS || n_retry) {
		uint32_t group[RECEIPTS], taken[RECEIPTS];
		unsigned int n_group = 0, n_taken = 0, i;

		while (n_group < RECEIPTS && n_retry)
			group[n_group++] = retry[--n_retry];
		while (n_group < RECEIPTS && next < CHUNKS)
			group[n_group++] = next++;
		for (i = 0; i < n_group; i++) {
			int busy = 0, b;

			for (r = 0; r < N; r++) {
				uint64_t t = 0;

				len = frame(f, &j, TLY_T_DATA, &group[i], 1, r);
				run(f, len, &t, &b);
				busy |= b;
				ns_data += t;
				n_data++;
			}
			if (busy)
				retry[n_retry++] = group[i];
			else
				taken[n_taken++] = group[i];
		}
		if (!n_taken)
			continue;
		for (r = 0; r < N; r++) {
			len = frame(f, &j, TLY_T_CONFIRM, taken, n_taken, r);
			run(f, len, &ns_conf, NULL);
			n_conf++;
		}
	}
	ns = ns_data + ns_conf;
	if (tly_xdp_counters(ctl, after)) {
		fprintf(stderr, "xdp-agg-bench: counters\n");
		exit(1);
	}
	pkts = after[TLY_XDP_C_RX] - before[TLY_XDP_C_RX];
	if (after[TLY_XDP_C_COMPLETIONS] - before[TLY_XDP_C_COMPLETIONS] !=
	    CHUNKS ||
	    after[TLY_XDP_C_FREED] - before[TLY_XDP_C_FREED] != CHUNKS) {
		fprintf(stderr, "xdp-agg-bench: the stream did not complete (%llu of %u chunks completed, %llu freed; dropped as flags %llu, busy %llu)\n",
			(unsigned long long)(after[TLY_XDP_C_COMPLETIONS] -
					     before[TLY_XDP_C_COMPLETIONS]),
			CHUNKS,
			(unsigned long long)(after[TLY_XDP_C_FREED] -
					     before[TLY_XDP_C_FREED]),
			(unsigned long long)(after[TLY_E_FLAGS] -
					     before[TLY_E_FLAGS]),
			(unsigned long long)(after[TLY_XDP_C_BUSY] -
					     before[TLY_XDP_C_BUSY]));
		exit(1);
	}
	*data_ns = (double)ns_data / (double)n_data;
	printf("K %3u  n %d  packets %llu  %.1f ns/packet  DATA %.1f ns  "
	       "CONFIRM of %d %.1f ns  %.2f Mpps\n", k, N,
	       (unsigned long long)pkts, (double)ns / (double)pkts, *data_ns,
	       RECEIPTS, (double)ns_conf / (double)n_conf,
	       (double)pkts * 1e3 / (double)ns);
	return (double)pkts * 1e3 / (double)ns;
}

/* ns of one run that only reads the envelope (another UDP port): what
 * BPF_PROG_TEST_RUN itself adds to every run above */
static double baseline(void)
{
	struct tly_xdp_job j = { .k = 64, .n_slots = 1 };
	uint64_t ns = 0;
	uint8_t f[4096];
	uint32_t len, i, c = 1025;

	len = frame(f, &j, TLY_T_DATA, &c, 1, 0);
	tly_put16(f + TLY_ETH_LEN + TLY_IP_LEN + 2, PORT + 2);
	for (i = 0; i < 100000; i++)
		if (run(f, len, &ns, NULL) != XDP_PASS)
			exit(1);
	return (double)ns / 100000;
}

int main(void)
{
	struct tly_xdp_prog_info info;
	double m64, m128, m256, m832, m_default, d, d832;

	if (tly_xdp_open(&ctl, 4096)) {
		fprintf(stderr, "xdp-agg-bench: cannot load (root?)\n");
		return 1;
	}
	if (!tly_xdp_info(ctl, &info))
		printf("program: %u instructions, %u verified, %s\n",
		       info.xlated_insns, info.verified_insns,
		       tly_xdp_lock_name(info.lock));
	m64 = bench(64, &d);
	m128 = bench(128, &d);
	m256 = bench(256, &d);
	m832 = bench(TLY_SWITCH_K_MAX, &d832);
	m_default = bench(TLY_SWITCH_K_MTU1500, &d);	/* the daemon's default */
	printf("a run that passes the frame at once: %.1f ns (the test run's "
	       "own cost, included above)\n", baseline());
	printf("figure xdp_agg_mpps %.2f Mpps\n", m_default);
	printf("figure xdp_agg_mpps_k64 %.2f Mpps\n", m64);
	printf("figure xdp_agg_mpps_k128 %.2f Mpps\n", m128);
	printf("figure xdp_agg_mpps_k256 %.2f Mpps\n", m256);
	printf("figure xdp_agg_mpps_k832 %.2f Mpps\n", m832);
	printf("figure xdp_agg_data_ns %.1f ns\n", d);
	printf("figure xdp_agg_data_ns_k832 %.1f ns\n", d832);
	tly_xdp_close(ctl);
	return 0;
}
