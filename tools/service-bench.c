// SPDX-License-Identifier: BSD-3-Clause
/*
 * service-bench - tallyd as a host service: how long a new job takes to
 * start, and how two jobs share one daemon.  Only the public API
 * (<tally/tally.h>) is used on the client side; the daemons are plain
 * tallyd processes started here with `--set service.enabled=true`.
 *
 * start: 4 service daemons on 127.0.0.1..4 (one "host" each, its own
 *   socket), started once and kept running.  Then --jobs jobs, one after
 *   the other, each with a new id, secret and coordinator port: 4
 *   processes, one per daemon, each tally_connect_opts() to its daemon
 *   as host_rank 0..3 of a 4-host job, then tally_alloc() 4 bytes and
 *   all-reduce (SUM) one float.  The 4 processes are released together;
 *   each stamps CLOCK_MONOTONIC just before tally_connect_opts(), after it
 *   returns, after tally_alloc(), and when tally_wait() of the first
 *   all-reduce returns.  A job's start time is
 *	t1 - t0, t0 = the earliest stamp before tally_connect_opts(),
 *		 t1 = the latest completion of the first all-reduce,
 *   fork and process start-up excluded, nothing subtracted.  The breakdown
 *   splits it at the last tally_connect_opts() return (admission) and the
 *   last tally_alloc() return.  One job first is a warm-up, reported but
 *   not counted.
 *	figure service_job_start_ms <median over the jobs> ms
 *   A second series, for the breakdown only, releases host 0's process
 *   first and the others once its tally_connect_opts() returned: the
 *   difference is what the hosts admitted before host 0 wait for (the
 *   membership's connect retry).  Before each job, untimed, a bare
 *   connect-and-close to each daemon works around a tallyd bug (see
 *   connect_retrying()).
 *
 * share: one service daemon, one host.  Job A (2 processes) all-reduces
 *   --size bytes of float32 (AVG, in place) in a loop, timed in windows
 *   of --seconds: alone, with B, alone, with B, ... alone (--rounds
 *   shared windows), where each B is a new job (another id, 2 more
 *   processes) running the same loop, admitted and warm before A's window
 *   opens and gone before the next.  busbw as NCCL's:
 *	busbw = 2(n-1)/n * bytes / time per all-reduce,  n = 2
 *   (n is the job's processes, the members of its all-reduce; for n = 2
 *   busbw equals algbw).  The time per all-reduce is the slower member's
 *   window divided by the all-reduces in it.  A round's ratio is A's
 *   busbw with B over the mean of A's alone windows just before and after
 *   (the host's other load drifts); the figure is the median of them:
 *	figure service_two_jobs_busbw_ratio <median ratio> ratio
 *   Fair share is 0.5.  B's own busbw over A's window is printed too.
 *
 * A part that fails prints its figure as nan and what it measured; the
 * other part still runs; the exit status is then 1.
 *
 * usage: service-bench --tallyd PATH [--only start|share] [--jobs N]
 *                      [--rounds R] [--size BYTES] [--seconds S] [--csv FILE] [--keep]
 *                      [--set SECTION.KEY=VALUE]...  (given to every tallyd)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <tally/tally.h>

#include "tool_daemon.h"
#include "bench_stats.h"

#define START_HOSTS 4
#define MAX_JOBS 64
#define SHARE_N 2		/* processes of each job in the share part */
#define WAIT_MS 60000		/* a member's bound on any one step */
#define CONNECT_RETRIES 4
#define MAX_SETS 8

struct opts {
	const char *tallyd;
	bool start, share;
	int jobs;
	int rounds;
	size_t size;
	double seconds;
	const char *csv;
	bool keep;
	int nset;			/* --set, passed to every tallyd */
	const char *set[MAX_SETS];
};

static const struct opts *opts;

static char tmpdir[64];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *shared_map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * A barrier for processes that gives up: each arrival bumps @count; wait
 * until it reaches @n or @timeout_ms passes (a member that died must not
 * hang the others).  0, or -1 on timeout.
 */
static int arrive_wait(atomic_int *count, int n, int timeout_ms)
{
	double end = now_ms() + timeout_ms;

	atomic_fetch_add(count, 1);
	while (atomic_load(count) < n) {
		if (now_ms() > end)
			return -1;
		usleep(50);
	}
	return 0;
}

static int wait_until_count(atomic_int *count, int n, int timeout_ms)
{
	double end = now_ms() + timeout_ms;

	while (atomic_load(count) < n) {
		if (now_ms() > end)
			return -1;
		usleep(100);
	}
	return 0;
}

/* ---- daemons ---------------------------------------------------------- */

/* A service tallyd named @name; @address "IP:PORT" or NULL (one host). */
static int daemon_start(struct tool_daemon *d, const char *tallyd,
			const char *name, const char *address)
{
	const char *argv[16 + 2 * MAX_SETS];
	int argc = 0;

	snprintf(d->sock, sizeof(d->sock), "%s/%s.sock", tmpdir, name);
	snprintf(d->log, sizeof(d->log), "%s/%s.log", tmpdir, name);
	argv[argc++] = tallyd;
	argv[argc++] = "--socket";
	argv[argc++] = d->sock;
	argv[argc++] = "--set";
	argv[argc++] = "service.enabled=true";
	argv[argc++] = "--log-level";
	argv[argc++] = "info";
	if (address) {
		argv[argc++] = "--address";
		argv[argc++] = address;
		/* four daemons on two cores: one reduction thread each */
		argv[argc++] = "--reduce-threads";
		argv[argc++] = "1";
	}
	for (int i = 0; i < opts->nset; i++) {
		argv[argc++] = "--set";
		argv[argc++] = opts->set[i];
	}
	argv[argc] = NULL;
	return tool_daemon_start(d, argv, "service-bench");
}

/* Stop it; nonzero when it was gone already or did not exit cleanly. */
static int daemon_stop(struct tool_daemon *d)
{
	return tool_daemon_stop(d, "service-bench");
}

static void show_log_tail(const struct tool_daemon *d, int lines)
{
	char cmd[256];

	if (!d->log[0])
		return;		/* never started */
	fprintf(stderr, "---- last lines of %s\n", d->log);
	snprintf(cmd, sizeof(cmd), "tail -n %d '%s' >&2", lines, d->log);
	(void)!system(cmd);
}

/* A TCP port of 127.0.0.1 free just now: the job's coordinator port. */
static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int port = -1;

	if (s < 0)
		return -1;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!bind(s, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(s, (struct sockaddr *)&sa, &len))
		port = ntohs(sa.sin_port);
	close(s);
	return port;
}

/* ---- start: a 4-host job's first all-reduce --------------------------- */

struct start_shared {
	atomic_int ready;		/* members forked and waiting */
	atomic_int go;			/* released by the parent */
	atomic_int done;		/* members through their all-reduce */
	atomic_int host0_admitted;	/* host 0's connect returned */
	double t_connect[START_HOSTS];	/* before tally_connect_opts */
	double t_admitted[START_HOSTS];	/* it returned */
	double t_alloc[START_HOSTS];	/* tally_alloc returned */
	double t_done[START_HOSTS];	/* first all-reduce completed */
	int err[START_HOSTS];		/* tally error, or 1000 + what */
	int retries[START_HOSTS];	/* connects refused (tallyd bug) */
	float result[START_HOSTS];
};

enum { STEP_CONNECT = 1, STEP_ALLOC, STEP_SUBMIT, STEP_WAIT, STEP_VALUE,
       STEP_SYNC };

static const char *const step_name[] = {
	"", "tally_connect_opts", "tally_alloc", "tally_allreduce",
	"tally_wait", "result", "waiting for the others"
};

/*
 * tally_connect_opts(), tried again when the daemon closed the connection
 * (-TALLY_ECONNECT): a service tallyd refuses every connection that
 * reuses the pending-connection slot of a client it admitted with a job
 * description ("refused: closed within its job description"; admit() in
 * ctrl/admission.c leaves the slot's hello_done set), so every other
 * connection fails.  The refusal also clears the slot: the next try
 * works.  @retries counts the extra tries.
 *
 * Not worked around (there is no way from the client): the same daemon
 * refuses, with -TALLY_EDENIED and "refused: (null)" in its log, every
 * process that joins a job it already runs (service_job() returns the
 * job with *status still -TALLY_EDENIED), so a service job has one
 * process per host at most and the share part fails.
 */
static int connect_retrying(const struct tally_connect_opts *o,
			    struct tally_client **c, int *retries)
{
	int err = tally_connect_opts(o, c);

	for (int i = 0; err == -TALLY_ECONNECT && i < CONNECT_RETRIES; i++) {
		(*retries)++;
		err = tally_connect_opts(o, c);
	}
	return err;
}

static void start_member(struct start_shared *sh, const struct tool_daemon *d,
			 int rank, const char *id, const char *secret,
			 const char *coord, bool host0_first)
{
	struct tally_connect_opts o = TALLY_CONNECT_OPTS_INIT;
	struct tally_client *c = NULL;
	uint64_t req;
	float *x;
	int err;

	o.socket = d->sock;
	o.flags = TALLY_CONNECT_NO_ENV;
	o.job.id = id;
	o.job.secret = secret;
	o.job.coordinator = coord;
	o.job.hosts = START_HOSTS;
	o.job.host_rank = rank;
	o.job.local_size = 1;
	o.job.local_rank = 0;

	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load(&sh->go))
		sched_yield();		/* short: the parent is quick */
	if (host0_first && rank) {
		double end = now_ms() + WAIT_MS;

		while (!atomic_load(&sh->host0_admitted) && now_ms() < end)
			usleep(50);
	}
	sh->t_connect[rank] = now_ms();
	err = connect_retrying(&o, &c, &sh->retries[rank]);
	sh->t_admitted[rank] = now_ms();
	if (rank == 0)
		atomic_store(&sh->host0_admitted, 1);
	if (err) {
		sh->err[rank] = STEP_CONNECT * 1000 - err;
		goto out;
	}
	x = tally_alloc(c, sizeof(*x));
	sh->t_alloc[rank] = now_ms();
	if (!x) {
		sh->err[rank] = STEP_ALLOC * 1000 - tally_last_error(c);
		goto out;
	}
	*x = (float)(rank + 1);
	err = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 1, .iteration = 0, .sendbuf = x, .recvbuf = x,
		.count = 1, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
		.flags = TALLY_F_LAST_OF_ITERATION }, &req);
	if (err) {
		sh->err[rank] = STEP_SUBMIT * 1000 - err;
		goto out;
	}
	err = tally_wait(c, req, WAIT_MS);
	sh->t_done[rank] = now_ms();
	sh->result[rank] = *x;
	if (err)
		sh->err[rank] = STEP_WAIT * 1000 - err;
	else if (*x != (float)(START_HOSTS * (START_HOSTS + 1) / 2))
		sh->err[rank] = STEP_VALUE * 1000;
out:
	/* leave together: an early leaver would fail the others' job */
	if (arrive_wait(&sh->done, START_HOSTS, WAIT_MS) && !sh->err[rank])
		sh->err[rank] = STEP_SYNC * 1000;
	tally_disconnect(c);
	_exit(sh->err[rank] ? 1 : 0);
}

struct start_row {
	double total, admit, alloc, first;
	double admit_min, admit_max;	/* per member: tally_connect_opts */
	int retries;			/* refused connects, all members */
};

/* One job; 0 with @row filled, else -1 (and why, on stderr). */
static int start_job(struct start_shared *sh, struct tool_daemon *dm, int j,
		     bool host0_first, struct start_row *row)
{
	char id[64], secret[64], coord[32];
	pid_t pid[START_HOSTS];
	int port = free_port(), bad = 0;
	double t0 = 1e300, t1 = 0, admit = 0, alloc = 0;

	if (port < 0)
		return -1;
	/* Untimed: a bare connect-and-close to each daemon takes the
	 * pending slot its last admitted client left stale (see
	 * connect_retrying()), so the timed connects meet a clean one. */
	for (int r = 0; r < START_HOSTS; r++)
		tool_can_connect(dm[r].sock);
	usleep(20000);
	memset(sh, 0, sizeof(*sh));
	snprintf(id, sizeof(id), "svcbench-%d-%d", (int)getpid(), j);
	snprintf(secret, sizeof(secret), "svcbench-secret-%d-%d-%ld",
		 (int)getpid(), j, (long)now_ms());
	snprintf(coord, sizeof(coord), "127.0.0.1:%d", port);
	fflush(NULL);
	for (int r = 0; r < START_HOSTS; r++) {
		pid[r] = fork();
		if (pid[r] == 0)
			start_member(sh, &dm[r], r, id, secret, coord,
				     host0_first);
		if (pid[r] < 0) {
			perror("service-bench: fork");
			while (r-- > 0) {
				kill(pid[r], SIGKILL);
				waitpid(pid[r], NULL, 0);
			}
			return -1;
		}
	}
	if (wait_until_count(&sh->ready, START_HOSTS, 10000))
		fprintf(stderr, "service-bench: job %d: members not ready\n",
			j);
	atomic_store(&sh->go, 1);
	for (int r = 0; r < START_HOSTS; r++) {
		int status;

		waitpid(pid[r], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			bad = 1;
	}
	row->admit_min = 1e300;
	row->admit_max = 0;
	for (int r = 0; r < START_HOSTS; r++) {
		double a = sh->t_admitted[r] - sh->t_connect[r];

		if (sh->err[r]) {
			int step = sh->err[r] / 1000, e = sh->err[r] % 1000;

			fprintf(stderr, "service-bench: job %s host %d: %s "
				"failed: %s\n", id, r,
				step_name[step < STEP_SYNC + 1 ? step : 0],
				e ? tally_strerror(-e) : step == STEP_VALUE ?
				"wrong sum" : "timed out");
			if (step == STEP_VALUE)
				fprintf(stderr, "  got %g, want %d\n",
					sh->result[r],
					START_HOSTS * (START_HOSTS + 1) / 2);
		}
		t0 = sh->t_connect[r] < t0 ? sh->t_connect[r] : t0;
		t1 = sh->t_done[r] > t1 ? sh->t_done[r] : t1;
		admit = sh->t_admitted[r] > admit ? sh->t_admitted[r] : admit;
		alloc = sh->t_alloc[r] > alloc ? sh->t_alloc[r] : alloc;
		row->retries += sh->retries[r];
		row->admit_min = a < row->admit_min ? a : row->admit_min;
		row->admit_max = a > row->admit_max ? a : row->admit_max;
	}
	row->total = t1 - t0;
	row->admit = admit - t0;
	row->alloc = alloc - admit;
	row->first = t1 - alloc;
	return bad ? -1 : 0;
}

struct series {
	int n, failed, retries;
	double total, admit, first;	/* medians */
	double min, max;
};

/*
 * --jobs jobs (and a warm-up job first) on the running daemons, a table
 * row each; @host0_first: the other hosts' processes call
 * tally_connect_opts() only once host 0's returned.
 */
static void start_series(struct start_shared *sh, struct tool_daemon *dm,
			 const struct opts *o, bool host0_first, FILE *csv,
			 struct series *out)
{
	double total[MAX_JOBS], admit[MAX_JOBS], first[MAX_JOBS];
	static int next_job;

	memset(out, 0, sizeof(*out));
	printf("%6s %10s %10s %8s %10s %18s %8s\n", "job", "total_ms",
	       "admitted", "alloc", "first_ar", "connect_min..max",
	       "retries");
	for (int i = 0; i <= o->jobs; i++) {	/* i 0: warm-up */
		struct start_row r = { 0 };
		int j = next_job++;
		int err = start_job(sh, dm, j, host0_first, &r);

		printf("%5d%s %10.1f %10.1f %8.1f %10.1f %8.1f..%-8.1f %8d%s\n",
		       j, i ? " " : "w", r.total, r.admit, r.alloc, r.first,
		       r.admit_min, r.admit_max, r.retries,
		       err ? "  FAILED" : "");
		out->retries += r.retries;
		if (csv)
			fprintf(csv, "%d,%s,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,"
				"%d,%d\n", j, host0_first ? "host0_first" :
				"together", !i, r.total, r.admit, r.alloc,
				r.first, r.admit_min, r.admit_max, r.retries,
				!err);
		if (err) {
			out->failed++;
			continue;
		}
		if (i == 0)
			continue;
		total[out->n] = r.total;
		admit[out->n] = r.admit;
		first[out->n] = r.first;
		out->n++;
	}
	if (out->n) {
		out->total = bench_median(total, out->n);
		out->admit = bench_median(admit, out->n);
		out->first = bench_median(first, out->n);
		out->min = total[0];		/* sorted by bench_median() */
		out->max = total[out->n - 1];
		printf("  median of %d jobs: %.1f ms (min %.1f, max %.1f); "
		       "medians of the parts: %.1f ms to the last "
		       "admission, %.1f ms from the last tally_alloc to the "
		       "first all-reduce done\n", out->n, out->total,
		       out->min, out->max, out->admit, out->first);
	}
	if (out->retries)
		printf("  %d connect(s) refused and tried again (the tallyd "
		       "bug of connect_retrying())\n", out->retries);
	if (out->failed)
		printf("  FAILED: %d of %d jobs\n", out->failed, o->jobs + 1);
}

static int run_start(const struct opts *o)
{
	struct tool_daemon dm[START_HOSTS] = { 0 };
	struct start_shared *sh = shared_map(sizeof(*sh));
	struct series together = { 0 }, ordered = { 0 };
	int ret = 0;
	FILE *csv = NULL;

	if (!sh)
		return -1;
	for (int h = 0; h < START_HOSTS; h++) {
		char name[16], addr[32];

		snprintf(name, sizeof(name), "host%d", h);
		/* the port is not used by service jobs; each job gets its own */
		snprintf(addr, sizeof(addr), "127.0.0.%d:7000", h + 1);
		if (daemon_start(&dm[h], o->tallyd, name, addr)) {
			printf("start: FAILED: service daemon %d did not "
			       "start\n", h);
			printf("figure service_job_start_ms nan ms\n");
			ret = -1;
			goto out;
		}
	}
	if (o->csv) {
		csv = fopen(o->csv, "w");
		if (!csv)
			fprintf(stderr, "service-bench: %s: %s\n", o->csv,
				strerror(errno));
		else
			fprintf(csv, "job,series,warmup,total_ms,admitted_ms,"
				"alloc_ms,first_allreduce_ms,connect_min_ms,"
				"connect_max_ms,retries,ok\n");
	}
	printf("# start: %d service daemons (127.0.0.1..%d) kept running; a "
	       "new %d-host job each row, 1 process per host\n",
	       START_HOSTS, START_HOSTS, START_HOSTS);
	printf("# total = first tally_connect_opts() call -> first 1-float "
	       "all-reduce done on all; split at the last connect return\n"
	       "# (admitted) and the last tally_alloc() return; connect = "
	       "one member's tally_connect_opts(), min..max; w = warm-up\n");
	printf("start, the %d processes released together (the figure):\n",
	       START_HOSTS);
	start_series(sh, dm, o, false, csv, &together);
	printf("start, host 0's process first, the others once its "
	       "tally_connect_opts() returned (breakdown):\n");
	start_series(sh, dm, o, true, csv, &ordered);
	if (together.n && ordered.n)
		printf("start: together %.1f ms, host 0 first %.1f ms: a host "
		       "admitted before host 0's daemon listens for the job "
		       "waits for its membership connect retry\n",
		       together.total, ordered.total);
	if (together.n && !together.failed) {
		printf("figure service_job_start_ms %.1f ms\n",
		       together.total);
	} else {
		printf("start: FAILED: %d jobs measured\n", together.n);
		printf("figure service_job_start_ms nan ms\n");
		ret = -1;
	}
	if (ordered.failed)
		ret = -1;
out:
	if (csv)
		fclose(csv);
	for (int h = 0; h < START_HOSTS; h++) {
		if (ret)
			show_log_tail(&dm[h], 15);
		if (daemon_stop(&dm[h]))
			ret = -1;
	}
	munmap(sh, sizeof(*sh));
	return ret;
}

/* ---- share: two jobs on one daemon ------------------------------------ */

/*
 * Windows of A: alone, with B, alone, with B, ... alone: 2 * rounds + 1.
 * Each shared window has its own job B (a new id: B joins and leaves the
 * service every round).  A round's ratio is A's busbw with B over the
 * mean of the alone windows before and after it.
 */
#define MAX_ROUNDS 16
#define MAX_PHASES (2 * MAX_ROUNDS + 1)

struct job_sync {
	atomic_int ready;		/* members connected */
	atomic_llong stop_at;		/* B: iteration to stop before; 0: none */
	atomic_llong iter;		/* rank 0's iterations done */
	atomic_int done;		/* members finished */
	int err[SHARE_N];
	int retries[SHARE_N];		/* connects refused (tallyd bug) */
	char what[SHARE_N][96];
};

struct share_shared {
	int nphases;
	struct job_sync a, b[MAX_ROUNDS];
	atomic_int phase_go;		/* A: windows opened */
	atomic_int phase_done;		/* A: members through a window */
	/* round r: 1 while A's shared window runs, then 2 */
	atomic_int b_timing[MAX_ROUNDS];
	atomic_llong a_stop[MAX_PHASES]; /* A: iteration to stop before */
	/* A: each member's window */
	double win_ms[MAX_PHASES][SHARE_N];
	long long win_iters[MAX_PHASES][SHARE_N];
	/* B of round r: rank 0's time and iterations as A's window opened
	 * and closed */
	double b_t[MAX_ROUNDS][2];
	long long b_it[MAX_ROUNDS][2];
};

static void member_fail(struct job_sync *js, int rank, const char *what,
			int err)
{
	snprintf(js->what[rank], sizeof(js->what[rank]), "%s: %s", what,
		 err ? tally_strerror(err) : "wrong result");
	js->err[rank] = 1;
}

/*
 * One all-reduce of the loop, checked at three places (AVG of 1.0 and
 * 3.0 is 2.0, and stays 2.0 in place).  0 or -1.
 */
static int loop_step(struct tally_client *c, float *x, size_t count,
		     long long it, struct job_sync *js, int rank)
{
	uint64_t req;
	int err;

	err = tally_allreduce(c, &(struct tally_allreduce_args){
		.key = 7, .iteration = (uint64_t)it, .sendbuf = x,
		.recvbuf = x, .count = count, .dtype = TALLY_FLOAT32,
		.op = TALLY_AVG, .flags = TALLY_F_LAST_OF_ITERATION }, &req);
	if (!err)
		err = tally_wait(c, req, WAIT_MS);
	if (err) {
		member_fail(js, rank, "all-reduce", err);
		return -1;
	}
	if (x[0] != 2.0f || x[count / 2] != 2.0f || x[count - 1] != 2.0f) {
		member_fail(js, rank, "all-reduce", 0);
		return -1;
	}
	return 0;
}

/*
 * Run the loop until rank 0 says stop.  Rank 0 decides with @stop (a
 * function of time): it posts *@stop_at = its next iteration + 1 before it
 * submits that iteration, so the other member, which cannot finish an
 * iteration rank 0 has not submitted, sees it before it would submit the
 * one after.  Each window has its own @stop_at, 0 until posted.  Returns
 * the iterations run, or -1.
 */
static long long run_loop(struct tally_client *c, float *x, size_t count,
			  long long *it, atomic_llong *stop_at,
			  struct job_sync *js, int rank,
			  bool (*stop)(void *), void *arg,
			  void (*each)(void *, long long), void *each_arg)
{
	long long start = *it;

	for (;;) {
		long long at = atomic_load(stop_at);

		if (at && *it >= at)
			break;
		/* this one is still run: the other member may have
		 * submitted it already */
		if (rank == 0 && !at && stop(arg))
			atomic_store(stop_at, *it + 1);
		if (loop_step(c, x, count, *it, js, rank))
			return -1;
		(*it)++;
		if (rank == 0) {
			atomic_store(&js->iter, *it);
			if (each)
				each(each_arg, *it);
		}
	}
	return *it - start;
}

struct deadline { double end; };

static bool past_deadline(void *arg)
{
	return now_ms() >= ((struct deadline *)arg)->end;
}

struct b_state {
	struct share_shared *sh;
	int round;
	int seen;			/* b_timing last acted on */
};

/* B's rank 0, after each all-reduce: stamp A's window as it opens and
 * closes. */
static void b_watch(void *arg, long long it)
{
	struct b_state *b = arg;
	int t = atomic_load(&b->sh->b_timing[b->round]);

	if (t == 1 && b->seen == 0) {
		b->sh->b_t[b->round][0] = now_ms();
		b->sh->b_it[b->round][0] = it;
		b->seen = 1;
	} else if (t == 2 && b->seen == 1) {
		b->sh->b_t[b->round][1] = now_ms();
		b->sh->b_it[b->round][1] = it;
		b->seen = 2;
	} else if (t == 2) {
		b->seen = 2;	/* missed the opening: no figure for B */
	}
}

/* B runs until A's shared window closed (or A is gone). */
static bool b_should_stop(void *arg)
{
	struct b_state *b = arg;

	return b->seen == 2 ||
	       atomic_load(&b->sh->phase_go) > b->sh->nphases;
}

/* A member of A (@round -1) or of round @round's B; never returns. */
static void share_member(struct share_shared *sh, const struct opts *o,
			 const char *sock, int round, int rank,
			 const char *id)
{
	struct tally_connect_opts co = TALLY_CONNECT_OPTS_INIT;
	struct job_sync *js = round < 0 ? &sh->a : &sh->b[round];
	struct tally_client *c = NULL;
	size_t count = o->size / sizeof(float);
	long long it = 0;
	float *x;
	int err;

	co.socket = sock;
	co.flags = TALLY_CONNECT_NO_ENV;
	co.job.id = id;
	co.job.hosts = 1;
	co.job.local_size = SHARE_N;
	co.job.local_rank = rank;
	err = connect_retrying(&co, &c, &js->retries[rank]);
	if (err) {
		member_fail(js, rank, "tally_connect_opts", err);
		goto out;
	}
	x = tally_alloc(c, count * sizeof(float));
	if (!x) {
		member_fail(js, rank, "tally_alloc", tally_last_error(c));
		goto out;
	}
	for (size_t i = 0; i < count; i++)
		x[i] = rank ? 3.0f : 1.0f;
	atomic_fetch_add(&js->ready, 1);
	/* both admitted, or give up at once: an all-reduce would wait for
	 * the member that is not coming */
	while (atomic_load(&js->ready) < SHARE_N) {
		if (js->err[!rank])
			goto out;
		usleep(100);
	}
	/* warm-up: the first all-reduces map and fault the buffers */
	for (int w = 0; w < 5; w++, it++)
		if (loop_step(c, x, count, it, js, rank))
			goto out;

	if (round >= 0) {		/* B: until A's window closed */
		struct b_state b = { .sh = sh, .round = round };

		run_loop(c, x, count, &it, &js->stop_at, js, rank,
			 b_should_stop, &b, rank == 0 ? b_watch : NULL, &b);
		goto out;
	}
	for (int ph = 0; ph < sh->nphases; ph++) {
		bool shared = ph % 2;
		struct deadline dl;
		long long n;
		double t;

		/* wait for the parent to open this window */
		while (atomic_load(&sh->phase_go) <= ph) {
			if (js->err[!rank])
				goto out;
			usleep(200);
		}
		dl.end = now_ms() + o->seconds * 1e3;
		t = now_ms();
		if (shared && rank == 0)
			atomic_store(&sh->b_timing[ph / 2], 1);
		n = run_loop(c, x, count, &it, &sh->a_stop[ph], js, rank,
			     past_deadline, &dl, NULL, NULL);
		if (n < 0)
			goto out;
		sh->win_ms[ph][rank] = now_ms() - t;
		sh->win_iters[ph][rank] = n;
		if (shared && rank == 0)
			atomic_store(&sh->b_timing[ph / 2], 2);
		atomic_fetch_add(&sh->phase_done, 1);
	}
out:
	if (arrive_wait(&js->done, SHARE_N, WAIT_MS) && !js->err[rank])
		member_fail(js, rank, "waiting for the other member", 0);
	/* an A member that failed must not leave the parent waiting */
	if (round < 0 && js->err[rank])
		atomic_fetch_add(&sh->phase_done, MAX_PHASES * SHARE_N);
	tally_disconnect(c);
	_exit(js->err[rank] ? 1 : 0);
}

static int spawn_job(struct share_shared *sh, const struct opts *o,
		     const char *sock, int round, const char *id, pid_t *pid)
{
	fflush(NULL);
	for (int r = 0; r < SHARE_N; r++) {
		pid[r] = fork();
		if (pid[r] < 0) {
			perror("service-bench: fork");
			return -1;
		}
		if (pid[r] == 0)
			share_member(sh, o, sock, round, r, id);
	}
	return 0;
}

static int reap(pid_t *pid, int n)
{
	int bad = 0;

	for (int r = 0; r < n; r++) {
		int status;

		if (pid[r] <= 0)
			continue;
		waitpid(pid[r], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			bad = 1;
		pid[r] = 0;
	}
	return bad;
}

static double busbw_gbs(const struct opts *o, double ms, long long iters)
{
	double per = ms / 1e3 / (double)iters;

	return iters > 0 ? 2.0 * (SHARE_N - 1) / SHARE_N * (double)o->size /
		per / 1e9 : 0;
}

/* A's busbw in window @ph: the slower member's window; 0 if none. */
static double a_busbw(const struct share_shared *sh, const struct opts *o,
		      int ph)
{
	double ms = 0;
	long long it = sh->win_iters[ph][0];

	for (int r = 0; r < SHARE_N; r++) {
		ms = sh->win_ms[ph][r] > ms ? sh->win_ms[ph][r] : ms;
		if (sh->win_iters[ph][r] != it)
			return 0;
	}
	return busbw_gbs(o, ms, it);
}

static bool job_failed(const struct job_sync *js)
{
	for (int r = 0; r < SHARE_N; r++)
		if (js->err[r])
			return true;
	return false;
}

/* Round @round's B admitted and past its warm-up (its rank 0 counted a
 * few loop all-reduces) before A's window opens.  0 or -1. */
static int b_running(struct share_shared *sh, int round)
{
	struct job_sync *js = &sh->b[round];
	double end = now_ms() + WAIT_MS;

	while (atomic_load(&js->iter) < 10) {
		if (job_failed(js) || job_failed(&sh->a) || now_ms() > end)
			return -1;
		usleep(1000);
	}
	return 0;
}

static int run_share(const struct opts *o)
{
	struct tool_daemon d = { 0 };
	struct share_shared *sh = shared_map(sizeof(*sh));
	pid_t pa[SHARE_N] = { 0 }, pb[SHARE_N] = { 0 };
	double bw[MAX_PHASES] = { 0 }, ratio[MAX_ROUNDS], sorted[MAX_ROUNDS];
	double b_bw[MAX_ROUNDS] = { 0 }, both[MAX_ROUNDS];
	int ret = 0, bad = 0, done = 0, retries = 0;
	char ida[64];

	if (!sh)
		return -1;
	memset(sh, 0, sizeof(*sh));
	sh->nphases = 2 * o->rounds + 1;
	snprintf(ida, sizeof(ida), "svcbench-A-%d", (int)getpid());
	printf("# share: one service daemon; job A (%d processes) all-reduces "
	       "%zu bytes float32 (AVG, in place) in %.1f s windows:\n"
	       "# alone, with B, alone, ... (%d rounds); each B is a new job "
	       "of %d more processes running the same loop.\n"
	       "# busbw = 2(n-1)/n * bytes / time per all-reduce, n = %d; "
	       "ratio = A with B / mean of A alone before and after\n",
	       SHARE_N, o->size, o->seconds, o->rounds, SHARE_N, SHARE_N);
	if (daemon_start(&d, o->tallyd, "share", NULL))
		goto fail;
	if (spawn_job(sh, o, d.sock, -1, ida, pa))
		goto fail;
	printf("%-6s %-10s %8s %10s %12s\n", "window", "", "allreds",
	       "ms", "busbw_GB/s");
	for (int ph = 0; ph < sh->nphases; ph++) {
		int round = ph / 2;
		bool shared = ph % 2;
		double ms;

		if (shared) {
			char idb[64];

			snprintf(idb, sizeof(idb), "svcbench-B%d-%d", round,
				 (int)getpid());
			if (spawn_job(sh, o, d.sock, round, idb, pb) ||
			    b_running(sh, round))
				goto fail;
		}
		atomic_store(&sh->phase_go, ph + 1);
		if (wait_until_count(&sh->phase_done, (ph + 1) * SHARE_N,
				     (int)(o->seconds * 1e3) + WAIT_MS) ||
		    job_failed(&sh->a))
			goto fail;
		bw[ph] = a_busbw(sh, o, ph);
		ms = sh->win_ms[ph][0] > sh->win_ms[ph][1] ?
		     sh->win_ms[ph][0] : sh->win_ms[ph][1];
		printf("%-6d %-10s %8lld %10.1f %12.2f\n", ph,
		       shared ? "A with B" : "A alone", sh->win_iters[ph][0],
		       ms, bw[ph]);
		if (!bw[ph])
			goto fail;
		if (shared) {
			/* B stops once A's window closed (b_timing 2, set
			 * before A counted phase_done) */
			bad |= reap(pb, SHARE_N);
			if (bad)
				goto fail;
			if (sh->b_it[round][1] > sh->b_it[round][0]) {
				ms = sh->b_t[round][1] - sh->b_t[round][0];
				b_bw[round] = busbw_gbs(o, ms,
					sh->b_it[round][1] -
					sh->b_it[round][0]);
				printf("%-6s %-10s %8lld %10.1f %12.2f  (its "
				       "rank 0 over A's window)\n", "", "B",
				       sh->b_it[round][1] - sh->b_it[round][0],
				       ms, b_bw[round]);
			}
		} else if (ph > 0) {
			double alone = (bw[ph - 2] + bw[ph]) / 2;

			ratio[done] = bw[ph - 1] / alone;
			both[done] = (bw[ph - 1] + b_bw[round - 1]) / alone;
			printf("round %d: A with B / A alone = %.3f; "
			       "(A + B) / A alone = %.3f\n", done + 1,
			       ratio[done], both[done]);
			done++;
		}
		fflush(stdout);
	}
	atomic_store(&sh->phase_go, sh->nphases + 1);
	bad |= reap(pa, SHARE_N);
	if (bad)
		goto fail;
	memcpy(sorted, ratio, sizeof(ratio[0]) * (size_t)done);
	printf("share: A with B / A alone, median of %d rounds: %.3f "
	       "(fair share 0.5); (A + B) / A alone: median %.3f\n", done,
	       bench_median(sorted, done), bench_median(both, done));
	for (int r = 0; r <= o->rounds && r < MAX_ROUNDS; r++)
		retries += sh->b[r].retries[0] + sh->b[r].retries[1];
	retries += sh->a.retries[0] + sh->a.retries[1];
	if (retries)
		printf("share: %d connect(s) refused and tried again (the "
		       "tallyd bug of connect_retrying())\n", retries);
	printf("figure service_two_jobs_busbw_ratio %.3f ratio\n",
	       bench_median(sorted, done));
	goto out;
fail:
	for (int r = 0; r < SHARE_N; r++)
		if (sh->a.err[r])
			fprintf(stderr, "service-bench: job A member %d: %s\n",
				r, sh->a.what[r]);
	for (int b = 0; b < o->rounds; b++)
		for (int r = 0; r < SHARE_N; r++)
			if (sh->b[b].err[r])
				fprintf(stderr, "service-bench: job B of round "
					"%d, member %d: %s\n", b + 1, r,
					sh->b[b].what[r]);
	printf("share: FAILED after %d of %d rounds%s", done, o->rounds,
	       done ? ": ratios" : "");
	for (int i = 0; i < done; i++)
		printf(" %.3f", ratio[i]);
	printf("\nfigure service_two_jobs_busbw_ratio nan ratio\n");
	atomic_store(&sh->phase_go, MAX_PHASES + 1);
	for (int r = 0; r < SHARE_N; r++) {
		if (pa[r] > 0)
			kill(pa[r], SIGKILL);
		if (pb[r] > 0)
			kill(pb[r], SIGKILL);
	}
	reap(pa, SHARE_N);
	reap(pb, SHARE_N);
	show_log_tail(&d, 20);
	ret = -1;
out:
	if (daemon_stop(&d)) {
		fprintf(stderr, "service-bench: the share daemon did not "
			"exit cleanly\n");
		ret = -1;
	}
	munmap(sh, sizeof(*sh));
	return ret;
}

/* ---- main ------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: service-bench --tallyd PATH [--only start|share] "
		"[--jobs N] [--rounds R]\n"
		"                     [--size BYTES] [--seconds S] "
		"[--csv FILE] [--keep]\n"
		"                     [--set SECTION.KEY=VALUE (to every "
		"tallyd)]...\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "tallyd", required_argument, NULL, 't' },
		{ "only", required_argument, NULL, 'o' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "csv", required_argument, NULL, 'c' },
		{ "keep", no_argument, NULL, 'k' },
		{ "set", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct opts o = { .start = true, .share = true, .jobs = 10,
			  .rounds = 3, .size = 4u << 20, .seconds = 2 };
	char *end;
	int c, ret = 0;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			o.tallyd = optarg;
			break;
		case 'o':
			o.start = !strcmp(optarg, "start");
			o.share = !strcmp(optarg, "share");
			if (!o.start && !o.share) {
				fprintf(stderr, "service-bench: --only start "
					"or --only share, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'j':
			o.jobs = (int)strtol(optarg, &end, 10);
			if (*end || o.jobs < 1 || o.jobs >= MAX_JOBS) {
				fprintf(stderr, "service-bench: --jobs 1..%d\n",
					MAX_JOBS - 1);
				return 2;
			}
			break;
		case 'r':
			o.rounds = (int)strtol(optarg, &end, 10);
			if (*end || o.rounds < 1 || o.rounds > MAX_ROUNDS) {
				fprintf(stderr, "service-bench: --rounds "
					"1..%d\n", MAX_ROUNDS);
				return 2;
			}
			break;
		case 's':
			o.size = strtoull(optarg, &end, 10);
			if (*end || o.size < 3 * sizeof(float) ||
			    o.size % sizeof(float)) {
				fprintf(stderr, "service-bench: --size: bytes, "
					"a multiple of 4, at least 12\n");
				return 2;
			}
			break;
		case 'S':
			o.seconds = strtod(optarg, &end);
			if (*end || !(o.seconds > 0 && o.seconds <= 600)) {
				fprintf(stderr, "service-bench: --seconds: "
					"0 < S <= 600\n");
				return 2;
			}
			break;
		case 'c':
			o.csv = optarg;
			break;
		case 'k':
			o.keep = true;
			break;
		case 'D':
			if (o.nset == MAX_SETS) {
				fprintf(stderr, "service-bench: at most %d "
					"--set\n", MAX_SETS);
				return 2;
			}
			o.set[o.nset++] = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	opts = &o;
	if (!o.tallyd || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (access(o.tallyd, X_OK)) {
		fprintf(stderr, "service-bench: %s: %s\n", o.tallyd,
			strerror(errno));
		return 2;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/service-bench-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("service-bench: mkdtemp");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (o.start && run_start(&o))
		ret = 1;
	if (o.share && run_share(&o))
		ret = 1;
	if (o.keep || ret) {
		fprintf(stderr, "service-bench: daemon logs kept in %s\n",
			tmpdir);
	} else {
		char cmd[96];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		(void)!system(cmd);
	}
	return ret;
}
