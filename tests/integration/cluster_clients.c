// SPDX-License-Identifier: BSD-3-Clause
/*
 * cluster_clients.c - client processes of the multi-host tests.
 *
 * Inputs are small integers (|x| <= 11), so every dtype and the engine's
 * fixed-point encoding carry every sum exactly: results are compared bit
 * for bit with a sum computed here in double.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tally/tally.h>
#include "cluster_clients.h"
#include "dataplane/half.h"

static const uint64_t counts[] = { 1, 255, 257, 70001 };

static int value(int proc, size_t i)
{
	return (int)((i * 31 + (size_t)proc * 7) % 23) - 11;
}

void store_value(void *buf, enum tally_dtype t, size_t i, double v)
{
	switch (t) {
	case TALLY_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case TALLY_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case TALLY_FLOAT16: ((uint16_t *)buf)[i] = float_to_half((float)v);
		break;
	default: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
	}
}

static int check(const void *buf, enum tally_dtype t, enum tally_op op,
		 size_t count, int procs, uint64_t key)
{
	size_t esz = tally_dtype_size(t);
	unsigned char want[4];

	for (size_t i = 0; i < count; i++) {
		double sum = 0;

		for (int p = 0; p < procs; p++)
			sum += value(p, i);
		if (op == TALLY_AVG)
			sum = t == TALLY_INT32 ? trunc(sum / procs) :
						 (double)((float)sum *
							  (1.0f / (float)procs));
		store_value(want, t, 0, sum);
		if (memcmp((const char *)buf + i * esz, want, esz)) {
			fprintf(stderr, "key %llu dtype %d op %d count %zu: "
				"element %zu wrong\n", (unsigned long long)key,
				t, op, count, i);
			return -1;
		}
	}
	return 0;
}

int client_job_main(void *arg)
{
	struct client_job *j = arg;
	int ndt = j->float_types ? TALLY_DTYPE_MAX : 2;
	static const enum tally_dtype dts[] = { TALLY_FLOAT32, TALLY_INT32,
						TALLY_FLOAT16, TALLY_BFLOAT16 };
	struct tally_client *c;
	uint64_t req;
	void *buf;
	int proc, procs = j->hosts * CL_LOCAL, failures = 0;

	if (j->go_fd >= 0 && sync_wait(j->go_fd, 60000))
		return 9;
	CHECK(tally_connect(j->sock, &c) == 0, 2);
	proc = j->host * CL_LOCAL + tally_rank(c);
	buf = tally_alloc(c, 70001 * 4);
	CHECK(buf, 3);
	for (int round = 0; round < j->rounds; round++)
	for (int di = 0; di < ndt; di++)
	for (int op = 0; op < TALLY_OP_MAX; op++)
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		enum tally_dtype t = dts[di];
		struct tally_allreduce_args a = {
			.key = k + 16 * (uint64_t)(di * 2 + op),
			.iteration = j->first_iteration + (uint64_t)round,
			.sendbuf = buf, .recvbuf = buf,
			.count = counts[k], .dtype = t, .op = op,
			.priority = (uint32_t)k,
		};
		int ret;

		for (size_t i = 0; i < counts[k]; i++)
			store_value(buf, t, i, value(proc, i));
		ret = tally_allreduce(c, &a, &req);
		if (!ret)
			ret = tally_wait(c, req, 30000);
		if (j->expect_error) {
			if (ret == j->expect_error) {	/* the one we wait for */
				if (j->error_seen_ms)
					atomic_store(&j->error_seen_ms[
						tally_rank(c) % CL_LOCAL],
						test_now_ms());
				goto out;
			}
			if (ret) {
				fprintf(stderr, "proc %d: %s, not %s\n", proc,
					tally_strerror(ret),
					tally_strerror(j->expect_error));
				return 4;
			}
			continue;		/* before the failure */
		}
		if (ret) {
			fprintf(stderr, "proc %d key %llu: %s\n", proc,
				(unsigned long long)a.key,
				tally_strerror(ret));
			return 5;
		}
		failures += check(buf, t, op, counts[k], procs, a.key) != 0;
		if (failures)
			return 6;
	}
	if (j->expect_error) {
		fprintf(stderr, "proc %d: no error came\n", proc);
		return 7;
	}
out:
	tally_disconnect(c);
	return 0;
}

int run_cluster_clients(struct test_cluster *tc, int hosts,
			struct client_job proto, int timeout_ms)
{
	pid_t pid[CL_MAX_DAEMONS * CL_LOCAL];
	struct client_job jobs[CL_MAX_DAEMONS];
	int n = 0, failed = 0;

	for (int h = 0; h < hosts; h++) {
		jobs[h] = proto;
		jobs[h].sock = tc->d[h].sock;
		jobs[h].host = h;
		for (int l = 0; l < CL_LOCAL; l++)
			pid[n++] = child_start(client_job_main, &jobs[h]);
	}
	for (int i = 0; i < n; i++)
		failed += child_wait(pid[i], timeout_ms) != 0;
	return failed;
}

int run_checked_job(const struct cluster_spec *spec, int rounds,
		    bool float_types, int timeout_ms)
{
	struct client_job job = { .hosts = spec->workers, .rounds = rounds,
				  .float_types = float_types, .go_fd = -1 };
	struct test_cluster tc;
	int failed;

	if (cluster_up(&tc, spec))
		return -1;
	failed = run_cluster_clients(&tc, spec->workers, job, timeout_ms);
	if (failed)
		cluster_show_warnings(&tc);
	return failed + cluster_down(&tc);
}

int kill_mid_run(struct test_cluster *tc, int hosts, int run_ms,
		 uint64_t *took_ms)
{
	struct client_job job = { .hosts = hosts, .rounds = 1000000,
				  .expect_error = -TALLY_EPEERLOST,
				  .go_fd = -1 };
	struct client_job after = { .hosts = hosts - 1, .rounds = 1,
				    .first_iteration = 1u << 30, .go_fd = -1 };
	struct client_job jobs[CL_MAX_DAEMONS];
	pid_t pid[CL_MAX_DAEMONS * CL_LOCAL];
	bool exited_ok[CL_MAX_DAEMONS * CL_LOCAL];
	int n = 0, failed = 0, gone, status;
	size_t seen_size = sizeof(_Atomic uint64_t) * CL_MAX_DAEMONS * CL_LOCAL;
	_Atomic uint64_t *seen = mmap(NULL, seen_size, PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char per_host[CL_MAX_DAEMONS * 24] = "";
	uint64_t t0;

	if (seen == MAP_FAILED)
		return -1;
	for (int h = 0; h < hosts; h++) {
		jobs[h] = job;
		jobs[h].sock = tc->d[h].sock;
		jobs[h].host = h;
		jobs[h].error_seen_ms = seen + h * CL_LOCAL;
		if (h == hosts - 1)	/* they see their daemon die instead */
			jobs[h].expect_error = -TALLY_EDAEMONLOST;
		for (int l = 0; l < CL_LOCAL; l++)
			pid[n++] = child_start(client_job_main, &jobs[h]);
	}
	usleep((useconds_t)run_ms * 1000);
	kill(tc->d[hosts - 1].pid, SIGKILL);
	t0 = test_now_ms();
	/* the clock starts when the process is gone: its sockets close
	 * only after the kernel has torn down its memory, which on a
	 * starved machine has taken seconds (daemon_reap()) */
	gone = daemon_reap(tc->d[hosts - 1].pid, &status, 2000);
	if (gone < 0) {
		fprintf(stderr, "the killed daemon was not reaped\n");
		failed++;
		gone = 0;
	} else {
		tc->d[hosts - 1].pid = 0;
	}
	t0 += (uint64_t)gone;
	for (int i = 0; i < n; i++) {
		exited_ok[i] = child_wait(pid[i], 30000) == 0;
		failed += !exited_ok[i];
	}
	/* the last error seen, in ms after the process was gone (a client
	 * may have been first: its socket closed before the reaping) */
	*took_ms = 0;
	for (int h = 0; h < hosts; h++) {
		long long last = 0;

		for (int l = 0; l < CL_LOCAL; l++) {
			uint64_t at = atomic_load(&seen[h * CL_LOCAL + l]);
			long long d = at ? (long long)at - (long long)t0 : -1;

			/* a client that failed is counted once, above
			 * (it said why) */
			if (!at && exited_ok[h * CL_LOCAL + l])
				failed++;
			if (l == 0 || d > last)
				last = d;
		}
		if (last > 0 && (uint64_t)last > *took_ms)
			*took_ms = (uint64_t)last;
		snprintf(per_host + strlen(per_host),
			 sizeof(per_host) - strlen(per_host), "%s%lld",
			 h ? ", " : "", last);
	}
	munmap(seen, seen_size);
	fprintf(stderr, "the killed daemon was gone in %d ms; the clients had their errors %llu ms after (by host, the last client: %s; host %d's daemon was killed)\n",
		gone, (unsigned long long)*took_ms, per_host, hosts - 1);
	daemon_stop(&tc->d[hosts - 1]);
	tc->d[hosts - 1].pid = 0;
	if (!failed)	/* the survivors serve a new job */
		failed = run_cluster_clients(tc, hosts - 1, after, 120000);
	return failed;
}
