// SPDX-License-Identifier: BSD-3-Clause
/*
 * cluster_ops.c - operations of a multi-host job: a ready local group is
 * reduced into its staging buffer and handed to the scheduler; what the
 * scheduler releases becomes engine tensors; when all of a gradient's
 * bytes are back, every member's output is written in one pass.
 *
 * A unit of one segment is all-reduced in place in the staging buffer; a
 * merged unit (mgwfbp) is gathered into a buffer of its own first and
 * scattered back after.  Engine tensor ids are derived from the unit's
 * first (key, iteration) and the element offset of each engine part, so
 * every host, which forms the same units, names them alike.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/tally.h>
#include "dataplane/clock.h"
#include "ctrl/cluster_internal.h"
#include "ctrl/config.h"
#include "ctrl/log.h"
#include "dataplane/engine/codec.h"
#include "dataplane/engine/dtype.h"
#include "dataplane/reduce.h"
#include "dataplane/reduce_pool.h"

#define UNIT_NONE UINT32_MAX

static size_t part_elems(const struct cluster *c)
{
	return (size_t)TLY_MAX_CHUNKS * (size_t)config_k(c->cfg);
}

/* the job checked the dtype at submission (job.c): it is in the table */
static enum tly_dtype to_engine_dtype(uint8_t t)
{
	int dt = tly_dtype_from_tally(t);

	return dt < 0 ? TLY_DT_F32 : (enum tly_dtype)dt;
}

static uint32_t op_index(const void *user)
{
	return (uint32_t)(uintptr_t)user;
}

static char *staging(struct cluster *c, uint32_t idx)
{
	return c->env.groups->pool[idx].m[0].recv;
}

/*
 * Where the engine writes what the host sent (sign_ef's error feedback,
 * docs/compression.md section 5): member 0's sendbuf, the library's
 * scratch, free once the local sum was taken.  Laid out as the staging.
 */
static char *sent_buf(struct cluster *c, uint32_t idx)
{
	return (char *)c->env.groups->pool[idx].m[0].send;
}

/* whether the op's own method feeds back (its members' sendbufs are
 * the library's, apart from their recvbufs) */
static bool op_feedback(const struct cluster *c, const struct lg_group *g)
{
	const struct tly_codec_ops *co = tly_codec(g->op.codec);

	if (!co || !co->sent || g->op.dtype == TALLY_INT32 ||
	    c->cfg->algorithm != ALGO_AGGREGATE)
		return false;
	for (unsigned int r = 0; r < c->env.groups->size; r++)
		if (g->m[r].send == g->m[r].recv)
			return false;
	return true;
}

/* ---- finishing -------------------------------------------------------- */

static void release_members(struct cluster *c, struct lg_group *g, int res)
{
	c->env.group_done(c->env.ctx, g, res);
}

/* All of a gradient is back: one pass writes (and scales) every output. */
static void finish_op(struct cluster *c, uint32_t idx)
{
	struct lg_group *g = &c->env.groups->pool[idx];
	void *out[CONFIG_MAX_LOCAL_SIZE];
	const void *in[1] = { g->m[0].recv };
	struct reduce_args a;
	int res;

	for (unsigned int r = 0; r < c->env.groups->size; r++)
		out[r] = g->m[r].recv;
	res = reduce_prepare(&a, g->op.dtype, g->op.redop, in, 1, out,
			     c->env.groups->size, g->op.count,
			     (unsigned int)c->total_procs);
	if (!res)
		reduce_pool_run(c->env.reducer, &a);
	if (!res && c->ops[idx].sent) {
		/* every member's share of the residual needs it */
		size_t bytes = g->op.count * tally_dtype_size(g->op.dtype);

		for (unsigned int r = 1; r < c->env.groups->size; r++)
			memcpy((void *)g->m[r].send, g->m[0].send, bytes);
		g->sent = true;
	}
	c->ops[idx].used = false;
	release_members(c, g, res);
}

static void unit_free(struct net_unit *nu)
{
	free(nu->merged);
	free(nu->merged_sent);
	nu->merged = NULL;
	nu->merged_sent = NULL;
	nu->used = false;
}

void cluster_ops_tensor_done(struct cluster *c, uint32_t ui)
{
	struct net_unit *nu;
	uint64_t off = 0;

	if (ui >= CLUSTER_MAX_UNITS)
		return;
	nu = &c->units[ui];
	if (!nu->used || ++nu->parts_done < nu->parts)
		return;
	for (uint32_t s = 0; s < nu->u.n_segments; s++) {
		const struct sched_segment *seg = &nu->u.seg[s];
		uint32_t idx = op_index(seg->user);
		struct net_op *op = &c->ops[idx];

		if (nu->merged)		/* scatter the merged result back */
			memcpy(staging(c, idx) + seg->offset,
			       (char *)nu->merged + off, seg->bytes);
		if (c->env.groups->pool[idx].op.codec != nu->codec ||
		    (nu->merged && !nu->merged_sent))
			op->sent = false;	/* fed back elsewise, or not */
		else if (nu->merged_sent && op->sent)
			memcpy(sent_buf(c, idx) + seg->offset,
			       (char *)nu->merged_sent + off, seg->bytes);
		off += seg->bytes;
		op->bytes_done += seg->bytes;
		if (op->used && op->bytes_done == op->bytes)
			finish_op(c, idx);
	}
	sched_unit_done(c->sched, nu->u.id, tly_now_ns());
	unit_free(nu);
}

/* The clock of units that wait for a shard's room, and of a deadline
 * the schedule keeps (never sooner than this) */
#define OPS_TICK_NS 1000000ull

/*
 * A completion wakes the control thread (the completion rings' eventfd),
 * and so does a client's submission, so units in flight and gradients the
 * schedule holds need no clock of their own; only units waiting for room
 * in a shard (a safety net: a completion frees it) and the schedule's
 * deadline (MG-WFBP's merge, ByteScheduler's stall rule) do.  A tick every
 * millisecond while anything was out cost each daemon of the four-host
 * lab 4 % of a core (docs/performance.md, section 10).
 */
uint64_t cluster_ops_sleep_ns(const struct cluster *c, uint64_t now_ns)
{
	uint64_t due;

	if (c->queue_head != UNIT_NONE)
		return OPS_TICK_NS;
	due = sched_next_deadline(c->sched);
	if (due == UINT64_MAX)
		return UINT64_MAX;
	return due > now_ns + OPS_TICK_NS ? due - now_ns : OPS_TICK_NS;
}

/* The shard of engine tensor @id: every host computes it alike, so an
 * aggregator's shard s sees exactly what its workers' shards s send.  The
 * id is mixed first: the engine picks slots from its own bits. */
static unsigned int shard_of(const struct cluster *c, uint32_t id)
{
	return tly_thread_shard(id, c->n_shards);
}

/* The callers own the engine (threads paused) or it is gone: the rings
 * are emptied by whoever destroys it. */
void cluster_ops_fail_all(struct cluster *c, int res)
{

	for (uint32_t i = 0; i < CLUSTER_MAX_UNITS; i++)
		if (c->units[i].used)
			unit_free(&c->units[i]);
	c->queue_head = c->queue_tail = UNIT_NONE;
	sched_reset(c->sched);
	for (uint32_t i = 0; i < c->env.groups->n_pool; i++) {
		if (!c->ops[i].used)
			continue;
		c->ops[i].used = false;
		release_members(c, &c->env.groups->pool[i], res);
	}
}

/* ---- what a stuck operation waits for (watchdog) ------------------------ */

static bool unit_has_op(const struct net_unit *nu, uint32_t idx)
{
	for (uint32_t s = 0; s < nu->u.n_segments; s++)
		if (op_index(nu->u.seg[s].user) == idx)
			return true;
	return false;
}

/* The first engine part of @nu still in progress, described. */
static int describe_unit(struct cluster *c, const struct net_unit *nu,
			 char *buf, size_t len)
{
	size_t esz = tally_dtype_size(nu->dtype);
	uint64_t seg0 = nu->u.seg[0].offset / esz;
	struct tly_tensor_wait tw;

	if (nu->parts_submitted < nu->parts) {
		uint32_t active = 0;

		for (unsigned int s = 0; s < c->n_shards; s++)
			active += c->shards[s].worker ?
				  tly_worker_active(c->shards[s].worker) : 0;
		snprintf(buf, len, "%u of %u engine tensors wait for room in "
			 "the engine (%u in progress)",
			 nu->parts - nu->parts_submitted, nu->parts, active);
		return 0;
	}
	for (uint32_t p = 0; p < nu->parts; p++) {
		uint32_t id = tly_tensor_id(nu->key, (uint32_t)nu->iteration,
					    (uint32_t)(seg0 +
						       p * part_elems(c)));
		struct tly_worker *w = c->shards[shard_of(c, id)].worker;

		if (!w || tly_worker_tensor_wait(w, id, &tw))
			continue;	/* this part is done */
		snprintf(buf, len, "engine tensor %08x: %u of %u chunks done "
			 "(exponent %u, ready %u, inflight %u, acked %u, "
			 "deferred %u, idle %u); chunk %u is %s and waits on "
			 "node %u", id, tw.done, tw.n_chunks,
			 tw.by_state[0], tw.by_state[1], tw.by_state[2],
			 tw.by_state[3], tw.by_state[4], tw.by_state[6],
			 tw.first, tly_chunk_state_name(tw.first_state),
			 tw.peer);
		return 0;
	}
	snprintf(buf, len, "every engine tensor of its unit is done; the "
		 "completion was not delivered");
	return 0;
}

int cluster_describe_op(struct cluster *c, uint32_t idx, char *buf,
			size_t len)
{
	const struct net_op *op = &c->ops[idx];
	const struct sched_stats *st = sched_stats(c->sched);

	if (!op->used)
		return -1;
	for (uint32_t i = 0; i < CLUSTER_MAX_UNITS; i++) {
		int ret;

		if (!c->units[i].used || !unit_has_op(&c->units[i], idx))
			continue;
		/* the engine is the threads': borrow it for a moment */
		if (!cluster_dp_pause(c)) {
			snprintf(buf, len, "a dataplane thread is stuck");
			return 0;
		}
		ret = describe_unit(c, &c->units[i], buf, len);
		cluster_dp_resume(c);
		return ret;
	}
	snprintf(buf, len, "%llu of %llu bytes back; the rest waits in the "
		 "%s scheduler (%llu bytes in flight, credit %llu)",
		 (unsigned long long)op->bytes_done,
		 (unsigned long long)op->bytes,
		 sched_policy_name((enum sched_policy)c->cfg->schedule),
		 (unsigned long long)st->bytes_in_flight,
		 (unsigned long long)st->credit_bytes);
	return 0;
}

/* ---- submission ------------------------------------------------------- */

static void queue_push(struct cluster *c, uint32_t ui)
{
	c->units[ui].next = UNIT_NONE;
	if (c->queue_tail == UNIT_NONE)
		c->queue_head = ui;
	else
		c->units[c->queue_tail].next = ui;
	c->queue_tail = ui;
}

static void queue_pop(struct cluster *c)
{
	c->queue_head = c->units[c->queue_head].next;
	if (c->queue_head == UNIT_NONE)
		c->queue_tail = UNIT_NONE;
}

/* Turn a released unit into a unit record (gathering a merged one). */
static int unit_start(struct cluster *c, const struct sched_unit *u)
{
	const struct lg_group *g0 = &c->env.groups->pool[op_index(u->seg[0].user)];
	size_t esz = tally_dtype_size(g0->op.dtype);
	struct net_unit *nu = NULL;
	uint32_t ui;

	for (ui = 0; ui < CLUSTER_MAX_UNITS; ui++)
		if (!c->units[ui].used) {
			nu = &c->units[ui];
			break;
		}
	if (!nu)
		return -ENOSPC;
	*nu = (struct net_unit){ .used = true, .u = *u,
				 .dtype = g0->op.dtype,
				 .codec = g0->op.codec,
				 .iteration = g0->op.iteration,
				 .key = g0->op.key };
	if (u->n_segments > 1) {
		uint64_t off = 0;

		nu->merged = malloc(u->bytes);
		if (!nu->merged) {
			nu->used = false;
			return -ENOMEM;
		}
		if (tly_codec(nu->codec)->sent)
			nu->merged_sent = malloc(u->bytes);
		for (uint32_t s = 0; s < u->n_segments; s++) {
			const struct sched_segment *seg = &u->seg[s];

			memcpy((char *)nu->merged + off,
			       staging(c, op_index(seg->user)) +
			       seg->offset, seg->bytes);
			off += seg->bytes;
		}
	}
	nu->parts = (uint32_t)((u->bytes / esz + part_elems(c) - 1) /
			       part_elems(c));
	queue_push(c, ui);
	return 0;
}

/* Hand queued units' parts to the shards' threads while they take them
 * (each holds at most DP_MAX_TENSORS, so its rings never fill). */
static int submit_parts(struct cluster *c)
{
	uint32_t kick = 0;
	int n = 0;

	_Static_assert(CLUSTER_MAX_SHARDS <= 32, "kick mask");
	while (c->engine_up && c->queue_head != UNIT_NONE) {
		uint32_t ui = c->queue_head;
		struct net_unit *nu = &c->units[ui];
		size_t esz = tally_dtype_size(nu->dtype);
		uint64_t seg0 = nu->u.seg[0].offset / esz;
		size_t first = nu->parts_submitted * part_elems(c);
		size_t left = nu->u.bytes / esz - first;
		char *base = nu->merged ? nu->merged :
			     staging(c, op_index(nu->u.seg[0].user)) +
			     nu->u.seg[0].offset;
		struct tly_tensor_desc t = {
			.id = tly_tensor_id(nu->key, (uint32_t)nu->iteration,
					    (uint32_t)(seg0 + first)),
			.dtype = to_engine_dtype(nu->dtype),
			.algo = c->cfg->algorithm == ALGO_RING ? TLY_ALGO_RING :
								TLY_ALGO_AGG,
			.src = base + first * esz,
			.dst = base + first * esz,
			.count = left < part_elems(c) ? left : part_elems(c),
			.prio = nu->u.priority > 7 ? 7 : (uint8_t)nu->u.priority,
			.user = (void *)(uintptr_t)ui,
		};
		/* job_submit() resolved the op's method against the job's
		 * [compression] method: float tensors through aggregators */
		if (t.dtype != TLY_DT_I32 && t.algo == TLY_ALGO_AGG)
			t.codec = nu->codec;
		/* a merged unit's "sent" is scattered to the ops that want
		 * it; a lone op's goes to its sendbuf if it wants it */
		if (t.codec == nu->codec && tly_codec(t.codec)->sent &&
		    (nu->merged ? nu->merged_sent != NULL :
		     c->ops[op_index(nu->u.seg[0].user)].sent))
			t.sent = (nu->merged ? (char *)nu->merged_sent :
				  sent_buf(c, op_index(nu->u.seg[0].user)) +
				  nu->u.seg[0].offset) + first * esz;
		unsigned int s = shard_of(c, t.id);
		struct cluster_shard *sh = &c->shards[s];

		if (sh->tensors_out >= DP_MAX_TENSORS ||
		    dp_thread_submit(sh->dp, &t))
			break;		/* the shard is full: later */
		sh->tensors_out++;
		kick |= 1u << s;
		n++;
		if (++nu->parts_submitted == nu->parts)
			queue_pop(c);
	}
	for (unsigned int s = 0; kick; s++, kick >>= 1)
		if (kick & 1)
			dp_thread_kick(c->shards[s].dp);
	return n;
}

int cluster_ops_pump(struct cluster *c, uint64_t now)
{
	struct sched_unit u;

	if (!c->engine_up || !c->shards[0].worker)
		return 0;
	while (sched_next(c->sched, now, &u) == 1) {
		int ret = unit_start(c, &u);

		if (ret) {
			log_err("cannot start a unit: %s", strerror(-ret));
			cluster_engine_failed(c, -TALLY_ENOMEM,
					      "no room for a unit");
			return 0;
		}
	}
	return submit_parts(c);
}

void cluster_submit_group(struct cluster *c, struct lg_group *g)
{
	uint32_t idx = (uint32_t)(g - c->env.groups->pool);
	const void *in[CONFIG_MAX_LOCAL_SIZE];
	void *out[1] = { g->m[0].recv };
	struct sched_item it = {
		.key = g->op.key, .iteration = g->op.iteration,
		.priority = g->op.priority,
		.bytes = g->op.count * tally_dtype_size(g->op.dtype),
		/* one merged message holds one dtype: gradients of another
		 * dtype in the same plan group form a group of their own */
		.last = g->op.last,
		.group = g->op.group ? ((uint32_t)g->op.group << 2 |
					g->op.dtype) : 0,
		.user = (void *)(uintptr_t)idx,
	};
	struct reduce_args a;
	int res;

	for (unsigned int r = 0; r < c->env.groups->size; r++)
		in[r] = g->m[r].send;
	/* the local sum, into the first member's receive buffer */
	res = reduce_prepare(&a, g->op.dtype, TALLY_SUM, in, c->env.groups->size,
			     out, 1, g->op.count, 1);
	if (res || cluster_dead(c)) {
		release_members(c, g, res ? res : -TALLY_EPEERLOST);
		return;
	}
	reduce_pool_run(c->env.reducer, &a);
	c->ops[idx] = (struct net_op){ .used = true, .bytes = it.bytes,
				       .sent = op_feedback(c, g) };
	if (sched_ready(c->sched, &it, tly_now_ns())) {
		c->ops[idx].used = false;
		release_members(c, g, -TALLY_EAGAIN);
		return;
	}
	cluster_ops_pump(c, tly_now_ns());
}

_Static_assert(SCHED_DAEMON_BSP_HOLD == TALLY_MAX_INFLIGHT,
	       "BSP's hold bound is what one client may have pending");

int cluster_ops_init(struct cluster *c)
{
	struct sched_cfg sc;

	sched_cfg_daemon(&sc, (enum sched_policy)c->cfg->schedule,
			 c->env.groups->n_pool,
			 (uint64_t)c->cfg->partition_kib << 10,
			 (uint64_t)c->cfg->credit_kib << 10,
			 c->cfg->credit_autotune,
			 c->cfg->algorithm == ALGO_AGGREGATE);

	c->queue_head = c->queue_tail = UNIT_NONE;
	c->ops = calloc(c->env.groups->n_pool, sizeof(*c->ops));
	c->units = calloc(CLUSTER_MAX_UNITS, sizeof(*c->units));
	c->sched = sched_create(&sc);
	if (!c->ops || !c->units || !c->sched) {
		cluster_ops_fini(c);
		return -1;
	}
	return 0;
}

void cluster_ops_fini(struct cluster *c)
{

	if (c->units)
		for (uint32_t i = 0; i < CLUSTER_MAX_UNITS; i++)
			if (c->units[i].used)
				unit_free(&c->units[i]);
	sched_destroy(c->sched);
	free(c->units);
	free(c->ops);
	c->sched = NULL;
	c->units = NULL;
	c->ops = NULL;
}
