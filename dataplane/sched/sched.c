// SPDX-License-Identifier: BSD-3-Clause
/*
 * sched.c - the scheduling policies (see sched.h and docs/scheduling.md).
 *
 * State, all sized by max_items at sched_create():
 *  - item slots: the gradients ready and not yet completely released,
 *    linked in ready order (FIFO); each remembers how many of its bytes
 *    have been released (ByteScheduler partitions);
 *  - unit records: the units released and not yet reported done, at most
 *    max_items of them (sched_next() releases nothing while they are all
 *    taken);
 *  - BSP: the last few iterations whose last gradient arrived.
 *
 * MG-WFBP rule (online form of Shi et al., INFOCOM'19), with
 * t(bytes) = a + b * bytes and a serial network:
 *  - busy_until is the model's time at which everything released so far
 *    has finished: a unit released at now of B bytes ends at
 *    max(now, busy_until) + a + b * B; when the last unit in flight is
 *    reported done, busy_until = now (the model follows reality).
 *  - The waiting merge W is every waiting gradient of the oldest waiting
 *    iteration, in ready order, at most SCHED_MAX_SEGMENTS of them.
 *  - W is released as one unit when (1) no unit is in flight, or (2) W is
 *    full (SCHED_MAX_SEGMENTS segments: nothing more can merge), or
 *    (3) now >= busy_until + a.
 *  - Otherwise W waits and later gradients merge into it.  Rule (3) is
 *    the paper's merge condition turned into a deadline: merging gradient
 *    g into W beats sending them apart iff g is ready before W's earliest
 *    start (busy_until) plus a; after that no later gradient can pay for
 *    the wait, and the daemon is only waiting for a late completion.
 *    sched_next_deadline() reports busy_until + a.
 *  - With a merge plan (items carry group numbers) timing plays no part:
 *    see next_mg_group(); sched_next_deadline() reports UINT64_MAX.
 *
 * ByteScheduler autotune (hill climbing, deterministic): each credit
 * value is measured on units released under it only (an epoch; units
 * released under an older credit are ignored, so the measurement does not
 * lag).  The epoch's first completion starts the clock; after
 * SCHED_TUNE_WINDOW more, throughput = their bytes / the time the network
 * had a unit in flight between the first and the last of them.  The
 * first measurement moves the credit up one step; afterwards, if the
 * throughput fell below the previous measurement's the direction
 * reverses, then the credit moves one step in the current direction, and
 * a new epoch starts.  Step = max((credit_max - credit_min) /
 * SCHED_TUNE_STEPS, 1); the credit is clamped to [credit_min,
 * credit_max], and reaching a bound turns the direction around.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/sched/sched.h"

#define SCHED_BSP_CLOSED 8	/* iterations remembered as closed (BSP) */
#define SCHED_TUNE_WINDOW 8	/* completions per autotune measurement */
#define SCHED_TUNE_STEPS 16	/* autotune step = range / this */
#define NIL UINT32_MAX

struct pending {
	struct sched_item it;
	uint64_t seq;		/* ready order */
	uint64_t released;	/* bytes already put in units */
	bool releasable;	/* BSP: its iteration's last arrived */
	uint32_t prev, next;	/* ready-order list, or free list (next) */
};

struct unit_rec {
	uint64_t id;		/* 0: free */
	uint64_t bytes;
	uint64_t epoch;		/* autotune: the credit it went under */
	uint64_t released_ns;
};

struct sched {
	struct sched_cfg cfg;
	uint64_t last_progress_ns;	/* a unit completed, or one went over
					 * the credit (ByteScheduler stalls) */
	uint64_t unit_ns;		/* units' release-to-done time, EWMA */
	struct pending *items;
	uint32_t head, tail, free_head, n_items;
	struct unit_rec *units;
	uint32_t n_units;
	uint64_t next_seq, next_id;

	/* BSP */
	uint64_t closed[SCHED_BSP_CLOSED];
	uint32_t n_closed, closed_pos;

	/* MG-WFBP */
	uint64_t busy_until;

	/* ByteScheduler autotune */
	uint64_t busy_since;	/* a unit has been in flight since */
	uint64_t busy_total_ns;	/* network busy time before busy_since */
	uint64_t tune_epoch;	/* credit changes so far */
	uint64_t win_start_ns, win_bytes;	/* busy time, bytes */
	uint32_t win_done;	/* completions of this epoch */
	double prev_tput;
	int tune_dir;		/* +1 or -1; 0 before the first window */

	struct sched_stats st;
};

static uint64_t credit_clamp(const struct sched *s, uint64_t c)
{
	if (c < s->cfg.credit_min)
		c = s->cfg.credit_min;
	if (c > s->cfg.credit_max)
		c = s->cfg.credit_max;
	return c;
}

static void items_init(struct sched *s)
{
	uint32_t i;

	for (i = 0; i < s->cfg.max_items; i++)
		s->items[i].next = i + 1 < s->cfg.max_items ? i + 1 : NIL;
	s->free_head = 0;
	s->head = NIL;
	s->tail = NIL;
	s->n_items = 0;
}

struct sched *sched_create(const struct sched_cfg *cfg)
{
	struct sched *s;

	if (!cfg || cfg->max_items == 0 || cfg->max_items >= NIL)
		return NULL;
	switch (cfg->policy) {
	case SCHED_BSP:
	case SCHED_WFBP:
		break;
	case SCHED_MGWFBP:
		if (cfg->a_ns < 0 || cfg->b_ns_per_byte < 0)
			return NULL;
		break;
	case SCHED_BYTESCHEDULER:
		if (cfg->autotune && (cfg->credit_min == 0 ||
				      cfg->credit_min > cfg->credit_max))
			return NULL;
		break;
	default:
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->cfg = *cfg;
	s->items = calloc(cfg->max_items, sizeof(*s->items));
	s->units = calloc(cfg->max_items, sizeof(*s->units));
	if (!s->items || !s->units) {
		sched_destroy(s);
		return NULL;
	}
	items_init(s);
	s->next_id = 1;
	if (cfg->policy == SCHED_BYTESCHEDULER && cfg->autotune)
		s->cfg.credit_bytes = credit_clamp(s, cfg->credit_bytes);
	s->st.credit_bytes = s->cfg.credit_bytes;
	return s;
}

void sched_destroy(struct sched *s)
{
	if (!s)
		return;
	free(s->items);
	free(s->units);
	free(s);
}

static bool bsp_is_closed(const struct sched *s, uint64_t iteration)
{
	uint32_t i;

	for (i = 0; i < s->n_closed; i++)
		if (s->closed[i] == iteration)
			return true;
	return false;
}

static void bsp_close(struct sched *s, uint64_t iteration)
{
	uint32_t i;

	for (i = s->head; i != NIL; i = s->items[i].next)
		if (s->items[i].it.iteration == iteration)
			s->items[i].releasable = true;
	if (bsp_is_closed(s, iteration))
		return;
	s->closed[s->closed_pos] = iteration;
	s->closed_pos = (s->closed_pos + 1) % SCHED_BSP_CLOSED;
	if (s->n_closed < SCHED_BSP_CLOSED)
		s->n_closed++;
}

/* BSP: gradients of @iteration held for its last one */
static uint32_t bsp_held(const struct sched *s, uint64_t iteration)
{
	uint32_t i, n = 0;

	for (i = s->head; i != NIL; i = s->items[i].next)
		if (!s->items[i].releasable &&
		    s->items[i].it.iteration == iteration)
			n++;
	return n;
}

/* ByteScheduler order: older iteration, then priority, then ready order. */
static bool bs_before(const struct pending *x, const struct pending *y)
{
	if (x->it.iteration != y->it.iteration)
		return x->it.iteration < y->it.iteration;
	if (x->it.priority != y->it.priority)
		return x->it.priority < y->it.priority;
	return x->seq < y->seq;
}

int sched_ready(struct sched *s, const struct sched_item *it, uint64_t now_ns)
{
	struct pending *p;
	uint32_t i, idx;

	(void)now_ns;
	if (!s || !it)
		return -EINVAL;
	if (s->free_head == NIL)
		return -ENOSPC;
	idx = s->free_head;
	p = &s->items[idx];
	s->free_head = p->next;
	memset(p, 0, sizeof(*p));
	p->it = *it;
	p->seq = s->next_seq++;
	p->next = NIL;
	p->prev = s->tail;
	if (s->tail != NIL)
		s->items[s->tail].next = idx;
	else
		s->head = idx;
	s->tail = idx;
	s->n_items++;

	if (s->cfg.policy == SCHED_BSP) {
		if (it->last)
			bsp_close(s, it->iteration);
		else if (bsp_is_closed(s, it->iteration))
			p->releasable = true;	/* late: its iteration went */
		else if (s->cfg.bsp_hold_max &&
			 bsp_held(s, it->iteration) >= s->cfg.bsp_hold_max)
			/* its clients may be unable to submit more, the
			 * last one included: what is held goes, and the
			 * rest of the iteration as it comes */
			bsp_close(s, it->iteration);
	} else if (s->cfg.policy == SCHED_BYTESCHEDULER) {
		/* Preemption: it overtakes a less urgent partition that
		 * became ready before it and is not yet released. */
		for (i = s->head; i != idx; i = s->items[i].next) {
			if (bs_before(p, &s->items[i])) {
				s->st.preemptions++;
				break;
			}
		}
	}
	return 0;
}

static void item_unlink(struct sched *s, uint32_t idx)
{
	struct pending *p = &s->items[idx];

	if (p->prev != NIL)
		s->items[p->prev].next = p->next;
	else
		s->head = p->next;
	if (p->next != NIL)
		s->items[p->next].prev = p->prev;
	else
		s->tail = p->prev;
	p->next = s->free_head;
	s->free_head = idx;
	s->n_items--;
}

static void unit_begin(struct sched_unit *u)
{
	u->id = 0;
	u->priority = UINT32_MAX;
	u->bytes = 0;
	u->n_segments = 0;
}

/* Put bytes [released, released + bytes) of item idx into u; the item
 * leaves the pending list when this completes it. */
static void unit_add(struct sched *s, struct sched_unit *u, uint32_t idx,
		     uint64_t bytes)
{
	struct pending *p = &s->items[idx];
	struct sched_segment *seg = &u->seg[u->n_segments++];

	seg->user = p->it.user;
	seg->offset = p->released;
	seg->bytes = bytes;
	p->released += bytes;
	seg->item_last_piece = p->released >= p->it.bytes;
	u->bytes += bytes;
	if (p->it.priority < u->priority)
		u->priority = p->it.priority;
	if (seg->item_last_piece)
		item_unlink(s, idx);
}

static int unit_commit(struct sched *s, struct sched_unit *u, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < s->cfg.max_items; i++)
		if (s->units[i].id == 0)
			break;
	/* the caller checked that a record is free */
	u->id = s->next_id++;
	s->units[i].id = u->id;
	s->units[i].bytes = u->bytes;
	s->units[i].epoch = s->tune_epoch;
	s->units[i].released_ns = now;
	if (s->n_units++ == 0) {
		s->busy_since = now;
		s->last_progress_ns = now;
	}
	s->st.units++;
	s->st.bytes_in_flight += u->bytes;
	if (u->n_segments > 1)
		s->st.merged_items += u->n_segments;
	if (s->cfg.policy == SCHED_MGWFBP) {
		uint64_t start = now > s->busy_until ? now : s->busy_until;

		s->busy_until = start + (uint64_t)(s->cfg.a_ns +
				s->cfg.b_ns_per_byte * (double)u->bytes);
	}
	return 1;
}

static int next_bsp(struct sched *s, uint64_t now, struct sched_unit *u)
{
	uint32_t i;

	for (i = s->head; i != NIL; i = s->items[i].next) {
		if (s->items[i].releasable) {
			unit_add(s, u, i, s->items[i].it.bytes);
			return unit_commit(s, u, now);
		}
	}
	return 0;
}

static int next_wfbp(struct sched *s, uint64_t now, struct sched_unit *u)
{
	if (s->head == NIL)
		return 0;
	unit_add(s, u, s->head, s->items[s->head].it.bytes);
	return unit_commit(s, u, now);
}

/* The MG-WFBP waiting merge: how many items it has (capped). */
static uint32_t mg_waiting(const struct sched *s)
{
	uint64_t iter;
	uint32_t i, n = 0;

	if (s->head == NIL)
		return 0;
	iter = s->items[s->head].it.iteration;
	for (i = s->head; i != NIL && n < SCHED_MAX_SEGMENTS;
	     i = s->items[i].next)
		if (s->items[i].it.iteration == iter)
			n++;
	return n;
}

static uint64_t mg_deadline(const struct sched *s)
{
	uint64_t d = s->busy_until + (uint64_t)s->cfg.a_ns;

	return d < s->busy_until ? UINT64_MAX : d;
}

/*
 * MG-WFBP with a merge plan: the items carry the plan's group numbers
 * (computed by every process from the same profile and cost model), and a
 * group leaves as one unit once it is closed: an item of another group (or
 * iteration) is ready behind it, or the iteration's last item is in it; or
 * as several, each closed at SCHED_MAX_SEGMENTS items or before the item
 * that would take it past SCHED_MAX_MERGED_BYTES.  Decided by the items
 * alone, so every host forms the same units, which a multi-host
 * all-reduce needs (timing differs between hosts).
 */
static int next_mg_group(struct sched *s, uint64_t now, struct sched_unit *u)
{
	const struct sched_item *h = &s->items[s->head].it;
	uint64_t bytes = 0;
	uint32_t i, n = 0;
	bool closed = false;

	for (i = s->head; i != NIL; i = s->items[i].next) {
		const struct sched_item *it = &s->items[i].it;

		if (it->iteration != h->iteration || it->group != h->group ||
		    (n && bytes + it->bytes > SCHED_MAX_MERGED_BYTES)) {
			closed = true;
			break;
		}
		bytes += it->bytes;
		n++;
		if (it->last || n == SCHED_MAX_SEGMENTS) {
			closed = true;
			break;
		}
	}
	if (!closed)
		return 0;
	while (n--)
		unit_add(s, u, s->head, s->items[s->head].it.bytes);
	return unit_commit(s, u, now);
}

static int next_mgwfbp(struct sched *s, uint64_t now, struct sched_unit *u)
{
	uint32_t i, nx, n;
	uint64_t iter;

	if (s->head != NIL && s->items[s->head].it.group)
		return next_mg_group(s, now, u);
	if (s->cfg.mg_plan_only)
		return next_wfbp(s, now, u);	/* no plan: no merging */
	n = mg_waiting(s);
	if (n == 0)
		return 0;
	if (s->n_units > 0 && n < SCHED_MAX_SEGMENTS && now < mg_deadline(s))
		return 0;
	iter = s->items[s->head].it.iteration;
	for (i = s->head; i != NIL && u->n_segments < n; i = nx) {
		nx = s->items[i].next;
		if (s->items[i].it.iteration == iter)
			unit_add(s, u, i, s->items[i].it.bytes);
	}
	return unit_commit(s, u, now);
}

/*
 * No unit completed for stall_ns while the credit is full.  Partitions of
 * one gradient complete only when every host has sent them (all-reduce
 * and aggregation alike), and hosts whose gradients became ready in
 * different orders can each fill their credit with partitions the others
 * have not released: every host then waits for the others forever.  Every
 * stall_ns one more partition goes past the credit; since each host
 * releases its partitions in the same (iteration, priority) order, the
 * partitions a host waits for are eventually released by every other host
 * and complete (docs/scheduling.md, "Stalls").  With stall_adapt the
 * bound grows to twice the usual time from a unit's release to its
 * completion: on a slow link (a PS whose aggregator sends every host's
 * results through one shaped port) units take longer than stall_ns, and
 * releasing past the credit there only queues more.
 */
static uint64_t bs_stall_ns(const struct sched *s)
{
	/* a slow link is no stall: twice the usual unit time at least */
	if (!s->cfg.stall_adapt || s->cfg.stall_ns > 2 * s->unit_ns)
		return s->cfg.stall_ns;
	return 2 * s->unit_ns;
}

static bool bs_stalled(const struct sched *s, uint64_t now)
{
	return s->cfg.stall_ns && now - s->last_progress_ns >= bs_stall_ns(s);
}

static int next_bytescheduler(struct sched *s, uint64_t now,
			      struct sched_unit *u)
{
	uint64_t part = s->cfg.partition_bytes, bytes;
	uint32_t i, best = NIL;
	struct pending *p;

	for (i = s->head; i != NIL; i = s->items[i].next)
		if (best == NIL || bs_before(&s->items[i], &s->items[best]))
			best = i;
	if (best == NIL)
		return 0;
	p = &s->items[best];
	bytes = p->it.bytes - p->released;
	if (part && bytes > part)
		bytes = part;
	if (s->n_units > 0 &&
	    s->st.bytes_in_flight + bytes > s->cfg.credit_bytes) {
		if (!bs_stalled(s, now))
			return 0;
		/* see bs_stalled(): one partition past the credit */
		s->last_progress_ns = now;
		s->st.stall_releases++;
	}
	unit_add(s, u, best, bytes);
	s->st.partitions++;
	return unit_commit(s, u, now);
}

int sched_next(struct sched *s, uint64_t now_ns, struct sched_unit *u)
{
	if (!s || !u)
		return 0;
	if (s->n_units >= s->cfg.max_items)
		return 0;	/* every unit record is in flight */
	unit_begin(u);
	switch (s->cfg.policy) {
	case SCHED_BSP:
		return next_bsp(s, now_ns, u);
	case SCHED_WFBP:
		return next_wfbp(s, now_ns, u);
	case SCHED_MGWFBP:
		return next_mgwfbp(s, now_ns, u);
	case SCHED_BYTESCHEDULER:
		return next_bytescheduler(s, now_ns, u);
	}
	return 0;
}

/* Time the network had a unit in flight, up to now. */
static uint64_t busy_ns(const struct sched *s, uint64_t now)
{
	return s->busy_total_ns + (s->n_units ? now - s->busy_since : 0);
}

static void autotune_step(struct sched *s, double tput)
{
	uint64_t step, c = s->cfg.credit_bytes;

	if (s->tune_dir == 0)
		s->tune_dir = 1;
	else if (tput < s->prev_tput)
		s->tune_dir = -s->tune_dir;
	s->prev_tput = tput;
	step = (s->cfg.credit_max - s->cfg.credit_min) / SCHED_TUNE_STEPS;
	if (step == 0)
		step = 1;
	if (s->tune_dir > 0) {
		c = c + step > c ? c + step : UINT64_MAX;
		if (c >= s->cfg.credit_max)
			s->tune_dir = -1;
	} else {
		c = c > step ? c - step : 0;
		if (c <= s->cfg.credit_min)
			s->tune_dir = 1;
	}
	s->cfg.credit_bytes = credit_clamp(s, c);
	s->st.credit_bytes = s->cfg.credit_bytes;
	s->tune_epoch++;
	s->win_done = 0;
}

/* A unit of the current credit's epoch completed (its busy time already
 * counted up to now). */
static void autotune(struct sched *s, uint64_t now, uint64_t bytes)
{
	uint64_t busy = busy_ns(s, now);

	if (s->win_done++ == 0) {
		/* the first completion only starts the clock */
		s->win_start_ns = busy;
		s->win_bytes = 0;
		return;
	}
	s->win_bytes += bytes;
	if (s->win_done <= SCHED_TUNE_WINDOW)
		return;
	autotune_step(s, busy > s->win_start_ns ?
		      (double)s->win_bytes / (double)(busy - s->win_start_ns) :
		      0.0);
}

void sched_unit_done(struct sched *s, uint64_t unit_id, uint64_t now_ns)
{
	uint64_t bytes, epoch, lat;
	uint32_t i;

	if (!s || unit_id == 0)
		return;
	for (i = 0; i < s->cfg.max_items; i++)
		if (s->units[i].id == unit_id)
			break;
	if (i == s->cfg.max_items)
		return;		/* unknown, or from before sched_reset() */
	bytes = s->units[i].bytes;
	epoch = s->units[i].epoch;
	lat = now_ns - s->units[i].released_ns;
	s->unit_ns = s->unit_ns ? (7 * s->unit_ns + lat) / 8 : lat;
	s->units[i].id = 0;
	s->st.bytes_in_flight -= bytes;
	s->last_progress_ns = now_ns;
	if (--s->n_units == 0) {
		s->busy_total_ns += now_ns - s->busy_since;
		s->busy_until = now_ns;
	}
	if (s->cfg.policy == SCHED_BYTESCHEDULER && s->cfg.autotune &&
	    epoch == s->tune_epoch)
		autotune(s, now_ns, bytes);
}

uint64_t sched_next_deadline(const struct sched *s)
{
	if (!s || s->head == NIL)
		return UINT64_MAX;
	if (s->cfg.policy == SCHED_BYTESCHEDULER) {
		uint64_t d = s->last_progress_ns + bs_stall_ns(s);

		/* a partition waits for credit only while units are out */
		if (!s->cfg.stall_ns || s->n_units == 0)
			return UINT64_MAX;
		return d < s->last_progress_ns ? UINT64_MAX : d;
	}
	if (s->cfg.policy != SCHED_MGWFBP)
		return UINT64_MAX;
	if (s->items[s->head].it.group || s->cfg.mg_plan_only)
		return UINT64_MAX;	/* a plan's group: only items close it */
	if (s->n_units == 0 || mg_waiting(s) >= SCHED_MAX_SEGMENTS)
		return 0;	/* due now */
	return mg_deadline(s);
}

void sched_reset(struct sched *s)
{
	if (!s)
		return;
	items_init(s);
	memset(s->units, 0, s->cfg.max_items * sizeof(*s->units));
	s->n_units = 0;
	s->n_closed = 0;
	s->closed_pos = 0;
	s->busy_until = 0;
	s->busy_total_ns = 0;
	s->tune_epoch++;	/* units from before never count */
	s->win_done = 0;
	s->st.bytes_in_flight = 0;
}

const struct sched_stats *sched_stats(const struct sched *s)
{
	return &s->st;
}

void sched_depth(const struct sched *s, uint32_t *pending, uint32_t *units)
{
	*pending = s->n_items;
	*units = s->n_units;
}

static const char *const policy_names[] = {
	[SCHED_BSP] = "bsp",
	[SCHED_WFBP] = "wfbp",
	[SCHED_MGWFBP] = "mgwfbp",
	[SCHED_BYTESCHEDULER] = "bytescheduler",
};

const char *sched_policy_name(enum sched_policy p)
{
	if ((unsigned int)p >= sizeof(policy_names) / sizeof(policy_names[0]) ||
	    !policy_names[p])
		return "unknown";
	return policy_names[p];
}

void sched_cfg_daemon(struct sched_cfg *sc, enum sched_policy policy,
		      uint32_t max_items, uint64_t partition_bytes,
		      uint64_t credit_bytes, bool autotune, bool aggregate)
{
	*sc = (struct sched_cfg){
		.policy = policy,
		.max_items = max_items,
		.partition_bytes = partition_bytes,
		.credit_bytes = credit_bytes,
		.autotune = autotune,
		.credit_min = 64u << 10,
		.credit_max = 256u << 20,
		.a_ns = 100000, .b_ns_per_byte = 1,
		.mg_plan_only = true,
		.stall_ns = SCHED_DAEMON_STALL_NS,
		/* aggregation: every host's results leave through the
		 * aggregators' ports, so on a slow network units take longer
		 * than the bound; ring: crossed credits are routine and their
		 * waits would feed the unit time (docs/scheduling.md) */
		.stall_adapt = aggregate,
		.bsp_hold_max = SCHED_DAEMON_BSP_HOLD,
	};
}

int sched_policy_parse(const char *name)
{
	unsigned int i;

	if (!name)
		return -1;
	for (i = 0; i < sizeof(policy_names) / sizeof(policy_names[0]); i++)
		if (policy_names[i] && strcmp(policy_names[i], name) == 0)
			return (int)i;
	return -1;
}
