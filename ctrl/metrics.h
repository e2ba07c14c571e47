/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * metrics.h - a small registry of metric samples and its writer in the
 * Prometheus text exposition format 0.0.4.
 *
 * Pure: no I/O, no clock, no daemon.  The daemon fills a registry from
 * its state (daemon_collect_metrics(), ctrl/collect.c), then either the
 * HTTP endpoint (metrics_http.c) writes it as text or the control socket
 * (tally-ctl) sends the same text; both show the same numbers.
 *
 * A family (name, type, help) holds samples that differ by their labels;
 * labels are given as a NULL-terminated list of name, value, name, value.
 * Histograms have fixed upper bounds ("le") and are written cumulative,
 * with _bucket{le="+Inf"}, _sum and _count.
 */
#ifndef TALLY_CTRL_METRICS_H
#define TALLY_CTRL_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metrics_type {
	METRICS_COUNTER,
	METRICS_GAUGE,
	METRICS_HISTOGRAM,
};

/* Upper bounds of a histogram, +Inf excluded. */
#define METRICS_HIST_MAX 24

/* A histogram as the daemon accumulates it: counts per bucket (not
 * cumulative; counts[n_bounds] is the +Inf bucket), sum and count. */
struct metrics_hist {
	unsigned int n_bounds;
	double bounds[METRICS_HIST_MAX];	/* increasing */
	uint64_t counts[METRICS_HIST_MAX + 1];
	double sum;
	uint64_t count;
};

/* @bounds increasing, @n <= METRICS_HIST_MAX.  0 or -1. */
int metrics_hist_init(struct metrics_hist *h, const double *bounds,
		      unsigned int n);
void metrics_hist_observe(struct metrics_hist *h, double v);
/* @sum += @h, both with the same bounds; an empty (zeroed) @sum takes
 * @h's.  A daemon keeps its ended jobs' latencies this way. */
void metrics_hist_add(struct metrics_hist *sum, const struct metrics_hist *h);

struct metrics;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);
/* Forget every family and sample (keeps the memory for the next fill). */
void metrics_reset(struct metrics *m);

/* Declare a family; declaring it again with the same type is a no-op.
 * -1 when the name is not a valid metric name, the type differs from an
 * earlier declaration, or out of memory. */
int metrics_family(struct metrics *m, const char *name,
		   enum metrics_type type, const char *help);
/* A counter or gauge sample of a declared family.  @labels: NULL or
 * { "name", "value", ..., NULL }.  -1 on an unknown family, a histogram
 * family, a bad label name, or out of memory. */
int metrics_set(struct metrics *m, const char *name,
		const char *const *labels, double value);
/* A histogram sample (the le label is added by the writer). */
int metrics_set_hist(struct metrics *m, const char *name,
		     const char *const *labels, const struct metrics_hist *h);

/* Write the registry in the text format; *@out is malloc'd and
 * NUL-terminated, *@len excludes the NUL.  0 or -1 (out of memory). */
int metrics_write(const struct metrics *m, char **out, size_t *len);

/* Number of samples (histograms count once); for tests. */
size_t metrics_count(const struct metrics *m);

/* The content type of what metrics_write() produces. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif /* TALLY_CTRL_METRICS_H */
