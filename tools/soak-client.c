// SPDX-License-Identifier: BSD-3-Clause
/*
 * soak-client - one training process of tools/soak: continuous all-reduces
 * of random sizes, dtypes and ops, every result checked exactly.
 *
 * Every client of one generation (--gen) computes the same sequence of
 * operations from --seed: a count, dtype, op and in-place flag drawn from
 * hash(seed, gen, i) for operation i.  An iteration is --window operations
 * (drawn from the seed when 0), submitted together, the last one flagged
 * TALLY_F_LAST_OF_ITERATION: operation i has key i % window, priority
 * i % window and iteration (gen << 20) + i / window: distinct across
 * generations in the 32 bits of the iteration that reach the wire
 * (tly_tensor_id), since a job that repeats an earlier job's (key,
 * iteration) on the same daemons finds its tensors taken for stale ones.
 * Consecutive pairs of an iteration form a merge group (the plan every
 * process computes alike, as tools/replay sends one; the mgwfbp schedule
 * merges by it); --no-plan sends group 0 instead, and --same-iterations
 * starts every generation at iteration 0, as every new training run does.
 *
 * Exact checking: the client with contributor bit b (host * local + local
 * rank) sends c(e) * 2^b for element e, where c(e) is drawn from the same
 * hash, so the sum over all P processes of the job is c(e) * (2^P - 1).
 * The value ranges keep every partial sum exactly representable in the
 * dtype (float16: |c| <= 8; bfloat16: c a power of two; float32: |c| <
 * 2^15), and the fixed-point wire format represents such integers exactly
 * (docs/protocol.md, section 2), so a float result is checked exactly as
 * well.  AVG is drawn only when it is exact (int32, or P a power of two).
 * A result that is not c(e) * (2^P - 1) everywhere, or a send buffer the
 * daemon changed, is a wrong result.
 *
 * It reports on stdout, one line per event, for the driver to parse:
 *   ready RANK                  connected (local rank)
 *   progress OPS BYTES          twice a second
 *   wrong OP DTYPE COUNT IDX GOT EXPECTED WHAT    (result or sendbuf)
 *   error OP CODE MONO_NS       an operation failed (then it exits)
 *   stuck OP MS                 an operation pending past --op-timeout-ms
 *   left MONO_NS                SIGUSR1: disconnected with work pending
 *   noconnect CODE              gave up connecting
 *   done OPS BYTES WRONG        at exit
 * MONO_NS is CLOCK_MONOTONIC, the clock the driver stamps its faults with.
 * SIGTERM ends it after the operation it waits for (at most 100 ms).
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tally/tally.h>
#include "dataplane/half.h"

#define MAX_WINDOW 8
#define MAX_PROCS 8		/* c(e) * (2^P - 1) stays exact up to 8 */
#define WAIT_SLICE_MS 100
#define MAX_WRONG_LINES 8
#define ITER_BITS 20		/* iterations of one generation */

struct soak_opts {
	const char *socket;
	int host, local, procs;
	uint64_t seed, gen;
	uint64_t max_count;
	int window;		/* 0: drawn per generation, 1..4 */
	int op_timeout_ms;
	int connect_timeout_ms;
	bool no_plan;		/* group 0: mgwfbp merges by timing alone */
	bool same_iterations;	/* every generation from iteration 0 */
};

struct op {
	bool busy;
	uint64_t index, req, count, h;
	enum tally_dtype dtype;
	enum tally_op rop;
	bool inplace;
	uint64_t start_ns;
	void *send, *recv;
	void *out;		/* the slot's receive buffer when not in place */
};

static volatile sig_atomic_t stop_flag, leave_flag;

static void on_term(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void on_usr1(int sig)
{
	(void)sig;
	leave_flag = 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static const char *dtype_name(enum tally_dtype t)
{
	static const char *const names[] = { "float32", "float16",
					     "bfloat16", "int32" };

	return (unsigned int)t < TALLY_DTYPE_MAX ? names[t] : "?";
}

/* c(e): the job-wide base value of element e, exact in every partial sum */
static int32_t base_value(enum tally_dtype t, uint64_t h, uint64_t e)
{
	uint64_t r = mix64(h ^ (e * 0xd6e8feb86659fd93ull));

	switch (t) {
	case TALLY_INT32:
		return (int32_t)(r % (2u << 20)) - (1 << 20);
	case TALLY_FLOAT32:
		return (int32_t)(r % (2u << 15)) - (1 << 15);
	case TALLY_FLOAT16:
		return (int32_t)(r % 17) - 8;
	default:		/* bfloat16: 0 or +-2^k, k < 4 */
		if (r % 9 == 0)
			return 0;
		return (r & 16 ? -1 : 1) * (1 << (r % 4));
	}
}

static void put_elem(void *buf, enum tally_dtype t, uint64_t e, int64_t v)
{
	switch (t) {
	case TALLY_INT32:
		((uint32_t *)buf)[e] = (uint32_t)v;
		break;
	case TALLY_FLOAT32:
		((float *)buf)[e] = (float)v;
		break;
	case TALLY_FLOAT16:
		((uint16_t *)buf)[e] = float_to_half((float)v);
		break;
	default:
		((uint16_t *)buf)[e] = float_to_bf16((float)v);
		break;
	}
}

static double get_elem(const void *buf, enum tally_dtype t, uint64_t e)
{
	switch (t) {
	case TALLY_INT32:
		return (double)((const int32_t *)buf)[e];
	case TALLY_FLOAT32:
		return ((const float *)buf)[e];
	case TALLY_FLOAT16:
		return half_to_float(((const uint16_t *)buf)[e]);
	default:
		return bf16_to_float(((const uint16_t *)buf)[e]);
	}
}

/* What every process of the job must receive for element e. */
static double expected(const struct soak_opts *o, const struct op *op,
		       uint64_t e)
{
	int64_t c = base_value(op->dtype, op->h, e);
	int64_t sum = c * (int64_t)((1u << o->procs) - 1);

	if (op->dtype == TALLY_INT32) {
		if (op->rop == TALLY_AVG)
			return (double)(int32_t)(sum / o->procs);
		return (double)(int32_t)(uint32_t)sum;	/* wraps mod 2^32 */
	}
	if (op->rop == TALLY_AVG)
		return (double)((float)sum * (1.0f / (float)o->procs));
	return (double)sum;
}

static void draw_op(const struct soak_opts *o, struct op *op, uint64_t i)
{
	uint64_t h = mix64(o->seed ^ mix64(o->gen * 0x100000001b3ull + i));
	uint64_t span = 0;
	bool pow2 = (o->procs & (o->procs - 1)) == 0;

	while ((2ull << span) <= o->max_count)
		span++;
	op->index = i;
	op->h = h;
	op->dtype = (enum tally_dtype)(h % TALLY_DTYPE_MAX);
	/* log-uniform count in [1, max_count] */
	op->count = (1ull << ((h >> 8) % (span + 1)));
	op->count += (h >> 16) % op->count;
	if (op->count > o->max_count)
		op->count = o->max_count;
	op->rop = ((h >> 40) % 4 == 0 &&
		   (op->dtype == TALLY_INT32 || pow2)) ? TALLY_AVG : TALLY_SUM;
	op->inplace = (h >> 44) & 1;
}

static void fill(struct op *op, int bit)
{
	for (uint64_t e = 0; e < op->count; e++) {
		int64_t c = base_value(op->dtype, op->h, e);

		put_elem(op->send, op->dtype, e, c * (1ll << bit));
		if (!op->inplace)	/* poison: the result must replace it */
			put_elem(op->recv, op->dtype, e, 12345);
	}
}

static int check(const struct soak_opts *o, const struct op *op, int bit,
		 int *lines)
{
	int bad = 0;

	for (uint64_t e = 0; e < op->count && !bad; e++) {
		double got = get_elem(op->recv, op->dtype, e);
		double want = expected(o, op, e);
		const char *what = "result";

		if (got == want && !op->inplace) {
			int64_t c = base_value(op->dtype, op->h, e);

			want = (double)(c * (1ll << bit));
			got = get_elem(op->send, op->dtype, e);
			what = "sendbuf";
		}
		if (got == want)
			continue;
		bad = 1;
		if ((*lines)++ < MAX_WRONG_LINES)
			printf("wrong %llu %s%s %llu %llu %.17g %.17g %s%s\n",
			       (unsigned long long)op->index,
			       dtype_name(op->dtype),
			       op->rop == TALLY_AVG ? "/avg" : "",
			       (unsigned long long)op->count,
			       (unsigned long long)e, got, want, what,
			       op->inplace ? " inplace" : "");
	}
	return bad;
}

static int connect_retry(const struct soak_opts *o, struct tally_client **c)
{
	uint64_t end = mono_ns() + (uint64_t)o->connect_timeout_ms * 1000000;
	useconds_t pause = 20000;
	int ret;

	for (;;) {
		ret = tally_connect(o->socket, c);
		if (!ret || stop_flag || mono_ns() > end)
			return ret;
		usleep(pause);		/* daemon down or job not yet free */
		if (pause < 320000)
			pause *= 2;
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: soak-client --socket PATH --host H --local L "
		"--procs P --seed S --gen G\n"
		"                   [--max-count N] [--window W] "
		"[--op-timeout-ms MS] [--connect-timeout-ms MS]\n"
		"                   [--no-plan] [--same-iterations]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct soak_opts *o)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "host", required_argument, NULL, 'H' },
		{ "local", required_argument, NULL, 'L' },
		{ "procs", required_argument, NULL, 'P' },
		{ "seed", required_argument, NULL, 'S' },
		{ "gen", required_argument, NULL, 'G' },
		{ "max-count", required_argument, NULL, 'm' },
		{ "window", required_argument, NULL, 'w' },
		{ "op-timeout-ms", required_argument, NULL, 't' },
		{ "connect-timeout-ms", required_argument, NULL, 'c' },
		{ "no-plan", no_argument, NULL, 'n' },
		{ "same-iterations", no_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 }
	};
	int ch;

	*o = (struct soak_opts){ .max_count = 1 << 16, .local = 1,
				 .procs = 1, .op_timeout_ms = 30000,
				 .connect_timeout_ms = 15000 };
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 's': o->socket = optarg; break;
		case 'H': o->host = atoi(optarg); break;
		case 'L': o->local = atoi(optarg); break;
		case 'P': o->procs = atoi(optarg); break;
		case 'S': o->seed = strtoull(optarg, NULL, 0); break;
		case 'G': o->gen = strtoull(optarg, NULL, 0); break;
		case 'm': o->max_count = strtoull(optarg, NULL, 0); break;
		case 'w': o->window = atoi(optarg); break;
		case 't': o->op_timeout_ms = atoi(optarg); break;
		case 'c': o->connect_timeout_ms = atoi(optarg); break;
		case 'n': o->no_plan = true; break;
		case 'i': o->same_iterations = true; break;
		default: usage();
		}
	}
	if (!o->socket || o->procs < 1 || o->procs > MAX_PROCS ||
	    o->local < 1 || o->host < 0 || (o->host + 1) * o->local > o->procs ||
	    o->max_count < 1 || o->window < 0 || o->window > MAX_WINDOW ||
	    o->op_timeout_ms < 1)
		usage();
	if (!o->window)
		o->window = 1 + (int)(mix64(o->seed ^ o->gen) % 4);
	if (o->gen >= 1u << (32 - ITER_BITS))
		usage();
}

/* Submit operation i into slot op; 0, or a tally error. */
static int submit(struct tally_client *c, const struct soak_opts *o,
		  struct op *op, uint64_t i, int bit)
{
	struct tally_allreduce_args a;
	int ret;

	draw_op(o, op, i);
	op->recv = op->inplace ? op->send : op->out;
	fill(op, bit);
	/* an iteration is one window of gradients, the last one flagged
	 * (the bsp schedule waits for it) */
	a = (struct tally_allreduce_args){
		.key = i % (uint64_t)o->window,
		.iteration = (o->same_iterations ? 0 : o->gen << ITER_BITS) +
			     i / (uint64_t)o->window,
		.sendbuf = op->send, .recvbuf = op->recv,
		.count = op->count, .dtype = op->dtype, .op = op->rop,
		.priority = (uint32_t)(i % (uint64_t)o->window),
		.group = o->no_plan ? 0 :
			 1 + (uint32_t)(i % (uint64_t)o->window) / 2,
		.flags = i % (uint64_t)o->window == (uint64_t)o->window - 1 ?
			 TALLY_F_LAST_OF_ITERATION : 0,
	};
	op->start_ns = mono_ns();
	ret = tally_allreduce(c, &a, &op->req);
	op->busy = !ret;
	return ret;
}

static void setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_term };

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
}

int main(int argc, char **argv)
{
	struct soak_opts o;
	struct tally_client *c = NULL;
	struct op ops[MAX_WINDOW] = { 0 };
	unsigned long long nops = 0, bytes = 0, wrong = 0;
	uint64_t next = 0, last_progress = 0;
	int bit, ret, lines = 0, status = 0;
	size_t slot_bytes;
	char *mem;

	parse(argc, argv, &o);
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup_signals();
	ret = connect_retry(&o, &c);
	if (ret) {
		printf("noconnect %d\n", -ret);
		return 2;
	}
	bit = o.host * o.local + tally_rank(c);
	slot_bytes = (o.max_count * 4 + 63) & ~(size_t)63;
	mem = tally_alloc(c, slot_bytes * 2 * (size_t)o.window);
	if (!mem || tally_rank(c) >= o.local) {
		printf("noconnect %d\n", mem ? TALLY_EINVAL : TALLY_ENOMEM);
		tally_disconnect(c);
		return 2;
	}
	for (int w = 0; w < o.window; w++) {
		ops[w].send = mem + slot_bytes * 2 * (size_t)w;
		ops[w].out = mem + slot_bytes * (2 * (size_t)w + 1);
	}
	printf("ready %d\n", tally_rank(c));

	while (!stop_flag && !leave_flag) {
		/* Operation i lives in slot i % window; they are submitted in
		 * order, so a busy slot for `next` holds the oldest in flight. */
		struct op *op = &ops[next % (uint64_t)o.window];
		uint64_t now;

		if (!op->busy) {
			ret = submit(c, &o, op, next, bit);
			if (ret) {
				printf("error %llu %d %llu\n",
				       (unsigned long long)next, -ret,
				       (unsigned long long)mono_ns());
				status = 1;
				break;
			}
			next++;
			continue;
		}
		ret = tally_wait(c, op->req, WAIT_SLICE_MS);
		now = mono_ns();
		if (ret == -TALLY_ETIMEDOUT) {
			if (now - op->start_ns >
			    (uint64_t)o.op_timeout_ms * 1000000) {
				printf("stuck %llu %llu\n",
				       (unsigned long long)op->index,
				       (unsigned long long)((now - op->start_ns) /
							    1000000));
				status = 1;
				break;
			}
		} else if (ret) {
			op->busy = false;
			printf("error %llu %d %llu\n",
			       (unsigned long long)op->index, -ret,
			       (unsigned long long)now);
			status = 1;
			break;
		} else {
			op->busy = false;
			if (check(&o, op, bit, &lines))
				wrong++;
			nops++;
			bytes += op->count * tally_dtype_size(op->dtype);
		}
		if (now - last_progress > 500000000ull) {
			printf("progress %llu %llu\n", nops, bytes);
			last_progress = now;
		}
	}
	if (leave_flag)
		printf("left %llu\n", (unsigned long long)mono_ns());
	printf("done %llu %llu %llu\n", nops, bytes, wrong);
	tally_disconnect(c);
	return wrong ? 3 : status;
}
