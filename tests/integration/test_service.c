// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_service.c - tallyd as a host service: jobs come from their
 * clients, several at once and one after another, on the same daemons
 * ("emulated hosts": one service daemon per host, on loopback).
 *
 * Every client all-reduces small integers (exact in every dtype and in
 * the engine's fixed point) and checks each result against the sum over
 * the job's processes, computed here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "cluster_clients.h"
#include "harness.h"
#include "shm/fdpass.h"
#include "shm/proto.h"

#define MAX_HOSTS 4
#define SECRET "service-test-secret-0123456789"

/* ---- the daemons --------------------------------------------------- */

struct hosts {
	int n;
	struct test_daemon d[MAX_HOSTS];
};

/* The daemons of the running test, stopped by its teardown if a failed
 * assertion left the test before hosts_down().  Each test's struct hosts
 * is static: the teardown runs after the failed test's frame is gone (it
 * read a dead frame's bytes, ran a shell on them and crashed). */
static struct hosts *hosts_running;

/* The service's configuration, as a host would have it in
 * /etc/tally/tally.conf: no job in it. */
static const char service_conf[] =
	"[service]\n"
	"enabled = true\n"
	"job_linger_ms = 200\n"
	"[dataplane]\n"
	"address = 127.0.0.1:1\n";

/* Start @n service daemons, each with the service's configuration file
 * and its own socket; @extra: more arguments for each (NULL-ended, may
 * be NULL). */
static void hosts_up(struct hosts *h, int n, const char *const *extra)
{
	static char conf[64];
	FILE *f;

	snprintf(conf, sizeof(conf), "/tmp/tally-service-%d.conf", getpid());
	f = fopen(conf, "w");
	assert_non_null(f);
	fputs(service_conf, f);
	fclose(f);
	memset(h, 0, sizeof(*h));
	h->n = n;
	for (int i = 0; i < n; i++) {
		const char *argv[32] = { "--config", conf, "--log-level",
					 "info" };
		int argc = 4;

		for (int k = 0; extra && extra[k] && argc < 31; k++)
			argv[argc++] = extra[k];
		argv[argc] = NULL;
		assert_int_equal(daemon_start(&h->d[i], 1, argv), 0);
	}
	unlink(conf);		/* read at start; a reload would need it */
	hosts_running = h;
}

static void hosts_down(struct hosts *h)
{
	int bad = 0;

	hosts_running = NULL;
	for (int i = 0; i < h->n; i++)
		bad += daemon_stop(&h->d[i]) != 0;
	assert_int_equal(bad, 0);
}

static int stop_left_hosts(void **state)
{
	(void)state;
	if (hosts_running) {
		for (int i = 0; i < hosts_running->n; i++)
			if (hosts_running->d[i].pid > 0)
				daemon_stop(&hosts_running->d[i]);
		hosts_running = NULL;
	}
	return 0;
}

/* ---- the clients --------------------------------------------------- */

struct proc {
	const char *sock;
	char job[48];
	int coord_port;			/* 0: the daemon derives it */
	int hosts, host_rank, local_size, local_rank;
	bool env;			/* name the job the torchrun way */
	bool no_secret;			/* the daemons derive the job's keys */
	enum tally_dtype dtype;
	size_t count;
	int rounds;
	int die_grank, die_after;	/* die_after > 0: the process of
					 * global rank die_grank is killed
					 * after so many rounds */
	bool may_lose_peer;		/* a member of its job dies */
};

static int value(int grank, size_t i, int round)
{
	return (int)((i * 31 + (size_t)grank * 7 + (size_t)round) % 23) - 11;
}

/* The torchrun variables of this process, as torchrun sets them. */
static void set_torchrun_env(const struct proc *p)
{
	char v[32];

	setenv("MASTER_ADDR", "127.0.0.1", 1);
	snprintf(v, sizeof(v), "%d", p->coord_port - 1);
	setenv("MASTER_PORT", v, 1);
	snprintf(v, sizeof(v), "%d", p->host_rank * p->local_size +
		 p->local_rank);
	setenv("RANK", v, 1);
	snprintf(v, sizeof(v), "%d", p->hosts * p->local_size);
	setenv("WORLD_SIZE", v, 1);
	snprintf(v, sizeof(v), "%d", p->local_rank);
	setenv("LOCAL_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", p->local_size);
	setenv("LOCAL_WORLD_SIZE", v, 1);
	snprintf(v, sizeof(v), "%d", p->host_rank);
	setenv("GROUP_RANK", v, 1);
	setenv("TALLY_JOB_SECRET", SECRET, 1);
}

static int connect_proc(const struct proc *p, struct tally_client **c)
{
	struct tally_connect_opts o = TALLY_CONNECT_OPTS_INIT;
	char coord[32];

	if (p->env) {
		set_torchrun_env(p);
		return tally_connect(p->sock, c);
	}
	snprintf(coord, sizeof(coord), "127.0.0.1:%d", p->coord_port);
	o.socket = p->sock;
	o.flags = TALLY_CONNECT_NO_ENV;
	o.job = (struct tally_job){ .id = p->job,
		.secret = p->no_secret ? "" : SECRET,
		.coordinator = p->coord_port ? coord : "127.0.0.1",
		.hosts = p->hosts, .host_rank = p->host_rank,
		.local_size = p->local_size, .local_rank = p->local_rank };
	return tally_connect_opts(&o, c);
}

static int proc_main(void *arg)
{
	const struct proc *p = arg;
	int grank = p->host_rank * p->local_size + p->local_rank;
	int procs = p->hosts * p->local_size;
	size_t esz = tally_dtype_size(p->dtype);
	struct tally_client *c;
	unsigned char want[4];
	uint64_t req;
	void *buf;
	int ret;

	ret = connect_proc(p, &c);
	if (ret) {
		fprintf(stderr, "job %s proc %d: connect: %s\n", p->job, grank,
			tally_strerror(ret));
		return 2;
	}
	CHECK(tally_rank(c) == p->local_rank, 3);
	CHECK(tally_size(c) == p->local_size, 3);
	buf = tally_alloc(c, p->count * esz);
	CHECK(buf, 4);
	for (int round = 0; round < p->rounds; round++) {
		struct tally_allreduce_args a = {
			.key = 7, .iteration = (uint64_t)round,
			.sendbuf = buf, .recvbuf = buf, .count = p->count,
			.dtype = p->dtype, .op = TALLY_SUM,
		};

		if (p->die_after && grank == p->die_grank &&
		    round == p->die_after)
			raise(SIGKILL);		/* mid-job, buffers mapped */
		for (size_t i = 0; i < p->count; i++)
			store_value(buf, p->dtype, i, value(grank, i, round));
		ret = tally_allreduce(c, &a, &req);
		if (!ret)
			ret = tally_wait(c, req, 60000);
		if (ret == -TALLY_EPEERLOST && p->may_lose_peer)
			break;
		if (ret) {
			fprintf(stderr, "job %s proc %d round %d: %s\n", p->job,
				grank, round, tally_strerror(ret));
			return 5;
		}
		for (size_t i = 0; i < p->count; i++) {
			double sum = 0;

			for (int q = 0; q < procs; q++)
				sum += value(q, i, round);
			store_value(want, p->dtype, 0, sum);
			if (memcmp((char *)buf + i * esz, want, esz)) {
				fprintf(stderr, "job %s proc %d round %d: "
					"element %zu wrong\n", p->job, grank,
					round, i);
				return 6;
			}
		}
	}
	tally_disconnect(c);
	return 0;
}

/* Fork every process of a job: @p is the template; @host_daemon[h] the
 * daemon of the job's host h.  Returns how many were started in @pids. */
static int job_start(const struct hosts *h, const int *host_daemon,
		     struct proc *p, struct proc *procs, pid_t *pids)
{
	int n = 0;

	for (int hr = 0; hr < p->hosts; hr++)
		for (int lr = 0; lr < p->local_size; lr++) {
			procs[n] = *p;
			procs[n].sock = h->d[host_daemon[hr]].sock;
			procs[n].host_rank = hr;
			procs[n].local_rank = lr;
			pids[n] = child_start(proc_main, &procs[n]);
			n++;
		}
	return n;
}

/* Coordinator ports of the tests' jobs: below the kernel's ephemeral
 * range (32768-60999), where the jobs' own UDP ports and connections
 * come from, and apart for concurrent runs. */
static int unique_port(int k)
{
	return 5000 + (getpid() % 300) * 16 + k;
}


/* ---- the daemon's numbers (its control query, as tally-ctl asks) ------ */

/* The metrics text of the daemon at @sock, malloc'd, or NULL. */
static char *ctl_metrics(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct tally_msg m;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), nfds = 0;
	int fds[TALLY_MSG_MAX_FDS];
	char *text = NULL;
	size_t got = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)))
		goto out;
	msg_init(&m, TALLY_MSG_CTL_QUERY);
	m.arg[0] = TALLY_CTL_VERSION;
	if (msg_send(s, &m, NULL, 0) || msg_recv(s, &m, fds, &nfds) <= 0 ||
	    m.status || m.arg[0] > TALLY_CTL_MAX_REPLY)
		goto out;
	text = calloc(1, m.arg[0] + 1);
	while (text && got < m.arg[0]) {
		ssize_t n = read(s, text + got, m.arg[0] - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
out:
	if (s >= 0)
		close(s);
	return text;
}

/* The value of the sample that starts with @name (labels included). */
static double metric(const char *text, const char *name)
{
	size_t len = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l += !!l)
		if (!strncmp(l, name, len) && l[len] == ' ')
			return strtod(l + len + 1, NULL);
	return -1;
}

static double daemon_metric(const struct test_daemon *d, const char *name)
{
	char *t = ctl_metrics(d->sock);
	double v = t ? metric(t, name) : -2;

	free(t);
	return v;
}

/* ---- tests ----------------------------------------------------------- */

/* Two jobs at once on the same 4 hosts; a process of the big one dies:
 * the small one's results stay exact and it finishes. */
static void test_two_jobs_one_dies(void **state)
{
	static const int all4[] = { 0, 1, 2, 3 }, two[] = { 2, 3 };
	struct proc a = { .job = "big", .coord_port = unique_port(0),
			  .hosts = 4, .local_size = 2,
			  .dtype = TALLY_FLOAT32, .count = 50000,
			  .rounds = 40, .may_lose_peer = true,
			  /* host 2's second process, after 3 rounds */
			  .die_grank = 5, .die_after = 3 };
	struct proc b = { .job = "small", .coord_port = unique_port(1),
			  .hosts = 2, .local_size = 1,
			  .dtype = TALLY_INT32, .count = 70001, .rounds = 30 };
	struct proc pa[8], pb[2];
	pid_t ia[8], ib[2];
	static struct hosts h;
	int na, nb;

	(void)state;
	hosts_up(&h, 4, NULL);
	na = job_start(&h, all4, &a, pa, ia);
	nb = job_start(&h, two, &b, pb, ib);
	assert_int_equal(child_wait(ia[5], 60000), -1);	/* killed */
	for (int i = 0; i < nb; i++)
		assert_int_equal(child_wait(ib[i], 120000), 0);
	for (int i = 0; i < na; i++)
		if (i != 5)
			assert_int_equal(child_wait(ia[i], 120000), 0);
	/* the small job ran on, exact, and ended without an abort */
	assert_int_equal(daemon_log_count(&h.d[2], "job small aborted"), 0);
	assert_int_equal(daemon_log_count(&h.d[3], "job small aborted"), 0);
	hosts_down(&h);
}

/* A job named by torchrun's variables only, on 2 hosts. */
static void test_job_from_torchrun_env(void **state)
{
	static const int hosts[] = { 0, 1 };
	struct proc p = { .job = "env", .coord_port = unique_port(2),
			  .hosts = 2, .local_size = 2, .env = true,
			  .dtype = TALLY_BFLOAT16, .count = 4099,
			  .rounds = 5 };
	struct proc procs[4];
	pid_t pids[4];
	static struct hosts h;
	char want[64];
	int n;

	(void)state;
	hosts_up(&h, 2, NULL);
	n = job_start(&h, hosts, &p, procs, pids);
	for (int i = 0; i < n; i++)
		assert_int_equal(child_wait(pids[i], 120000), 0);
	snprintf(want, sizeof(want), "job torchrun:127.0.0.1:%d: host 0 of 2",
		 unique_port(2) - 1);
	assert_int_equal(daemon_log_count(&h.d[0], want), 1);
	hosts_down(&h);
}


static bool sanitized(void)
{
	const char *s = getenv("TALLY_SANITIZE");

	return s && *s && strcmp(s, "none");
}

/* A job on 2 hosts whose clients give no secret and a short id: the
 * daemons derive its keys from the id, say so, and it runs. */
static void test_job_without_secret(void **state)
{
	static const int hosts[] = { 0, 1 };
	struct proc p = { .job = "ns", .coord_port = unique_port(4),
			  .hosts = 2, .local_size = 1, .no_secret = true,
			  .dtype = TALLY_FLOAT32, .count = 100, .rounds = 3 };
	struct proc procs[2];
	pid_t pids[2];
	static struct hosts h;
	int n;

	(void)state;
	hosts_up(&h, 2, NULL);
	n = job_start(&h, hosts, &p, procs, pids);
	for (int i = 0; i < n; i++)
		assert_int_equal(child_wait(pids[i], 60000), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(daemon_log_count(&h.d[i],
			"job ns has no secret"), 1);
	hosts_down(&h);
}

/* @now is at most 4 MiB over @base, or the test fails, saying by how much */
static void rss_within(double now, double base, int daemon)
{
	if (now < base + 4.0 * 1024 * 1024)
		return;
	fail_msg("daemon %d: resident %.1f MiB after the jobs, %.1f MiB after "
		 "the first 10 (4 MiB allowed)", daemon, now / 1048576.0,
		 base / 1048576.0);
}

/* 100 jobs, one after another, through the same two daemons: every one
 * exact, and nothing left behind: fds, memory, jobs (their slots and
 * groups go with them). */
static void test_hundred_jobs_no_leak(void **state)
{
	static const int hosts2[] = { 0, 1 };
	double fds[2], rss[2];
	static struct hosts h;

	(void)state;
	hosts_up(&h, 2, NULL);
	for (int k = 0; k < 100; k++) {
		/* a port of its own: the last job's coordinator may linger
		 * on its port a moment (service.job_linger_ms) */
		struct proc p = { .coord_port = 10000 + (getpid() % 150) * 128
						+ k, .hosts = 2,
				  .local_size = 1, .dtype = TALLY_FLOAT32,
				  .count = 1000 + (size_t)k, .rounds = 2 };
		struct proc procs[2];
		pid_t pids[2];
		int n;

		snprintf(p.job, sizeof(p.job), "seq-%d", k);
		n = job_start(&h, hosts2, &p, procs, pids);
		for (int i = 0; i < n; i++)
			assert_int_equal(child_wait(pids[i], 60000), 0);
		if (k != 9)
			continue;
		/* the baseline, once the first jobs warmed everything up */
		for (int i = 0; i < 2; i++) {
			uint64_t end = test_now_ms() + 5000;

			while (daemon_metric(&h.d[i], "tally_jobs") != 0 &&
			       test_now_ms() < end)
				usleep(20000);
			fds[i] = daemon_metric(&h.d[i], "process_open_fds");
			rss[i] = daemon_metric(&h.d[i],
					       "process_resident_memory_bytes");
			assert_true(fds[i] > 0 && rss[i] > 0);
		}
	}
	for (int i = 0; i < 2; i++) {
		uint64_t end = test_now_ms() + 5000;

		while (daemon_metric(&h.d[i], "tally_jobs") != 0 &&
		       test_now_ms() < end)
			usleep(20000);
		assert_true(daemon_metric(&h.d[i], "tally_jobs") == 0);
		assert_true(daemon_metric(&h.d[i], "tally_clients") == 0);
		assert_true(daemon_metric(&h.d[i],
					  "tally_jobs_started_total") == 100);
		assert_true(daemon_metric(&h.d[i],
					  "tally_jobs_ended_total") == 100);
		assert_true(daemon_metric(&h.d[i],
			"tally_ended_jobs_operations_total{result=\"done\"}")
			    == 200);
		assert_true(daemon_metric(&h.d[i], "process_open_fds") ==
			    fds[i]);
		/* 90 jobs more may not cost a job's buffers (MBs); under a
		 * sanitizer its quarantine keeps freed memory resident, and
		 * LeakSanitizer checks the daemon's exit instead */
		if (sanitized())
			fprintf(stderr, "daemon %d: resident size not bounded "
				"under -fsanitize=%s\n", i,
				getenv("TALLY_SANITIZE"));
		else
			rss_within(daemon_metric(&h.d[i],
				"process_resident_memory_bytes"), rss[i], i);
	}
	hosts_down(&h);
}

/* Connect to @sock as the client of a single-host job. */
static int connect_job(const char *sock, const char *id, int hosts,
		       int local_size, int local_rank,
		       struct tally_client **c)
{
	struct tally_connect_opts o = TALLY_CONNECT_OPTS_INIT;

	o.socket = sock;
	o.flags = TALLY_CONNECT_NO_ENV;
	o.job = (struct tally_job){ .id = id, .secret = SECRET,
		.coordinator = "127.0.0.1", .hosts = hosts, .host_rank = 0,
		.local_size = local_size, .local_rank = local_rank };
	return tally_connect_opts(&o, c);
}

/* Every limit of [service] hit once, with its error and its log line;
 * and the refusals that are not limits. */
static void test_limits(void **state)
{
	static const char *const lim[] = {
		"--set", "service.max_jobs=1",
		"--set", "service.max_clients_per_job=2",
		"--set", "service.max_segments=2",
		"--set", "service.max_client_bytes=1048576",
		"--set", "service.max_outstanding=1",
		/* the fast path takes nothing of the daemon's, so its
		 * operations are not counted against max_outstanding */
		"--set", "daemon.fast_path_bytes=0", NULL };
	struct tally_connect_opts none = TALLY_CONNECT_OPTS_INIT;
	struct tally_client *c, *other;
	uint64_t r1, r2;
	void *a, *b;
	static struct hosts h;
	float *buf;

	(void)state;
	hosts_up(&h, 1, lim);
	assert_int_equal(connect_job(h.d[0].sock, "l1", 1, 2, 0, &c), 0);
	/* bytes per client */
	assert_null(tally_alloc(c, 2 << 20));
	assert_int_equal(tally_last_error(c), -TALLY_ELIMIT);
	/* segments per client */
	a = tally_alloc(c, 4096);
	b = tally_alloc(c, 4096);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(tally_alloc(c, 4096));
	assert_int_equal(tally_last_error(c), -TALLY_ELIMIT);
	tally_free(c, b);		/* freed: room for one again */
	b = tally_alloc(c, 4096);
	assert_non_null(b);
	/* outstanding operations: the first waits for local rank 1 */
	buf = a;
	buf[0] = 1;
	assert_int_equal(tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 1, .sendbuf = buf, .recvbuf = buf, .count = 1,
		.dtype = TALLY_FLOAT32, .op = TALLY_SUM }, &r1), 0);
	assert_int_equal(tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 2, .sendbuf = buf, .recvbuf = buf, .count = 1,
		.dtype = TALLY_FLOAT32, .op = TALLY_SUM }, &r2), 0);
	assert_int_equal(tally_wait(c, r2, 5000), -TALLY_ELIMIT);
	assert_int_equal(tally_wait(c, r1, 100), -TALLY_ETIMEDOUT);
	/* jobs per daemon */
	assert_int_equal(connect_job(h.d[0].sock, "l2", 1, 1, 0, &other),
			 -TALLY_ELIMIT);
	/* clients per job: a job bigger than the limit */
	assert_int_equal(connect_job(h.d[0].sock, "l3", 1, 3, 0, &other),
			 -TALLY_ELIMIT);
	/* not limits: a description at odds with the running job's, a
	 * rank taken, and no job at all */
	assert_int_equal(connect_job(h.d[0].sock, "l1", 1, 1, 0, &other),
			 -TALLY_EDENIED);
	assert_int_equal(connect_job(h.d[0].sock, "l1", 1, 2, 0, &other),
			 -TALLY_EDENIED);
	none.socket = h.d[0].sock;
	none.flags = TALLY_CONNECT_NO_ENV;
	assert_int_equal(tally_connect_opts(&none, &other), -TALLY_EDENIED);
	/* the job itself is untouched: its second member completes r1 */
	assert_int_equal(connect_job(h.d[0].sock, "l1", 1, 2, 1, &other), 0);
	{
		float *o = tally_alloc(other, 4096);
		uint64_t r;

		assert_non_null(o);
		o[0] = 2;
		assert_int_equal(tally_allreduce(other,
			&(struct tally_allreduce_args){ .key = 1,
			.sendbuf = o, .recvbuf = o, .count = 1,
			.dtype = TALLY_FLOAT32, .op = TALLY_SUM }, &r), 0);
		assert_int_equal(tally_wait(other, r, 5000), 0);
		assert_int_equal(tally_wait(c, r1, 5000), 0);
		assert_true(o[0] == 3.0f && buf[0] == 3.0f);
	}
	tally_disconnect(other);
	tally_disconnect(c);
	assert_int_equal(daemon_log_count(&h.d[0], "service.max_client_bytes"),
			 1);
	assert_int_equal(daemon_log_count(&h.d[0], "service.max_segments"), 1);
	assert_int_equal(daemon_log_count(&h.d[0], "service.max_outstanding"),
			 1);
	assert_int_equal(daemon_log_count(&h.d[0], "service.max_jobs"), 1);
	assert_int_equal(daemon_log_count(&h.d[0],
					  "service.max_clients_per_job"), 1);
	assert_true(daemon_metric(&h.d[0], "tally_limit_refusals_total") == 5);
	hosts_down(&h);
}

int main(void)
{
#define T(t) cmocka_unit_test_teardown(t, stop_left_hosts)
	const struct CMUnitTest tests[] = {
		T(test_two_jobs_one_dies),
		T(test_job_from_torchrun_env),
		T(test_job_without_secret),
		T(test_hundred_jobs_no_leak),
		T(test_limits),
	};

	/* TALLY_TEST_FILTER=pattern runs only the matching tests */
	if (getenv("TALLY_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TALLY_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
