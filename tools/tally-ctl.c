// SPDX-License-Identifier: BSD-3-Clause
/*
 * tally-ctl - look at a running tallyd through its client socket.
 *
 * It sends TALLY_MSG_CTL_QUERY instead of HELLO (shm/proto.h) and reads
 * one reply: the daemon's metrics in the Prometheus text format, the same
 * samples its HTTP endpoint serves (ctrl/collect.c).  The daemon never
 * counts such a connection as a client and nothing in it changes.
 *
 *   tally-ctl [--socket PATH] [--job ID] [--json] status|jobs|peers|counters
 *   tally-ctl [--socket PATH] [--job ID] top [-n COUNT]
 *
 * A daemon serves several jobs: its own numbers carry no label, a job's
 * carry job="<its id>", and the jobs are the ids of tally_job_clients.
 *
 * Exit status: 0, 1 when the daemon cannot be asked, 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <tally/tally.h>
#include "shm/proto.h"

#define IO_TIMEOUT_MS 5000
#define MAX_LABELS 8

struct sample {
	char *name;
	int n_labels;
	char *key[MAX_LABELS], *val[MAX_LABELS];
	double value;
};

struct snap {
	struct sample *s;
	size_t n;
	char *text;
};

static const char *prog = "tally-ctl";

/* ---- the query -------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Read exactly @len bytes before @deadline.  0 or -1 (errno set). */
static int read_full(int s, void *buf, size_t len, uint64_t deadline)
{
	char *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = s, .events = POLLIN };
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline ||
		    poll(&pfd, 1, (int)(deadline - now)) == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		n = read(s, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ECONNRESET;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Ask the daemon at @path; the reply text (malloc'd) or NULL (reported). */
static char *query(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct tally_msg q = {
		.magic = TALLY_MSG_MAGIC, .version = TALLY_PROTO_VERSION,
		.type = TALLY_MSG_CTL_QUERY, .arg = { TALLY_CTL_VERSION },
	};
	struct tally_msg r;
	uint64_t deadline = now_ms() + IO_TIMEOUT_MS;
	char *text;
	int s;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "%s: %s: socket path too long\n", prog, path);
		return NULL;
	}
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "%s: cannot connect to %s: %s (is tallyd "
			"running? --socket PATH)\n", prog, path,
			strerror(errno));
		if (s >= 0)
			close(s);
		return NULL;
	}
	if (send(s, &q, sizeof(q), MSG_NOSIGNAL) != (ssize_t)sizeof(q) ||
	    read_full(s, &r, sizeof(r), deadline)) {
		fprintf(stderr, "%s: %s: no answer: %s\n", prog, path,
			strerror(errno));
		close(s);
		return NULL;
	}
	if (r.magic == TALLY_MSG_MAGIC && r.type == TALLY_MSG_WELCOME &&
	    r.status) {		/* refused before it read the query */
		fprintf(stderr, "%s: %s: the daemon refused the connection: "
			"%s\n", prog, path, tally_strerror(r.status));
		close(s);
		return NULL;
	}
	if (r.magic != TALLY_MSG_MAGIC || r.version != TALLY_PROTO_VERSION ||
	    r.type != TALLY_MSG_CTL_REPLY) {
		fprintf(stderr, "%s: %s: not a tallyd of this version "
			"(protocol %u, message type %u)\n", prog, path,
			r.version, r.type);
		close(s);
		return NULL;
	}
	if (r.status) {
		fprintf(stderr, "%s: %s: the daemon refused: %s\n", prog, path,
			tally_strerror(r.status));
		close(s);
		return NULL;
	}
	if (r.arg[0] > TALLY_CTL_MAX_REPLY) {
		fprintf(stderr, "%s: %s: reply too long\n", prog, path);
		close(s);
		return NULL;
	}
	text = malloc(r.arg[0] + 1);
	if (!text || read_full(s, text, r.arg[0], deadline)) {
		fprintf(stderr, "%s: %s: reply cut short: %s\n", prog, path,
			strerror(errno));
		free(text);
		close(s);
		return NULL;
	}
	text[r.arg[0]] = '\0';
	close(s);
	return text;
}

/* ---- the text format (what the daemon writes) ------------------------- */

/* Unescape a label value in place from @p (after the opening quote); the
 * character after the closing quote, or NULL. */
static char *label_value(char *p, char **val)
{
	char *o = p;

	*val = p;
	for (; *p && *p != '"'; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			*o++ = *p == 'n' ? '\n' : *p;
		} else {
			*o++ = *p;
		}
	}
	if (*p != '"')
		return NULL;
	*o = '\0';
	return p + 1;
}

static int parse_line(char *line, struct sample *s)
{
	char *p = line + strcspn(line, "{ ");
	char *end;

	memset(s, 0, sizeof(*s));
	s->name = line;
	if (*p == '{') {
		*p++ = '\0';
		while (*p && *p != '}') {
			char *eq = strchr(p, '=');

			if (!eq || eq[1] != '"' || s->n_labels == MAX_LABELS)
				return -1;
			*eq = '\0';
			s->key[s->n_labels] = p;
			p = label_value(eq + 2, &s->val[s->n_labels]);
			if (!p)
				return -1;
			s->n_labels++;
			if (*p == ',')
				p++;
		}
		if (*p != '}')
			return -1;
		p++;
	}
	if (*p != ' ')
		return -1;
	*p++ = '\0';
	s->value = strtod(p, &end);
	return end == p ? -1 : 0;
}

static int parse(char *text, struct snap *sn)
{
	size_t cap = 0;

	sn->text = text;
	sn->n = 0;
	sn->s = NULL;
	for (char *line = strtok(text, "\n"); line;
	     line = strtok(NULL, "\n")) {
		if (line[0] == '#')
			continue;
		if (sn->n == cap) {
			struct sample *p;

			cap = cap ? cap * 2 : 256;
			p = realloc(sn->s, cap * sizeof(*p));
			if (!p)
				return -1;
			sn->s = p;
		}
		if (parse_line(line, &sn->s[sn->n]))
			return -1;
		sn->n++;
	}
	return 0;
}

static void snap_free(struct snap *sn)
{
	free(sn->s);
	free(sn->text);
}

static int fetch(const char *path, struct snap *sn)
{
	char *text = query(path);

	if (!text)
		return -1;
	if (parse(text, sn)) {
		fprintf(stderr, "%s: %s: unreadable reply\n", prog, path);
		snap_free(sn);
		return -1;
	}
	return 0;
}

static const char *label(const struct sample *s, const char *k)
{
	for (int i = 0; i < s->n_labels; i++)
		if (!strcmp(s->key[i], k))
			return s->val[i];
	return NULL;
}

/* Does @s have label @k = @v (true when @k is NULL)? */
static bool has(const struct sample *s, const char *k, const char *v)
{
	const char *l = k ? label(s, k) : NULL;

	return !k || (l && !strcmp(l, v));
}

/* The value of @name whose labels @k1 and @k2 are @v1 and @v2 (a NULL
 * key matches any sample); NAN when there is none. */
static double get2(const struct snap *sn, const char *name, const char *k1,
		   const char *v1, const char *k2, const char *v2)
{
	for (size_t i = 0; i < sn->n; i++)
		if (!strcmp(sn->s[i].name, name) &&
		    has(&sn->s[i], k1, v1) && has(&sn->s[i], k2, v2))
			return sn->s[i].value;
	return NAN;
}

static double get(const struct snap *sn, const char *name, const char *k,
		  const char *v)
{
	return get2(sn, name, k, v, NULL, NULL);
}

/* Sum of @name over the samples whose label @k is @v (all when NULL). */
static double sum(const struct snap *sn, const char *name, const char *k,
		  const char *v)
{
	double t = 0;

	for (size_t i = 0; i < sn->n; i++)
		if (!strcmp(sn->s[i].name, name) && has(&sn->s[i], k, v))
			t += sn->s[i].value;
	return t;
}

/* ---- the jobs --------------------------------------------------------- */

/* --job: only this job's numbers (NULL: every job's) */
static const char *only_job;

/*
 * The daemon's jobs, in its order: the "job" label of tally_job_clients,
 * which the daemon writes once for every job it serves (ctrl/collect.c).
 * With --job, that one job alone (none when the daemon has no such job).
 */
struct job_list {
	const char **id;
	size_t n;
	int width;		/* of the widest id, for the columns */
};

static int jobs(const struct snap *sn, struct job_list *jl)
{
	jl->n = 0;
	jl->width = 3;		/* "JOB" */
	jl->id = malloc((sn->n ? sn->n : 1) * sizeof(*jl->id));
	if (!jl->id) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	for (size_t i = 0; i < sn->n; i++) {
		const char *j = label(&sn->s[i], "job");

		if (strcmp(sn->s[i].name, "tally_job_clients") || !j ||
		    (only_job && strcmp(j, only_job)))
			continue;
		jl->id[jl->n++] = j;
		if ((int)strlen(j) > jl->width)
			jl->width = (int)strlen(j);
	}
	return 0;
}

struct job_row {
	const char *job, *health;
	double clients, local_size, hosts, rank, done, failed, bytes;
	double epoch;		/* NAN: a job on this host alone */
	bool broken, joined;
};

static struct job_row job_row(const struct snap *sn, const char *job)
{
	double joined = get(sn, "tally_cluster_joined", "job", job);
	struct job_row r = {
		.job = job,
		.clients = get(sn, "tally_job_clients", "job", job),
		.local_size = get(sn, "tally_local_size", "job", job),
		.hosts = get(sn, "tally_hosts", "job", job),
		.rank = get(sn, "tally_host_rank", "job", job),
		.bytes = get(sn, "tally_reduced_bytes_total", "job", job),
		.done = get2(sn, "tally_operations_total", "job", job,
			     "result", "done"),
		.failed = get2(sn, "tally_operations_total", "job", job,
			       "result", "failed"),
		.epoch = get(sn, "tally_cluster_epoch", "job", job),
		.broken = get(sn, "tally_job_broken", "job", job) > 0,
	};

	/* a job on one host is joined from the start (job_joined()) */
	r.joined = isnan(joined) ? !(r.hosts > 1) : joined > 0;
	if (r.broken)
		r.health = "job_aborted";
	else if (!isnan(joined) && joined == 0)
		r.health = "joining";
	else
		r.health = "ok";
	return r;
}

/* ---- output ----------------------------------------------------------- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			printf("\\n");
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_num(double v)
{
	if (isnan(v) || isinf(v))
		printf("null");
	else if (v == floor(v) && fabs(v) < 1e15)
		printf("%.0f", v);
	else
		printf("%.17g", v);
}

/* A number for the text output: "-" when the daemon did not send it. */
static const char *num(char *buf, size_t len, double v)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.0f", v);
	return buf;
}

static void json_job(const struct job_row *r)
{
	printf("{\"job\":");
	json_str(r->job);
	printf(",\"health\":");
	json_str(r->health);
	printf(",\"clients\":");
	json_num(r->clients);
	printf(",\"local_size\":");
	json_num(r->local_size);
	printf(",\"hosts\":");
	json_num(r->hosts);
	printf(",\"host_rank\":");
	json_num(r->rank);
	printf(",\"broken\":%s,\"joined\":%s,\"epoch\":",
	       r->broken ? "true" : "false", r->joined ? "true" : "false");
	json_num(r->epoch);
	printf(",\"operations_done\":");
	json_num(r->done);
	printf(",\"operations_failed\":");
	json_num(r->failed);
	printf(",\"reduced_bytes\":");
	json_num(r->bytes);
	printf("}");
}

static void json_jobs(const struct snap *sn, const struct job_list *jl)
{
	printf("[");
	for (size_t i = 0; i < jl->n; i++) {
		struct job_row r = job_row(sn, jl->id[i]);

		printf(i ? "," : "");
		json_job(&r);
	}
	printf("]");
}

static const char *info(const struct snap *sn, const char *k)
{
	for (size_t i = 0; i < sn->n; i++)
		if (!strcmp(sn->s[i].name, "tally_info"))
			return label(&sn->s[i], k);
	return NULL;
}

static void cmd_jobs(const struct snap *sn, const struct job_list *jl,
		     bool json)
{
	int w = jl->width;

	if (json) {
		json_jobs(sn, jl);
		printf("\n");
		return;
	}
	printf("%-*s %-12s %7s %5s %9s %6s %12s %10s %14s\n", w, "JOB",
	       "HEALTH", "CLIENTS", "HOSTS", "HOST_RANK", "EPOCH", "OPS_DONE",
	       "OPS_FAILED", "REDUCED_BYTES");
	for (size_t i = 0; i < jl->n; i++) {
		struct job_row r = job_row(sn, jl->id[i]);
		char ep[32];

		printf("%-*s %-12s %3.0f/%-3.0f %5.0f %9.0f %6s %12.0f %10.0f "
		       "%14.0f\n", w, r.job, r.health, r.clients, r.local_size,
		       r.hosts, r.rank, num(ep, sizeof(ep), r.epoch), r.done,
		       r.failed, r.bytes);
	}
}

/* The daemon's health: ok, or the first job's that is not ok. */
static const char *daemon_health(const struct snap *sn,
				 const struct job_list *jl)
{
	for (size_t i = 0; i < jl->n; i++) {
		struct job_row r = job_row(sn, jl->id[i]);

		if (strcmp(r.health, "ok"))
			return r.health;
	}
	return "ok";
}

/* The daemon-wide part of status (and of top's header). */
static void status_daemon(const struct snap *sn, const struct job_list *jl)
{
	const char *v = info(sn, "version"), *m = info(sn, "mode");

	printf("tallyd %s (%s), up %.0f s: %s\n", v ? v : "?", m ? m : "?",
	       get(sn, "tally_uptime_seconds", NULL, NULL),
	       daemon_health(sn, jl));
	printf("jobs %.0f (started %.0f, ended %.0f), clients %.0f, "
	       "connections refused %.0f, limit refusals %.0f\n",
	       get(sn, "tally_jobs", NULL, NULL),
	       get(sn, "tally_jobs_started_total", NULL, NULL),
	       get(sn, "tally_jobs_ended_total", NULL, NULL),
	       get(sn, "tally_clients", NULL, NULL),
	       get(sn, "tally_connections_refused_total", NULL, NULL),
	       get(sn, "tally_limit_refusals_total", NULL, NULL));
}

static void cmd_status(const struct snap *sn, const struct job_list *jl,
		       bool json)
{
	if (json) {
		const char *v = info(sn, "version"), *m = info(sn, "mode");

		printf("{\"health\":");
		json_str(daemon_health(sn, jl));
		printf(",\"version\":");
		json_str(v ? v : "");
		printf(",\"mode\":");
		json_str(m ? m : "");
		printf(",\"uptime_seconds\":");
		json_num(get(sn, "tally_uptime_seconds", NULL, NULL));
		printf(",\"clients\":");
		json_num(get(sn, "tally_clients", NULL, NULL));
		printf(",\"jobs_started\":");
		json_num(get(sn, "tally_jobs_started_total", NULL, NULL));
		printf(",\"jobs_ended\":");
		json_num(get(sn, "tally_jobs_ended_total", NULL, NULL));
		printf(",\"connections_refused\":");
		json_num(get(sn, "tally_connections_refused_total", NULL,
			     NULL));
		printf(",\"limit_refusals\":");
		json_num(get(sn, "tally_limit_refusals_total", NULL, NULL));
		printf(",\"jobs\":");
		json_jobs(sn, jl);
		printf("}\n");
		return;
	}
	status_daemon(sn, jl);
	for (size_t i = 0; i < jl->n; i++) {
		struct job_row r = job_row(sn, jl->id[i]);
		char ep[32];

		printf("\njob %s: %s\n", r.job, r.health);
		printf("  hosts %.0f, host rank %.0f, joined %s, epoch %s\n",
		       r.hosts, r.rank, r.joined ? "yes" : "no",
		       num(ep, sizeof(ep), r.epoch));
		printf("  clients %.0f of %.0f, broken %s\n", r.clients,
		       r.local_size, r.broken ? "yes" : "no");
		printf("  operations %.0f done, %.0f failed\n", r.done,
		       r.failed);
	}
}

static void cmd_peers(const struct snap *sn, const struct job_list *jl,
		      bool json)
{
	bool first = true;

	if (json)
		printf("[");
	else
		printf("%-*s %-5s %-22s %-11s %s\n", jl->width, "JOB", "PEER",
		       "ADDRESS", "ROLE", "SELF");
	for (size_t j = 0; j < jl->n; j++) {
		for (size_t i = 0; i < sn->n; i++) {
			const struct sample *s = &sn->s[i];
			const char *peer = label(s, "peer");
			const char *addr = label(s, "address");
			const char *role = label(s, "role");
			const char *self = label(s, "self");

			if (strcmp(s->name, "tally_peer_info") ||
			    !has(s, "job", jl->id[j]) || !peer || !addr ||
			    !role || !self)
				continue;
			if (!json) {
				printf("%-*s %-5s %-22s %-11s %s\n", jl->width,
				       jl->id[j], peer, addr, role,
				       !strcmp(self, "1") ? "yes" : "");
				continue;
			}
			printf(first ? "{\"job\":" : ",{\"job\":");
			first = false;
			json_str(jl->id[j]);
			printf(",\"peer\":%s,\"address\":", peer);
			json_str(addr);
			printf(",\"role\":");
			json_str(role);
			printf(",\"self\":%s}",
			       !strcmp(self, "1") ? "true" : "false");
		}
	}
	if (json)
		printf("]\n");
}

static void counter(const struct sample *s, bool json, bool *first)
{
	if (!json) {
		printf("%s", s->name);
		for (int l = 0; l < s->n_labels; l++)
			printf("%s%s=%s", l ? "," : "{", s->key[l], s->val[l]);
		printf("%s ", s->n_labels ? "}" : "");
		json_num(s->value);
		printf("\n");
		return;
	}
	printf(*first ? "{\"name\":" : ",{\"name\":");
	*first = false;
	json_str(s->name);
	printf(",\"labels\":{");
	for (int l = 0; l < s->n_labels; l++) {
		printf(l ? "," : "");
		json_str(s->key[l]);
		printf(":");
		json_str(s->val[l]);
	}
	printf("},\"value\":");
	json_num(s->value);
	printf("}");
}

/* Every sample: the daemon's (no job label; left out with --job), then
 * each job's in turn. */
static void cmd_counters(const struct snap *sn, const struct job_list *jl,
			 bool json)
{
	bool first = true, any = false;

	if (json)
		printf("[");
	for (size_t i = 0; i < sn->n && !only_job; i++) {
		if (!label(&sn->s[i], "job")) {
			counter(&sn->s[i], json, &first);
			any = true;
		}
	}
	for (size_t j = 0; j < jl->n; j++) {
		if (!json)
			printf("%s# job %s\n", any ? "\n" : "", jl->id[j]);
		any = true;
		for (size_t i = 0; i < sn->n; i++)
			if (has(&sn->s[i], "job", jl->id[j]))
				counter(&sn->s[i], json, &first);
	}
	if (json)
		printf("]\n");
}

/* ---- top -------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* @name of @job, in @prev when there is one, else in @sn (a rate of 0). */
static double before(const struct snap *sn, const struct snap *prev,
		     const char *name, const char *job)
{
	return sum(prev ? prev : sn, name, "job", job);
}

static void top_frame(const struct snap *sn, const struct snap *prev,
		      const struct job_list *jl, double dt)
{
	static const char *const tx = "tally_engine_sent_bytes_total";
	static const char *const rx = "tally_engine_received_bytes_total";
	static const char *const re = "tally_retransmissions_total";
	static const char *const lat_count =
		"tally_allreduce_latency_seconds_count";
	static const char *const lat_sum =
		"tally_allreduce_latency_seconds_sum";
	int w = jl->width;

	printf("\033[H\033[2J");
	status_daemon(sn, jl);
	printf("\n%-*s %-12s %7s %10s %12s %14s %14s %10s %8s\n", w, "JOB",
	       "HEALTH", "CLIENTS", "OPS/S", "REDUCE MB/S", "NET TX MB/S",
	       "NET RX MB/S", "RETX/S", "QUEUE");
	for (size_t i = 0; i < jl->n; i++) {
		const char *j = jl->id[i];
		struct job_row r = job_row(sn, j), p = r;

		/* a job new since the last frame counts from 0 */
		if (prev)
			p = job_row(prev, j);
		if (isnan(p.done))
			p.done = p.failed = p.bytes = 0;
		printf("%-*s %-12s %3.0f/%-3.0f %10.0f %12.1f %14.1f %14.1f "
		       "%10.0f %8.0f\n", w, j, r.health, r.clients,
		       r.local_size,
		       (r.done + r.failed - p.done - p.failed) / dt,
		       (r.bytes - p.bytes) / dt / 1e6,
		       (sum(sn, tx, "job", j) - before(sn, prev, tx, j)) / dt /
		       1e6,
		       (sum(sn, rx, "job", j) - before(sn, prev, rx, j)) / dt /
		       1e6,
		       (sum(sn, re, "job", j) - before(sn, prev, re, j)) / dt,
		       sum(sn, "tally_sched_queue_depth", "job", j));
	}
	printf("\nall-reduce latency (mean over the last interval):\n");
	for (size_t i = 0; i < jl->n; i++) {
		const char *j = jl->id[i];

		for (size_t k = 0; k < sn->n; k++) {
			const struct sample *s = &sn->s[k];
			const char *sc = label(s, "size_class");
			double c, t, pc = 0, pt = 0;

			if (strcmp(s->name, lat_count) || !has(s, "job", j) ||
			    !sc)
				continue;
			c = s->value;
			t = get2(sn, lat_sum, "job", j, "size_class", sc);
			if (prev) {
				pc = get2(prev, lat_count, "job", j,
					  "size_class", sc);
				pt = get2(prev, lat_sum, "job", j,
					  "size_class", sc);
				if (isnan(pc) || isnan(pt))
					pc = pt = 0;
			}
			if (c > pc)
				printf("  job %-*s %-9s %8.0f ops %10.3f ms\n",
				       w, j, sc, c - pc,
				       (t - pt) / (c - pc) * 1e3);
		}
	}
	printf("\nq or Ctrl-C quits\n");
	fflush(stdout);
}

static int cmd_top(const char *path, long count)
{
	struct termios saved, raw;
	bool tty = isatty(STDIN_FILENO) &&
		   tcgetattr(STDIN_FILENO, &saved) == 0;
	struct snap prev = { 0 }, cur;
	bool have_prev = false;
	uint64_t prev_ms = now_ms();
	int ret = 0;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (tty) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	for (long i = 0; !interrupted && (count <= 0 || i < count); i++) {
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		uint64_t t = now_ms();
		struct job_list jl;
		char c;

		if (fetch(path, &cur)) {
			ret = 1;
			break;
		}
		if (jobs(&cur, &jl)) {
			snap_free(&cur);
			ret = 1;
			break;
		}
		top_frame(&cur, have_prev ? &prev : NULL, &jl,
			  have_prev && t > prev_ms ? (t - prev_ms) / 1e3 : 1);
		free(jl.id);
		if (have_prev)
			snap_free(&prev);
		prev = cur;
		have_prev = true;
		prev_ms = t;
		if (count > 0 && i + 1 == count)
			break;
		if (tty && poll(&pfd, 1, 1000) > 0 &&
		    read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'))
			break;
		if (!tty)
			poll(NULL, 0, 1000);
	}
	if (have_prev)
		snap_free(&prev);
	if (tty)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [--socket PATH] [--job ID] [--json] "
		"status|jobs|peers|counters\n"
		"       %s [--socket PATH] [--job ID] top [-n COUNT]\n"
		"  -s, --socket PATH  tallyd's socket (default $TALLY_SOCKET, "
		"then %s)\n"
		"  -J, --job ID       only this job (default: every job)\n"
		"  -j, --json         machine-readable output\n"
		"  -n, --count N      top: stop after N refreshes\n"
		"  -h, --help\n", prog, prog, TALLY_DEFAULT_SOCKET);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "job", required_argument, NULL, 'J' },
		{ "json", no_argument, NULL, 'j' },
		{ "count", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = getenv("TALLY_SOCKET");
	const char *cmd;
	bool json = false;
	long count = 0;
	struct job_list jl;
	struct snap sn;
	int c;

	if (!path || !*path)
		path = TALLY_DEFAULT_SOCKET;
	while ((c = getopt_long(argc, argv, "s:J:jn:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			path = optarg;
			break;
		case 'J':
			only_job = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'n':
			count = strtol(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind];
	if (!strcmp(cmd, "top"))
		return cmd_top(path, count);
	if (strcmp(cmd, "status") && strcmp(cmd, "jobs") &&
	    strcmp(cmd, "peers") && strcmp(cmd, "counters")) {
		fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
		usage(stderr);
		return 2;
	}
	if (fetch(path, &sn))
		return 1;
	if (jobs(&sn, &jl)) {
		snap_free(&sn);
		return 1;
	}
	if (only_job && !jl.n) {
		fprintf(stderr, "%s: %s: no job '%s' on this daemon\n", prog,
			path, only_job);
		free(jl.id);
		snap_free(&sn);
		return 1;
	}
	if (!strcmp(cmd, "status"))
		cmd_status(&sn, &jl, json);
	else if (!strcmp(cmd, "jobs"))
		cmd_jobs(&sn, &jl, json);
	else if (!strcmp(cmd, "peers"))
		cmd_peers(&sn, &jl, json);
	else
		cmd_counters(&sn, &jl, json);
	free(jl.id);
	snap_free(&sn);
	return 0;
}
