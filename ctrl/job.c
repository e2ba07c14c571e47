// SPDX-License-Identifier: BSD-3-Clause
/*
 * job.c - one job on this host (see job.h): taking its members'
 * submissions, validating them, matching them into its local groups,
 * reducing, handing multi-host groups to its cluster, completing, and
 * aborting.
 *
 * Nothing in a descriptor is trusted: opcode, dtype, op, count and both
 * buffer ranges are checked against what this client registered, and a
 * bad one completes with an error while the daemon keeps serving.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <tally/tally.h>
#include "dataplane/clock.h"
#include "dataplane/engine/codec.h"
#include "ctrl/bootstrap.h"
#include "ctrl/cluster.h"
#include "ctrl/job.h"
#include "ctrl/log.h"
#include "ctrl/watchdog.h"
#include "dataplane/reduce.h"
#include "dataplane/reduce_pool.h"
#include "dataplane/transport/transport.h"

/* Upper bounds of the size classes (bytes); the last class is larger. */
static const uint64_t size_class_max[JOB_SIZE_CLASSES - 1] = {
	4096, 65536, 1 << 20, 16 << 20,
};
static const char *const size_class_name[JOB_SIZE_CLASSES] = {
	"le_4KiB", "le_64KiB", "le_1MiB", "le_16MiB", "gt_16MiB",
};

/* Latency bucket bounds, seconds: 10 us .. 10 s. */
static const double latency_bounds[] = {
	0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

const char *job_size_class_name(int cls)
{
	return cls >= 0 && cls < JOB_SIZE_CLASSES ? size_class_name[cls] : "";
}

static void observe_op(struct job *j, const struct lg_op *op, uint64_t bytes)
{
	uint64_t now = tly_now_ns();
	int c = 0;

	while (c < JOB_SIZE_CLASSES - 1 && bytes > size_class_max[c])
		c++;
	if (op->submit_ns && now >= op->submit_ns)
		metrics_hist_observe(&j->st.op_latency[c],
				     (double)(now - op->submit_ns) * 1e-9);
}

/* ---- completing ------------------------------------------------------- */

static void complete(struct job *j, struct daemon_client *cl,
		     uint64_t user_data, int res)
{
	if (res)
		j->st.ops_failed++;
	else
		j->st.ops_done++;
	client_complete(cl, user_data, res);
}

static void put_member(struct lg_member *m)
{
	client_seg_put(m->send_ref);
	client_seg_put(m->recv_ref);
}

/* A ready group is over (reduced, or failed with @res): complete every
 * member still here and free the group.  Also the cluster's group_done. */
static void group_finish(void *ctx, struct lg_group *g, int res)
{
	struct job *j = ctx;
	uint64_t bytes = g->op.count * tally_dtype_size(g->op.dtype);

	if (!res) {
		j->st.bytes_reduced += bytes;
		observe_op(j, &g->op, bytes);
	}
	for (unsigned int r = 0; r < j->groups.size; r++) {
		put_member(&g->m[r]);
		if (!j->members[r])
			continue;
		if (res)
			j->st.ops_failed++;
		else
			j->st.ops_done++;
		client_complete_flags(j->members[r], g->m[r].user_data, res,
				      !res && g->sent ? TALLY_CQE_F_SENT : 0);
	}
	local_group_release(&j->groups, g);
}

/* This host alone: reduce the group into every member's output. */
static void run_group(struct job *j, struct lg_group *g)
{
	const void *in[CONFIG_MAX_LOCAL_SIZE];
	void *out[CONFIG_MAX_LOCAL_SIZE];
	unsigned int n = j->groups.size;
	struct reduce_args args;
	int res;

	for (unsigned int r = 0; r < n; r++) {
		in[r] = g->m[r].send;
		out[r] = g->m[r].recv;
	}
	res = reduce_prepare(&args, g->op.dtype, g->op.redop, in, n, out, n,
			     g->op.count, n);
	if (!res)
		reduce_pool_run(j->env.reducer, &args);
	group_finish(j, g, res);
}

static void fail_group(struct job *j, struct lg_group *g, unsigned int rank,
		       bool all)
{
	for (unsigned int r = 0; r < j->groups.size; r++) {
		if (!(g->arrived & (1ull << r)) || (!all && r != rank))
			continue;
		put_member(&g->m[r]);
		complete(j, j->members[r], g->m[r].user_data,
			 -TALLY_EMISMATCH);
	}
	log_warn("job %s: key %llu iteration %llu: members disagree on "
		 "count, dtype or op (rank %u)", j->id,
		 (unsigned long long)g->op.key,
		 (unsigned long long)g->op.iteration, rank);
	local_group_settle(&j->groups, g);
}

/* ---- submissions ------------------------------------------------------ */

static int check_sqe(const struct tally_sqe *s, uint64_t *bytes)
{
	size_t esz = tally_dtype_size((enum tally_dtype)s->dtype);

	if (s->opcode != TALLY_OP_ALLREDUCE || esz == 0 ||
	    s->redop >= TALLY_OP_MAX || (s->flags & ~TALLY_F_ALL) ||
	    TALLY_F_COMPRESSION(s->flags) > TALLY_COMPRESS_BLOCK_TOPK1_EF)
		return -TALLY_EBADOP;
	if (s->count == 0 || s->count > UINT64_MAX / esz)
		return -TALLY_EINVAL;
	/* segments are page-aligned: aligned offsets are aligned elements,
	 * which the reduction kernels load as such */
	if ((s->send_off | s->recv_off) % esz)
		return -TALLY_EINVAL;
	*bytes = s->count * esz;
	return 0;
}

/*
 * The engine codec of a submission (docs/compression.md section 7): the
 * op's method, or the job's for TALLY_COMPRESS_DEFAULT; int32 tensors
 * stay exact unless a lossy method is named for one, which is refused, as
 * is any lossy method in a ring job.  -TALLY_EINVAL when refused.
 */
static int sqe_codec(const struct job *j, const struct tally_sqe *s,
		     uint8_t *codec)
{
	static const uint8_t from_api[] = {
		[TALLY_COMPRESS_NONE] = TLY_CODEC_NONE,
		[TALLY_COMPRESS_INT16] = TLY_CODEC_INT16,
		[TALLY_COMPRESS_INT8] = TLY_CODEC_INT8,
		[TALLY_COMPRESS_SIGN_EF] = TLY_CODEC_SIGN_EF,
		[TALLY_COMPRESS_BLOCK_TOPK10_EF] = TLY_CODEC_TOPK10_EF,
		[TALLY_COMPRESS_BLOCK_TOPK1_EF] = TLY_CODEC_TOPK1_EF,
	};
	enum tally_compression m = TALLY_F_COMPRESSION(s->flags);
	bool exact = s->dtype == TALLY_INT32;

	if ((unsigned int)m >= sizeof(from_api))
		return -TALLY_EINVAL;	/* check_sqe() refused it already */

	if (m == TALLY_COMPRESS_DEFAULT) {
		*codec = exact ? TLY_CODEC_NONE : (uint8_t)j->cfg.compression;
		return 0;
	}
	*codec = from_api[m];
	if (*codec != TLY_CODEC_NONE &&
	    (exact || j->cfg.algorithm == ALGO_RING))
		return -TALLY_EINVAL;
	return 0;
}

/* Resolve one buffer of a descriptor and take a reference on its segment. */
static void *resolve(struct daemon_client *cl, uint32_t seg_id, uint64_t off,
		     uint64_t len, struct daemon_seg **ref)
{
	struct daemon_seg *s = client_seg_find(cl, seg_id);

	if (!s || !segment_contains(&s->seg, off, len))
		return NULL;
	s->refs++;
	*ref = s;
	return (char *)s->seg.base + off;
}

void job_submit(struct job *j, struct daemon_client *cl,
		const struct tally_sqe *s)
{
	struct lg_op op = { s->key, s->iteration, s->count, s->dtype,
			    s->redop, s->priority, s->group,
			    (s->flags & TALLY_F_LAST_OF_ITERATION) != 0,
			    tly_now_ns(), TLY_CODEC_NONE };
	struct lg_member m = { .user_data = s->user_data };
	struct daemon_seg *sref = NULL, *rref = NULL;
	struct lg_group *g;
	uint64_t bytes;
	int ret;

	if (s->opcode == TALLY_OP_NOP) {
		complete(j, cl, s->user_data, 0);
		return;
	}
	ret = check_sqe(s, &bytes);
	if (!ret && sqe_codec(j, s, &op.codec)) {
		ret = -TALLY_EINVAL;
		if (client_log_bad(cl))
			log_warn("job %s rank %d: compression %s refused for "
				 "a%s tensor (key %llu): lossy lanes are for "
				 "float tensors through aggregators", j->id,
				 cl->rank,
				 tly_codec(TALLY_F_COMPRESSION(s->flags) - 1u)
				 ->name, s->dtype == TALLY_INT32 ?
				 "n int32" : " ring job's",
				 (unsigned long long)s->key);
		complete(j, cl, s->user_data, ret);
		return;
	}
	if (ret) {
		if (client_log_bad(cl))
			log_warn("job %s rank %d: bad request (opcode %u dtype "
				 "%u op %u count %llu): %s", j->id, cl->rank,
				 s->opcode, s->dtype, s->redop,
				 (unsigned long long)s->count,
				 tally_strerror(ret));
		complete(j, cl, s->user_data, ret);
		return;
	}
	if (j->broken || job_dead(j)) {
		/* the other hosts would wait for this operation forever */
		if (j->cluster && !j->cluster_aborted) {
			j->cluster_aborted = true;
			cluster_local_abort(j->cluster);
		}
		complete(j, cl, s->user_data, -TALLY_EPEERLOST);
		return;
	}
	/* a client names buffers by its own segment ids: it cannot reach
	 * another client's, let alone another job's */
	m.send = resolve(cl, s->send_seg, s->send_off, bytes, &sref);
	m.recv = resolve(cl, s->recv_seg, s->recv_off, bytes, &rref);
	if (!m.send || !m.recv ||
	    /* in place or disjoint, as the client library checks too */
	    (m.send != m.recv && (const char *)m.send < (char *)m.recv + bytes &&
	     (char *)m.recv < (const char *)m.send + bytes)) {
		if (sref)
			client_seg_put(sref);
		if (rref)
			client_seg_put(rref);
		if (client_log_bad(cl))
			log_warn("job %s rank %d: buffer outside its segments",
				 j->id, cl->rank);
		complete(j, cl, s->user_data, -TALLY_ERANGE);
		return;
	}
	m.send_ref = sref;
	m.recv_ref = rref;

	switch (local_group_add(&j->groups, (unsigned int)cl->rank, &op, &m,
				&g)) {
	case LG_WAITING:
		return;
	case LG_READY:
		if (j->cluster)
			cluster_submit_group(j->cluster, g);
		else
			run_group(j, g);
		return;
	case LG_MISMATCH:
		fail_group(j, g, (unsigned int)cl->rank, true);
		return;
	case LG_MISMATCH_ONE:
		fail_group(j, g, (unsigned int)cl->rank, false);
		return;
	case LG_DUPLICATE:
		log_warn("job %s rank %d: key %llu iteration %llu submitted "
			 "twice", j->id, cl->rank, (unsigned long long)s->key,
			 (unsigned long long)s->iteration);
		ret = -TALLY_EBADOP;
		break;
	case LG_FULL:
		ret = -TALLY_EAGAIN;
		break;
	case LG_BAD_RANK:
		ret = -TALLY_EBADOP;
		break;
	}
	put_member(&m);
	complete(j, cl, s->user_data, ret);
}

/* ---- aborting --------------------------------------------------------- */

/* Fail every pending group: a member that left can never contribute. */
static void abort_groups(struct job *j)
{
	struct local_group *lg = &j->groups;

	for (uint32_t i = 0; i < lg->n_pool; i++) {
		struct lg_group *g = &lg->pool[i];

		if (!g->used)
			continue;
		for (unsigned int r = 0; r < lg->size; r++) {
			if (!(g->arrived & (1ull << r)) || g->failed)
				continue;
			put_member(&g->m[r]);
			if (j->members[r])
				complete(j, j->members[r], g->m[r].user_data,
					 -TALLY_EPEERLOST);
		}
		local_group_release(lg, g);
	}
}

void job_abort(struct job *j, const char *why)
{
	abort_groups(j);
	local_fast_abort(&j->fast, TALLY_EPEERLOST);
	if (j->n_members > 0 && !j->broken)
		log_warn("job %s aborted (%s): pending and new operations of "
			 "the %d remaining member(s) fail with peer-lost",
			 j->id, why, j->n_members);
	j->broken = j->n_members > 0;
	if (!j->broken)
		j->cluster_aborted = false;	/* a new run may form */
}

static void cluster_job_abort(void *ctx, const char *why)
{
	job_abort(ctx, why);
}

/* ---- members ---------------------------------------------------------- */

/* The fast path is for a host alone (docs/local-fast-path.md): the
 * network's jobs need the daemon for every operation anyway, and one
 * client has nobody to reduce with. */
static bool fast_path_wanted(const struct job *j)
{
	return !j->cluster && j->cfg.world <= 1 && j->cfg.local_size >= 2 &&
	       j->cfg.fast_path_bytes > 0 &&
	       j->cfg.compression == TLY_CODEC_NONE;
}

/* A run of the job ended (no member left): the next gets a fresh table. */
static void members_gone(struct job *j)
{
	uint64_t done, failed;

	j->empty_since_ns = tly_now_ns();
	local_fast_counts(&j->fast, &done, &failed);
	j->st.fast_done_past += done;
	j->st.fast_failed_past += failed;
	local_fast_destroy(&j->fast);
}

int job_member_add(struct job *j, struct daemon_client *cl, int rank,
		   const char **why)
{
	if (j->broken) {
		*why = "job aborted, waiting for its members to leave";
		return -TALLY_EDENIED;
	}
	if (rank < 0 || rank >= j->cfg.local_size) {
		*why = "local rank out of the job's local size";
		return -TALLY_EDENIED;
	}
	if (j->members[rank]) {
		*why = "local rank taken";
		return -TALLY_EDENIED;
	}
	if (j->n_members == 0 && fast_path_wanted(j) &&
	    local_fast_create(&j->fast, (unsigned int)j->cfg.local_size,
			      (unsigned int)j->cfg.fast_path_slots,
			      (uint64_t)j->cfg.fast_path_bytes)) {
		*why = "no memory for the job's fast-path table";
		return -TALLY_EDENIED;
	}
	j->members[rank] = cl;
	j->n_members++;
	j->ever_members++;
	j->empty_since_ns = 0;
	cl->job = j;
	cl->rank = rank;
	return 0;
}

void job_member_undo(struct job *j, struct daemon_client *cl)
{
	j->members[cl->rank] = NULL;
	j->n_members--;
	j->ever_members--;
	if (!j->n_members)
		members_gone(j);
	cl->job = NULL;
}

void job_member_left(struct job *j, struct daemon_client *cl)
{
	if (cl->rank < 0 || cl->rank >= j->cfg.local_size ||
	    j->members[cl->rank] != cl)
		return;
	j->members[cl->rank] = NULL;
	j->n_members--;
	/* Other hosts wait for what this job had pending: tell them.  A
	 * member leaving with nothing pending (the end of training) does
	 * not end the others' job. */
	if (j->cluster && !j->cluster_aborted && j->groups.n_used > 0) {
		j->cluster_aborted = true;
		cluster_local_abort(j->cluster);
	}
	job_abort(j, "a member left");
	if (!j->n_members)
		members_gone(j);
	cl->job = NULL;
}

/* ---- the loop's side -------------------------------------------------- */

/* How long a group may wait here before its (key, iteration) is looked
 * for in the fast-path table: members that took the other path never
 * come, and they disagree on the size or flags. */
#define FAST_CROSS_AFTER_NS 5000000ull

static void fast_cross_check(struct job *j, uint64_t now_ns)
{
	struct local_group *lg = &j->groups;

	if (!local_fast_on(&j->fast) || lg->n_used == 0 ||
	    now_ns < j->fast.next_check_ns)
		return;
	j->fast.next_check_ns = now_ns + FAST_CROSS_AFTER_NS;
	for (uint32_t i = 0; i < lg->n_pool; i++) {
		struct lg_group *g = &lg->pool[i];

		if (!g->used || g->failed ||
		    now_ns - g->op.submit_ns < FAST_CROSS_AFTER_NS ||
		    !local_fast_cross(&j->fast, g->op.key, g->op.iteration,
				      g->arrived))
			continue;
		for (unsigned int r = 0; r < lg->size; r++) {
			if (!(g->arrived & (1ull << r)))
				continue;
			put_member(&g->m[r]);
			complete(j, j->members[r], g->m[r].user_data,
				 -TALLY_EMISMATCH);
		}
		log_warn("job %s: key %llu iteration %llu: members disagree on "
			 "count, dtype or flags (some took the fast path)",
			 j->id, (unsigned long long)g->op.key,
			 (unsigned long long)g->op.iteration);
		local_group_release(lg, g);
	}
}

struct job_ops job_ops(const struct job *j)
{
	uint64_t done, failed;

	local_fast_counts(&j->fast, &done, &failed);
	done += j->st.fast_done_past;
	failed += j->st.fast_failed_past;
	return (struct job_ops){ .done = j->st.ops_done + done,
				 .failed = j->st.ops_failed + failed,
				 .fast_done = done };
}

int job_poll(struct job *j, uint64_t now_ns)
{
	int work = 0;

	fast_cross_check(j, now_ns);
	if (j->cluster) {
		work = cluster_poll(j->cluster, now_ns);
		cluster_tick(j->cluster, now_ns / 1000000);
	}
	watchdog_poll(j, now_ns);
	return work;
}

int64_t job_sleep_ns(struct job *j, uint64_t now_ns)
{
	int64_t t = j->cluster ? (int64_t)cluster_idle_ns(j->cluster) : -1;
	int64_t w = watchdog_sleep_ns(j, now_ns);

	if (local_fast_on(&j->fast) && j->groups.n_used > 0) {
		int64_t f = j->fast.next_check_ns > now_ns ?
			    (int64_t)(j->fast.next_check_ns - now_ns) : 0;

		if (w < 0 || f < w)
			w = f;
	}

	if (w >= 0 && (t < 0 || w < t))
		t = w;
	return t;
}

void job_event(struct job *j, uint64_t tag)
{
	if (j->cluster)
		cluster_event(j->cluster, tag);
}

bool job_joined(const struct job *j)
{
	return j->cfg.world <= 1 || cluster_joined(j->cluster);
}

bool job_dead(const struct job *j)
{
	return cluster_dead(j->cluster);
}

void job_set_stuck_ms(struct job *j, int stuck_ms)
{
	if (watchdog_set_stuck_ms(j, stuck_ms))
		log_err("job %s: no memory for the watchdog", j->id);
}

/* ---- life ------------------------------------------------------------- */

int job_start(struct job *j, const struct job_env *env)
{
	j->env = *env;
	j->start_ns = tly_now_ns();
	j->empty_since_ns = j->start_ns;
	for (int i = 0; i < JOB_SIZE_CLASSES; i++)
		metrics_hist_init(&j->st.op_latency[i], latency_bounds,
				  sizeof(latency_bounds) /
				  sizeof(latency_bounds[0]));
	if (local_group_init(&j->groups, (unsigned int)j->cfg.local_size,
			     (uint32_t)j->cfg.local_size *
			     TALLY_MAX_INFLIGHT) ||
	    watchdog_init(j)) {
		log_err("job %s: out of memory", j->id);
		local_group_destroy(&j->groups);
		return -1;
	}
	if (config_is_cluster(&j->cfg)) {
		struct cluster_env ce = {
			.cfg = &j->cfg, .groups = &j->groups,
			.reducer = env->reducer, .epoll_fd = env->epoll_fd,
			.tag_job = j->slot,
			.secret = j->secret, .secret_len = j->secret_len,
			.retry_other_job = !j->static_job,
			.group_done = group_finish,
			.job_abort = cluster_job_abort, .ctx = j,
		};

		j->cluster = cluster_start(&ce);
		if (!j->cluster) {
			log_err("job %s: cannot join its hosts", j->id);
			watchdog_fini(j);
			local_group_destroy(&j->groups);
			return -1;
		}
	}
	j->used = true;
	return 0;
}

void job_stop(struct job *j)
{
	for (int r = 0; r < CONFIG_MAX_LOCAL_SIZE; r++)
		if (j->members[r])
			j->members[r]->job = NULL;
	memset(j->members, 0, sizeof(j->members));
	j->n_members = 0;
	cluster_stop(j->cluster);	/* fails what is in the network */
	j->cluster = NULL;
	abort_groups(j);
	local_fast_abort(&j->fast, TALLY_EPEERLOST);
	local_fast_destroy(&j->fast);
	watchdog_fini(j);
	local_group_destroy(&j->groups);
	explicit_bzero(j->secret, sizeof(j->secret));
	j->used = false;
}
