// SPDX-License-Identifier: BSD-3-Clause
/*
 * be_xdp.c - backend: the XDP aggregator (dataplane/xdp/agg.bpf.c), the
 * program the kernel verified, run frame by frame through
 * BPF_PROG_TEST_RUN as tests/xdp/test_xdp_agg.c does.  Worker packets
 * get an Ethernet/IPv4/UDP envelope from their rank's address; a frame
 * the program sends back (XDP_TX) goes to the worker it names, or, when
 * it is addressed to the job's group (rank 0xffff), to every worker.
 * The runner's virtual clock does not reach the kernel's: the sweep runs
 * every 25 ms of virtual time and frees partials older than 25 ms of
 * real time, above the workers' retry ceiling in either.  Needs root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include "conf.h"
#include "dataplane/xdp/xdp_ctl.h"

#define PORT		47300
#define GROUP_PORT	47301
#define GROUP_IP	0xef070002u	/* 239.7.0.2 */
#define FRAME_MAX	(TLY_L2L4_LEN + CF_PKT_MAX)
#define SWEEP_NS	25000000ull

struct be_xdp {
	struct cf_backend be;
	struct tly_xdp_ctl *ctl;
	uint64_t next_sweep;
};

static const struct tly_addr agg_addr = {
	{ 0x02, 0, 0, 0, 0, 0xaa }, 0x0a620001, PORT,
};

static struct tly_addr worker_addr(uint16_t rank)
{
	struct tly_addr a = { { 0x02, 0, 0, 0, 1, (uint8_t)rank },
			      0x0a620100u + rank, (uint16_t)(47400 + rank) };

	return a;
}

static void x_rx(struct cf_backend *be, uint16_t rank, const uint8_t *pkt,
		 size_t len, uint64_t now)
{
	struct be_xdp *x = (struct be_xdp *)be;
	uint8_t in[FRAME_MAX], out[FRAME_MAX];
	struct tly_addr w = worker_addr(rank);
	LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = in,
		    .data_size_in = (uint32_t)(TLY_L2L4_LEN + len),
		    .data_out = out, .data_size_out = sizeof(out),
		    .repeat = 1);
	uint16_t to;

	(void)now;
	if (len > CF_PKT_MAX)
		return;
	memcpy(in + TLY_L2L4_LEN, pkt, len);
	tly_l2l4_write(in, &w, &agg_addr, 3, len);
	if (bpf_prog_test_run_opts(tly_xdp_prog_fd(x->ctl), &t) ||
	    t.retval != XDP_TX || t.data_size_out < TLY_L2L4_LEN + TLY_HDR_LEN)
		return;
	to = tly_get16(out + TLY_L2L4_LEN + 4);
	if (tly_get32(out + TLY_ETH_LEN + 16) == GROUP_IP)
		to = CF_GROUP;
	x->be.reply(x->be.run, to, out + TLY_L2L4_LEN,
		    t.data_size_out - TLY_L2L4_LEN);
}

static void x_poll(struct cf_backend *be, uint64_t now, uint64_t wait_ns)
{
	struct be_xdp *x = (struct be_xdp *)be;

	(void)wait_ns;
	if (now < x->next_sweep)
		return;
	tly_xdp_sweep(x->ctl, SWEEP_NS, NULL);
	x->next_sweep = now + SWEEP_NS;
}

static void x_destroy(struct cf_backend *be)
{
	struct be_xdp *x = (struct be_xdp *)be;

	tly_xdp_close(x->ctl);
	free(x);
}

struct cf_backend *cf_be_xdp(const struct cf_job *j)
{
	struct be_xdp *x = calloc(1, sizeof(*x));
	struct tly_xdp_job xj = {
		.cookie = j->cookie, .job = j->job, .n_workers = j->n,
		.k = j->k, .port = PORT, .n_slots = j->slots,
		.group_ip = GROUP_IP, .group_port = GROUP_PORT,
	};
	int e;

	if (!x)
		return NULL;
	e = tly_xdp_open(&x->ctl, j->slots);
	if (e) {
		fprintf(stderr, "xdp backend: load: %s (needs root)\n",
			strerror(-e));
		free(x);
		return NULL;
	}
	tly_group_mac(GROUP_IP, xj.group_mac);
	e = tly_xdp_set_job(x->ctl, &xj);
	if (e) {
		fprintf(stderr, "xdp backend: job: %s\n", strerror(-e));
		tly_xdp_close(x->ctl);
		free(x);
		return NULL;
	}
	x->be = (struct cf_backend){
		.name = "xdp", .rx = x_rx, .poll = x_poll,
		.destroy = x_destroy,
	};
	x->next_sweep = SWEEP_NS;
	return &x->be;
}
