// SPDX-License-Identifier: BSD-3-Clause
/*
 * gpu-bench - libtally-cuda on one GPU: copies through tally's pinned
 * shared memory, the conversion and quantization kernels, and how well a
 * device all-reduce's stages overlap.  A local tallyd (--local-size 2) is
 * started here; two member processes share GPU 0 (CUDA is used only in
 * them, after fork()).  Member 0 measures alone where one process is
 * enough; both take part in the all-reduces.
 *
 * copies (member 0, --copy-mib, default 256 MiB; cudaEvent timing of
 *   cudaMemcpyAsync, median of --reps after one warm-up):
 *	figure gpu_d2h_gbps, gpu_h2d_gbps: device <-> tally_cuda_alloc()
 *	figure gpu_copy_frac_of_peak: the smaller of the two over the same
 *	  copy with cudaHostAlloc() memory (the link's pinned peak)
 * kernels (member 0, the same size of float32):
 *	figure gpu_convert_frac_of_copy: tcu_convert_f32_to_bf16's bytes
 *	  read + written per second over a device-to-device cudaMemcpy's
 *	  (2 x its size per second)
 *	figure gpu_quantize_frac_of_copy: tcu_quantize_f32 (k = 256) the
 *	  same way (the float32 in, the words out, the shifts read)
 * pipeline (both members at once, 64 MiB float32, released together by a
 *   barrier; a run's time is the slower member's, wall clock; median of
 *   --reps after one warm-up):
 *	end to end: tally_cuda_allreduce() in place + cudaStreamSynchronize
 *	stages alone: cudaMemcpyAsync D2H into tally_cuda_alloc() memory,
 *	  tally_allreduce() + tally_wait() on tally_alloc() memory, H2D
 *	figure gpu_pipeline_overlap_64MiB: end to end (default chunk) over
 *	  the sum of the stages; below 1 when they overlap
 *	figure gpu_best_chunk_kib: the fastest chunk of a sweep 256 KiB ..
 *	  16 MiB (each a fresh tally_cuda_open())
 *
 * A failure prints the CUDA or tally call and its error; figures not
 * measured print as nan and the exit status is 1.
 *
 * usage: gpu-bench [--tallyd PATH] [--reps N] [--copy-mib N]
 *        ($TALLYD when --tallyd is not given)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
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
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <tally/tally.h>
#include <tally/tally_cuda.h>
#include "gpu/kernels/kernels.h"
#include "tool_daemon.h"
#include "bench_stats.h"

#define MEMBERS 2
#define MAX_REPS 64
#define PIPE_BYTES ((size_t)64 << 20)
#define QUANT_K 256
#define QUANT_SHIFT 24		/* |x| < 1 here: well inside the words */
#define FILL_BYTE 0x3c		/* float 0x3c3c3c3c = 0.0115: finite */
#define BARRIER_MS 120000
#define WAIT_MS 60000
#define RUN_TIMEOUT_S 200	/* it takes well under a minute */

static const size_t sweep_kib[] = {
	256, 512, 1024, 2048, 4096, 8192, 16384,
};
#define NSWEEP (sizeof(sweep_kib) / sizeof(sweep_kib[0]))

enum stage { ST_D2H, ST_HOST, ST_H2D, ST_E2E, NSTAGES };
static const char *const stage_name[NSTAGES] = {
	"D2H to tally shm", "host tally_allreduce", "H2D from tally shm",
	"tally_cuda_allreduce",
};

/* in a MAP_SHARED mapping: what the members share */
struct shared {
	atomic_int bar_count, bar_gen;
	atomic_int failed;
	double t[MEMBERS][MAX_REPS];	/* one series' times, ms */
	/* the figures, NAN until measured */
	double d2h_gbps, h2d_gbps, copy_frac, convert_frac, quantize_frac;
	double overlap, best_chunk_kib;
};

struct opts {
	const char *tallyd;
	int reps;
	size_t copy_bytes;
};

static struct shared *sh;
static struct opts opt = { .reps = 7, .copy_bytes = (size_t)256 << 20 };
static int rank_ = -1;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double median(const double *v, int n)
{
	double s[MAX_REPS];

	memcpy(s, v, n * sizeof(*v));
	return bench_median(s, n);
}

static double min_of(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

/* a member's failure: say what, and release the other from barriers */
static int fail(const char *call, const char *why)
{
	fprintf(stderr, "gpu-bench: member %d: %s: %s\n", rank_, call, why);
	atomic_store(&sh->failed, 1);
	return -1;
}

static int fail_cuda(const char *call, cudaError_t e)
{
	return fail(call, cudaGetErrorString(e));
}

static int fail_tally(const char *call, int r, struct tally_cuda *tc)
{
	char why[512];

	snprintf(why, sizeof(why), "%s%s%s", tally_strerror(r),
		 tc ? " - " : "", tc ? tally_cuda_error_message(tc) : "");
	return fail(call, why);
}

#define CUDA_TRY(call)							\
	do {								\
		cudaError_t e_ = (call);				\
		if (e_ != cudaSuccess)					\
			return fail_cuda(#call, e_);			\
	} while (0)

/* both members here, or -1 when the other failed or never came */
static int barrier(void)
{
	int gen = atomic_load(&sh->bar_gen);
	double deadline = now_ms() + BARRIER_MS;
	struct timespec nap = { 0, 20000 };

	if (atomic_fetch_add(&sh->bar_count, 1) == MEMBERS - 1) {
		atomic_store(&sh->bar_count, 0);
		atomic_fetch_add(&sh->bar_gen, 1);
		return 0;
	}
	while (atomic_load(&sh->bar_gen) == gen) {
		if (atomic_load(&sh->failed))
			return -1;
		if (now_ms() > deadline)
			return fail("barrier", "the other member did not come");
		nanosleep(&nap, NULL);
	}
	return 0;
}

/* ---- copies and kernels: member 0 alone, cudaEvent timing ---- */

struct timer {
	cudaStream_t s;
	cudaEvent_t start, stop;
};

typedef cudaError_t (*work_fn)(void *arg, cudaStream_t s);

/* median ms of @work over opt.reps runs after a warm-up */
static int time_work(struct timer *tm, work_fn work, void *arg,
		     const char *what, double *ms)
{
	double t[MAX_REPS];
	cudaError_t e;
	float f;

	for (int i = -1; i < opt.reps; i++) {
		CUDA_TRY(cudaEventRecord(tm->start, tm->s));
		e = work(arg, tm->s);
		if (e != cudaSuccess)
			return fail_cuda(what, e);
		CUDA_TRY(cudaEventRecord(tm->stop, tm->s));
		CUDA_TRY(cudaEventSynchronize(tm->stop));
		CUDA_TRY(cudaEventElapsedTime(&f, tm->start, tm->stop));
		if (i >= 0)
			t[i] = f;
	}
	*ms = median(t, opt.reps);
	return 0;
}

struct copy_arg {
	void *dst;
	const void *src;
	size_t bytes;
	enum cudaMemcpyKind kind;
};

static cudaError_t do_copy(void *p, cudaStream_t s)
{
	struct copy_arg *a = p;

	return cudaMemcpyAsync(a->dst, a->src, a->bytes, a->kind, s);
}

struct kernel_arg {
	void *out;
	const float *x;
	size_t n;
	const int32_t *shift;
};

static cudaError_t do_convert(void *p, cudaStream_t s)
{
	struct kernel_arg *a = p;

	return tcu_convert_f32_to_bf16(a->out, a->x, a->n, s);
}

static cudaError_t do_quantize(void *p, cudaStream_t s)
{
	struct kernel_arg *a = p;

	return tcu_quantize_f32(a->out, a->x, a->n, QUANT_K, a->shift, s);
}

static double gbps(double bytes, double ms)
{
	return bytes / (ms * 1e6);
}

static int time_copy(struct timer *tm, void *dst, const void *src,
		     enum cudaMemcpyKind kind, const char *name, double *gb)
{
	struct copy_arg a = { dst, src, opt.copy_bytes, kind };
	double ms;

	if (time_work(tm, do_copy, &a, name, &ms))
		return -1;
	*gb = gbps((double)opt.copy_bytes, ms);
	printf("  %-34s %9.3f ms %8.2f GB/s\n", name, ms, *gb);
	return 0;
}

struct copy_bufs {
	void *dev, *dev2, *shm, *pinned;
	int32_t *shift;
};

static int copy_bufs_get(struct tally_cuda *tc, struct copy_bufs *b)
{
	size_t n = opt.copy_bytes / sizeof(float);
	size_t blocks = (n + QUANT_K - 1) / QUANT_K;
	int32_t *shift_host;
	cudaError_t e;

	CUDA_TRY(cudaMalloc(&b->dev, opt.copy_bytes));
	CUDA_TRY(cudaMalloc(&b->dev2, opt.copy_bytes));
	CUDA_TRY(cudaMemset(b->dev, FILL_BYTE, opt.copy_bytes));
	CUDA_TRY(cudaMemset(b->dev2, 0, opt.copy_bytes));
	b->shm = tally_cuda_alloc(tc, opt.copy_bytes);
	if (!b->shm)
		return fail("tally_cuda_alloc", tally_cuda_error_message(tc));
	memset(b->shm, FILL_BYTE, opt.copy_bytes);
	CUDA_TRY(cudaHostAlloc(&b->pinned, opt.copy_bytes,
			       cudaHostAllocDefault));
	memset(b->pinned, FILL_BYTE, opt.copy_bytes);
	CUDA_TRY(cudaMalloc((void **)&b->shift, blocks * sizeof(int32_t)));
	shift_host = malloc(blocks * sizeof(int32_t));
	if (!shift_host)
		return fail("malloc", strerror(ENOMEM));
	for (size_t i = 0; i < blocks; i++)
		shift_host[i] = QUANT_SHIFT;
	e = cudaMemcpy(b->shift, shift_host, blocks * sizeof(int32_t),
		       cudaMemcpyHostToDevice);
	free(shift_host);
	if (e != cudaSuccess)
		return fail_cuda("cudaMemcpy (shifts)", e);
	return 0;
}

static void copy_bufs_put(struct tally_cuda *tc, struct copy_bufs *b)
{
	cudaFree(b->shift);
	cudaFreeHost(b->pinned);
	tally_cuda_free(tc, b->shm);
	cudaFree(b->dev2);
	cudaFree(b->dev);
}

static int run_copies(struct tally_cuda *tc)
{
	struct copy_bufs b = { 0 };
	struct timer tm;
	double d2h, h2d, pd2h, ph2d, d2d, ms;
	size_t n = opt.copy_bytes / sizeof(float);
	struct kernel_arg k = { .n = n };
	double conv_bytes = (double)n * (4 + 2);
	double quant_bytes = (double)n * (4 + 4) +
			     (double)((n + QUANT_K - 1) / QUANT_K) * 4;
	int r = -1;

	CUDA_TRY(cudaStreamCreateWithFlags(&tm.s, cudaStreamNonBlocking));
	CUDA_TRY(cudaEventCreate(&tm.start));
	CUDA_TRY(cudaEventCreate(&tm.stop));
	if (copy_bufs_get(tc, &b))
		goto out;
	printf("copies and kernels, %zu MiB, median of %d (member 0):\n",
	       opt.copy_bytes >> 20, opt.reps);
	if (time_copy(&tm, b.shm, b.dev, cudaMemcpyDeviceToHost,
		      "D2H to tally_cuda_alloc", &d2h) ||
	    time_copy(&tm, b.dev, b.shm, cudaMemcpyHostToDevice,
		      "H2D from tally_cuda_alloc", &h2d) ||
	    time_copy(&tm, b.pinned, b.dev, cudaMemcpyDeviceToHost,
		      "D2H to cudaHostAlloc", &pd2h) ||
	    time_copy(&tm, b.dev, b.pinned, cudaMemcpyHostToDevice,
		      "H2D from cudaHostAlloc", &ph2d) ||
	    time_copy(&tm, b.dev2, b.dev, cudaMemcpyDeviceToDevice,
		      "D2D (one way)", &d2d))
		goto out;
	d2d *= 2;	/* read + written, as the kernels are counted */
	printf("  %-34s %21.2f GB/s\n", "D2D read + written", d2d);
	sh->d2h_gbps = d2h;
	sh->h2d_gbps = h2d;
	sh->copy_frac = fmin(d2h / pd2h, h2d / ph2d);

	k.x = b.dev;
	k.out = b.dev2;
	if (time_work(&tm, do_convert, &k, "tcu_convert_f32_to_bf16", &ms))
		goto out;
	printf("  %-34s %9.3f ms %8.2f GB/s\n", "convert f32->bf16 (r+w)",
	       ms, gbps(conv_bytes, ms));
	sh->convert_frac = gbps(conv_bytes, ms) / d2d;
	k.shift = b.shift;
	if (time_work(&tm, do_quantize, &k, "tcu_quantize_f32", &ms))
		goto out;
	printf("  %-34s %9.3f ms %8.2f GB/s\n", "quantize f32 k=256 (r+w)",
	       ms, gbps(quant_bytes, ms));
	sh->quantize_frac = gbps(quant_bytes, ms) / d2d;
	r = 0;
out:
	copy_bufs_put(tc, &b);
	cudaEventDestroy(tm.stop);
	cudaEventDestroy(tm.start);
	cudaStreamDestroy(tm.s);
	return r;
}

/* ---- the pipeline: both members, barrier-released, wall clock ---- */

struct member {
	struct tally_client *c;
	struct tally_cuda *tc;
	cudaStream_t s;
	float *dev;
	void *shm;		/* PIPE_BYTES of tally_cuda_alloc() */
	uint64_t iteration;
};

/* one run of @st; its wall time in ms */
static int run_stage(struct member *m, enum stage st, double *ms)
{
	struct tally_cuda_allreduce_args ca = {
		.key = 1, .iteration = m->iteration++,
		.sendbuf = m->dev, .recvbuf = m->dev,
		.count = PIPE_BYTES / sizeof(float), .dtype = TALLY_FLOAT32,
		.wire_dtype = TALLY_FLOAT32, .op = TALLY_SUM,
	};
	struct tally_allreduce_args ha = {
		.key = 2, .iteration = ca.iteration,
		.sendbuf = m->shm, .recvbuf = m->shm,
		.count = PIPE_BYTES / sizeof(float), .dtype = TALLY_FLOAT32,
		.op = TALLY_SUM,
	};
	double t0;
	uint64_t req;
	int r;

	if (barrier())
		return -1;
	t0 = now_ms();
	switch (st) {
	case ST_D2H:
		CUDA_TRY(cudaMemcpyAsync(m->shm, m->dev, PIPE_BYTES,
					 cudaMemcpyDeviceToHost, m->s));
		CUDA_TRY(cudaStreamSynchronize(m->s));
		break;
	case ST_H2D:
		CUDA_TRY(cudaMemcpyAsync(m->dev, m->shm, PIPE_BYTES,
					 cudaMemcpyHostToDevice, m->s));
		CUDA_TRY(cudaStreamSynchronize(m->s));
		break;
	case ST_HOST:
		r = tally_allreduce(m->c, &ha, &req);
		if (!r)
			r = tally_wait(m->c, req, WAIT_MS);
		if (r)
			return fail_tally("tally_allreduce/tally_wait", r,
					  NULL);
		break;
	default:
		r = tally_cuda_allreduce(m->tc, &ca, m->s);
		if (r)
			return fail_tally("tally_cuda_allreduce", r, m->tc);
		CUDA_TRY(cudaStreamSynchronize(m->s));
		r = tally_cuda_async_error(m->tc);
		if (r)
			return fail_tally("tally_cuda_allreduce (async)", r,
					  m->tc);
		break;
	}
	*ms = now_ms() - t0;
	return 0;
}

/* median over runs of the slower member's time; member 0 prints it */
static int time_stage(struct member *m, enum stage st, const char *label,
		      double *med)
{
	double worst[MAX_REPS], ms;

	for (int i = -1; i < opt.reps; i++) {
		if (run_stage(m, st, &ms))
			return -1;
		if (i >= 0)
			sh->t[rank_][i] = ms;
	}
	if (barrier())
		return -1;
	for (int i = 0; i < opt.reps; i++)
		worst[i] = fmax(sh->t[0][i], sh->t[1][i]);
	*med = median(worst, opt.reps);
	if (rank_ == 0)
		printf("  %-34s %9.3f ms (best %.3f) %8.2f GB/s\n",
		       label ? label : stage_name[st], *med,
		       min_of(worst, opt.reps),
		       gbps((double)PIPE_BYTES, *med));
	/* nobody writes sh->t for the next series before both read it */
	return barrier();
}

static int cuda_open(struct member *m, size_t chunk_bytes)
{
	struct tally_cuda_opts o = TALLY_CUDA_OPTS_INIT;
	int r;

	o.chunk_bytes = chunk_bytes;
	r = tally_cuda_open(m->c, &o, &m->tc);
	/* a container's seccomp profile may refuse mbind(): measure the
	 * rest anyway, and say so */
	if (r && strstr(tally_cuda_open_error(), "mbind")) {
		fprintf(stderr, "WARNING: gpu-bench: member %d: "
			"tally_cuda_open: %s; again without NUMA placement\n",
			rank_, tally_cuda_open_error());
		o.numa_node = TALLY_CUDA_NUMA_NONE;
		r = tally_cuda_open(m->c, &o, &m->tc);
	}
	if (r) {
		m->tc = NULL;
		return fail("tally_cuda_open", tally_cuda_open_error());
	}
	return 0;
}

static void cuda_close(struct member *m)
{
	if (m->shm)
		tally_cuda_free(m->tc, m->shm);
	m->shm = NULL;
	tally_cuda_close(m->tc);
	m->tc = NULL;
}

static int run_pipeline(struct member *m)
{
	double stage[NSTAGES], sweep[NSWEEP];
	size_t best = 0;

	if (rank_ == 0)
		printf("pipeline, 64 MiB float32 SUM, 2 processes on one GPU, "
		       "median of %d of the slower member:\n", opt.reps);
	m->shm = tally_cuda_alloc(m->tc, PIPE_BYTES);
	if (!m->shm)
		return fail("tally_cuda_alloc",
			    tally_cuda_error_message(m->tc));
	if (time_stage(m, ST_D2H, NULL, &stage[ST_D2H]) ||
	    time_stage(m, ST_H2D, NULL, &stage[ST_H2D]) ||
	    time_stage(m, ST_E2E, NULL, &stage[ST_E2E]))
		return -1;
	if (rank_ == 0)
		printf("chunk sweep of tally_cuda_allreduce (depth %u):\n",
		       TALLY_CUDA_DEPTH_DEFAULT);
	for (size_t i = 0; i < NSWEEP; i++) {
		char name[64];

		cuda_close(m);
		if (cuda_open(m, sweep_kib[i] << 10))
			return -1;
		snprintf(name, sizeof(name), "chunk %zu KiB", sweep_kib[i]);
		if (time_stage(m, ST_E2E, name, &sweep[i]))
			return -1;
		best = sweep[i] < sweep[best] ? i : best;
	}
	/* the client is the caller's again: the host all-reduce alone */
	cuda_close(m);
	m->shm = tally_alloc(m->c, PIPE_BYTES);
	if (!m->shm)
		return fail_tally("tally_alloc", tally_last_error(m->c), NULL);
	memset(m->shm, FILL_BYTE, PIPE_BYTES);
	if (time_stage(m, ST_HOST, NULL, &stage[ST_HOST]))
		return -1;
	tally_free(m->c, m->shm);
	m->shm = NULL;
	sh->overlap = stage[ST_E2E] /
		      (stage[ST_D2H] + stage[ST_HOST] + stage[ST_H2D]);
	sh->best_chunk_kib = (double)sweep_kib[best];
	return 0;
}

static int member_run(void)
{
	struct member m = { 0 };
	char sock[128];
	int r;

	CUDA_TRY(cudaSetDevice(0));
	snprintf(sock, sizeof(sock), "%s", getenv("GPU_BENCH_SOCK"));
	r = tally_connect(sock, &m.c);
	if (r)
		return fail_tally("tally_connect", r, NULL);
	if (cuda_open(&m, 0))
		return -1;
	CUDA_TRY(cudaStreamCreateWithFlags(&m.s, cudaStreamNonBlocking));
	CUDA_TRY(cudaMalloc((void **)&m.dev, PIPE_BYTES));
	CUDA_TRY(cudaMemset(m.dev, FILL_BYTE, PIPE_BYTES));
	if (rank_ == 0 && run_copies(m.tc))
		return -1;
	if (barrier() || run_pipeline(&m))
		return -1;
	cudaFree(m.dev);
	cudaStreamDestroy(m.s);
	tally_disconnect(m.c);
	return 0;
}

/* ---- the parent: tallyd, the members, the figures ---- */

struct daemon {
	char dir[32];
	struct tool_daemon tallyd;
};

static int daemon_start(struct daemon *d)
{
	const char *argv[] = { opt.tallyd, "--socket", d->tallyd.sock,
			       "--local-size", "2", NULL };

	snprintf(d->dir, sizeof(d->dir), "/tmp/gpu-bench-XXXXXX");
	if (!mkdtemp(d->dir)) {
		perror("gpu-bench: mkdtemp");
		return -1;
	}
	snprintf(d->tallyd.sock, sizeof(d->tallyd.sock), "%s/tallyd.sock",
		 d->dir);
	snprintf(d->tallyd.log, sizeof(d->tallyd.log), "%s/tallyd.log",
		 d->dir);
	return tool_daemon_start(&d->tallyd, argv, "gpu-bench");
}

static void show_log(const struct daemon *d)
{
	char line[512];
	FILE *f = fopen(d->tallyd.log, "r");

	if (!f)
		return;
	fprintf(stderr, "gpu-bench: tallyd's log:\n");
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  %s", line);
	fclose(f);
}

static void daemon_stop(struct daemon *d, bool show)
{
	tool_daemon_stop(&d->tallyd, "gpu-bench");
	if (show)
		show_log(d);
	unlink(d->tallyd.sock);
	unlink(d->tallyd.log);
	rmdir(d->dir);
}

/* wait for the members, killing them at the deadline; 0: both exited 0 */
static int reap(pid_t *pid)
{
	double deadline = now_ms() + RUN_TIMEOUT_S * 1e3;
	int left = 0, bad = 0, st;

	for (int i = 0; i < MEMBERS; i++) {
		if (pid[i] > 0)
			left++;
		else
			bad = 1;	/* fork failed */
	}
	while (left) {
		for (int i = 0; i < MEMBERS; i++) {
			if (pid[i] <= 0 || waitpid(pid[i], &st, WNOHANG) !=
			    pid[i])
				continue;
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				bad = 1;
			if (WIFSIGNALED(st))
				fprintf(stderr, "gpu-bench: member %d killed "
					"by signal %d\n", i, WTERMSIG(st));
			pid[i] = 0;
			left--;
		}
		if (left && now_ms() > deadline) {
			fprintf(stderr, "gpu-bench: members still running "
				"after %d s: killed\n", RUN_TIMEOUT_S);
			for (int i = 0; i < MEMBERS; i++)
				if (pid[i] > 0)
					kill(pid[i], SIGKILL);
			deadline = INFINITY;
			bad = 1;
		}
		usleep(10000);
	}
	return bad ? -1 : 0;
}

static void print_figures(void)
{
	printf("figure gpu_d2h_gbps %.2f GB/s\n", sh->d2h_gbps);
	printf("figure gpu_h2d_gbps %.2f GB/s\n", sh->h2d_gbps);
	printf("figure gpu_copy_frac_of_peak %.3f ratio\n", sh->copy_frac);
	printf("figure gpu_convert_frac_of_copy %.3f ratio\n",
	       sh->convert_frac);
	printf("figure gpu_quantize_frac_of_copy %.3f ratio\n",
	       sh->quantize_frac);
	printf("figure gpu_pipeline_overlap_64MiB %.3f ratio\n", sh->overlap);
	printf("figure gpu_best_chunk_kib %.0f KiB\n", sh->best_chunk_kib);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: gpu-bench [--tallyd PATH] [--reps N] "
		"[--copy-mib N]\n  (without --tallyd: $TALLYD)\n");
}

static int parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "tallyd", required_argument, NULL, 't' },
		{ "reps", required_argument, NULL, 'r' },
		{ "copy-mib", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int ch;

	opt.tallyd = getenv("TALLYD");
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 't':
			opt.tallyd = optarg;
			break;
		case 'r':
			opt.reps = atoi(optarg);
			break;
		case 'c':
			opt.copy_bytes = strtoull(optarg, NULL, 0) << 20;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (!opt.tallyd || optind != argc) {
		usage(stderr);
		return -1;
	}
	if (opt.reps < 1 || opt.reps > MAX_REPS || !opt.copy_bytes) {
		fprintf(stderr, "gpu-bench: --reps 1..%d, --copy-mib > 0\n",
			MAX_REPS);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct daemon d = { 0 };
	pid_t pid[MEMBERS];
	int r;

	if (parse(argc, argv))
		return 2;
	/* a member killed at the deadline keeps the lines it printed */
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("gpu-bench: mmap");
		return 1;
	}
	sh->d2h_gbps = sh->h2d_gbps = sh->copy_frac = NAN;
	sh->convert_frac = sh->quantize_frac = NAN;
	sh->overlap = sh->best_chunk_kib = NAN;
	if (daemon_start(&d)) {
		daemon_stop(&d, true);
		print_figures();
		return 1;
	}
	setenv("GPU_BENCH_SOCK", d.tallyd.sock, 1);
	for (int i = 0; i < MEMBERS; i++) {
		fflush(NULL);
		pid[i] = fork();
		if (pid[i] == 0) {
			rank_ = i;
			r = member_run();
			fflush(NULL);
			_exit(r ? 1 : 0);
		}
		if (pid[i] < 0) {
			perror("gpu-bench: fork");
			atomic_store(&sh->failed, 1);
		}
	}
	r = reap(pid);
	daemon_stop(&d, r != 0);
	print_figures();
	return r ? 1 : 0;
}
