// SPDX-License-Identifier: BSD-3-Clause
/*
 * cluster.c - tallyd in a multi-host job (see cluster.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include <tally/tally.h>
#include "ctrl/auth.h"
#include "ctrl/cluster.h"
#include "ctrl/cluster_internal.h"
#include "ctrl/config.h"
#include "dataplane/reduce_pool.h"
#include "ctrl/log.h"
#include "ctrl/loop_tags.h"

/* What the engine of an epoch did, for the log (and for debugging). */
static void log_engine(const struct cluster *c)
{
	for (int i = 0; i < 2; i++) {
		const struct tly_counters *k = i == 0 ?
			(c->worker ? tly_worker_counters(c->worker) : NULL) :
			(c->agg ? tly_agg_counters(c->agg) : NULL);

		if (!k)
			continue;
		log_info("%s: rx %llu tx %llu retx %llu dups %llu acks %llu "
			 "busy %llu", i ? "aggregator" : "worker",
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

static void engine_destroy(struct cluster *c)
{
	log_engine(c);
	if (c->worker) {
		counters_add(&c->past_worker, tly_worker_counters(c->worker));
		tly_worker_destroy(c->worker);
	}
	if (c->agg) {
		counters_add(&c->past_agg, tly_agg_counters(c->agg));
		tly_agg_destroy(c->agg);
	}
	c->worker = NULL;
	c->agg = NULL;
}

/* ---- rosters ---------------------------------------------------------- */

static int open_transport(struct cluster *c)
{
	struct transport_config tc = {
		.kind = c->cfg->transport,
		.self = c->self_node,
		.n_nodes = c->n_nodes,
		.addrs = c->addrs,
		.mtu = (uint32_t)(TLY_L2L4_LEN + TLY_HDR_LEN + 4 * c->cfg->k),
		.eal_args = c->cfg->eal_args,
		.mbufs = (uint32_t)c->cfg->mbufs,
		.rdma_device = c->cfg->rdma_device,
		.rdma_port = (uint8_t)c->cfg->rdma_port,
		.rdma_gid_index = c->cfg->rdma_gid_index,
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
	struct epoll_event ev = { .events = EPOLLIN,
		.data.u64 = TAG_JOB_SOCK(TAG_NET, c->env.tag_job, 0) };
	int fd;

	if (transport_open(&c->tp, &tc)) {
		log_err("cannot open the %s transport", c->cfg->transport);
		return -1;
	}
	c->tp_open = true;
	c->tp_tx = transport_tx_ops(&c->tp);
	fd = c->tp.ops->wait_fd ? c->tp.ops->wait_fd(&c->tp) : -1;
	if (fd >= 0)
		epoll_ctl(c->env.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
	log_info("%s transport open: node %u of %u", c->tp.ops->name,
		 c->self_node, c->n_nodes);
	return 0;
}


/* The engines send through these: per-peer counts, then the transport. */
static uint8_t *tx_alloc_counted(void *ctx, size_t len)
{
	struct cluster *c = ctx;

	return c->tp_tx.alloc(c->tp_tx.ctx, len);
}

static void tx_send_counted(void *ctx, uint16_t dst, uint8_t *frame,
			    size_t len)
{
	struct cluster *c = ctx;

	if (dst < BOOT_MAX_MEMBERS) {
		c->peer_tx_pkts[dst]++;
		c->peer_tx_bytes[dst] += len;
	}
	c->tp_tx.send(c->tp_tx.ctx, dst, frame, len);
}

static int build_engine(struct cluster *c, const struct boot_member *me)
{
	uint16_t job = (uint16_t)((c->cfg->job_key * 0x9e3779b1u) ^
				  (c->epoch * 0x85ebca6bu) ^
				  (c->cfg->job_key >> 16));
	struct tly_net net = {
		.addrs = c->tp.full_frames ? c->addrs : NULL,
		.n_nodes = c->n_nodes,
		.port = c->addrs[c->self_node].port,
	};
	struct tly_tx_ops tx = {
		.alloc = tx_alloc_counted, .send = tx_send_counted, .ctx = c,
	};
	/* the epoch's cookie: packets of a guessed job key or of an earlier
	 * epoch fail the receiver's first check */
	uint32_t cookie = auth_cookie(&c->mb.cfg.keys, c->cfg->job_key,
				      c->epoch);
	bool agg_here = false;

	for (int i = 0; i < c->n_aggs; i++)
		agg_here |= c->agg_nodes[i] == c->self_node;
	if (me->role != ROLE_AGGREGATOR && c->cfg->local_size > 0) {
		struct tly_worker_cfg w = {
			.job = job, .cookie = cookie, .k = (uint16_t)c->cfg->k,
			.n_workers = c->n_workers, .rank = c->self_node,
			.n_slots = (uint32_t)c->cfg->pool_slots,
			.n_aggs = c->n_aggs, .agg_nodes = c->agg_nodes,
			.window = (uint32_t)c->cfg->window,
			.max_tensors = 1024,
			.rto_ns = (uint64_t)c->cfg->rto_us * 1000,
			.rto_max_ns = (uint64_t)c->cfg->rto_us * 1000 * 64,
			.acked_ns = (uint64_t)c->cfg->rto_us * 1000 * 8,
			.busy_ns = (uint64_t)c->cfg->rto_us * 1000,
			.confirm_ns = 200000, .confirm_batch = 64,
			.chunk_rotate = 0,
			.net = net, .ops = tx,
			.done = cluster_ops_tensor_done, .done_ctx = c,
		};

		c->worker = tly_worker_create(&w);
		if (!c->worker)
			return -1;
	}
	if (agg_here && c->cfg->algorithm == ALGO_AGGREGATE) {
		struct tly_agg_cfg a = {
			.job = job, .cookie = cookie, .k = (uint16_t)c->cfg->k,
			.n_workers = c->n_workers, .self = c->self_node,
			.n_slots = (uint32_t)c->cfg->pool_slots,
			.n_fallback = (uint32_t)c->cfg->pool_slots / 4 + 64,
			.evict_ns = (uint64_t)c->cfg->rto_us * 1000 * 16,
			.probe_ns = (uint64_t)c->cfg->rto_us * 1000 * 4,
			.net = net, .ops = tx,
		};

		c->agg = tly_agg_create(&a);
		if (!c->agg)
			return -1;
		c->agg_slots = a.n_slots + a.n_fallback;
	}
	return 0;
}

static void on_roster(void *ctx, const struct boot_msg *r)
{
	struct cluster *c = ctx;
	const struct boot_member *me = NULL;

	if (c->have_roster) {
		/* membership changed under running operations */
		engine_destroy(c);
		cluster_ops_fail_all(c, -TALLY_EPEERLOST);
		c->env.job_abort(c->env.ctx, "the job's membership changed");
	}
	c->epoch = r->epoch;
	c->n_nodes = r->roster.n;
	c->n_workers = c->n_aggs = 0;
	c->total_procs = 0;
	for (uint16_t i = 0; i < r->roster.n; i++) {
		const struct boot_member *e = &r->roster.m[i];

		c->addrs[i].ip = e->ip;
		c->addrs[i].port = e->port;
		memcpy(c->addrs[i].mac, e->mac, 6);
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
	if (!me) {
		log_err("epoch %u: this daemon is not in the roster", r->epoch);
		c->have_roster = false;
		return;
	}
	if (transport_set_nodes(&c->tp, c->self_node, c->n_nodes, c->addrs)) {
		log_err("epoch %u: the %s transport cannot take the roster",
			r->epoch, c->tp.ops->name);
		c->have_roster = false;
		return;
	}
	if (build_engine(c, me)) {
		log_err("cannot build the aggregation engine");
		engine_destroy(c);
		c->have_roster = false;
		return;
	}
	c->have_roster = true;
	cluster_ops_pump(c, transport_now_ns());	/* what waited for the first roster */
	log_info("epoch %u: %u workers, %u aggregators, %d processes; this "
		 "daemon is node %u (%s)", c->epoch, c->n_workers, c->n_aggs,
		 c->total_procs, c->self_node, boot_role_name(me->role));
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
	engine_destroy(c);
	cluster_ops_fail_all(c, -TALLY_EPEERLOST);
	c->have_roster = false;
	c->env.job_abort(c->env.ctx, why);
}

/* ---- the loop's side -------------------------------------------------- */

bool cluster_joined(const struct cluster *c)
{
	return c && c->have_roster;
}

bool cluster_dead(const struct cluster *c)
{
	return c && c->mb.dead;
}

int cluster_poll(struct cluster *c, uint64_t now)
{
	struct transport_rx rx[TRANSPORT_RX_BURST];
	struct tly_net net;
	int n, work = 0;

	if (!c->tp_open)
		return 0;
	net = (struct tly_net){ .addrs = c->tp.full_frames ? c->addrs : NULL,
				.n_nodes = c->n_nodes,
				.port = c->addrs[c->self_node].port };
	n = transport_rx_burst(&c->tp, rx, TRANSPORT_RX_BURST);
	for (int i = 0; i < n; i++) {
		int type = tly_frame_type(&net, rx[i].data, rx[i].len);

		if ((type == TLY_T_DATA || type == TLY_T_CONFIRM) && c->agg)
			tly_agg_rx(c->agg, rx[i].data, rx[i].len, now);
		else if (type > 0 && c->worker)
			tly_worker_rx(c->worker, rx[i].data, rx[i].len, now);
	}
	if (n > 0)
		transport_rx_release(&c->tp, rx, n);
	work += n;
	if (c->worker) {
		tly_worker_poll(c->worker, now);
		work += cluster_ops_pump(c, now);
	}
	if (c->agg)
		tly_agg_poll(c->agg, now);
	work += transport_tx_flush(&c->tp, now);
	return work;
}

/* While a member reaches its coordinator, its retries need a finer clock
 * than the heartbeats': a job's first all-reduce waits for them. */
#define CLUSTER_JOIN_TICK_MS 5

uint64_t cluster_idle_ns(struct cluster *c)
{
	uint64_t hb = (uint64_t)c->cfg->heartbeat_ms * 1000000ull / 2;
	bool busy = (c->worker && tly_worker_active(c->worker)) ||
		    (c->agg && tly_agg_slots_busy(c->agg));
	bool has_fd = c->tp_open && c->tp.ops->wait_fd &&
		      c->tp.ops->wait_fd(&c->tp) >= 0;

	/* Timers of work in flight need us soon; a transport without a
	 * wakeup fd (DPDK) must be polled; otherwise sleep until a packet,
	 * a client or the next heartbeat. */
	if (busy || (!has_fd && c->tp_open))
		return busy ? 200000 : 1000000;
	if (c->mb_started && membership_joining(&c->mb))
		return CLUSTER_JOIN_TICK_MS * 1000000ull;
	return hb;
}

void cluster_event(struct cluster *c, uint64_t tag)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	membership_event(&c->mb, tag,
			 (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec /
			 1000000);
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
	engine_destroy(c);
	cluster_ops_fail_all(c, -TALLY_EPEERLOST);
	c->have_roster = false;
	membership_abort(&c->mb);
}

void cluster_log_counters(const struct cluster *c)
{
	uint64_t sent = c->past_worker.tx_bytes;
	uint64_t recv = c->past_worker.rx_bytes;

	if (c->worker) {
		sent += tly_worker_counters(c->worker)->tx_bytes;
		recv += tly_worker_counters(c->worker)->rx_bytes;
	}
	log_info("wire: worker sent %llu bytes, received %llu bytes "
		 "(tally header + payload)", (unsigned long long)sent,
		 (unsigned long long)recv);
	log_info("auth: %llu control messages failed authentication",
		 (unsigned long long)c->mb.auth_failures);
}

_Static_assert(BOOT_MAX_MEMBERS == 256, "cluster_snapshot.peers");

void cluster_snapshot(const struct cluster *c, struct cluster_snapshot *s)
{

	memset(s, 0, sizeof(*s));
	if (!c)
		return;
	s->joined = c->have_roster;
	s->epoch = c->epoch;
	s->n_nodes = c->n_nodes;
	s->self_node = c->self_node;
	s->n_workers = c->n_workers;
	s->n_aggs = c->n_aggs;
	s->worker = c->past_worker;
	s->agg = c->past_agg;
	s->have_worker = c->worker || c->past_worker.tx_pkts;
	s->have_agg = c->agg || c->past_agg.rx_pkts;
	if (c->worker)
		counters_add(&s->worker, tly_worker_counters(c->worker));
	if (c->agg) {
		counters_add(&s->agg, tly_agg_counters(c->agg));
		s->agg_slots_busy = tly_agg_slots_busy(c->agg);
		s->agg_slots = c->agg_slots;
	}
	if (c->tp_open) {
		s->tp = c->tp.stats;
		s->transport = c->tp.ops->name;
	}
	if (c->sched) {
		s->have_sched = true;
		s->sched = *sched_stats(c->sched);
		sched_depth(c->sched, &s->sched_pending, &s->sched_units);
	}
	for (uint32_t i = 0; c->units && i < CLUSTER_MAX_UNITS; i++)
		s->net_units += c->units[i].used;
	s->auth_failures = c->mb.auth_failures;
	for (uint16_t i = 0; i < c->n_nodes && i < BOOT_MAX_MEMBERS; i++) {
		s->peers[i].ip = c->addrs[i].ip;
		s->peers[i].port = c->addrs[i].port;
		s->peers[i].agg = i >= c->n_workers;
		s->peers[i].tx_pkts = c->peer_tx_pkts[i];
		s->peers[i].tx_bytes = c->peer_tx_bytes[i];
		for (uint16_t a = 0; a < c->n_aggs; a++)
			s->peers[i].agg |= c->agg_nodes[a] == i;
	}
	for (int i = 0; i < BOOT_MAX_MEMBERS; i++)
		s->n_present += c->mb.present[i];
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
		.k = (uint16_t)cfg->k,
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
	int ret;

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
	ret = cluster_ops_init(c) ? -1 : open_transport(c);
	if (!ret) {
		if (c->tp.has_local_mac)
			memcpy(mc.self.mac, c->tp.local_mac, 6);
		if (c->tp.local_port)
			mc.self.port = c->addrs[0].port = c->tp.local_port;
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
	engine_destroy(c);
	if (c->units)
		cluster_ops_fail_all(c, -TALLY_EPEERLOST);
	if (c->mb_started)
		membership_stop(&c->mb);
	if (c->tp_open)
		transport_close(&c->tp);
	cluster_ops_fini(c);
	explicit_bzero(&c->mb.cfg.keys, sizeof(c->mb.cfg.keys));
	free(c);
}
