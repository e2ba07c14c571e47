// SPDX-License-Identifier: BSD-3-Clause
/*
 * replay - play a model's training iterations through tally, as one
 * training process of one host.
 *
 * The profile (tools/models/<model>.csv) lists every gradient tensor in
 * backward order with its layer, size and the compute time attributed to
 * it.  Each iteration:
 *   forward   layer 0 .. L-1: before layer l runs, every gradient of layer l
 *             from the previous iteration must be back (its all-reduce
 *             waited for); then the layer's forward time is slept;
 *   backward  tensors in backward order: sleep the tensor's backward time,
 *             then submit its all-reduce (real buffers of the real size),
 *             priority = its layer (input side most urgent), the merge
 *             group of the mgwfbp plan, the last one flagged.
 * So what overlaps is decided by the daemon's schedule and network, as in
 * training.  All times are multiplied by the time dilation factor (see
 * docs/experiments.md); reported rates are divided back (undilated).
 *
 * The mgwfbp plan is computed here from the profile and the cost model
 * time(bytes) = a + b*bytes, with a and b measured through tally at start
 * and averaged over every process (an all-reduce of the measurements), so
 * every host derives the same plan.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/tally.h>
#include "dataplane/sched/mg_plan.h"

struct tensor {
	char name[96];
	int layer;
	uint64_t elements;
	double fwd_us, bwd_us;
	float *buf;
	uint64_t req;
	bool pending;
	uint32_t group;
};

struct profile {
	int n, layers;
	struct tensor *t;	/* backward order */
};

struct opts {
	const char *socket, *profile;
	int iterations, warmup, batch, hosts;
	double dilation;
	double single_throughput;	/* samples/s of one GPU, for efficiency */
	bool plan;			/* compute and send mgwfbp groups */
	bool check;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Sleep, never spin: the machine's cores belong to the daemons too. */
static void sleep_us(double us)
{
	struct timespec ts;

	if (us <= 0)
		return;
	ts.tv_sec = (time_t)(us / 1e6);
	ts.tv_nsec = (long)((us - (double)ts.tv_sec * 1e6) * 1e3);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int load_profile(const char *path, struct profile *p)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int cap = 0;

	if (!f) {
		perror(path);
		return -1;
	}
	memset(p, 0, sizeof(*p));
	while (fgets(line, sizeof(line), f)) {
		struct tensor t = { 0 };
		int order;

		if (line[0] == '#' || !strncmp(line, "order", 5))
			continue;
		if (sscanf(line, "%d,%95[^,],%d,%lu,%lf,%lf", &order, t.name,
			   &t.layer, &t.elements, &t.fwd_us, &t.bwd_us) != 6) {
			fprintf(stderr, "%s: bad line: %s", path, line);
			fclose(f);
			return -1;
		}
		if (p->n == cap) {
			cap = cap ? 2 * cap : 256;
			p->t = realloc(p->t, (size_t)cap * sizeof(*p->t));
		}
		p->t[p->n++] = t;
		if (t.layer + 1 > p->layers)
			p->layers = t.layer + 1;
	}
	fclose(f);
	return p->n ? 0 : -1;
}

static int allreduce(struct tally_client *c, struct tensor *t, uint64_t key,
		     uint64_t iter, uint32_t flags, bool wait)
{
	struct tally_allreduce_args a = {
		.key = key, .iteration = iter, .sendbuf = t->buf,
		.recvbuf = t->buf, .count = t->elements,
		.dtype = TALLY_FLOAT32, .op = TALLY_AVG,
		.priority = (uint32_t)t->layer, .group = t->group,
		.flags = flags,
	};
	int ret = tally_allreduce(c, &a, &t->req);

	if (ret)
		return ret;
	t->pending = true;
	if (!wait)
		return 0;
	t->pending = false;
	return tally_wait(c, t->req, 600000);
}

/*
 * Submit gradient @i of iteration @iter (the last one flagged).  With
 * TALLY_MAX_INFLIGHT requests pending (BERT-Large has 391 gradients) wait
 * for the oldest of this backward (*@oldest onwards) and retry, as a
 * framework would.
 */
static int submit_reaping(struct tally_client *c, struct profile *p, int i,
			  uint64_t iter, int *oldest)
{
	uint32_t flags = i == p->n - 1 ? TALLY_F_LAST_OF_ITERATION : 0;
	int ret;

	while ((ret = allreduce(c, &p->t[i], (uint64_t)i, iter, flags,
				false)) == -TALLY_EAGAIN) {
		while (*oldest < i && !p->t[*oldest].pending)
			++*oldest;
		if (*oldest == i)
			break;		/* nothing of ours to reap */
		p->t[*oldest].pending = false;
		ret = tally_wait(c, p->t[*oldest].req, 600000);
		if (ret)
			break;
	}
	return ret;
}

/*
 * Measure a and b through tally (keys above every tensor's), then average
 * them over all processes, so every host computes the same plan.
 */
static int measure_model(struct tally_client *c, struct profile *p,
			 double *a_us, double *b_us_per_byte)
{
	struct tensor small = { .elements = 1 }, big = { .elements = 1 << 20 };
	struct tensor res = { .elements = 2 };
	uint64_t key = (uint64_t)p->n + 1000;
	/* iterations of their own: bsp remembers which iterations ended */
	uint64_t iter0 = 1ull << 31;
	double t_small = 1e30, t_big = 1e30;
	int ret;

	small.buf = tally_alloc(c, 4);
	big.buf = tally_alloc(c, big.elements * 4);
	res.buf = tally_alloc(c, 8);
	if (!small.buf || !big.buf || !res.buf)
		return -TALLY_ENOMEM;
	for (int i = 0; i < 5; i++) {
		double t0 = now_us();

		/* each its own iteration's last: bsp holds nothing back */
		ret = allreduce(c, &small, key, iter0 + 2 * (uint64_t)i,
				TALLY_F_LAST_OF_ITERATION, true);
		if (ret)
			return ret;
		if (now_us() - t0 < t_small)
			t_small = now_us() - t0;
		t0 = now_us();
		ret = allreduce(c, &big, key + 1, iter0 + 2 * (uint64_t)i + 1,
				TALLY_F_LAST_OF_ITERATION, true);
		if (ret)
			return ret;
		if (now_us() - t0 < t_big)
			t_big = now_us() - t0;
	}
	res.buf[0] = (float)t_small;
	res.buf[1] = (float)((t_big - t_small) / (double)(big.elements * 4));
	ret = allreduce(c, &res, key + 2, iter0 + 100,
			TALLY_F_LAST_OF_ITERATION, true);
	*a_us = res.buf[0];
	*b_us_per_byte = res.buf[1];
	tally_free(c, small.buf);
	tally_free(c, big.buf);
	tally_free(c, res.buf);
	return ret;
}

/*
 * MG-WFBP's merge plan over the (dilated) backward timeline: the same
 * code tally-sim plans with (dataplane/sched/mg_plan.c).
 */
static int plan_groups(struct profile *p, double a, double b, double dil)
{
	double *bwd = calloc((size_t)p->n, sizeof(double));
	double *bytes = calloc((size_t)p->n, sizeof(double));
	uint32_t *group = calloc((size_t)p->n, sizeof(uint32_t));
	uint32_t groups = 0;

	if (bwd && bytes && group) {
		for (int i = 0; i < p->n; i++) {
			bwd[i] = p->t[i].bwd_us * dil;
			bytes[i] = (double)p->t[i].elements * 4;
		}
		groups = mg_plan(p->n, bwd, bytes, a, b, group);
		for (int i = 0; i < p->n; i++)
			p->t[i].group = group[i];
	}
	free(bwd);
	free(bytes);
	free(group);
	return (int)groups;
}

static void fill(struct profile *p, int rank)
{
	for (int i = 0; i < p->n; i++)
		for (uint64_t e = 0; e < p->t[i].elements; e++)
			p->t[i].buf[e] = (float)((int)((e + (uint64_t)rank) %
						       7) - 3);
}

static int run(struct tally_client *c, struct profile *p,
	       const struct opts *o, double *iter_us)
{
	double t_start = 0;
	int ret;

	for (int it = 0; it < o->warmup + o->iterations; it++) {
		if (it == o->warmup)
			t_start = now_us();
		/* forward: layer l needs its gradients of the last step */
		for (int l = 0; l < p->layers; l++) {
			double fwd = 0;

			for (int i = 0; i < p->n; i++) {
				struct tensor *t = &p->t[i];

				if (t->layer != l)
					continue;
				fwd += t->fwd_us;
				if (t->pending) {
					t->pending = false;
					ret = tally_wait(c, t->req, 600000);
					if (ret)
						return ret;
				}
			}
			sleep_us(fwd * o->dilation);
		}
		/* backward: each gradient goes out as it is produced */
		for (int i = 0, oldest = 0; i < p->n; i++) {
			sleep_us(p->t[i].bwd_us * o->dilation);
			ret = submit_reaping(c, p, i, (uint64_t)it, &oldest);
			if (ret)
				return ret;
		}
	}
	for (int i = 0; i < p->n; i++)
		if (p->t[i].pending) {
			p->t[i].pending = false;
			ret = tally_wait(c, p->t[i].req, 600000);
			if (ret)
				return ret;
		}
	*iter_us = (now_us() - t_start) / o->iterations;
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: replay --profile CSV [--socket PATH] [--iterations N]\n"
		"              [--warmup N] [--dilation D] [--batch B]\n"
		"              [--hosts H] [--single-throughput S] [--plan]\n"
		"              [--check]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "profile", required_argument, NULL, 'p' },
		{ "iterations", required_argument, NULL, 'i' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "dilation", required_argument, NULL, 'd' },
		{ "batch", required_argument, NULL, 'b' },
		{ "hosts", required_argument, NULL, 'H' },
		{ "single-throughput", required_argument, NULL, 'S' },
		{ "plan", no_argument, NULL, 'P' },
		{ "check", no_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .iterations = 3, .warmup = 1, .batch = 64,
			  .hosts = 1, .dilation = 1 };
	struct tally_client *c;
	struct profile p;
	double a = 0, b = 0, iter_us, compute_us = 0, samples;
	uint64_t total = 0, used = 0;
	char *arena;
	int ch, ret, groups = 0, procs;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 's': o.socket = optarg; break;
		case 'p': o.profile = optarg; break;
		case 'i': o.iterations = atoi(optarg); break;
		case 'w': o.warmup = atoi(optarg); break;
		case 'd': o.dilation = atof(optarg); break;
		case 'b': o.batch = atoi(optarg); break;
		case 'H': o.hosts = atoi(optarg); break;
		case 'S': o.single_throughput = atof(optarg); break;
		case 'P': o.plan = true; break;
		case 'c': o.check = true; break;
		default: usage();
		}
	}
	if (!o.profile || o.iterations < 1 || o.dilation <= 0 || o.hosts < 1)
		usage();
	if (load_profile(o.profile, &p))
		return 1;
	ret = tally_connect(o.socket, &c);
	if (ret) {
		fprintf(stderr, "replay: %s\n", tally_strerror(ret));
		return 1;
	}
	procs = o.hosts * tally_size(c);
	/* one shared buffer for the whole model (a client has a bounded
	 * number of segments), each tensor 64-byte aligned inside it */
	for (int i = 0; i < p.n; i++)
		total += (p.t[i].elements * 4 + 63) & ~(uint64_t)63;
	arena = tally_alloc(c, total);
	if (!arena) {
		fprintf(stderr, "replay: cannot share %lu bytes\n", total);
		return 1;
	}
	for (int i = 0; i < p.n; i++) {
		p.t[i].buf = (float *)(arena + used);
		used += (p.t[i].elements * 4 + 63) & ~(uint64_t)63;
		compute_us += p.t[i].fwd_us + p.t[i].bwd_us;
	}
	fill(&p, tally_rank(c));
	ret = measure_model(c, &p, &a, &b);
	if (!ret && o.plan)
		groups = plan_groups(&p, a, b, o.dilation);
	if (!ret)
		ret = run(c, &p, &o, &iter_us);
	if (ret) {
		fprintf(stderr, "replay: %s\n", tally_strerror(ret));
		return 1;
	}
	if (o.check) {		/* one more step: AVG of known values */
		for (int i = 0; i < p.n; i++)
			for (uint64_t e = 0; e < p.t[i].elements; e++)
				p.t[i].buf[e] = (float)(e % 5);
		/* the whole step at once, as bsp needs its last gradient */
		for (int i = 0, oldest = 0; i < p.n && !ret; i++)
			ret = submit_reaping(c, &p, i, 1u << 30, &oldest);
		for (int i = 0; i < p.n && !ret; i++) {
			if (!p.t[i].pending)
				continue;	/* reaped on the way */
			p.t[i].pending = false;
			ret = tally_wait(c, p.t[i].req, 600000);
		}
		for (int i = 0; i < p.n && !ret; i++)
			for (uint64_t e = 0; e < p.t[i].elements; e++)
				if (p.t[i].buf[e] != (float)(e % 5)) {
					fprintf(stderr, "replay: %s[%lu] wrong\n",
						p.t[i].name, e);
					return 1;
				}
		if (ret) {
			fprintf(stderr, "replay: %s\n", tally_strerror(ret));
			return 1;
		}
	}
	samples = o.batch * procs / (iter_us / o.dilation / 1e6);
	if (!o.single_throughput)
		o.single_throughput = o.batch / (compute_us / 1e6);
	printf("iteration_ms=%.3f samples_per_s=%.2f scaling_efficiency=%.4f "
	       "a_us=%.1f b_ns_per_byte=%.4f groups=%d tensors=%d\n",
	       iter_us / o.dilation / 1e3, samples,
	       samples / (procs * o.single_throughput), a / o.dilation,
	       b * 1e3 / o.dilation, groups, p.n);
	tally_disconnect(c);
	free(p.t);
	return 0;
}
