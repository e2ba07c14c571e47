// SPDX-License-Identifier: BSD-3-Clause
/*
 * cluster_harness.c - start and stop a job of several tallyd daemons.
 *
 * Over UDP every daemon runs on the loopback with its own data port; the
 * coordinator (rank 0) listens on another.  Ports come from the test's
 * pid so concurrent runs do not collide, and from another block when a
 * port of that one is taken.  Over DPDK each daemon runs in
 * the network namespace the spec names.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "cluster_harness.h"

#define ARGS_MAX 64

void cluster_default_secret(void)
{
	char secret[64];

	snprintf(secret, sizeof(secret), "tally-test-job-secret-%d-%ld",
		 getpid(), (long)test_now_ms());
	setenv("TALLY_JOB_SECRET", secret, 0);
}

/* Whether @port is free for UDP and TCP on the loopback now.  Daemons
 * bind their ports when the job starts, long after they started: a port
 * another test holds would fail the job, not the daemon's start. */
static bool port_free(int port)
{
	static const int types[] = { SOCK_DGRAM, SOCK_STREAM };
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bool ok = true;

	for (int i = 0; ok && i < 2; i++) {
		int fd = socket(AF_INET, types[i], 0);

		ok = fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa));
		if (fd >= 0)
			close(fd);
	}
	return ok;
}

/* start rank @r of @spec, whose coordinator listens on port @base */
static int rank_start(struct test_cluster *tc,
		      const struct cluster_spec *spec, int base, int r)
{
	int stride = spec->port_stride > 0 ? spec->port_stride : 1;
	const char *ip0 = spec->coord_ip ? spec->coord_ip :
			  spec->ip[0] ? spec->ip[0] : "127.0.0.1";
	char coord[64], addr[64], rank[16], world[16], key[16], secret[160];
	bool agg = r >= spec->workers;
	const char *argv[ARGS_MAX];
	int argc = 0;

	snprintf(coord, sizeof(coord), "%s:%d", ip0, base);
	snprintf(world, sizeof(world), "%d", tc->n);
	snprintf(key, sizeof(key), "%d", 1000 + getpid() % 1000);
	snprintf(rank, sizeof(rank), "%d", r);
	snprintf(addr, sizeof(addr), "%s:%d",
		 spec->ip[r] ? spec->ip[r] : "127.0.0.1",
		 base + 1 + r * stride);
	argv[argc++] = "--rank";
	argv[argc++] = rank;
	argv[argc++] = "--world";
	argv[argc++] = world;
	argv[argc++] = "--role";
	argv[argc++] = agg ? "aggregator" : spec->role;
	argv[argc++] = "--algorithm";
	argv[argc++] = spec->algorithm;
	argv[argc++] = "--coordinator";
	argv[argc++] = coord;
	argv[argc++] = "--job-key";
	argv[argc++] = key;
	argv[argc++] = "--address";
	argv[argc++] = addr;
	argv[argc++] = "--transport";
	argv[argc++] = spec->transport ? spec->transport : "udp";
	argv[argc++] = "--log-level";
	argv[argc++] = "info";
	if (spec->eal_args[r]) {
		argv[argc++] = "--eal-args";
		argv[argc++] = spec->eal_args[r];
	}
	if (spec->mac[r]) {
		argv[argc++] = "--mac";
		argv[argc++] = spec->mac[r];
	}
	if (spec->secret_file[r]) {
		snprintf(secret, sizeof(secret), "cluster.secret_file=%s",
			 spec->secret_file[r]);
		argv[argc++] = "--set";
		argv[argc++] = secret;
	}
	for (int i = 0; spec->extra && spec->extra[i] &&
			argc < ARGS_MAX - 1; i++)
		argv[argc++] = spec->extra[i];
	for (int i = 0; (agg ? spec->extra_agg : spec->extra_worker) &&
			(agg ? spec->extra_agg : spec->extra_worker)[i] &&
			argc < ARGS_MAX - 1; i++)
		argv[argc++] = (agg ? spec->extra_agg :
				spec->extra_worker)[i];
	argv[argc] = NULL;
	if (daemon_start_in(&tc->d[r], CL_LOCAL, argv, spec->netns[r])) {
		fprintf(stderr, "daemon rank %d did not start\n", r);
		daemon_stop(&tc->d[r]);	/* its directory */
		return -1;
	}
	return 0;
}

static int cluster_up_at(struct test_cluster *tc,
			 const struct cluster_spec *spec, int base)
{
	cluster_default_secret();
	memset(tc, 0, sizeof(*tc));
	tc->n = spec->workers + spec->aggregators;
	tc->base = base;
	for (int r = 0; r < tc->n; r++) {
		if (rank_start(tc, spec, base, r)) {
			tc->n = r;
			cluster_down(tc);
			return -1;
		}
	}
	return 0;
}

int cluster_restart(struct test_cluster *tc, const struct cluster_spec *spec,
		    int r)
{
	if (tc->d[r].pid && daemon_stop(&tc->d[r]))
		fprintf(stderr, "daemon rank %d: unclean stop before restart\n",
			r);
	tc->d[r].pid = 0;
	return rank_start(tc, spec, tc->base, r);
}

int cluster_up(struct test_cluster *tc, const struct cluster_spec *spec)
{
	int stride = spec->port_stride > 0 ? spec->port_stride : 1;
	int n = spec->workers + spec->aggregators, base = 0;

	/* another test may hold a port of this process's block: take the
	 * first block whose ports are all free */
	for (int attempt = 0; attempt < 8; attempt++) {
		bool free_all = true;

		base = test_port_base_try(16, attempt);
		free_all = port_free(base);	/* the coordinator's */
		for (int r = 0; free_all && r < n; r++)
			free_all = port_free(base + 1 + r * stride);
		if (free_all)
			break;
	}
	return cluster_up_at(tc, spec, base);
}

void cluster_show_warnings(const struct test_cluster *tc)
{
	char line[512];

	for (int r = 0; r < tc->n; r++) {
		FILE *f = fopen(tc->d[r].log, "r");

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "warn:") || strstr(line, "error:"))
				fprintf(stderr, "daemon %d: %s", r, line);
		fclose(f);
	}
}

/* tally_transport_sent_bytes_total of the daemon at @sock, summed over
 * its samples (what tools/compress-study reads); -1 on failure */
static double sent_bytes(const char *sock)
{
	static const char name[] =
		"\"name\":\"tally_transport_sent_bytes_total\"";
	const char *ctl = getenv("TALLY_CTL");
	char cmd[512], out[65536], *p;
	double sum = 0;
	size_t len;
	FILE *f;

	if (!ctl)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s --socket %s --json counters", ctl,
		 sock);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	len = fread(out, 1, sizeof(out) - 1, f);
	out[len] = 0;
	if (pclose(f))
		return -1;
	for (p = strstr(out, name); p; p = strstr(p + 1, name)) {
		char *v = strstr(p, "\"value\":");

		if (!v)
			return -1;
		sum += strtod(v + 8, NULL);
	}
	return sum;
}

/* sent_bytes() once the dataplane threads have published the job's
 * counters: they publish what changed within 5 ms (dp_thread.c), so a
 * job of a few milliseconds may not be in the first read.  Two reads
 * 50 ms apart that agree (heartbeats come every 200 ms), for up to 2 s.
 * (cluster_harness.h) */
double cluster_sent_bytes(const char *sock)
{
	double last = sent_bytes(sock), b = last;

	for (int i = 0; i < 40; i++) {
		usleep(50000);
		b = sent_bytes(sock);
		if (b > 0 && b == last)
			break;
		last = b;
	}
	return b;
}

/* @d's closing counters per thread: 0 when every one of @threads
 * received and sent, -1 otherwise */
static int check_thread_counters(const struct test_daemon *d, int index,
				 unsigned int threads,
				 unsigned long long *passed_out,
				 unsigned long long *passed_in)
{
	char line[1024];
	FILE *f = fopen(d->log, "r");
	unsigned int seen = 0, busy = 0;

	if (!f) {
		fprintf(stderr, "daemon %d: no log %s\n", index, d->log);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "dataplane thread ");
		unsigned long long turns, sleeps, rx, tx, out, in;
		unsigned int t;

		if (!p || sscanf(p, "dataplane thread %u: %llu turns, "
				 "%llu sleeps; frames rx %llu tx %llu; "
				 "passed to other threads %llu, from "
				 "them %llu", &t, &turns, &sleeps, &rx,
				 &tx, &out, &in) != 7 || t >= 32)
			continue;
		fprintf(stderr, "daemon %d thread %u: rx %llu tx %llu, passed on %llu, taken %llu\n",
			index, t, rx, tx, out, in);
		seen |= 1u << t;
		if (rx > 0 && tx > 0)
			busy |= 1u << t;
		*passed_out += out;
		*passed_in += in;
	}
	fclose(f);
	if (seen == (1u << threads) - 1 && busy == seen)
		return 0;
	fprintf(stderr, "daemon %d: threads logged 0x%x, with traffic 0x%x; "
		"want 0x%x\n", index, seen, busy, (1u << threads) - 1);
	return -1;
}

int cluster_terminate(struct test_cluster *tc)
{
	int bad = 0;

	for (int d = tc->n - 1; d >= 0; d--)
		if (daemon_terminate(&tc->d[d], 5000)) {
			fprintf(stderr, "daemon %d did not exit cleanly\n", d);
			bad++;
		}
	return bad;
}

int cluster_stop_check_threads(struct test_cluster *tc, unsigned int threads,
			       unsigned long long *passed_out,
			       unsigned long long *passed_in)
{
	int bad;

	*passed_out = *passed_in = 0;
	usleep(100000);		/* the threads' counters published */
	bad = cluster_terminate(tc);
	/* the daemons are gone (killed if one hung): cluster_down()
	 * removes what they left */
	for (int d = 0; d < tc->n; d++)
		bad += check_thread_counters(&tc->d[d], d, threads, passed_out,
					     passed_in) ? 1 : 0;
	return bad;
}

int cluster_down(struct test_cluster *tc)
{
	int bad = 0;

	for (int r = tc->n - 1; r >= 0; r--)
		if (tc->d[r].pid && daemon_stop(&tc->d[r]))
			bad++;
	return bad;
}
