// SPDX-License-Identifier: BSD-3-Clause
/*
 * watchdog.c - stuck-operation reports (see watchdog.h).
 *
 * The local-group pool is the one place every operation of this host
 * lives in until it completes, so the watchdog scans it: an entry is
 * timed from the first scan that saw its (key, iteration), which keeps
 * local_group.c free of clocks.  The small all-reduces of a one-host job
 * live in the clients' fast-path table instead (docs/local-fast-path.md):
 * its open slots are timed the same way, by the slot's state word, which
 * changes with every use.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctrl/cluster.h"
#include "ctrl/job.h"
#include "ctrl/log.h"
#include "ctrl/watchdog.h"

struct wd_entry {
	bool used;
	bool reported;
	uint64_t key, iteration;
	uint64_t state;			/* a fast-path slot's use */
	uint64_t since_ns;
};

struct watchdog {
	uint64_t stuck_ns;
	uint64_t next_scan_ns;
	struct wd_entry *e;		/* one per local-group pool entry */
	struct wd_entry fe[TALLY_FAST_MAX_SLOTS];	/* per table slot */
	struct watchdog_stats st;
};

int watchdog_init(struct job *j)
{
	struct watchdog *w;

	if (j->cfg.stuck_ms <= 0)
		return 0;		/* off */
	w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	w->e = calloc(j->groups.n_pool, sizeof(*w->e));
	if (!w->e) {
		free(w);
		return -1;
	}
	w->stuck_ns = (uint64_t)j->cfg.stuck_ms * 1000000ull;
	j->watchdog = w;
	return 0;
}

int watchdog_set_stuck_ms(struct job *j, int stuck_ms)
{
	j->cfg.stuck_ms = stuck_ms;
	if (stuck_ms <= 0) {
		watchdog_fini(j);
		return 0;
	}
	if (!j->watchdog)
		return watchdog_init(j);
	j->watchdog->stuck_ns = (uint64_t)stuck_ms * 1000000ull;
	j->watchdog->next_scan_ns = 0;	/* scan at the next turn */
	return 0;
}

void watchdog_fini(struct job *j)
{
	if (!j->watchdog)
		return;
	free(j->watchdog->e);
	free(j->watchdog);
	j->watchdog = NULL;
}

/* "<prefix>local ranks 1 3 have not submitted": those of @size not in
 * @arrived */
static void describe_missing(char *buf, size_t len, const char *prefix,
			     uint64_t arrived, unsigned int size)
{
	size_t n = (size_t)snprintf(buf, len, "%slocal ranks", prefix);

	for (unsigned int r = 0; r < size && n < len; r++)
		if (!(arrived & (1ull << r)))
			n += (size_t)snprintf(buf + n, len - n, " %u", r);
	if (n < len)
		snprintf(buf + n, len - n, " have not submitted");
}

static void describe(struct job *j, uint32_t idx, char *buf, size_t len)
{
	const struct lg_group *g = &j->groups.pool[idx];
	uint64_t all = j->groups.size >= 64 ? UINT64_MAX :
		       (1ull << j->groups.size) - 1;

	if ((g->arrived & all) != all)
		describe_missing(buf, len, g->failed ? "failed; " : "",
				 g->arrived, j->groups.size);
	else if (!j->cluster || cluster_describe_op(j->cluster, idx, buf, len))
		snprintf(buf, len, "all local ranks submitted; in the "
			 "daemon's hands");
}

static void no_longer_stuck(const struct wd_entry *e, uint64_t now)
{
	if (e->reported)
		log_info("key %llu iteration %llu is no longer stuck: it "
			 "finished after %llu ms or more",
			 (unsigned long long)e->key,
			 (unsigned long long)e->iteration,
			 (unsigned long long)((now - e->since_ns) / 1000000));
}

/* An entry seen again at @now: true, once, when it has just passed the
 * bound and is to be reported (its age in *@age); counts it stuck. */
static bool newly_stuck(struct watchdog *w, struct wd_entry *e, uint64_t now,
			uint64_t *age)
{
	*age = now - e->since_ns;
	if (*age < w->stuck_ns)
		return false;
	w->st.stuck_now++;
	if (e->reported)
		return false;
	e->reported = true;
	w->st.reports++;
	return true;
}

static void report(const struct job *j, const struct wd_entry *e,
		   uint64_t age, const char *why)
{
	log_warn("stuck: key %llu iteration %llu unfinished for %llu ms: %s "
		 "(job %s)", (unsigned long long)e->key,
		 (unsigned long long)e->iteration,
		 (unsigned long long)(age / 1000000), why, j->id);
}

/* The fast-path table's open slots (read with atomics: the clients'). */
static void scan_fast(struct job *j, struct watchdog *w, uint64_t now)
{
	struct local_fast *f = &j->fast;

	for (uint32_t i = 0; i < f->l.slots; i++) {
		struct tally_fast_slot *s = tally_fast_slot_at(f->seg.base,
							       &f->l, i);
		uint64_t st = atomic_load(&s->state), age;
		struct wd_entry *e = &w->fe[i];
		char why[512];

		if (e->used && e->state != st) {
			no_longer_stuck(e, now);
			e->used = false;
		}
		if (TALLY_FAST_PHASE(st) != TALLY_FAST_OPEN)
			continue;
		if (!e->used) {
			*e = (struct wd_entry){
				.used = true, .state = st, .since_ns = now,
				.key = atomic_load(&s->key),
				.iteration = atomic_load(&s->iteration) };
			continue;
		}
		if (!newly_stuck(w, e, now, &age))
			continue;
		describe_missing(why, sizeof(why), "fast path: ",
				 atomic_load(&s->arrived), f->l.ranks);
		report(j, e, age, why);
	}
}

static void scan(struct job *j, struct watchdog *w, uint64_t now)
{
	char why[512];

	w->st.stuck_now = 0;
	if (local_fast_on(&j->fast))
		scan_fast(j, w, now);
	else
		for (uint32_t i = 0; i < TALLY_FAST_MAX_SLOTS; i++)
			w->fe[i].used = false;	/* a table gone */
	for (uint32_t i = 0; i < j->groups.n_pool; i++) {
		const struct lg_group *g = &j->groups.pool[i];
		struct wd_entry *e = &w->e[i];
		uint64_t age;

		if (e->used && (!g->used || e->key != g->op.key ||
				e->iteration != g->op.iteration)) {
			no_longer_stuck(e, now);
			e->used = false;
		}
		if (!g->used)
			continue;
		if (!e->used) {
			*e = (struct wd_entry){ .used = true,
						.key = g->op.key,
						.iteration = g->op.iteration,
						.since_ns = now };
			continue;
		}
		if (!newly_stuck(w, e, now, &age))
			continue;
		describe(j, i, why, sizeof(why));
		report(j, e, age, why);
	}
}

void watchdog_poll(struct job *j, uint64_t now_ns)
{
	struct watchdog *w = j->watchdog;

	if (!w || now_ns < w->next_scan_ns)
		return;
	w->next_scan_ns = now_ns + w->stuck_ns / 4;
	scan(j, w, now_ns);
}

int64_t watchdog_sleep_ns(const struct job *j, uint64_t now_ns)
{
	const struct watchdog *w = j->watchdog;

	/* idle with nothing pending, nothing reported to close, needs no
	 * scan */
	if (!w || (j->groups.n_used == 0 && w->st.stuck_now == 0 &&
		   !(local_fast_on(&j->fast) && j->n_members > 0)))
		return -1;
	return w->next_scan_ns > now_ns ? (int64_t)(w->next_scan_ns - now_ns)
					 : 0;
}

const struct watchdog_stats *watchdog_stats(const struct job *j)
{
	static const struct watchdog_stats off;

	return j->watchdog ? &j->watchdog->st : &off;
}
