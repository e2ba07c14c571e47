// SPDX-License-Identifier: BSD-3-Clause
/*
 * op-latency - one client's all-reduce latency, op by op: connects to a
 * tallyd, runs --warmup then --iters in-place float32 sum all-reduces of
 * --bytes one after another, times each (tally_allreduce to the end of
 * tally_wait) and prints one line
 *	ops N median_us M mean_us A min_us L p90_us P errors E
 * The median, not tally-bench's mean, is what tools/emu-bench compares:
 * one stall of a shared machine (a daemon off its core for 100 ms) moves
 * the mean of a few hundred ops by hundreds of microseconds and the median
 * by nothing.  Every host of the job runs it with the same options (the
 * ops are keyed alike); the last op's result is checked: every element
 * must be the sum over the --hosts hosts of (host index + 1), each host
 * contributing its --host index + 1.
 *
 * --poll waits with tally_test() and sched_yield() instead of
 * tally_wait(), so the client is never asleep when its op completes: what
 * is timed is the daemons' path only, not how late this machine wakes a
 * sleeping thread (tools/emu-bench's instrument).
 */
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/tally.h>
#include "bench_stats.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void usage(void)
{
	fprintf(stderr, "usage: op-latency --socket PATH --hosts H --host I "
		"[--bytes B] [--warmup W] [--iters N] [--poll]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "hosts", required_argument, NULL, 'H' },
		{ "host", required_argument, NULL, 'h' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "iters", required_argument, NULL, 'i' },
		{ "poll", no_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL;
	int hosts = 1, rank = 0, warmup = 20, iters = 200, opt, ret;
	int poll = 0;
	size_t bytes = 4096, count;
	struct tally_client *c;
	double *lat, sum = 0, want = 0;
	float *buf;
	long errors = 0;
	uint64_t req;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 's': sock = optarg; break;
		case 'H': hosts = atoi(optarg); break;
		case 'h': rank = atoi(optarg); break;
		case 'b': bytes = strtoul(optarg, NULL, 0); break;
		case 'w': warmup = atoi(optarg); break;
		case 'i': iters = atoi(optarg); break;
		case 'p': poll = 1; break;
		default: usage();
		}
	}
	count = bytes / sizeof(float);
	if (!sock || hosts < 1 || rank < 0 || rank >= hosts || iters < 1 || warmup < 0 || !count)
		usage();
	ret = tally_connect(sock, &c);
	if (ret) {
		fprintf(stderr, "op-latency: connect: %s\n",
			tally_strerror(ret));
		return 1;
	}
	buf = tally_alloc(c, count * sizeof(float));
	lat = calloc((size_t)iters, sizeof(*lat));
	if (!buf || !lat) {
		fprintf(stderr, "op-latency: out of memory\n");
		return 1;
	}
	for (int i = -warmup; i < iters; i++) {
		struct tally_allreduce_args a = {
			.key = 1, .sendbuf = buf, .recvbuf = buf,
			.count = count, .dtype = TALLY_FLOAT32, .op = TALLY_SUM,
			.iteration = (uint64_t)(i + warmup),
		};
		double t0;

		for (size_t k = 0; k < count; k++)
			buf[k] = (float)(rank + 1);
		t0 = now_us();
		ret = tally_allreduce(c, &a, &req);
		if (!ret && poll) {
			while ((ret = tally_test(c, req)) == -TALLY_EINPROGRESS)
				sched_yield();
		} else if (!ret) {
			ret = tally_wait(c, req, -1);
		}
		if (ret) {
			fprintf(stderr, "op-latency: op %d: %s\n", i,
				tally_strerror(ret));
			return 1;
		}
		if (i >= 0)
			lat[i] = now_us() - t0;
	}
	/* every host's rank + 1, summed: exact in float32 */
	for (int h = 0; h < hosts; h++)
		want += h + 1;
	for (size_t k = 0; k < count; k++)
		errors += buf[k] != (float)want;
	tally_disconnect(c);
	for (int i = 0; i < iters; i++)
		sum += lat[i];
	bench_sort(lat, iters);
	printf("ops %d median_us %.2f mean_us %.2f min_us %.2f p90_us %.2f "
	       "errors %ld\n", iters, lat[iters / 2], sum / iters, lat[0],
	       lat[iters * 9 / 10], errors);
	free(lat);
	return errors ? 1 : 0;
}
