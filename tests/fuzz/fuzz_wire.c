// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_wire.c - libFuzzer target for everything that reads a received
 * frame: the header parser, then an aggregator and a worker (with a float
 * tensor through aggregation in each codec: int32, int16 and int8 lanes,
 * sign_ef and block_topk10_ef in the software profile,
 * docs/compression.md; and an int32 tensor through the ring) fed the
 * same packets, bare or in full Ethernet/IPv4/UDP frames, in the software
 * profile or the switch profile (docs/switch-profile.md: K = 64, no ring,
 * its CONFIRM of 1 to 8 chunks and the ACK echoing them, the aggregator's
 * sweep).  Full frames may carry a UDP checksum: mode bit 2 makes each
 * record's right (where its lengths let one be computed), so that the
 * path past the check is reached with any content.
 */
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/engine/agg.h"
#include "dataplane/engine/worker.h"

#define K 8
#define K_SWITCH 64

static uint8_t txbuf[2][4096];
static int n_tx;

static uint8_t *fz_alloc(void *ctx, size_t len)
{
	(void)ctx;
	if (len > sizeof(txbuf[0]))
		abort();
	return txbuf[n_tx++ & 1];
}

static void fz_send(void *ctx, uint16_t dst, uint8_t *frame, size_t len)
{
	(void)ctx;
	(void)frame;
	if (dst >= 4 || len > sizeof(txbuf[0]))
		abort();
}

static const struct tly_addr addrs[4] = {
	{ .mac = { 2, 0, 0, 0, 0, 1 }, .ip = 0x0a000001, .port = 9191 },
	{ .mac = { 2, 0, 0, 0, 0, 2 }, .ip = 0x0a000002, .port = 9191 },
	{ .mac = { 2, 0, 0, 0, 0, 3 }, .ip = 0x0a000003, .port = 9191 },
	{ .mac = { 2, 0, 0, 0, 0, 4 }, .ip = 0x0a000004, .port = 9191 },
};

struct engines {
	struct tly_agg *a;
	struct tly_worker *w;
	float src[100], dst[100];
	int32_t isrc[100], idst[100];
	float nsrc[700], ndst[2][700];	/* two chunks of the narrow lanes */
	float sdst[700], ssent[700];	/* sign_ef: four chunks */
	float kdst[700], ksent[700];	/* block_topk10_ef */
};

static void make(struct engines *e, int l2l4, int sw)
{
	static const uint16_t agg_nodes[1] = { 3 };
	struct tly_net net = {
		.addrs = l2l4 ? addrs : NULL, .n_nodes = 4, .port = 9191,
	};
	struct tly_tx_ops ops = { .alloc = fz_alloc, .send = fz_send };
	uint16_t k = sw ? K_SWITCH : K;
	uint8_t profile = sw ? TLY_PROFILE_SWITCH : TLY_PROFILE_SOFTWARE;
	struct tly_agg_cfg ac = {
		.job = 0x7a11, .k = k, .n_workers = 3, .self = 3,
		.n_slots = 16, .n_fallback = 4, .evict_ns = 100,
		.probe_ns = 100, .profile = profile, .net = net, .ops = ops,
	};
	struct tly_worker_cfg wc = {
		.job = 0x7a11, .k = k, .n_workers = 3, .rank = 0,
		.n_slots = 16, .n_aggs = 1, .agg_nodes = agg_nodes,
		.window = 4, .max_tensors = 6, .rto_ns = 10, .acked_ns = 10,
		.busy_ns = 10, .confirm_ns = 10, .profile = profile,
		.release_max = 4, .net = net, .ops = ops,
		/* switch profile: the ACK of one DATA stands for the one
		 * before it (worker_ack.c) */
		.ack_every = 2,
	};
	struct tly_tensor_desc d = {
		.id = 7, .dtype = TLY_DT_F32, .src = e->src, .dst = e->dst,
		.count = 100,
	};

	e->a = tly_agg_create(&ac);
	e->w = tly_worker_create(&wc);
	if (!e->a || !e->w || tly_worker_submit(e->w, &d, 0))
		abort();
	d.src = e->nsrc;
	d.count = 700;
	d.id = 10;		/* int16 lanes */
	d.codec = TLY_CODEC_INT16;
	d.dst = e->ndst[0];
	if (tly_worker_submit(e->w, &d, 0))
		abort();
	d.id = 11;		/* int8 lanes */
	d.codec = TLY_CODEC_INT8;
	d.dst = e->ndst[1];
	if (tly_worker_submit(e->w, &d, 0))
		abort();
	d.id = 12;		/* sign_ef: count lanes (not in a switch) */
	d.codec = TLY_CODEC_SIGN_EF;
	d.dst = e->sdst;
	d.sent = e->ssent;
	if (!sw && tly_worker_submit(e->w, &d, 0))
		abort();
	d.id = 13;		/* block_topk10_ef: m(b), PULL, counted round */
	d.codec = TLY_CODEC_TOPK10_EF;
	d.dst = e->kdst;
	d.sent = e->ksent;
	if (tly_worker_submit(e->w, &d, 0) != (sw ? -EINVAL : 0))
		abort();	/* not in a switch */
	d.sent = NULL;
	d.codec = TLY_CODEC_NONE;
	d.count = 100;
	d.id = 9;		/* an int32 tensor through aggregation */
	d.dtype = TLY_DT_I32;
	d.src = e->isrc;
	d.dst = e->idst;
	if (sw && tly_worker_submit(e->w, &d, 0))
		abort();
	d.id = 8;
	d.algo = TLY_ALGO_RING;
	d.dtype = TLY_DT_I32;
	d.src = e->isrc;
	d.dst = e->idst;
	if (tly_worker_submit(e->w, &d, 0) != (sw ? -EINVAL : 0))
		abort();		/* the switch profile has no ring */
	tly_worker_poll(e->w, 0);
}

/* a record as a frame whose UDP checksum is right, where its IPv4 and
 * UDP lengths agree and fit (otherwise as it came) */
static const uint8_t *with_checksum(const uint8_t *rec, size_t len)
{
	static uint8_t frame[65536];
	uint8_t *ip = frame + TLY_ETH_LEN, *udp = ip + TLY_IP_LEN;
	size_t ip_len;

	if (len < TLY_L2L4_LEN || len > sizeof(frame))
		return rec;
	memcpy(frame, rec, len);
	ip_len = tly_get16(ip + 2);
	if (ip_len < TLY_IP_LEN + TLY_UDP_LEN || ip_len > len - TLY_ETH_LEN ||
	    tly_get16(udp + 4) != ip_len - TLY_IP_LEN)
		return rec;
	tly_put16(udp + 6, tly_udp_checksum(ip));
	return frame;
}

/*
 * Input: one byte of mode (bit 0: full frames; bit 1: the switch
 * profile; bit 2: full frames' UDP checksums made right), then records of
 * [op][len:2][len bytes].  Each record goes to the aggregator and to the
 * worker; op's high bits advance the clock and run the pollers.  Fresh
 * engines per input, so a crash reproduces from its input alone.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct engines e = { 0 };
	uint64_t now = 1;
	size_t off = 1;

	if (size < 1)
		return 0;
	make(&e, data[0] & 1, !!(data[0] & 2));
	while (off + 3 <= size) {
		uint8_t op = data[off];
		size_t len = (size_t)data[off + 1] << 8 | data[off + 2];
		const uint8_t *rec;
		struct tly_hdr h;
		static const struct tly_wire_limits lim[2] = {
			{ .job = 0x7a11, .k = K, .n_ranks = 3, .n_slots = 16,
			  .n_hops = 4 },
			{ .job = 0x7a11, .k = K_SWITCH, .n_ranks = 3,
			  .n_slots = 16, .n_hops = 4,
			  .profile = TLY_PROFILE_SWITCH },
		};

		off += 3;
		if (len > size - off)
			len = size - off;
		rec = (data[0] & 5) == 5 ? with_checksum(data + off, len) :
					   data + off;
		(void)tly_hdr_parse(rec, len, &lim[0], &h);
		(void)tly_hdr_parse(rec, len, &lim[1], &h);
		tly_agg_rx(e.a, rec, len, now);
		tly_worker_rx(e.w, rec, len, now);
		now += (uint64_t)(op >> 2) * 3;
		if (op & 2) {
			tly_agg_poll(e.a, now);
			(void)tly_agg_sweep(e.a, now);
			tly_worker_poll(e.w, now);
		}
		off += len;
	}
	tly_agg_destroy(e.a);
	tly_worker_destroy(e.w);
	return 0;
}
