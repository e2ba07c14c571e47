// SPDX-License-Identifier: BSD-3-Clause
/*
 * cluster.c - tallyd in a multi-host job (see cluster.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include <tally/tally.h>
#include "ctrl/auth.h"
#include "ctrl/cluster.h"
#include "dataplane/engine/codec.h"
#include "ctrl/cluster_internal.h"
#include "ctrl/config.h"
#include "dataplane/clock.h"
#include "dataplane/placement.h"
#include "dataplane/reduce_pool.h"
#include "ctrl/log.h"
#include "ctrl/loop_tags.h"

#define for_each_shard(c, sh) \
	for (struct cluster_shard *sh = (c)->shards; \
	     sh < (c)->shards + (c)->n_shards; sh++)

/* What the engine of an epoch did, for the log (and for debugging). */
static void log_engine(const struct cluster_shard *sh, unsigned int s)
{
	for (int i = 0; i < 2; i++) {
		const struct tly_counters *k = i == 0 ?
			(sh->worker ? tly_worker_counters(sh->worker) : NULL) :
			(sh->agg ? tly_agg_counters(sh->agg) : NULL);

		if (!k)
			continue;
		log_info("%s (shard %u): rx %llu tx %llu retx %llu dups %llu "
			 "acks %llu busy %llu", i ? "aggregator" : "worker", s,
			 (unsigned long long)k->rx_pkts,
			 (unsigned long long)k->tx_pkts,
			 (unsigned long long)k->retx,
			 (unsigned long long)k->dups,
			 (unsigned long long)k->acks,
			 (unsigned long long)k->busy);
		for (int e = 1; e < TLY_E_COUNT; e++)
			if (k->drops[e])
				log_info("  dropped %llu: %s",
					 (unsigned long long)k->drops[e],
					 tly_drop_name(e));
	}
	if (sh->worker) {
		struct tly_worker_mem m;

		/* kept between operations (dataplane/engine/worker_mem.c) */
		tly_worker_mem(sh->worker, &m);
		log_info("  tensor arrays: %llu allocated, %llu reused, "
			 "%zu bytes kept", (unsigned long long)m.allocs,
			 (unsigned long long)m.reuses, m.kept_bytes);
	}
	for (uint16_t n = 0; sh->worker && n < TRANSPORT_MAX_NODES; n++) {
		struct tly_worker_path p;

		if (tly_worker_path(sh->worker, n, &p) || !p.srtt_ns)
			continue;
		log_info("  path to node %u: window %u, srtt %llu us, base "
			 "%llu us, decreases %llu on delay, %llu on loss", n,
			 p.cwnd, (unsigned long long)p.srtt_ns / 1000,
			 (unsigned long long)p.base_rtt_ns / 1000,
			 (unsigned long long)p.delay_decreases,
			 (unsigned long long)p.loss_decreases);
	}
	for (uint16_t n = 0; sh->worker && n < TRANSPORT_MAX_NODES; n++) {
		struct tly_worker_held h;

		/* the switch profile's bound (dataplane.held_max) */
		if (tly_worker_held(sh->worker, n, &h) || !h.peak)
			continue;
		log_info("  held at node %u: peak %u of %u, past it %u, "
			 "probes %llu, placed by a later answer %llu (%llu of "
			 "them probed)", n, h.peak, h.max, h.escapes,
			 (unsigned long long)h.probes,
			 (unsigned long long)h.inferred,
			 (unsigned long long)h.inferred_probed);
	}
}

/* @sum += @k, field by field (all of them are uint64_t). */
static void counters_add(struct tly_counters *sum,
			 const struct tly_counters *k)
{
	uint64_t *a = (uint64_t *)sum;
	const uint64_t *b = (const uint64_t *)k;

	_Static_assert(sizeof(*sum) % sizeof(uint64_t) == 0,
		       "tly_counters holds uint64_t only");
	for (size_t i = 0; i < sizeof(*sum) / sizeof(uint64_t); i++)
		a[i] += b[i];
}

/* ---- the dataplane threads ---------------------------------------------- */

bool cluster_dp_pause(struct cluster *c)
{
	bool ok = !c->dp_stuck;

	for_each_shard(c, sh)
		if (ok && sh->dp &&
		    dp_thread_pause(sh->dp, CLUSTER_PAUSE_TIMEOUT_NS)) {
			log_err("dataplane thread %u did not pause within %llu "
				"ms: its engine is left alone and the job "
				"fails", (unsigned int)(sh - c->shards),
				CLUSTER_PAUSE_TIMEOUT_NS / 1000000);
			c->dp_stuck = true;
			ok = false;
		}
	if (!ok)	/* let the others run on; nothing is changed */
		cluster_dp_resume(c);
	return ok;
}

void cluster_dp_resume(struct cluster *c)
{
	for_each_shard(c, sh)
		if (sh->dp)
			dp_thread_resume(sh->dp);
}

/* The engine goes; the threads must be paused (or stopped). */
static void engine_destroy(struct cluster *c)
{
	struct tly_net none = { 0 };

	for_each_shard(c, sh) {
		log_engine(sh, (unsigned int)(sh - c->shards));
		if (sh->worker) {
			counters_add(&c->past_worker,
				     tly_worker_counters(sh->worker));
			tly_worker_destroy(sh->worker);
		}
		if (sh->agg) {
			counters_add(&c->past_agg, tly_agg_counters(sh->agg));
			tly_agg_destroy(sh->agg);
		}
		sh->worker = NULL;
		sh->agg = NULL;
		sh->tensors_out = 0;
		if (sh->dp) {
			dp_thread_set_engine(sh->dp, NULL, NULL, &none);
			dp_thread_reset_rings(sh->dp);
		}
	}
	c->engine_up = false;
}

/*
 * Everything in the network fails with @res and the engine goes (when the
 * threads can be paused: a stuck one keeps it, and the job fails anyway).
 */
static void network_down(struct cluster *c, int res)
{
	if (cluster_dp_pause(c)) {
		engine_destroy(c);
		cluster_dp_resume(c);
	}
	cluster_ops_fail_all(c, res);
	c->have_roster = false;
}

/* ---- rosters ---------------------------------------------------------- */

static bool mac_set(const uint8_t mac[6])
{
	static const uint8_t zero[6];

	return memcmp(mac, zero, 6) != 0;
}

/* Shard s talks to shard s of every node: on port + s (the roster and the
 * registration carry the base port), and at the node's MAC for thread s
 * when the roster has one (rdma: the queue pair of that thread). */
static void shard_addrs(struct cluster *c, struct cluster_shard *sh)
{
	unsigned int s = (unsigned int)(sh - c->shards);

	for (uint16_t i = 0; i < c->n_nodes; i++) {
		sh->addrs[i] = c->addrs[i];
		sh->addrs[i].port = (uint16_t)(c->addrs[i].port + s);
		if (s && mac_set(c->thread_macs[i][s - 1]))
			memcpy(sh->addrs[i].mac, c->thread_macs[i][s - 1], 6);
	}
}

/*
 * The result group (dataplane.result_group): workers join it, and an
 * aggregator over udp sends each RESULT to it once, in either profile
 * (docs/transport-udp.md, "One RESULT for every worker").  Shard s uses
 * the group's port + s, as its unicast port.
 */
static bool group_sender(const struct tally_config *cfg)
{
	return cfg->result_group.ip && cfg->role != ROLE_WORKER &&
	       cfg->algorithm == ALGO_AGGREGATE &&
	       !strcmp(cfg->transport, "udp");
}

static void open_transport(struct cluster *c, struct cluster_shard *sh)
{
	unsigned int s = (unsigned int)(sh - c->shards);
	struct transport_config tc = {
		.kind = c->cfg->transport,
		.self = c->self_node,
		.n_nodes = c->n_nodes,
		.addrs = sh->addrs,
		.mtu = (uint32_t)(TLY_ETH_LEN +
				  TLY_DATA_IP_LEN(config_k(c->cfg))),
		/* a switch, or the XDP program, takes whole frames only */
		.no_fragments = c->cfg->dp_profile == TLY_PROFILE_SWITCH,
		.eal_args = c->cfg->eal_args,
		.mbufs = (uint32_t)c->cfg->mbufs,
		/* dpdk: one queue pair per thread (udp: one socket each) */
		.queues = (uint16_t)c->n_shards,
		.queue = (uint16_t)(sh - c->shards),
		.rdma_device = c->cfg->rdma_device,
		.rdma_port = (uint8_t)c->cfg->rdma_port,
		.rdma_gid_index = c->cfg->rdma_gid_index,
		/* the RESULT to every worker */
		.group_ip = c->cfg->result_group.ip,
		.group_port = (uint16_t)(c->cfg->result_group.port + s),
		.group_send = group_sender(c->cfg),
		.group_send_only = c->cfg->role == ROLE_AGGREGATOR,
		.emu = {
			.rate_bps = c->cfg->emu_rate_bps,
			.delay_ns = (uint64_t)c->cfg->emu_delay_us * 1000,
			.jitter_ns = (uint64_t)c->cfg->emu_jitter_us * 1000,
			.loss_ppm = (uint32_t)c->cfg->emu_loss_ppm,
			.dup_ppm = (uint32_t)c->cfg->emu_dup_ppm,
			.reorder_ppm = (uint32_t)c->cfg->emu_reorder_ppm,
			.reorder_ns = (uint64_t)c->cfg->emu_reorder_us * 1000,
			.seed = c->cfg->emu_seed + (uint64_t)c->cfg->rank,
		},
	};

	shard_addrs(c, sh);
	if (transport_open(&sh->tp, &tc)) {
		log_err("cannot open the %s transport", c->cfg->transport);
		return;
	}
	sh->tp_open = true;
	log_info("%s transport open: node %u of %u, port %u (shard %u)",
		 sh->tp.ops->name, c->self_node, c->n_nodes,
		 sh->tp.local_port ? sh->tp.local_port :
		 sh->addrs[c->self_node].port, s);
}

/* The shard's thread, its completions in the daemon's epoll. */
static int start_thread(struct cluster *c, struct cluster_shard *sh,
			int cpu)
{
	unsigned int s = (unsigned int)(sh - c->shards);
	struct dp_thread_cfg tc = {
		.tp = &sh->tp, .index = s, .cpu = cpu,
		.spin_ns = (uint64_t)c->cfg->idle_spin_us * 1000,
	};
	struct epoll_event ev = { .events = EPOLLIN,
		.data.u64 = TAG_JOB_SOCK(TAG_NET, c->env.tag_job, s) };
	char err[160];

	sh->dp = dp_thread_start(&tc, err, sizeof(err));
	if (!sh->dp) {
		log_err("cannot start dataplane thread %u: %s", s, err);
		return -1;
	}
	if (epoll_ctl(c->env.epoll_fd, EPOLL_CTL_ADD,
		      dp_thread_completion_fd(sh->dp), &ev)) {
		log_err("epoll_ctl(dataplane thread %u): %s", s,
			strerror(errno));
		return -1;
	}
	return 0;
}

static int build_shard(struct cluster *c, struct cluster_shard *sh,
		       const struct boot_member *me)
{
	uint16_t job = tly_wire_job(c->cfg->job_key, c->epoch);
	struct tly_net net = {
		.addrs = sh->tp.full_frames ? sh->addrs : NULL,
		.n_nodes = c->n_nodes,
		.port = sh->addrs[c->self_node].port,
	};
	struct tly_tx_ops tx = dp_thread_tx_ops(sh->dp);
	/* the epoch's cookie: packets of a guessed job key or of an earlier
	 * epoch fail the receiver's first check */
	uint32_t cookie = auth_cookie(&c->mb.cfg.keys, c->cfg->job_key,
				      c->epoch);
	bool agg_here = false;

	for (int i = 0; i < c->n_aggs; i++)
		agg_here |= c->agg_nodes[i] == c->self_node;
	if (me->role != ROLE_AGGREGATOR && c->cfg->local_size > 0) {
		struct tly_worker_cfg w = {
			.job = job, .cookie = cookie,
			.k = (uint16_t)config_k(c->cfg),
			.n_workers = c->n_workers, .rank = c->self_node,
			.n_slots = (uint32_t)c->cfg->pool_slots,
			.n_aggs = c->n_aggs, .agg_nodes = c->agg_nodes,
			.window = (uint32_t)c->cfg->window,
			.cc_off = !c->cfg->congestion,
			.cc_min_window = (uint32_t)c->cfg->cc_min_window,
			.cc_init_window = (uint32_t)c->cfg->cc_init_window,
			.cc_target_ns = (uint64_t)c->cfg->cc_target_delay_us *
					1000,
			.cc_base_ns = (uint64_t)c->cfg->cc_base_window_ms *
				      1000000,
			.max_tensors = DP_MAX_TENSORS,
			.rto_ns = (uint64_t)c->cfg->rto_us * 1000,
			.rto_max_ns = (uint64_t)c->cfg->rto_us * 1000 * 64,
			.acked_ns = (uint64_t)c->cfg->rto_us * 1000 * 8,
			.busy_ns = (uint64_t)c->cfg->rto_us * 1000,
			.switch_busy_ns = (uint64_t)c->cfg->busy_us * 1000,
			.held_max = (uint32_t)c->cfg->held_max,
			.release_batch = (uint32_t)c->cfg->release_batch,
			.ack_every = (uint32_t)c->cfg->ack_every,
			.confirm_ns = 200000, .confirm_batch = 64,
			.chunk_rotate = 0,
			.profile = (uint8_t)c->cfg->dp_profile,
			.result_group = !!c->cfg->result_group.ip,
			.net = net, .ops = tx,
			.done = dp_thread_tensor_done, .done_ctx = sh->dp,
		};

		/* full frames (dpdk): the group's RESULT names its port */
		if (w.result_group)
			w.net.group_port = (uint16_t)(c->cfg->result_group.port +
						      (sh - c->shards));
		sh->worker = tly_worker_create(&w);
		if (!sh->worker)
			return -1;
	}
	if (agg_here && c->cfg->algorithm == ALGO_AGGREGATE) {
		struct tly_agg_cfg a = {
			.job = job, .cookie = cookie,
			.k = (uint16_t)config_k(c->cfg),
			.n_workers = c->n_workers, .self = c->self_node,
			.n_slots = (uint32_t)c->cfg->pool_slots,
			.n_fallback = c->cfg->dp_profile == TLY_PROFILE_SWITCH ?
				      0 : (uint32_t)c->cfg->pool_slots / 4 + 64,
			/* the switch profile's sweep takes partials by age
			 * alone: well above the workers' longest retry
			 * (rto_max_ns = 64 x rto) */
			.evict_ns = (uint64_t)c->cfg->rto_us * 1000 *
				    (c->cfg->dp_profile == TLY_PROFILE_SWITCH ?
				     256 : 16),
			.probe_ns = (uint64_t)c->cfg->rto_us * 1000 * 4,
			.profile = (uint8_t)c->cfg->dp_profile,
			.net = net, .ops = tx,
		};

		sh->agg = tly_agg_create(&a);
		if (!sh->agg)
			return -1;
		c->agg_slots += a.n_slots + a.n_fallback;
	}
	dp_thread_set_engine(sh->dp, sh->worker, sh->agg, &net);
	return 0;
}

/* A roster in force: the threads are paused. */
static int apply_roster(struct cluster *c, const struct boot_msg *r,
			const struct boot_member *me)
{
	for_each_shard(c, sh) {
		shard_addrs(c, sh);
		if (transport_set_nodes(&sh->tp, c->self_node, c->n_nodes,
					sh->addrs)) {
			log_err("epoch %u: the %s transport cannot take the "
				"roster", r->epoch, sh->tp.ops->name);
			return -1;
		}
	}
	c->agg_slots = 0;
	for_each_shard(c, sh)
		if (build_shard(c, sh, me)) {
			log_err("cannot build the aggregation engine");
			engine_destroy(c);
			return -1;
		}
	if (c->xdp && cluster_xdp_epoch(c))
		return -1;
	c->engine_up = true;
	return 0;
}

static void on_roster(void *ctx, const struct boot_msg *r)
{
	struct cluster *c = ctx;
	const struct boot_member *me = NULL;
	bool had = c->have_roster;

	if (!cluster_dp_pause(c)) {
		cluster_ops_fail_all(c, -TALLY_EPEERLOST);
		c->have_roster = false;
		c->env.job_abort(c->env.ctx, "a dataplane thread is stuck");
		return;
	}
	if (c->engine_up)
		engine_destroy(c);
	if (had)	/* membership changed under running operations */
		cluster_ops_fail_all(c, -TALLY_EPEERLOST);
	c->epoch = r->epoch;
	c->n_nodes = r->roster.n;
	c->n_workers = c->n_aggs = 0;
	c->total_procs = 0;
	for (uint16_t i = 0; i < r->roster.n; i++) {
		const struct boot_member *e = &r->roster.m[i];

		c->addrs[i].ip = e->ip;
		c->addrs[i].port = e->port;
		memcpy(c->addrs[i].mac, e->mac, 6);
		memcpy(c->thread_macs[i], e->thread_mac,
		       sizeof(c->thread_macs[i]));
		if (e->rank == c->cfg->rank) {
			me = e;
			c->self_node = i;
		}
		if (e->role != ROLE_AGGREGATOR) {
			c->n_workers++;
			c->total_procs += e->local_size;
		}
		if (e->role == ROLE_AGGREGATOR ||
		    (e->role == ROLE_COLOCATED && r->roster.algorithm ==
						  ALGO_AGGREGATE))
			c->agg_nodes[c->n_aggs++] = i;
	}
	c->have_roster = false;
	if (!me)
		log_err("epoch %u: this daemon is not in the roster", r->epoch);
	else if (c->cfg->dp_profile == TLY_PROFILE_SWITCH &&
		 c->n_workers > TLY_SWITCH_MAX_WORKERS)
		log_err("epoch %u: dataplane.profile = switch takes at most %d "
			"workers (one 32-bit register per bitmap); the roster "
			"has %u", r->epoch, TLY_SWITCH_MAX_WORKERS,
			c->n_workers);
	else
		c->have_roster = apply_roster(c, r, me) == 0;
	cluster_dp_resume(c);
	if (had)
		c->env.job_abort(c->env.ctx, "the job's membership changed");
	else if (me && !c->have_roster &&
		 c->cfg->dp_profile == TLY_PROFILE_SWITCH &&
		 c->n_workers > TLY_SWITCH_MAX_WORKERS)
		c->env.job_abort(c->env.ctx, "dataplane.profile = switch takes "
				 "at most 32 workers");
	else if (me && !c->have_roster)	/* e.g. a route's MTU (udp_mtu.c) */
		c->env.job_abort(c->env.ctx, "the dataplane cannot take the "
				 "roster (the log says why)");
	if (!c->have_roster)
		return;
	/* docs/compression.md section 2: lim = 2^(7 - ceil(log2 n)) - 1 */
	if (c->cfg->compression == TLY_CODEC_INT8 && c->n_workers > 32)
		log_warn("epoch %u: compression.method = int8 with %u workers "
			 "keeps three levels per element (lim 1); int16 keeps "
			 "511", c->epoch, c->n_workers);
	cluster_ops_pump(c, tly_now_ns());	/* what waited for the first roster */
	log_info("epoch %u: %u workers, %u aggregators, %d processes; this "
		 "daemon is node %u (%s), %u dataplane thread(s)", c->epoch,
		 c->n_workers, c->n_aggs, c->total_procs, c->self_node,
		 boot_role_name(me->role), c->n_shards);
}

static void on_peer_down(void *ctx, int rank, const char *why)
{
	(void)ctx;
	log_warn("peer rank %d %s", rank, why);
}

static void on_lost(void *ctx, const char *why)
{
	struct cluster *c = ctx;

	log_err("no job any more: %s", why);
	network_down(c, -TALLY_EPEERLOST);
	c->env.job_abort(c->env.ctx, why);
}

/* ---- the loop's side -------------------------------------------------- */

bool cluster_joined(const struct cluster *c)
{
	return c && c->have_roster;
}

bool cluster_dead(const struct cluster *c)
{
	return c && (c->mb.dead || c->dp_stuck);
}

void cluster_engine_failed(struct cluster *c, int res, const char *why)
{
	log_err("%s: the job's operations fail and its hosts start a new "
		"epoch", why);
	network_down(c, res);
	membership_abort(&c->mb);
}

/* Take what the threads finished; give the engine what the scheduler
 * releases. */
int cluster_poll(struct cluster *c, uint64_t now)
{
	struct dp_completion e;
	int work = 0, failed = 0;

	for_each_shard(c, sh) {
		if (!sh->dp)
			continue;
		dp_thread_completion_awake(sh->dp);
		while (dp_thread_complete(sh->dp, &e)) {
			sh->tensors_out--;
			work++;
			if (e.status)
				failed = e.status;
			else
				cluster_ops_tensor_done(c, (uint32_t)e.user);
		}
	}
	if (failed) {
		log_err("the engine refused a tensor: %s", strerror(-failed));
		cluster_engine_failed(c, -TALLY_EINVAL, "engine refusal");
		return work;
	}
	if (c->engine_up)
		work += cluster_ops_pump(c, now);
	if (c->xdp)
		cluster_xdp_poll(c, now);
	return work;
}

/* While a member reaches its coordinator, its retries need a finer clock
 * than the heartbeats': a job's first all-reduce waits for them. */
#define CLUSTER_JOIN_TICK_MS 5
uint64_t cluster_idle_ns(struct cluster *c)
{
	uint64_t hb = (uint64_t)c->cfg->heartbeat_ms * 1000000ull / 2;
	uint64_t now = tly_now_ns(), ops;

	/* announce sleep on the completion rings: a thread that finishes a
	 * tensor from now on writes the eventfd in our epoll */
	for_each_shard(c, sh)
		if (sh->dp && dp_thread_completion_sleep(sh->dp))
			return 0;
	if (c->xdp && cluster_xdp_idle_ns(c, now) < hb)
		hb = cluster_xdp_idle_ns(c, now);
	if (c->mb_started && membership_joining(&c->mb) &&
	    CLUSTER_JOIN_TICK_MS * 1000000ull < hb)
		hb = CLUSTER_JOIN_TICK_MS * 1000000ull;
	ops = cluster_ops_sleep_ns(c, now);
	return ops < hb ? ops : hb;
}

void cluster_event(struct cluster *c, uint64_t tag)
{
	if (TAG_KIND(tag) == TAG_NET)
		return;		/* completions: cluster_poll takes them */
	membership_event(&c->mb, tag, tly_now_ms());
}

void cluster_tick(struct cluster *c, uint64_t now_ms)
{
	bool joining = c->mb_started && membership_joining(&c->mb);

	if (now_ms < c->next_tick_ms && !joining)
		return;
	c->next_tick_ms = now_ms + (uint64_t)c->cfg->heartbeat_ms / 2;
	membership_tick(&c->mb, now_ms);
}

void cluster_local_abort(struct cluster *c)
{
	/* Nothing may point into client memory once it goes away. */
	network_down(c, -TALLY_EPEERLOST);
	membership_abort(&c->mb);
}

/* The threads' published counters, summed. */
static void dp_stats_sum(const struct cluster *c, struct dp_stats *sum)
{
	struct dp_stats st;

	memset(sum, 0, sizeof(*sum));
	for (unsigned int s = 0; s < c->n_shards; s++) {
		uint64_t *a = (uint64_t *)sum;
		const uint64_t *b = (const uint64_t *)&st;

		if (!c->shards[s].dp)
			continue;
		dp_thread_stats(c->shards[s].dp, &st);
		for (size_t i = 0; i < sizeof(st) / sizeof(uint64_t); i++)
			a[i] += b[i];
	}
}

void cluster_log_counters(const struct cluster *c)
{
	struct dp_stats st;

	dp_stats_sum(c, &st);
	log_info("wire: worker sent %llu bytes, received %llu bytes "
		 "(tally header + payload)",
		 (unsigned long long)(c->past_worker.tx_bytes +
				      st.worker.tx_bytes),
		 (unsigned long long)(c->past_worker.rx_bytes +
				      st.worker.rx_bytes));
	log_info("auth: %llu control messages failed authentication",
		 (unsigned long long)c->mb.auth_failures);
	if (st.cq_overflow)
		log_err("dataplane: %llu completions lost (a full ring)",
			(unsigned long long)st.cq_overflow);
	for (unsigned int s = 0; s < c->n_shards; s++) {
		if (!c->shards[s].dp)
			continue;
		dp_thread_stats(c->shards[s].dp, &st);
		log_info("dataplane thread %u: %llu turns, %llu sleeps; "
			 "frames rx %llu tx %llu; passed to other threads "
			 "%llu, from them %llu", s,
			 (unsigned long long)st.turns,
			 (unsigned long long)st.sleeps,
			 (unsigned long long)st.tp.rx_pkts,
			 (unsigned long long)st.tp.tx_pkts,
			 (unsigned long long)st.tp.rx_handoff_out,
			 (unsigned long long)st.tp.rx_handoff_in);
		if (st.tp.emu_released)
			log_info("dataplane thread %u: emulator released %llu "
				 "frames, %llu within 10 us, late mean %.1f us, "
				 "max %.1f us", s,
				 (unsigned long long)st.tp.emu_released,
				 (unsigned long long)st.tp.emu_on_time,
				 st.tp.emu_late_ns / 1e3 /
				 (double)st.tp.emu_released,
				 st.tp.emu_late_max_ns / 1e3);
		/* udp: how much UDP_GRO merged (1.0: nothing) */
		if (st.tp.rx_msgs)
			log_info("dataplane thread %u: %.2f frames a receive "
				 "from the kernel (%llu receives)", s,
				 (double)st.tp.rx_pkts /
				 (double)st.tp.rx_msgs,
				 (unsigned long long)st.tp.rx_msgs);
	}
}

_Static_assert(BOOT_MAX_MEMBERS == 256, "cluster_snapshot.peers");
_Static_assert(TRANSPORT_MAX_NODES >= BOOT_MAX_MEMBERS, "dp_stats.peer_*");

void cluster_snapshot(const struct cluster *c, struct cluster_snapshot *s)
{
	struct dp_stats *st;

	memset(s, 0, sizeof(*s));
	if (!c)
		return;
	st = malloc(sizeof(*st));
	if (!st)
		return;
	dp_stats_sum(c, st);
	s->joined = c->have_roster;
	s->epoch = c->epoch;
	s->n_nodes = c->n_nodes;
	s->self_node = c->self_node;
	s->n_workers = c->n_workers;
	s->n_aggs = c->n_aggs;
	s->worker = c->past_worker;
	s->agg = c->past_agg;
	s->have_worker = c->shards[0].worker || c->past_worker.tx_pkts;
	s->have_agg = c->shards[0].agg || c->past_agg.rx_pkts;
	counters_add(&s->worker, &st->worker);
	counters_add(&s->agg, &st->agg);
	if (c->shards[0].agg) {
		s->agg_slots_busy = (uint32_t)st->agg_slots_busy;
		s->agg_slots = c->agg_slots;
	}
	if (c->shards[0].tp_open) {
		s->tp = st->tp;
		s->transport = c->shards[0].tp.ops->name;
	}
	if (c->sched) {
		s->have_sched = true;
		s->sched = *sched_stats(c->sched);
		sched_depth(c->sched, &s->sched_pending, &s->sched_units);
	}
	for (uint32_t i = 0; c->units && i < CLUSTER_MAX_UNITS; i++)
		s->net_units += c->units[i].used;
	s->auth_failures = c->mb.auth_failures;
	s->n_xdp = cluster_xdp_counters(c, s->xdp, s->xdp_names,
					CLUSTER_XDP_COUNTERS);
	for (uint16_t i = 0; i < c->n_nodes && i < BOOT_MAX_MEMBERS; i++) {
		s->peers[i].ip = c->addrs[i].ip;
		s->peers[i].port = c->addrs[i].port;
		s->peers[i].agg = i >= c->n_workers;
		s->peers[i].tx_pkts = st->peer_tx_pkts[i];
		s->peers[i].tx_bytes = st->peer_tx_bytes[i];
		for (uint16_t a = 0; a < c->n_aggs; a++)
			s->peers[i].agg |= c->agg_nodes[a] == i;
	}
	for (int i = 0; i < BOOT_MAX_MEMBERS; i++)
		s->n_present += c->mb.present[i];
	free(st);
}

/*
 * [dataplane] threads and cpus: how many shards, and the CPUs their
 * threads are pinned to, in order (@cpus[@n_cpus]; 0: not pinned).
 */
static int shards_check(struct cluster *c, int *cpus, int *n_cpus)
{
	const struct tally_config *cfg = c->cfg;
	struct tly_placement p;
	char err[256];

	c->n_shards = (unsigned int)cfg->dp_threads;
	*n_cpus = 0;
	/* udp: a socket per thread; dpdk: a queue pair per port and
	 * thread; rdma: a queue pair per thread */
	if (c->n_shards > 1 && strcmp(cfg->transport, "udp") &&
	    strcmp(cfg->transport, "dpdk") && strcmp(cfg->transport, "rdma")) {
		log_err("dataplane.threads = %u: the %s transport drives one "
			"queue, so one thread; only udp, dpdk and rdma take "
			"more (set dataplane.threads = 1)", c->n_shards,
			cfg->transport);
		return -1;
	}
	if (c->n_shards > 1 && !cfg->address.port) {
		/* a service job: every host's kernel picks its port, and its
		 * peers could not know port + s; all of them do the same */
		log_warn("dataplane.threads = %u: this job's port is chosen by "
			 "the kernel (a service job), so it runs one dataplane "
			 "thread", c->n_shards);
		c->n_shards = 1;
	}
	if (cfg->address.port + c->n_shards - 1 > 65535) {
		log_err("dataplane.threads = %u needs room above the port of "
			"dataplane.address: thread s uses port + s",
			c->n_shards);
		return -1;
	}
	if (!cfg->dp_cpus[0])
		return 0;
	if (tly_placement_resolve(&p, -1, cfg->dp_cpus, err, sizeof(err))) {
		log_err("dataplane.cpus: %s", err);
		return -1;
	}
	for (int i = 0; i < CPU_SETSIZE && *n_cpus < CLUSTER_MAX_SHARDS; i++)
		if (CPU_ISSET(i, &p.cpus))
			cpus[(*n_cpus)++] = i;
	return 0;
}

/* The job's keys: its own secret, else the daemon's secret file or
 * $TALLY_JOB_SECRET. */
static int load_keys(const struct cluster_env *env, struct auth_keys *k)
{
	char err[256];

	if (auth_init()) {
		log_err("libsodium cannot start");
		return -1;
	}
	if (env->secret_len ?
	    auth_keys_from_secret(k, env->secret, env->secret_len, err,
				  sizeof(err)) :
	    auth_load(k, env->cfg->secret_file, err, sizeof(err))) {
		log_err("%s", err);
		return -1;
	}
	return 0;
}

struct cluster *cluster_start(const struct cluster_env *env)
{
	const struct tally_config *cfg = env->cfg;
	struct cluster *c = calloc(1, sizeof(*c));
	struct membership_cfg mc = {
		.self = {
			.rank = (uint16_t)cfg->rank,
			.role = (uint8_t)cfg->role,
			.local_size = cfg->role == ROLE_AGGREGATOR ? 0 :
				      (uint8_t)cfg->local_size,
			.ip = cfg->address.ip,
			.port = cfg->address.port,
		},
		.world = (uint16_t)cfg->world,
		.algorithm = (uint8_t)cfg->algorithm,
		.job_key = cfg->job_key,
		.k = (uint16_t)config_k(cfg),
		.pool_slots = (uint32_t)cfg->pool_slots,
		.coord_ip = cfg->coordinator.ip,
		.coord_port = cfg->coordinator.port,
		.heartbeat_ms = (uint32_t)cfg->heartbeat_ms,
		.peer_timeout_ms = (uint32_t)cfg->peer_timeout_ms,
		.connect_timeout_ms = (uint32_t)cfg->connect_timeout_ms,
		.tag_job = env->tag_job,
		.retry_other_job = env->retry_other_job,
	};
	struct membership_ops ops = { on_roster, on_peer_down, on_lost, c };
	int cpus[CLUSTER_MAX_SHARDS], n_cpus, ret;

	if (!c)
		return NULL;
	c->env = *env;
	c->cfg = cfg;
	if (load_keys(env, &mc.keys)) {
		free(c);
		return NULL;
	}
	memcpy(mc.self.mac, cfg->mac, 6);
	/*
	 * Open the transport on a table of ourselves before registering;
	 * rosters then arrive through transport_set_nodes().  Opening can
	 * take seconds (DPDK's EAL on a busy machine): done in on_roster(),
	 * it stopped our heartbeats and the job declared us lost.  And rdma
	 * peers need our queue pair's number, known only once it is open:
	 * we register the address it gives; udp on port 0 registers the
	 * port the kernel chose.
	 */
	c->addrs[0] = (struct tly_addr){ .ip = cfg->address.ip,
					 .port = cfg->address.port };
	memcpy(c->addrs[0].mac, cfg->mac, 6);
	c->self_node = 0;
	c->n_nodes = 1;
	ret = shards_check(c, cpus, &n_cpus) ? -1 : cluster_ops_init(c);
	mc.dp_threads = (uint8_t)c->n_shards;
	mc.dp_profile = (uint8_t)cfg->dp_profile;
	mc.compression = (uint8_t)cfg->compression;
	if (!ret) {
		char err[200];

		if (config_profile_check(cfg, err, sizeof(err)) ||
		    config_compression_check(cfg, err, sizeof(err))) {
			log_err("%s", err);
			ret = -1;
		}
	}
	if (!ret && !strcmp(cfg->transport, "xdp")) {
		/* the kernel runs the data path: no shard, no thread */
		c->n_shards = 0;
		ret = cluster_xdp_open(c);
	}
	for_each_shard(c, sh) {
		if (!ret)
			open_transport(c, sh);
		if (!ret && !sh->tp_open)
			ret = -1;
		if (!ret)
			ret = start_thread(c, sh, n_cpus ?
					   cpus[(sh - c->shards) % n_cpus] :
					   -1);
	}
	if (!ret) {
		struct transport *tp = &c->shards[0].tp;

		if (tp->has_local_mac)
			memcpy(mc.self.mac, tp->local_mac, 6);
		/* rdma: every thread's queue pair, for the roster */
		for (unsigned int s = 1; s < c->n_shards; s++)
			if (c->shards[s].tp.has_local_mac)
				memcpy(mc.self.thread_mac[s - 1],
				       c->shards[s].tp.local_mac, 6);
		if (tp->local_port)
			mc.self.port = c->addrs[0].port = tp->local_port;
		ret = membership_start(&c->mb, &mc, &ops, env->epoll_fd);
		c->mb_started = ret == 0;
	}
	explicit_bzero(&mc.keys, sizeof(mc.keys));
	if (ret) {
		cluster_stop(c);
		return NULL;
	}
	return c;
}

void cluster_stop(struct cluster *c)
{
	if (!c)
		return;
	cluster_log_counters(c);
	for_each_shard(c, sh)
		if (sh->dp) {
			epoll_ctl(c->env.epoll_fd, EPOLL_CTL_DEL,
				  dp_thread_completion_fd(sh->dp), NULL);
			dp_thread_stop(sh->dp);
		}
	if (c->units)
		cluster_ops_fail_all(c, -TALLY_EPEERLOST);
	if (c->mb_started)
		membership_stop(&c->mb);
	cluster_xdp_close(c);
	explicit_bzero(&c->mb.cfg.keys, sizeof(c->mb.cfg.keys));
	if (c->dp_stuck) {
		/* a thread may still use its transport and engine, which
		 * live in @c: they are leaked, not freed under it */
		log_err("a dataplane thread is stuck: its memory is leaked");
		return;
	}
	for_each_shard(c, sh)
		sh->dp = NULL;
	engine_destroy(c);
	for_each_shard(c, sh)
		if (sh->tp_open)
			transport_close(&sh->tp);
	cluster_ops_fini(c);
	free(c);
}
