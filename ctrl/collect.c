// SPDX-License-Identifier: BSD-3-Clause
/*
 * collect.c - the daemon's numbers as metric samples.
 *
 * daemon_collect_metrics() is the only place that reads the daemon's
 * counters for the outside: the Prometheus endpoint (metrics_http.c) and
 * tally-ctl's control query (ctl.c) both write what it fills, so they
 * show the same numbers.  Daemon-wide numbers carry no label; a job's
 * are filled once per job, labelled job="<its id>" (Prometheus shows it
 * as exported_job when it scrapes: its own "job" is the scrape's).
 *
 * Sent frames are counted per peer (cluster.c wraps the transport's tx);
 * received bytes and packets only per job and engine (worker, aggregator)
 * or per job and transport: no layer knows a frame's sender before the
 * engine parses it.  The "peer" label names a roster node
 * (tally_peer_info).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tally/tally.h>
#include "ctrl/cluster.h"
#include "ctrl/daemon.h"
#include "ctrl/job.h"
#include "ctrl/watchdog.h"
#include "dataplane/clock.h"
#include "dataplane/engine/wire.h"

#ifndef TALLY_VERSION_STRING	/* meson defines it (ctrl/meson.build) */
#define TALLY_VERSION_STRING "unknown"
#endif

/* ---- filling the registry --------------------------------------------- */

struct fill {
	struct metrics *m;
	const char *job;	/* the job label of put() */
	int err;
};

static void fam(struct fill *f, const char *name, enum metrics_type t,
		const char *help)
{
	f->err |= metrics_family(f->m, name, t, help);
}

/* A sample labelled with the job and up to two more label pairs. */
static void put(struct fill *f, const char *name, double v,
		const char *k1, const char *v1, const char *k2,
		const char *v2)
{
	const char *l[] = { "job", f->job, k1, v1, k2, v2, NULL };

	f->err |= metrics_set(f->m, name, l, v);
}

static void put1(struct fill *f, const char *name, enum metrics_type t,
		 const char *help, double v)
{
	fam(f, name, t, help);
	put(f, name, v, NULL, NULL, NULL, NULL);
}

/* Open fds and resident bytes, as Prometheus' process collectors name
 * them: what a leak across many jobs would show. */
static void collect_process(struct fill *f)
{
	const char *const none[] = { NULL };
	unsigned long long size = 0, resident = 0;
	long fds = 0;
	struct dirent *e;
	FILE *statm;
	DIR *dir = opendir("/proc/self/fd");

	while (dir && (e = readdir(dir)))
		fds += e->d_name[0] != '.';
	if (dir) {
		closedir(dir);
		fds--;			/* opendir's own */
	}
	statm = fopen("/proc/self/statm", "re");
	if (statm) {
		if (fscanf(statm, "%llu %llu", &size, &resident) != 2)
			resident = 0;
		fclose(statm);
	}
	fam(f, "process_open_fds", METRICS_GAUGE, "Open file descriptors.");
	f->err |= metrics_set(f->m, "process_open_fds", none, (double)fds);
	fam(f, "process_resident_memory_bytes", METRICS_GAUGE,
	    "Resident memory size in bytes.");
	f->err |= metrics_set(f->m, "process_resident_memory_bytes", none,
			      (double)resident *
			      (double)sysconf(_SC_PAGESIZE));
}

static void collect_daemon(struct fill *f, struct tallyd *d)
{
	const char *const none[] = { NULL };
	const struct job_stats *past = &d->jobs.past;

	fam(f, "tally_info", METRICS_GAUGE, "Always 1: the daemon's version "
	    "and mode.");
	{
		const char *const l[] = {
			"version", TALLY_VERSION_STRING, "mode",
			d->cfg.service ? "service" :
			config_is_cluster(&d->cfg) ? "cluster" : "local",
			NULL };

		f->err |= metrics_set(f->m, "tally_info", l, 1);
	}
	fam(f, "tally_uptime_seconds", METRICS_GAUGE, "Seconds since the "
	    "daemon started.");
	f->err |= metrics_set(f->m, "tally_uptime_seconds", none,
			      (double)(tly_now_ns() - d->start_ns) * 1e-9);
	fam(f, "tally_jobs", METRICS_GAUGE, "Jobs this daemon serves now "
	    "(an ended job lingers service.job_linger_ms).");
	f->err |= metrics_set(f->m, "tally_jobs", none, d->jobs.n_used);
	fam(f, "tally_jobs_started_total", METRICS_COUNTER, "Jobs started.");
	f->err |= metrics_set(f->m, "tally_jobs_started_total", none,
			      d->jobs.started);
	fam(f, "tally_jobs_ended_total", METRICS_COUNTER, "Jobs ended.");
	f->err |= metrics_set(f->m, "tally_jobs_ended_total", none,
			      (double)d->jobs.retired);
	fam(f, "tally_clients", METRICS_GAUGE, "Clients connected, over all "
	    "jobs.");
	f->err |= metrics_set(f->m, "tally_clients", none, d->n_clients);
	fam(f, "tally_connections_refused_total", METRICS_COUNTER,
	    "Client connections refused (full, broken HELLO, timeouts, "
	    "limits).");
	f->err |= metrics_set(f->m, "tally_connections_refused_total", none,
			      (double)d->stat_conns_refused);
	fam(f, "tally_limit_refusals_total", METRICS_COUNTER, "Connections, "
	    "segments and requests refused over a limit of [service].");
	{
		uint64_t n = d->stat_limit_refusals + past->limit_refusals;
		struct job *j;

		job_table_for_each(&d->jobs, j)
			n += j->st.limit_refusals;
		f->err |= metrics_set(f->m, "tally_limit_refusals_total", none,
				      (double)n);
	}
	fam(f, "tally_ctl_queries_total", METRICS_COUNTER, "Control queries "
	    "answered (tally-ctl).");
	f->err |= metrics_set(f->m, "tally_ctl_queries_total", none,
			      (double)d->stat_ctl_queries);
	fam(f, "tally_ctl_refused_total", METRICS_COUNTER, "Control queries "
	    "refused (bad version or fields, fds, no memory).");
	f->err |= metrics_set(f->m, "tally_ctl_refused_total", none,
			      (double)d->stat_ctl_refused);
	fam(f, "tally_ended_jobs_operations_total", METRICS_COUNTER,
	    "Operations of the jobs that ended, by result.");
	{
		const char *const ok[] = { "result", "done", NULL };
		const char *const ko[] = { "result", "failed", NULL };

		f->err |= metrics_set(f->m, "tally_ended_jobs_operations_total",
				      ok, (double)past->ops_done);
		f->err |= metrics_set(f->m, "tally_ended_jobs_operations_total",
				      ko, (double)past->ops_failed);
	}
	collect_process(f);
}

/* One job's own numbers, labelled job="<its id>". */
static void collect_job(struct fill *f, struct tallyd *d, struct job *j)
{
	const struct watchdog_stats *ws = watchdog_stats(j);
	struct job_ops ops = job_ops(j);
	char rank[16], pid[16];

	(void)d;
	put1(f, "tally_job_clients", METRICS_GAUGE, "Clients of the job "
	     "connected to this daemon.", j->n_members);
	put1(f, "tally_local_size", METRICS_GAUGE, "Clients the job has on "
	     "this host.", j->cfg.local_size);
	put1(f, "tally_job_broken", METRICS_GAUGE, "1 while the job is "
	     "aborted and waits for its clients to leave.", j->broken);
	put1(f, "tally_job_dead", METRICS_GAUGE, "1 once the job's hosts "
	     "are lost for good (coordinator gone, refused, never reached).",
	     job_dead(j));
	put1(f, "tally_host_rank", METRICS_GAUGE, "This host's rank in the "
	     "job.", j->cfg.rank);
	put1(f, "tally_hosts", METRICS_GAUGE, "Hosts in the job.",
	     j->cfg.world);
	fam(f, "tally_operations_total", METRICS_COUNTER, "Operations "
	    "of its members completed, by result (with the fast path's).");
	put(f, "tally_operations_total", (double)ops.done,
	    "result", "done", NULL, NULL);
	put(f, "tally_operations_total", (double)ops.failed,
	    "result", "failed", NULL, NULL);
	put1(f, "tally_fast_path_operations_total", METRICS_COUNTER,
	     "Operations of its members done in the job's fast-path table "
	     "(docs/local-fast-path.md), as the clients count them; in "
	     "tally_operations_total too.",
	     (double)ops.fast_done);
	put1(f, "tally_reduced_bytes_total", METRICS_COUNTER, "Bytes of "
	     "local groups all-reduced.", (double)j->st.bytes_reduced);
	put1(f, "tally_local_groups_in_use", METRICS_GAUGE, "Local groups "
	     "(operations gathering or in flight) in use.", j->groups.n_used);
	put1(f, "tally_local_groups", METRICS_GAUGE, "Local groups there "
	     "are.", j->groups.n_pool);
	put1(f, "tally_watchdog_reports_total", METRICS_COUNTER, "Operations "
	     "the watchdog reported stuck.", (double)ws->reports);
	put1(f, "tally_watchdog_stuck_operations", METRICS_GAUGE,
	     "Operations stuck at the watchdog's last scan.", ws->stuck_now);

	fam(f, "tally_client_outstanding_operations", METRICS_GAUGE,
	    "Operations a client submitted that have not completed.");
	for (int r = 0; r < j->cfg.local_size; r++) {
		const struct daemon_client *cl = j->members[r];

		if (!cl)
			continue;
		snprintf(rank, sizeof(rank), "%d", r);
		snprintf(pid, sizeof(pid), "%d", (int)cl->pid);
		put(f, "tally_client_outstanding_operations",
		    cl->outstanding, "client", rank, "pid", pid);
	}
	fam(f, "tally_allreduce_latency_seconds", METRICS_HISTOGRAM,
	    "Local groups' time from the first member's submission to "
	    "completion, by size class.");
	for (int c = 0; c < JOB_SIZE_CLASSES; c++) {
		const char *const l[] = { "job", f->job, "size_class",
					  job_size_class_name(c), NULL };

		f->err |= metrics_set_hist(f->m,
					   "tally_allreduce_latency_seconds",
					   l, &j->st.op_latency[c]);
	}
}

static void collect_engine(struct fill *f, const char *engine,
			   const struct tly_counters *k)
{
	static const char *const drops = "tally_engine_drops_total";

	put(f, "tally_engine_sent_bytes_total", (double)k->tx_bytes,
	    "engine", engine, NULL, NULL);
	put(f, "tally_engine_sent_packets_total", (double)k->tx_pkts,
	    "engine", engine, NULL, NULL);
	put(f, "tally_engine_received_bytes_total", (double)k->rx_bytes,
	    "engine", engine, NULL, NULL);
	put(f, "tally_engine_received_packets_total", (double)k->rx_pkts,
	    "engine", engine, NULL, NULL);
	put(f, "tally_retransmissions_total", (double)k->retx,
	    "engine", engine, NULL, NULL);
	put(f, "tally_duplicates_total", (double)k->dups,
	    "engine", engine, NULL, NULL);
	for (int e = 1; e < TLY_E_COUNT; e++)
		put(f, drops, (double)k->drops[e], "engine", engine, "reason",
		    tly_drop_name((enum tly_drop)e));
	put(f, drops, (double)k->tx_nobuf, "engine", engine, "reason",
	    "tx_no_buffer");
}

static void collect_cluster(struct fill *f, struct job *j)
{
	struct cluster_snapshot *s = malloc(sizeof(*s));
	char peer[16], addr[32], ip[INET_ADDRSTRLEN];
	const char *tp;

	if (!s) {
		f->err = -1;
		return;
	}
	cluster_snapshot(j->cluster, s);
	tp = s->transport ? s->transport : j->cfg.transport;
	put1(f, "tally_cluster_joined", METRICS_GAUGE, "1 once the job's "
	     "roster arrived.", s->joined);
	put1(f, "tally_cluster_epoch", METRICS_GAUGE, "Roster epoch (grows "
	     "on every membership change).", s->epoch);
	put1(f, "tally_auth_failures_total", METRICS_COUNTER, "Membership "
	     "messages that failed authentication.",
	     (double)s->auth_failures);
	fam(f, "tally_peer_info", METRICS_GAUGE, "Always 1: a roster node "
	    "(peer = its index in the roster), its address and role.");
	for (uint16_t i = 0; i < s->n_nodes; i++) {
		struct in_addr in = { .s_addr = htonl(s->peers[i].ip) };

		inet_ntop(AF_INET, &in, ip, sizeof(ip));
		snprintf(peer, sizeof(peer), "%u", i);
		snprintf(addr, sizeof(addr), "%s:%u", ip, s->peers[i].port);
		{
			const char *const l[] = {
				"job", f->job, "peer", peer, "address", addr,
				"role", s->peers[i].agg ? "aggregator" :
				"worker", "self", i == s->self_node ?
				"1" : "0", NULL };

			f->err |= metrics_set(f->m, "tally_peer_info", l, 1);
		}
	}

	fam(f, "tally_peer_sent_bytes_total", METRICS_COUNTER, "Bytes of the "
	    "frames the engines sent to a peer (the frame as handed to the "
	    "transport, before the link emulator).");
	fam(f, "tally_peer_sent_packets_total", METRICS_COUNTER, "Frames the "
	    "engines sent to a peer.");
	for (uint16_t i = 0; i < s->n_nodes; i++) {
		snprintf(peer, sizeof(peer), "%u", i);
		put(f, "tally_peer_sent_bytes_total",
		    (double)s->peers[i].tx_bytes, "peer", peer, NULL, NULL);
		put(f, "tally_peer_sent_packets_total",
		    (double)s->peers[i].tx_pkts, "peer", peer, NULL, NULL);
	}

	fam(f, "tally_engine_sent_bytes_total", METRICS_COUNTER, "Bytes the "
	    "engine sent (tally header + payload), per job and engine.");
	fam(f, "tally_engine_sent_packets_total", METRICS_COUNTER, "Packets "
	    "the engine sent.");
	fam(f, "tally_engine_received_bytes_total", METRICS_COUNTER, "Bytes "
	    "the engine received (tally header + payload).");
	fam(f, "tally_engine_received_packets_total", METRICS_COUNTER,
	    "Packets the engine received.");
	fam(f, "tally_retransmissions_total", METRICS_COUNTER,
	    "Retransmissions (worker) and result probes (aggregator).");
	fam(f, "tally_duplicates_total", METRICS_COUNTER, "Duplicate "
	    "contributions or results received.");
	fam(f, "tally_engine_drops_total", METRICS_COUNTER, "Packets the "
	    "engine dropped, by reason.");
	if (s->have_worker)
		collect_engine(f, "worker", &s->worker);
	if (s->have_agg)
		collect_engine(f, "aggregator", &s->agg);
	put1(f, "tally_slots_busy", METRICS_GAUGE, "Aggregator slots "
	     "(primary pool and fallback) in use.", s->agg_slots_busy);
	put1(f, "tally_slots", METRICS_GAUGE, "Aggregator slots (primary "
	     "pool and fallback) there are.", s->agg_slots);
	put1(f, "tally_slot_fallbacks_total", METRICS_COUNTER,
	     "Contributions the aggregator's fallback store held.",
	     (double)s->agg.fallback);
	put1(f, "tally_slot_evictions_total", METRICS_COUNTER,
	     "Idle partial sums the aggregator evicted.",
	     (double)s->agg.evictions);
	if (s->n_xdp) {
		fam(f, "tally_xdp_agg_total", METRICS_COUNTER, "The XDP "
		    "aggregator's counters (dataplane.transport = xdp; "
		    "docs/xdp-aggregator.md), by name: its drop reasons and "
		    "packet kinds.");
		for (unsigned int i = 0; i < s->n_xdp; i++)
			put(f, "tally_xdp_agg_total", (double)s->xdp[i],
			    "counter", s->xdp_names[i], NULL, NULL);
	}

	fam(f, "tally_transport_sent_bytes_total", METRICS_COUNTER,
	    "Bytes the transport sent (whole frames).");
	put(f, "tally_transport_sent_bytes_total", (double)s->tp.tx_bytes,
	    "transport", tp, NULL, NULL);
	fam(f, "tally_transport_sent_packets_total", METRICS_COUNTER,
	    "Packets the transport sent.");
	put(f, "tally_transport_sent_packets_total", (double)s->tp.tx_pkts,
	    "transport", tp, NULL, NULL);
	fam(f, "tally_transport_received_bytes_total", METRICS_COUNTER,
	    "Bytes the transport received.");
	put(f, "tally_transport_received_bytes_total", (double)s->tp.rx_bytes,
	    "transport", tp, NULL, NULL);
	fam(f, "tally_transport_received_packets_total", METRICS_COUNTER,
	    "Packets the transport received.");
	put(f, "tally_transport_received_packets_total",
	    (double)s->tp.rx_pkts, "transport", tp, NULL, NULL);
	fam(f, "tally_transport_looped_packets_total", METRICS_COUNTER,
	    "Packets to this node itself (a co-located aggregator shard) "
	    "handed from send to receive without the wire (udp, dpdk).");
	put(f, "tally_transport_looped_packets_total",
	    (double)s->tp.loop_pkts, "transport", tp, NULL, NULL);
	fam(f, "tally_transport_group_packets_total", METRICS_COUNTER,
	    "Packets sent once to the result group for every worker (an "
	    "aggregator's RESULTs over udp), in the sent packets too.");
	put(f, "tally_transport_group_packets_total",
	    (double)s->tp.group_pkts, "transport", tp, NULL, NULL);
	fam(f, "tally_transport_drops_total", METRICS_COUNTER, "Packets the "
	    "transport (or its link emulator) dropped, by reason.");
	put(f, "tally_transport_drops_total", (double)s->tp.tx_drops,
	    "transport", tp, "reason", "tx");
	put(f, "tally_transport_drops_total", (double)s->tp.rx_drops,
	    "transport", tp, "reason", "rx_malformed");
	put(f, "tally_transport_drops_total", (double)s->tp.rx_filtered,
	    "transport", tp, "reason", "rx_filtered");
	put(f, "tally_transport_drops_total", (double)s->tp.emu_lost,
	    "transport", tp, "reason", "emulated_loss");
	put(f, "tally_transport_drops_total", (double)s->tp.emu_pool_drops,
	    "transport", tp, "reason", "emulator_pool");

	put1(f, "tally_sched_queue_depth", METRICS_GAUGE, "Gradients the "
	     "scheduler holds that are not released in full.",
	     s->sched_pending);
	put1(f, "tally_sched_units_in_flight", METRICS_GAUGE, "Scheduler "
	     "units in the network.", s->sched_units);
	put1(f, "tally_sched_in_flight_bytes", METRICS_GAUGE, "Bytes the "
	     "scheduler has in the network.",
	     (double)s->sched.bytes_in_flight);
	put1(f, "tally_sched_credit_bytes", METRICS_GAUGE, "The scheduler's "
	     "credit (ByteScheduler; autotuned when enabled).",
	     (double)s->sched.credit_bytes);
	put1(f, "tally_sched_units_total", METRICS_COUNTER, "Units the "
	     "scheduler released.", (double)s->sched.units);
	put1(f, "tally_sched_partitions_total", METRICS_COUNTER, "Partitions "
	     "the scheduler cut.", (double)s->sched.partitions);
	put1(f, "tally_sched_preemptions_total", METRICS_COUNTER, "Ready "
	     "gradients that overtook less urgent ones.",
	     (double)s->sched.preemptions);
	put1(f, "tally_sched_stall_releases_total", METRICS_COUNTER,
	     "Partitions released past the credit after a stall.",
	     (double)s->sched.stall_releases);
	free(s);
}

int daemon_collect_metrics(struct tallyd *d, struct metrics *m)
{
	struct fill f = { .m = m };
	struct job *j;

	collect_daemon(&f, d);
	job_table_for_each(&d->jobs, j) {
		f.job = j->id;
		collect_job(&f, d, j);
		if (j->cluster)
			collect_cluster(&f, j);
	}
	return f.err ? -1 : 0;
}
