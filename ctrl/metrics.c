// SPDX-License-Identifier: BSD-3-Clause
/*
 * metrics.c - the metric registry and the Prometheus text writer (format
 * 0.0.4: https://prometheus.io/docs/instrumenting/exposition_formats/).
 *
 * Samples keep their labels already escaped and formatted ("a=\"x\",b=..."
 * without braces), so writing is a copy; the registry is rebuilt on every
 * scrape and is small (hundreds of samples).
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/metrics.h"

struct sample {
	size_t family;
	char *labels;		/* formatted, escaped, no braces; "" if none */
	double value;
	struct metrics_hist *hist;	/* histograms only */
};

struct family {
	char *name;
	char *help;
	enum metrics_type type;
};

struct metrics {
	struct family *fam;
	size_t n_fam, cap_fam;
	struct sample *smp;
	size_t n_smp, cap_smp;
};

/* ---- a growable string ------------------------------------------------ */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_grow(struct sbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 256;
	char *p;

	if (b->oom || b->len + more + 1 <= b->cap)
		return;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return;
	}
	b->p = p;
	b->cap = cap;
}

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	sb_grow(b, n);
	if (b->oom)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(tmp)) {
		sb_put(b, tmp, (size_t)n);
		return;
	}
	sb_grow(b, (size_t)n);
	if (b->oom)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Label values: backslash, double quote and line feed are escaped;
 * help text: backslash and line feed. */
static void sb_escaped(struct sbuf *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			sb_str(b, "\\\\");
		else if (*s == '\n')
			sb_str(b, "\\n");
		else if (*s == '"' && quote)
			sb_str(b, "\\\"");
		else
			sb_put(b, s, 1);
	}
}

/* The shortest %g form that reads back as @v (0.1, not 0.1000...01). */
static void sb_shortest(struct sbuf *b, double v)
{
	char tmp[40];

	for (int prec = 15; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	sb_str(b, tmp);
}

static void sb_value(struct sbuf *b, double v)
{
	if (isnan(v))
		sb_str(b, "NaN");
	else if (isinf(v))
		sb_str(b, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 1e15)
		sb_printf(b, "%.0f", v);
	else
		sb_shortest(b, v);
}

/* ---- names ------------------------------------------------------------ */

static bool valid_name(const char *s, bool colon)
{
	if (!*s)
		return false;
	for (const char *p = s; *p; p++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     c == '_' || (colon && c == ':');

		if (!alpha && !(p != s && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

/* ---- histograms ------------------------------------------------------- */

int metrics_hist_init(struct metrics_hist *h, const double *bounds,
		      unsigned int n)
{
	memset(h, 0, sizeof(*h));
	if (n > METRICS_HIST_MAX)
		return -1;
	for (unsigned int i = 0; i < n; i++) {
		if (isnan(bounds[i]) || (i && bounds[i] <= bounds[i - 1]))
			return -1;
		h->bounds[i] = bounds[i];
	}
	h->n_bounds = n;
	return 0;
}

void metrics_hist_observe(struct metrics_hist *h, double v)
{
	unsigned int i = 0;

	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void metrics_hist_add(struct metrics_hist *sum, const struct metrics_hist *h)
{
	if (!sum->n_bounds) {		/* empty: takes @h's bounds */
		*sum = *h;
		return;
	}
	for (unsigned int i = 0; i <= h->n_bounds; i++)
		sum->counts[i] += h->counts[i];
	sum->sum += h->sum;
	sum->count += h->count;
}

/* ---- the registry ----------------------------------------------------- */

struct metrics *metrics_new(void)
{
	return calloc(1, sizeof(struct metrics));
}

void metrics_reset(struct metrics *m)
{
	for (size_t i = 0; i < m->n_fam; i++) {
		free(m->fam[i].name);
		free(m->fam[i].help);
	}
	for (size_t i = 0; i < m->n_smp; i++) {
		free(m->smp[i].labels);
		free(m->smp[i].hist);
	}
	m->n_fam = m->n_smp = 0;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	metrics_reset(m);
	free(m->fam);
	free(m->smp);
	free(m);
}

size_t metrics_count(const struct metrics *m)
{
	return m->n_smp;
}

static long find_family(const struct metrics *m, const char *name)
{
	for (size_t i = 0; i < m->n_fam; i++)
		if (!strcmp(m->fam[i].name, name))
			return (long)i;
	return -1;
}

int metrics_family(struct metrics *m, const char *name,
		   enum metrics_type type, const char *help)
{
	long i = find_family(m, name);
	struct family *f;

	if (i >= 0)
		return m->fam[i].type == type ? 0 : -1;
	if (!valid_name(name, true))
		return -1;
	if (m->n_fam == m->cap_fam) {
		size_t cap = m->cap_fam ? m->cap_fam * 2 : 32;
		struct family *p = realloc(m->fam, cap * sizeof(*p));

		if (!p)
			return -1;
		m->fam = p;
		m->cap_fam = cap;
	}
	f = &m->fam[m->n_fam];
	f->name = strdup(name);
	f->help = strdup(help ? help : "");
	f->type = type;
	if (!f->name || !f->help) {
		free(f->name);
		free(f->help);
		return -1;
	}
	m->n_fam++;
	return 0;
}

/* "a=\"x\",b=\"y\"" from { "a", "x", "b", "y", NULL }; NULL on error. */
static char *format_labels(const char *const *labels)
{
	struct sbuf b = { 0 };

	sb_str(&b, "");
	for (size_t i = 0; labels && labels[i]; i += 2) {
		if (!labels[i + 1] || !valid_name(labels[i], false) ||
		    !strcmp(labels[i], "le") || !strncmp(labels[i], "__", 2)) {
			free(b.p);
			return NULL;
		}
		if (i)
			sb_str(&b, ",");
		sb_str(&b, labels[i]);
		sb_str(&b, "=\"");
		sb_escaped(&b, labels[i + 1], true);
		sb_str(&b, "\"");
	}
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

static int add_sample(struct metrics *m, const char *name,
		      const char *const *labels, bool hist, double value,
		      const struct metrics_hist *h)
{
	long f = find_family(m, name);
	struct sample *s;

	if (f < 0 || (m->fam[f].type == METRICS_HISTOGRAM) != hist)
		return -1;
	if (m->n_smp == m->cap_smp) {
		size_t cap = m->cap_smp ? m->cap_smp * 2 : 128;
		struct sample *p = realloc(m->smp, cap * sizeof(*p));

		if (!p)
			return -1;
		m->smp = p;
		m->cap_smp = cap;
	}
	s = &m->smp[m->n_smp];
	s->family = (size_t)f;
	s->value = value;
	s->hist = NULL;
	s->labels = format_labels(labels);
	if (!s->labels)
		return -1;
	if (hist) {
		s->hist = malloc(sizeof(*h));
		if (!s->hist) {
			free(s->labels);
			return -1;
		}
		*s->hist = *h;
	}
	m->n_smp++;
	return 0;
}

int metrics_set(struct metrics *m, const char *name,
		const char *const *labels, double value)
{
	return add_sample(m, name, labels, false, value, NULL);
}

int metrics_set_hist(struct metrics *m, const char *name,
		     const char *const *labels, const struct metrics_hist *h)
{
	return add_sample(m, name, labels, true, 0, h);
}

/* ---- the writer ------------------------------------------------------- */

static void write_labels(struct sbuf *b, const char *labels, const char *le)
{
	if (!*labels && !le)
		return;
	sb_str(b, "{");
	sb_str(b, labels);
	if (le) {
		if (*labels)
			sb_str(b, ",");
		sb_str(b, "le=\"");
		sb_str(b, le);
		sb_str(b, "\"");
	}
	sb_str(b, "}");
}

static void write_hist(struct sbuf *b, const char *name, const char *labels,
		       const struct metrics_hist *h)
{
	uint64_t cum = 0;
	char le[64];

	for (unsigned int i = 0; i <= h->n_bounds; i++) {
		struct sbuf v = { 0 };

		cum += h->counts[i];
		if (i == h->n_bounds) {
			snprintf(le, sizeof(le), "+Inf");
		} else {
			sb_value(&v, h->bounds[i]);
			snprintf(le, sizeof(le), "%s", v.oom ? "?" : v.p);
			free(v.p);
		}
		sb_printf(b, "%s_bucket", name);
		write_labels(b, labels, le);
		sb_printf(b, " %llu\n", (unsigned long long)cum);
	}
	sb_printf(b, "%s_sum", name);
	write_labels(b, labels, NULL);
	sb_str(b, " ");
	sb_value(b, h->sum);
	sb_printf(b, "\n%s_count", name);
	write_labels(b, labels, NULL);
	sb_printf(b, " %llu\n", (unsigned long long)h->count);
}

int metrics_write(const struct metrics *m, char **out, size_t *len)
{
	static const char *const types[] = { "counter", "gauge", "histogram" };
	struct sbuf b = { 0 };

	sb_str(&b, "");
	for (size_t f = 0; f < m->n_fam; f++) {
		const struct family *fam = &m->fam[f];

		sb_printf(&b, "# HELP %s ", fam->name);
		sb_escaped(&b, fam->help, false);
		sb_printf(&b, "\n# TYPE %s %s\n", fam->name, types[fam->type]);
		for (size_t i = 0; i < m->n_smp; i++) {
			const struct sample *s = &m->smp[i];

			if (s->family != f)
				continue;
			if (s->hist) {
				write_hist(&b, fam->name, s->labels, s->hist);
				continue;
			}
			sb_str(&b, fam->name);
			write_labels(&b, s->labels, NULL);
			sb_str(&b, " ");
			sb_value(&b, s->value);
			sb_str(&b, "\n");
		}
	}
	if (b.oom) {
		free(b.p);
		return -1;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}
