// SPDX-License-Identifier: BSD-3-Clause
/*
 * net.c - tally-sim's network and host model: the time of one unit's
 * all-reduce, from the protocol's packets (docs/protocol.md), the links'
 * rate and latency, the engine's window and the hosts' per-packet CPU
 * costs.  Every constant's source is in docs/simulator.md, section 2.
 *
 * A unit of S bytes is P = ceil(S / 4K) packets of K int32 lanes, each
 * 4K + hdr_bytes on the wire.  One packet's time on a host is the largest
 * of its wire time, the CPU time the host spends on it, and the window
 * bound (window packets per round trip).
 *
 *  ring         2(n-1) steps, each one latency plus ceil(P/n) packets:
 *               T = 2(n-1) (lat + ceil(P/n) t_pkt)   (docs/protocol.md §6)
 *  dedicated    every worker sends P DATA packets (plus one exponent
 *               packet per K chunks) to the aggregators and gets as many
 *               RESULTs; A aggregators each take n/A of every worker's
 *               packets through one link and one CPU:
 *               T = P' max(t_worker, n/A max(t_wire, agg_pkt)) + 4 lat
 *               (two round trips: the exponent round, then the data)
 *  co-located   every host is the shard of 1/n of every chunk: its link
 *               carries 2(n-1)/n P' packets each way (its own DATA out,
 *               the others' RESULTs in; the others' DATA in, RESULTs out)
 *               T = 2(n-1)/n P' t + 4 lat
 * The bandwidth part (all but the latency) occupies the hosts' links and
 * CPUs: the next unit starts after it, and its latency overlaps (the
 * engine keeps several tensors in flight, docs/protocol.md §4).
 */
#include <math.h>
#include <string.h>

#include "sim/sim.h"

uint64_t sim_packets(const struct sim_net *net, uint64_t bytes)
{
	uint64_t payload = 4ull * net->k;

	return bytes ? (bytes + payload - 1) / payload : 1;
}

static double wire_ns(const struct sim_net *net)
{
	return (4.0 * net->k + net->hdr_bytes) * 8.0 / net->rate_bps * 1e9;
}

/* a flow's packet time: wire, CPU cpu_ns, or window per round trip rtt */
static double pkt_ns(const struct sim_net *net, double cpu_ns, double rtt_ns)
{
	double t = wire_ns(net), w;

	if (cpu_ns > t)
		t = cpu_ns;
	w = (rtt_ns + t) / (net->window ? net->window : 1);
	return w > t ? w : t;
}

double sim_packet_ns(const struct sim_net *net, double lat_ns)
{
	return pkt_ns(net, net->host_pkt_ns, 2 * lat_ns);
}

void sim_unit_time(const struct sim_net *net, enum sim_algo algo,
		   uint32_t hosts, uint64_t bytes, double *occupy_ns,
		   double *total_ns)
{
	uint64_t p = sim_packets(net, bytes), pe;
	double n = hosts, occ = 0, lat = 0, t, a;
	uint32_t agg;

	if (hosts <= 1) {
		*occupy_ns = 0;
		*total_ns = 0;
		return;
	}
	/* float32: one exponent packet per K chunks (docs/protocol.md §4) */
	pe = p + (p + net->k - 1) / net->k;
	switch (algo) {
	case SIM_RING:
		/* a hop: receive, add, forward; acknowledged by the next rank */
		t = pkt_ns(net, net->agg_pkt_ns, 2 * net->lat_ns);
		occ = 2.0 * (n - 1) * (double)((p + hosts - 1) / hosts) * t;
		lat = 2.0 * (n - 1) * net->lat_ns;
		break;
	case SIM_AGG_DEDICATED:
		agg = net->n_agg ? net->n_agg : hosts;
		t = pkt_ns(net, net->host_pkt_ns, 2 * net->lat_ns);
		a = n / agg * fmax(wire_ns(net), net->agg_pkt_ns);
		occ = (double)pe * fmax(t, a);
		lat = 4 * net->lat_ns;
		break;
	case SIM_AGG_COLOCATED:
		t = pkt_ns(net, 0.5 * (net->host_pkt_ns + net->agg_pkt_ns),
			   2 * net->lat_ns);
		occ = ceil(2.0 * (n - 1) / n * (double)pe) * t;
		lat = 4 * net->lat_ns;
		break;
	}
	*occupy_ns = occ + net->unit_ns;
	*total_ns = occ + net->unit_ns + lat;
}

/*
 * The study's networks (docs/simulator.md, section 2):
 *  10g   10 Gb Ethernet: 10 Gb/s data rate (IEEE 802.3ae, 64b/66b over
 *        10.3125 GBd), Ethernet II/IPv4/UDP 42 bytes + preamble, FCS and
 *        inter-frame gap 24 bytes per frame, one-way host-to-host latency
 *        25 us through kernel stacks and one switch (tools/experiment's
 *        value);
 *  100g  100 Gb/s InfiniBand EDR: 100 Gb/s data rate (IBTA: 4 lanes x
 *        25.78125 GBd, 64b/66b), UD headers LRH 8 + BTH 12 + DETH 8 +
 *        ICRC 4 + VCRC 2 = 34 bytes per packet, one-way latency 2 us
 *        (tools/experiment's value; verbs latency through one EDR switch
 *        is about 1 us, the rest is the daemon's poll loop).
 * Host costs: tally's own figures on the development machine
 * (docs/performance.md); the intra-host step: PCIe 3.0 x16.
 */
int sim_net_preset(const char *name, struct sim_net *net)
{
	memset(net, 0, sizeof(*net));
	net->k = 256;			/* tools/experiment's dataplane.k */
	net->window = 64;		/* ctrl/config.c: dataplane.window */
	/* docs/performance.md §10: the aggregator's per-packet path,
	 * 7.0-9.6 Mpps on one core: 1 / 8.3 Mpps */
	net->agg_pkt_ns = 120;
	/* a worker's packet: the engine path (as the aggregator's, 120 ns)
	 * + quantize 1 KiB at 16.7 GB/s (61 ns) + dequantize at 24.3 GB/s
	 * (42 ns), docs/performance.md §2 */
	net->host_pkt_ns = 120 + 61 + 42;
	/* docs/performance.md §1: a 4 KiB local all-reduce, 5.9 us: the
	 * daemon's per-operation path */
	net->unit_ns = 5900;
	/* PCIe 3.0 x16: 8 GT/s x 16 lanes x 128/130 = 15.75 GB/s, times
	 * 256 / (256 + 24) for TLPs of 256-byte payload */
	net->pcie_Bps = 15.754e9 * 256.0 / 280.0;
	/* docs/performance.md §1: 4 clients, 4 MiB in place, 731.7 us:
	 * 4 x 4 MiB of input per 731.7 us */
	net->reduce_Bps = 4.0 * 4194304.0 / 731.7e-6;
	if (!strcmp(name, "10g")) {
		net->rate_bps = 10e9;
		net->lat_ns = 25000;
		net->hdr_bytes = 20 + 42 + 24;
		return 0;
	}
	if (!strcmp(name, "100g")) {
		net->rate_bps = 100e9;
		net->lat_ns = 2000;
		net->hdr_bytes = 20 + 34;
		return 0;
	}
	return -1;
}
