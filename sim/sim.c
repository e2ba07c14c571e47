// SPDX-License-Identifier: BSD-3-Clause
/*
 * sim.c - the discrete-event simulation of training iterations.
 *
 * Hosts are symmetric (same profile, same scheduler, same plan), so one
 * host's timeline stands for all: its GPUs compute, its gradients go
 * through the intra-host step into tally's scheduler (a real struct
 * sched, configured as tallyd configures it: sched_cfg_daemon()), the
 * units the scheduler releases go through the network model (net.c), and
 * completions go back to the scheduler and, through the intra-host step,
 * to the GPUs.  The iteration is tools/replay's:
 *
 *   forward   layer 0 .. L-1: layer l starts once every gradient of layer
 *             l from the previous iteration is back; it lasts its fwd;
 *   backward  tensor by tensor in backward order; each gradient is
 *             submitted when produced, priority = its layer, the last
 *             flagged, MG-WFBP's plan group attached.
 *
 * Events: a layer's forward ends; a gradient is produced; its local
 * reduce ends (sched_ready); the network is free (the next unit starts);
 * a unit completes (sched_unit_done); a gradient is back; the
 * scheduler's own deadline (ByteScheduler's stall rule).  After each,
 * sched_next() is asked until it releases nothing, as the daemon's pump
 * does.  Times are dilated (compute x D, network rate / D, latency x D;
 * the hosts' CPU costs are not), as tools/experiment runs, and divided
 * back at the end.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/sched/mg_plan.h"
#include "sim/sim.h"

const struct sim_method sim_methods[7] = {
	{ "bsp-a2a", SIM_RING, SCHED_BSP, false },
	{ "wfbp-a2a", SIM_RING, SCHED_WFBP, false },
	{ "mgwfbp", SIM_RING, SCHED_MGWFBP, true },
	{ "bytescheduler-a2a", SIM_RING, SCHED_BYTESCHEDULER, false },
	{ "bsp-ps", SIM_AGG_DEDICATED, SCHED_BSP, false },
	{ "wfbp-ps", SIM_AGG_DEDICATED, SCHED_WFBP, false },
	{ "bytescheduler-ps", SIM_AGG_DEDICATED, SCHED_BYTESCHEDULER, false },
};

const struct sim_method *sim_method_find(const char *name)
{
	for (int i = 0; i < 7; i++)
		if (!strcmp(sim_methods[i].name, name))
			return &sim_methods[i];
	return NULL;
}

void sim_cfg_default(struct sim_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->method = sim_methods[1];
	sim_net_preset("10g", &c->net);
	c->hosts = 1;
	c->gpus = 1;
	c->batch = 64;
	c->dilation = 1;
	c->iterations = 3;
	c->warmup = 1;
	/* ctrl/config.c: [cluster] partition_kib 1024, credit_kib 4096 */
	c->partition_bytes = 1024 << 10;
	c->credit_bytes = 4096 << 10;
}

enum { EV_FWD, EV_GRAD, EV_LOCAL, EV_LOCAL_ONLY, EV_NETFREE, EV_UNIT,
       EV_BACK, EV_DEADLINE };

struct ev {
	double t;
	uint64_t seq;
	int type;
	uint32_t arg;
};

struct slot {
	bool used;
	struct sched_unit u;
};

struct run {
	const struct sim_cfg *c;
	const struct sim_profile *p;
	struct sched *s;
	struct sim_net net;		/* dilated */
	double now;
	/* event heap */
	struct ev *h;
	uint32_t nh, caph;
	uint64_t seq;
	/* tensors */
	bool *out;			/* submitted, not back */
	uint64_t *done_bytes;
	uint32_t *group;
	double *fwd_layer;
	uint32_t *layer_out;		/* tensors of the layer not back */
	/* compute */
	int iter, layer;
	bool waiting;			/* forward waits for layer's tensors */
	double t_start, t_end;
	bool finished, ended;
	uint64_t *iter_of;		/* the iteration of its gradient */
	/* intra-host step: PCIe each way (full duplex) and the host's
	 * reduce, FIFOs that pipeline with each other */
	double d2h_free, h2d_free, cpu_free;
	/* ENOSPC backlog (tensors) */
	uint32_t *backlog;
	uint32_t nback;
	/* network: released units waiting for the links, and in flight */
	struct slot *slots;
	uint32_t nslots;
	uint32_t *queue;
	uint32_t nq;
	bool net_busy;
	double deadline;		/* the pending EV_DEADLINE, or -1 */
	int outstanding;		/* tensors submitted and not back */
};

static int push(struct run *r, double t, int type, uint32_t arg)
{
	uint32_t i;

	if (r->nh == r->caph) {
		uint32_t cap = r->caph ? 2 * r->caph : 1024;
		struct ev *h = realloc(r->h, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		r->h = h;
		r->caph = cap;
	}
	i = r->nh++;
	r->h[i] = (struct ev){ t, r->seq++, type, arg };
	while (i) {
		uint32_t up = (i - 1) / 2;
		struct ev x = r->h[i];

		if (r->h[up].t < x.t || (r->h[up].t == x.t &&
					 r->h[up].seq < x.seq))
			break;
		r->h[i] = r->h[up];
		r->h[up] = x;
		i = up;
	}
	return 0;
}

static struct ev pop(struct run *r)
{
	struct ev top = r->h[0];
	uint32_t i = 0;

	r->h[0] = r->h[--r->nh];
	for (;;) {
		uint32_t l = 2 * i + 1, m = i;
		struct ev x;

		if (l < r->nh && (r->h[l].t < r->h[m].t ||
				  (r->h[l].t == r->h[m].t &&
				   r->h[l].seq < r->h[m].seq)))
			m = l;
		if (l + 1 < r->nh && (r->h[l + 1].t < r->h[m].t ||
				      (r->h[l + 1].t == r->h[m].t &&
				       r->h[l + 1].seq < r->h[m].seq)))
			m = l + 1;
		if (m == i)
			break;
		x = r->h[i];
		r->h[i] = r->h[m];
		r->h[m] = x;
		i = m;
	}
	return top;
}

static uint64_t ns(double t)
{
	return t <= 0 ? 0 : (uint64_t)llround(t);
}

/*
 * The intra-host step of one gradient (bytes of one GPU), each way: device
 * to host over PCIe (every GPU its own link, in parallel), then the local
 * reduce of G buffers on the host's CPU; back: the CPU writes the G
 * outputs, then host to device.  The reduce's measured rate covers
 * reading and writing; half is charged each way.  Returns when done.
 */
static double pcie_ns(const struct run *r, uint64_t bytes)
{
	return r->net.pcie_Bps > 0 ? (double)bytes / r->net.pcie_Bps * 1e9 : 0;
}

static double cpu_ns(const struct run *r, uint64_t bytes)
{
	return r->net.reduce_Bps > 0 ?
	       0.5 * r->c->gpus * (double)bytes / r->net.reduce_Bps * 1e9 : 0;
}

static double local_in(struct run *r, uint64_t bytes)
{
	r->d2h_free = fmax(r->now, r->d2h_free) + pcie_ns(r, bytes);
	r->cpu_free = fmax(r->d2h_free, r->cpu_free) + cpu_ns(r, bytes);
	return r->cpu_free;
}

static double local_out(struct run *r, uint64_t bytes)
{
	r->cpu_free = fmax(r->now, r->cpu_free) + cpu_ns(r, bytes);
	r->h2d_free = fmax(r->cpu_free, r->h2d_free) + pcie_ns(r, bytes);
	return r->h2d_free;
}

static bool comm(const struct run *r)
{
	return r->c->hosts * r->c->gpus > 1;
}

static int start_compute(struct run *r);

static int tensor_back(struct run *r, uint32_t i)
{
	int l = r->p->t[i].layer;

	r->out[i] = false;
	r->outstanding--;
	r->layer_out[l]--;
	if (r->waiting && l == r->layer && r->layer_out[l] == 0) {
		r->waiting = false;
		return start_compute(r);
	}
	if (r->finished && r->outstanding == 0) {
		r->ended = true;
		r->t_end = r->now;
	}
	return 0;
}

/* the compute process: the next forward layer, or the backward pass */
static int start_compute(struct run *r)
{
	const struct sim_profile *p = r->p;
	double t;
	int ret;

	if (r->layer < p->layers) {
		if (r->layer_out[r->layer]) {
			r->waiting = true;
			return 0;
		}
		if (r->layer == 0 && !r->c->replay_timing) {
			/* steady state: from this forward's start to that
			 * of the iteration after the last measured */
			if (r->iter == r->c->warmup)
				r->t_start = r->now;
			if (r->iter == r->c->warmup + r->c->iterations) {
				r->ended = true;
				r->t_end = r->now;
				return 0;
			}
		}
		return push(r, r->now + r->fwd_layer[r->layer] *
			    r->c->dilation, EV_FWD, 0);
	}
	/* backward: every gradient in turn */
	t = r->now;
	for (int i = 0; i < p->n; i++) {
		t += p->t[i].bwd_ns * r->c->dilation;
		ret = push(r, t, EV_GRAD, (uint32_t)i);
		if (ret)
			return ret;
	}
	return 0;
}

static int net_start(struct run *r)
{
	uint32_t best = 0, si;
	struct sched_unit *u;
	double occ, tot;
	int ret;

	if (r->net_busy || r->nq == 0)
		return 0;
	/* the engine serves tensors in priority order, then submission
	 * order (docs/protocol.md §4) */
	for (uint32_t i = 1; i < r->nq; i++) {
		const struct sched_unit *a = &r->slots[r->queue[i]].u;
		const struct sched_unit *b = &r->slots[r->queue[best]].u;

		if (a->priority < b->priority ||
		    (a->priority == b->priority && a->id < b->id))
			best = i;
	}
	si = r->queue[best];
	memmove(&r->queue[best], &r->queue[best + 1],
		(r->nq - best - 1) * sizeof(*r->queue));
	r->nq--;
	u = &r->slots[si].u;
	sim_unit_time(&r->net, r->c->method.algo, r->c->hosts, u->bytes, &occ,
		      &tot);
	r->net_busy = true;
	ret = push(r, r->now + occ, EV_NETFREE, 0);
	return ret ? ret : push(r, r->now + tot, EV_UNIT, si);
}

static int ready(struct run *r, uint32_t i)
{
	const struct sim_tensor *t = &r->p->t[i];
	struct sched_item it = {
		.key = i, .iteration = r->iter_of[i],
		.priority = (uint32_t)t->layer, .bytes = t->bytes,
		.last = (int)i == r->p->n - 1,
		.group = r->c->method.plan ? r->group[i] : 0,
		.user = (void *)(uintptr_t)i,
	};

	return sched_ready(r->s, &it, ns(r->now));
}

/* what the daemon's pump does: hand every releasable unit to the net */
static int pump(struct run *r)
{
	uint64_t d;
	int ret;

	while (r->nback && ready(r, r->backlog[0]) == 0)
		memmove(r->backlog, r->backlog + 1,
			--r->nback * sizeof(*r->backlog));
	for (;;) {
		uint32_t si;

		for (si = 0; si < r->nslots && r->slots[si].used; si++)
			;
		if (si == r->nslots) {
			uint32_t n = r->nslots ? 2 * r->nslots : 64;
			struct slot *s = realloc(r->slots, n * sizeof(*s));
			uint32_t *q = realloc(r->queue, n * sizeof(*q));

			if (!s || !q) {
				free(s ? s : r->slots);
				r->slots = NULL;
				r->queue = q;
				return -ENOMEM;
			}
			memset(s + r->nslots, 0,
			       (n - r->nslots) * sizeof(*s));
			r->slots = s;
			r->queue = q;
			r->nslots = n;
		}
		if (!sched_next(r->s, ns(r->now), &r->slots[si].u))
			break;
		r->slots[si].used = true;
		r->queue[r->nq++] = si;
	}
	ret = net_start(r);
	if (ret)
		return ret;
	d = sched_next_deadline(r->s);
	if (d != UINT64_MAX) {
		double t = fmax((double)d, r->now + 1000);

		if (r->deadline < 0 || t < r->deadline) {
			r->deadline = t;
			return push(r, t, EV_DEADLINE, 0);
		}
	}
	return 0;
}

static int unit_done(struct run *r, uint32_t si)
{
	struct sched_unit *u = &r->slots[si].u;
	int ret = 0;

	for (uint32_t k = 0; k < u->n_segments && !ret; k++) {
		uint32_t i = (uint32_t)(uintptr_t)u->seg[k].user;

		r->done_bytes[i] += u->seg[k].bytes;
		if (r->done_bytes[i] == r->p->t[i].bytes) {
			ret = push(r, local_out(r, r->p->t[i].bytes),
				   EV_BACK, i);
		}
	}
	sched_unit_done(r->s, u->id, ns(r->now));
	r->slots[si].used = false;
	return ret;
}

static int handle(struct run *r, const struct ev *e)
{
	uint32_t i = e->arg;
	int ret = 0;

	switch (e->type) {
	case EV_FWD:
		r->layer++;
		return start_compute(r);
	case EV_GRAD:
		r->out[i] = true;
		r->outstanding++;
		r->layer_out[r->p->t[i].layer]++;
		r->done_bytes[i] = 0;
		r->iter_of[i] = (uint64_t)r->iter;
		if (!comm(r)) {
			ret = push(r, r->now, EV_BACK, i);
		} else {
			ret = push(r, local_in(r, r->p->t[i].bytes),
				   r->c->hosts > 1 ?
				   EV_LOCAL : EV_LOCAL_ONLY, i);
		}
		if (!ret && (int)i == r->p->n - 1) {
			/* backward over: the next iteration's forward */
			r->iter++;
			r->layer = 0;
			if (r->iter == r->c->warmup + r->c->iterations &&
			    r->c->replay_timing) {
				r->finished = true;
				if (r->outstanding == 0) {
					r->ended = true;
					r->t_end = r->now;
				}
				return 0;
			}
			if (r->iter == r->c->warmup && r->c->replay_timing)
				r->t_start = r->now;
			ret = start_compute(r);
		}
		return ret;
	case EV_LOCAL_ONLY:	/* one host: the local reduce is all */
		return push(r, local_out(r, r->p->t[i].bytes), EV_BACK, i);
	case EV_LOCAL:
		if (ready(r, i) == -ENOSPC)
			r->backlog[r->nback++] = i;
		return pump(r);
	case EV_NETFREE:
		r->net_busy = false;
		return pump(r);
	case EV_UNIT:
		ret = unit_done(r, i);
		return ret ? ret : pump(r);
	case EV_BACK:
		return tensor_back(r, i);
	case EV_DEADLINE:
		if (r->deadline == e->t)
			r->deadline = -1;
		return pump(r);
	}
	return -EINVAL;
}

/* replay's cost model for the MG-WFBP plan: a = time of a 1-float
 * all-reduce, b = (time of 4 MiB - a) / 4 MiB, dilated, through the same
 * path (intra-host step and network) */
static void plan_model(struct run *r, double *a, double *b)
{
	double occ, t_small, t_big;
	uint64_t big = 4u << 20;

	sim_unit_time(&r->net, r->c->method.algo, r->c->hosts, 4, &occ,
		      &t_small);
	sim_unit_time(&r->net, r->c->method.algo, r->c->hosts, big, &occ,
		      &t_big);
	t_small += 2 * (pcie_ns(r, 4) + cpu_ns(r, 4));
	t_big += 2 * (pcie_ns(r, big) + cpu_ns(r, big));
	*a = t_small;
	*b = (t_big - t_small) / (double)big;
}

int sim_run(const struct sim_cfg *c, struct sim_result *res)
{
	const struct sim_profile *p = c->prof;
	struct sched_cfg sc;
	struct run r = { .c = c, .p = p, .deadline = -1 };
	double a, b, *bwd = NULL, *bytes = NULL;
	int ret = -ENOMEM;

	memset(res, 0, sizeof(*res));
	if (!p || p->n == 0 || c->hosts == 0 || c->gpus == 0 ||
	    c->iterations < 1 || c->warmup < 0 || c->dilation <= 0)
		return -EINVAL;
	r.net = c->net;
	r.net.rate_bps /= c->dilation;
	r.net.lat_ns *= c->dilation;
	/* tallyd: local_size x TALLY_MAX_INFLIGHT (256) group slots */
	sched_cfg_daemon(&sc, c->method.policy, 256 * c->gpus,
			 c->partition_bytes, c->credit_bytes, c->autotune,
			 c->method.algo != SIM_RING);
	r.s = sched_create(&sc);
	r.out = calloc((size_t)p->n, sizeof(*r.out));
	r.done_bytes = calloc((size_t)p->n, sizeof(*r.done_bytes));
	r.group = calloc((size_t)p->n, sizeof(*r.group));
	r.backlog = calloc((size_t)p->n, sizeof(*r.backlog));
	r.iter_of = calloc((size_t)p->n, sizeof(*r.iter_of));
	r.fwd_layer = calloc((size_t)p->layers, sizeof(*r.fwd_layer));
	r.layer_out = calloc((size_t)p->layers, sizeof(*r.layer_out));
	bwd = calloc((size_t)p->n, sizeof(*bwd));
	bytes = calloc((size_t)p->n, sizeof(*bytes));
	if (!r.s || !r.out || !r.done_bytes || !r.group || !r.backlog ||
	    !r.iter_of ||
	    !r.fwd_layer || !r.layer_out || !bwd || !bytes)
		goto out;
	for (int i = 0; i < p->n; i++) {
		r.fwd_layer[p->t[i].layer] += p->t[i].fwd_ns;
		bwd[i] = p->t[i].bwd_ns * c->dilation;
		bytes[i] = (double)p->t[i].bytes;
	}
	if (c->method.plan) {
		plan_model(&r, &a, &b);
		if (c->plan_a_ns > 0 || c->plan_b_ns_per_byte > 0) {
			a = c->plan_a_ns * c->dilation;
			b = c->plan_b_ns_per_byte * c->dilation;
		}
		res->groups = mg_plan(p->n, bwd, bytes, a, b, r.group);
		res->plan_a_ns = a / c->dilation;
		res->plan_b = b / c->dilation;
	}
	ret = start_compute(&r);
	while (!ret && r.nh && !r.ended) {
		struct ev e = pop(&r);

		r.now = e.t;
		ret = handle(&r, &e);
	}
	if (!ret && !r.ended)
		ret = -EDEADLK;		/* nothing left to happen: stuck */
	if (ret)
		goto out;
	res->iteration_ns = (r.t_end - r.t_start) / c->iterations / c->dilation;
	res->samples_per_s = (double)c->batch * c->hosts * c->gpus /
			     (res->iteration_ns / 1e9);
	res->efficiency = res->samples_per_s /
		((double)c->hosts * c->gpus * c->batch / (p->compute_ns / 1e9));
	res->st = *sched_stats(r.s);
out:
	sched_destroy(r.s);
	free(r.out);
	free(r.done_bytes);
	free(r.group);
	free(r.backlog);
	free(r.iter_of);
	free(r.fwd_layer);
	free(r.layer_out);
	free(r.h);
	free(r.slots);
	free(r.queue);
	free(bwd);
	free(bytes);
	return ret;
}
