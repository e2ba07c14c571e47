// SPDX-License-Identifier: BSD-3-Clause
/*
 * tally-bench - all-reduce benchmark of a host's tallyd, shaped like
 * nccl-tests: -n client processes, a table of size, count, dtype, time,
 * algbw, busbw and check, optionally CSV.
 *
 * algbw = size / time; busbw = algbw * 2(n-1)/n, the bytes each member
 * would move in a bandwidth-optimal ring, so the numbers compare with NCCL's
 * and MPI's.  Time is the slowest member's average over the iterations.
 *
 * --memory-bound also times, in this process before the clients start, one
 * plain pass that sums n buffers into another of the same size: the memory
 * floor that any shared-memory all-reduce of n members has to beat.
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tally/tally.h>
#include "dataplane/half.h"
#include "bench_stats.h"

#define MAX_SIZES 32
#define MAX_CLIENTS 64

struct bench_opts {
	int nclients;
	size_t min_bytes, max_bytes;
	int factor;
	enum tally_dtype dtype;
	enum tally_op op;
	int warmup;
	int iters;		/* 0: chosen per size */
	bool check;
	bool csv;
	bool memory_bound;
	bool inplace;		/* recvbuf == sendbuf, as gradients are */
	int hosts;		/* hosts running this same benchmark */
	const char *socket;
};

/* Lives in a MAP_SHARED mapping: the children write, the parent reads. */
struct bench_shared {
	pthread_barrier_t barrier;
	int nsizes;
	size_t sizes[MAX_SIZES];
	double usec[MAX_SIZES][MAX_CLIENTS];
	/* the spread of one all-reduce's time: a window that opens slowly
	 * or a stall shows here and hides in the mean */
	double first_us[MAX_SIZES][MAX_CLIENTS];
	double p50_us[MAX_SIZES][MAX_CLIENTS];
	double max_us[MAX_SIZES][MAX_CLIENTS];
	long errors[MAX_SIZES][MAX_CLIENTS];
	int failed[MAX_CLIENTS];	/* a tally error code, 0 if fine */
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* first, median and largest of @n times (@t is sorted in place) */
static void spread(double *t, int n, double *first, double *p50,
		   double *max)
{
	*first = t[0];
	*p50 = bench_median(t, n);
	*max = t[n - 1];
}

static const char *dtype_name(enum tally_dtype t)
{
	static const char *const names[] = { "float", "half", "bfloat16",
					     "int32" };

	return (unsigned int)t < TALLY_DTYPE_MAX ? names[t] : "?";
}

static int iters_for(const struct bench_opts *o, size_t bytes)
{
	size_t n;

	if (o->iters)
		return o->iters;
	n = (256u << 20) / bytes;	/* ~256 MiB of traffic per size */
	return n < 5 ? 5 : n > 2000 ? 2000 : (int)n;
}

/* Small integers: exact in every dtype, so sums check bit for bit. */
static int pattern(int rank, size_t i)
{
	return (int)((i * 7 + (size_t)rank * 13) % 17) - 8;
}

static void fill(void *buf, enum tally_dtype t, size_t count, int rank)
{
	for (size_t i = 0; i < count; i++) {
		int v = pattern(rank, i);

		switch (t) {
		case TALLY_FLOAT32: ((float *)buf)[i] = (float)v; break;
		case TALLY_INT32: ((int32_t *)buf)[i] = v; break;
		case TALLY_FLOAT16:
			((uint16_t *)buf)[i] = float_to_half((float)v);
			break;
		default:
			((uint16_t *)buf)[i] = float_to_bf16((float)v);
			break;
		}
	}
}

static double value_at(const void *buf, enum tally_dtype t, size_t i)
{
	switch (t) {
	case TALLY_FLOAT32: return ((const float *)buf)[i];
	case TALLY_INT32: return ((const int32_t *)buf)[i];
	case TALLY_FLOAT16: return half_to_float(((const uint16_t *)buf)[i]);
	default: return bf16_to_float(((const uint16_t *)buf)[i]);
	}
}

static long verify(const void *buf, const struct bench_opts *o, size_t count)
{
	long bad = 0;

	for (size_t i = 0; i < count; i++) {
		double want = 0, got = value_at(buf, o->dtype, i);

		/* every host runs the same ranks with the same pattern */
		for (int r = 0; r < o->nclients; r++)
			want += o->hosts * pattern(r, i);
		if (o->op == TALLY_AVG) {
			want /= o->nclients * o->hosts;
			if (o->dtype == TALLY_INT32)
				want = trunc(want);
		}
		/* avg of floats is rounded: allow the dtype's half ulp */
		if (fabs(got - want) > (o->op == TALLY_AVG ?
					 fabs(want) / 128 + 1e-6 : 0))
			bad++;
	}
	return bad;
}

static int run_size(struct tally_client *c, const struct bench_opts *o,
		    struct bench_shared *sh, int si, int rank, void *sendbuf,
		    void *recvbuf, double *each, uint64_t *iteration)
{
	size_t bytes = sh->sizes[si];
	struct tally_allreduce_args a = {
		.key = (uint64_t)si, .sendbuf = sendbuf, .recvbuf = recvbuf,
		.count = bytes / tally_dtype_size(o->dtype),
		.dtype = o->dtype, .op = o->op,
	};
	int iters = iters_for(o, bytes);
	double t0 = 0, prev = 0;
	uint64_t req;
	int ret;

	for (int i = -o->warmup; i < iters; i++) {
		if (i == 0) {
			pthread_barrier_wait(&sh->barrier);
			t0 = prev = now_us();
		}
		a.iteration = (*iteration)++;
		ret = tally_allreduce(c, &a, &req);
		if (!ret)
			ret = tally_wait(c, req, -1);
		if (ret)
			return ret;
		if (i >= 0) {
			double t = now_us();

			each[i] = t - prev;
			prev = t;
		}
	}
	sh->usec[si][rank] = (prev - t0) / iters;
	spread(each, iters, &sh->first_us[si][rank], &sh->p50_us[si][rank],
	       &sh->max_us[si][rank]);
	if (o->check) {
		if (!o->inplace)
			memset(recvbuf, 0xff, bytes);
		fill(sendbuf, o->dtype, a.count, rank);
		a.iteration = (*iteration)++;
		ret = tally_allreduce(c, &a, &req);
		if (!ret)
			ret = tally_wait(c, req, -1);
		if (ret)
			return ret;
		sh->errors[si][rank] = verify(recvbuf, o, a.count);
	}
	pthread_barrier_wait(&sh->barrier);
	return 0;
}

static int client_main(const struct bench_opts *o, struct bench_shared *sh)
{
	struct tally_client *c;
	uint64_t iteration = 0;
	void *sendbuf, *recvbuf;
	double *each;		/* one time per timed iteration */
	int ret, rank;

	ret = tally_connect(o->socket, &c);
	if (ret) {
		fprintf(stderr, "tally-bench: connect: %s\n",
			tally_strerror(ret));
		return 1;
	}
	rank = tally_rank(c);
	sendbuf = tally_alloc(c, o->max_bytes);
	recvbuf = o->inplace ? sendbuf : tally_alloc(c, o->max_bytes);
	/* the smallest size runs the most iterations */
	each = malloc((size_t)iters_for(o, o->min_bytes) * sizeof(*each));
	if (!sendbuf || !recvbuf || !each) {
		fprintf(stderr, "tally-bench: cannot allocate %zu bytes\n",
			o->max_bytes);
		sh->failed[rank] = -TALLY_ENOMEM;
		free(each);
		pthread_barrier_wait(&sh->barrier);
		return 1;
	}
	fill(sendbuf, o->dtype, o->max_bytes / tally_dtype_size(o->dtype),
	     rank);
	pthread_barrier_wait(&sh->barrier);	/* everyone admitted */
	for (int si = 0; si < sh->nsizes && !ret; si++) {
		ret = run_size(c, o, sh, si, rank, sendbuf, recvbuf, each,
			       &iteration);
		if (ret) {
			fprintf(stderr, "tally-bench: rank %d: %s\n", rank,
				tally_strerror(ret));
			sh->failed[rank] = ret;
		}
	}
	free(each);
	tally_disconnect(c);
	return ret ? 1 : 0;
}

/* The sum written as plainly as C allows, so the compiler vectorises it:
 * one pass, every input read once, the output written once. */
static void plain_sum4(float *restrict out, const float *restrict a,
		       const float *restrict b, const float *restrict c,
		       const float *restrict d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = a[i] + b[i] + c[i] + d[i];
}

static void plain_add(float *restrict out, const float *restrict a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] += a[i];
}

/* One pass: out = in[0] + ... + in[n-1], float32, best of a few; for
 * other n than 4, in L1-sized blocks so it stays one pass over memory. */
static double memory_bound_us(int n, size_t bytes)
{
	size_t count = bytes / sizeof(float), blk = 4096;
	float *in[MAX_CLIENTS], *out = aligned_alloc(64, bytes);
	double best = 1e30;

	for (int k = 0; k < n; k++) {
		in[k] = aligned_alloc(64, bytes);
		memset(in[k], 0, bytes);
	}
	memset(out, 0, bytes);
	for (int rep = 0; rep < 5; rep++) {
		double t0 = now_us(), t;

		if (n == 4) {
			plain_sum4(out, in[0], in[1], in[2], in[3], count);
		} else {
			for (size_t b = 0; b < count; b += blk) {
				size_t m = count - b < blk ? count - b : blk;

				memcpy(out + b, in[0] + b, m * sizeof(float));
				for (int k = 1; k < n; k++)
					plain_add(out + b, in[k] + b, m);
			}
		}
		t = now_us() - t0;
		if (t < best)
			best = t;
	}
	for (int k = 0; k < n; k++)
		free(in[k]);
	free(out);
	return best;
}

static void report(const struct bench_opts *o, const struct bench_shared *sh,
		   const double *membound)
{
	int members = o->nclients * o->hosts;
	double bus = 2.0 * (members - 1) / members;

	if (o->csv)
		printf("size,count,type,op,time_us,algbw_gbps,busbw_gbps,"
		       "errors,first_us,p50_us,max_us%s\n", o->memory_bound ?
		       ",membound_us,frac_of_membound" : "");
	else
		printf("# tally-bench: %d clients, %s, %s, %s\n"
		       "%12s %12s %8s %4s %10s %8s %8s %6s%s\n",
		       o->nclients, dtype_name(o->dtype),
		       o->op == TALLY_SUM ? "sum" : "avg",
		       o->inplace ? "in place" : "out of place",
		       "size(B)", "count", "type", "op", "time(us)",
		       "algbw", "busbw", "check", o->memory_bound ?
		       "  membound(us)   frac" : "");
	for (int si = 0; si < sh->nsizes; si++) {
		size_t bytes = sh->sizes[si];
		double t = 0, first = 0, p50 = 0, max = 0, alg;
		long err = 0;

		/* the slowest client's mean; the largest first, median and
		 * longest of any client */
		for (int r = 0; r < o->nclients; r++) {
			t = fmax(t, sh->usec[si][r]);
			first = fmax(first, sh->first_us[si][r]);
			p50 = fmax(p50, sh->p50_us[si][r]);
			max = fmax(max, sh->max_us[si][r]);
			err += sh->errors[si][r];
		}
		alg = t > 0 ? (double)bytes / t / 1e3 : 0;
		if (o->csv) {
			printf("%zu,%zu,%s,%s,%.2f,%.3f,%.3f,%ld", bytes,
			       bytes / tally_dtype_size(o->dtype),
			       dtype_name(o->dtype),
			       o->op == TALLY_SUM ? "sum" : "avg", t, alg,
			       alg * bus, o->check ? err : -1);
			printf(",%.2f,%.2f,%.2f", first, p50, max);
		} else {
			printf("%12zu %12zu %8s %4s %10.2f %8.3f %8.3f %6s",
			       bytes, bytes / tally_dtype_size(o->dtype),
			       dtype_name(o->dtype),
			       o->op == TALLY_SUM ? "sum" : "avg", t, alg,
			       alg * bus, !o->check ? "-" : err ? "FAIL" : "ok");
		}
		if (o->memory_bound)
			printf(o->csv ? ",%.2f,%.3f" : "  %12.2f %6.3f",
			       membound[si], t > 0 ? membound[si] / t : 0);
		printf("\n");
	}
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	}
	return (size_t)v;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: tally-bench [-n clients] [-b min] [-e max] [-f factor]\n"
		"                   [-d float|half|bfloat16|int32] [-o sum|avg]\n"
		"                   [-w warmup] [-i iters] [--check] [--csv]\n"
		"                   [--memory-bound] [--inplace] [--socket PATH]\n"
		"                   [--hosts H]  (H hosts run the same benchmark:\n"
		"                                 --check expects their sum)\n"
		"Sizes take K/M/G suffixes.  The tallyd serving the socket must\n"
		"have --local-size equal to -n.\n");
	exit(2);
}

static void parse_opts(struct bench_opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "check", no_argument, NULL, 'c' },
		{ "csv", no_argument, NULL, 'C' },
		{ "memory-bound", no_argument, NULL, 'M' },
		{ "inplace", no_argument, NULL, 'I' },
		{ "hosts", required_argument, NULL, 'H' },
		{ "socket", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct bench_opts){ .nclients = 4, .min_bytes = 4096,
		.max_bytes = 64u << 20, .factor = 4, .warmup = 5, .hosts = 1 };
	while ((c = getopt_long(argc, argv, "n:b:e:f:d:o:w:i:h", lo,
				NULL)) != -1) {
		switch (c) {
		case 'n': o->nclients = atoi(optarg); break;
		case 'b': o->min_bytes = parse_size(optarg); break;
		case 'e': o->max_bytes = parse_size(optarg); break;
		case 'f': o->factor = atoi(optarg); break;
		case 'w': o->warmup = atoi(optarg); break;
		case 'i': o->iters = atoi(optarg); break;
		case 'c': o->check = true; break;
		case 'C': o->csv = true; break;
		case 'M': o->memory_bound = true; break;
		case 'I': o->inplace = true; break;
		case 'H': o->hosts = atoi(optarg); break;
		case 's': o->socket = optarg; break;
		case 'o':
			o->op = !strcmp(optarg, "avg") ? TALLY_AVG : TALLY_SUM;
			break;
		case 'd':
			for (int t = 0; t < TALLY_DTYPE_MAX; t++)
				if (!strcmp(optarg, dtype_name(t)))
					o->dtype = t;
			break;
		default: usage();
		}
	}
	if (o->nclients < 1 || o->nclients > MAX_CLIENTS || o->factor < 2 ||
	    o->min_bytes < 4 || o->max_bytes < o->min_bytes || o->warmup < 0 ||
	    o->iters < 0 || o->hosts < 1)
		usage();
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct bench_shared *sh;
	pthread_barrierattr_t ba;
	double membound[MAX_SIZES] = { 0 };
	pid_t pids[MAX_CLIENTS];
	int failed = 0;

	parse_opts(&o, argc, argv);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	for (size_t b = o.min_bytes; b <= o.max_bytes && sh->nsizes < MAX_SIZES;
	     b *= (size_t)o.factor)
		sh->sizes[sh->nsizes++] = b;
	if (o.memory_bound)
		for (int si = 0; si < sh->nsizes; si++)
			membound[si] = memory_bound_us(o.nclients,
						       sh->sizes[si]);
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&sh->barrier, &ba, (unsigned int)o.nclients);

	fflush(stdout);
	for (int r = 0; r < o.nclients; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			_exit(client_main(&o, sh));
		if (pids[r] < 0) {
			perror("fork");
			o.nclients = r;
			failed = 1;
			break;
		}
	}
	for (int r = 0; r < o.nclients; r++) {
		int status;

		if (wait(&status) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			/* the others would wait at a barrier forever */
			for (int k = 0; k < o.nclients && !failed; k++)
				kill(pids[k], SIGTERM);
			failed = 1;
		}
	}
	if (failed) {
		fprintf(stderr, "tally-bench: a client failed\n");
		return 1;
	}
	report(&o, sh, membound);
	for (int si = 0; si < sh->nsizes; si++)
		for (int r = 0; r < o.nclients; r++)
			if (sh->errors[si][r])
				return 1;
	return 0;
}
