// SPDX-License-Identifier: BSD-3-Clause
/*
 * cuda_emu.c - a host EMULATION of the part of the CUDA runtime that
 * libtally-cuda calls, defined against the real <cuda_runtime_api.h>
 * declarations, so that its pipeline (slots, events, flags, the progress
 * thread, errors) runs in CI where there is no GPU.  cudart is not linked.
 *
 * The model, kept to what CUDA guarantees:
 * - One device (0).  "Device memory" is host memory from a table of
 *   cudaMalloc ranges; pinned memory (cudaHostAlloc, cudaHostRegister) is
 *   another table, mapped, its device pointer itself.  Anything else is
 *   cudaMemoryTypeUnregistered.  Copies and kernels check that their
 *   device side lies in one of those ranges.
 * - Every stream, the legacy default stream too, is a thread that runs
 *   its queue in order; an op is done when the thread has run it.  The
 *   legacy stream and the blocking streams wait for each other's earlier
 *   work (implicit synchronization); cudaStreamNonBlocking streams do not.
 * - cudaEventRecord makes a new mark, done when the stream reaches it; the
 *   event is its latest mark.  cudaStreamWaitEvent waits for the mark the
 *   event held AT THE CALL, whatever is recorded later; cudaEventQuery
 *   says whether the latest mark is done.  Marks are counted references,
 *   so an event may be destroyed while waits on it are queued, as in CUDA.
 * - Before each op a stream sleeps a random while (seeded,
 *   $TALLY_CUDA_EMU_SEED), and copies run in pieces, so the interleaving
 *   changes from run to run and a missing dependency gives wrong data.
 * - Idle streams sleep on condition variables; waits for marks too.
 * - A failing kernel is a device fault: sticky, returned by every later
 *   call, as on a GPU.
 * - cudaGetDriverEntryPointByVersion finds no driver symbol (cudaSuccess,
 *   NULL, cudaDriverEntryPointSymbolNotFound, as documented for a driver
 *   that lacks one), so stream_wait.c uses its polling kernel.
 */
#include "cuda_emu.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EMU_STREAM_MAGIC 0x5354524dU
#define EMU_EVENT_MAGIC 0x45564e54U
#define EMU_COPY_PIECE 16384	/* copies run in pieces of this, jittered */

/* a point in a stream: done when the stream has run past it */
struct emu_mark {
	int refs;
	bool done;
};

enum emu_op_kind { OP_COPY, OP_SET, OP_RECORD, OP_WAIT, OP_KERNEL };

struct emu_op {
	struct emu_op *next;
	enum emu_op_kind kind;
	void *dst;		/* COPY, SET */
	const void *src;	/* COPY */
	size_t bytes;		/* COPY, SET */
	int value;		/* SET */
	struct emu_mark *mark;	/* RECORD, WAIT */
	emu_kernel_fn fn;	/* KERNEL */
	void *arg;		/* KERNEL: owned by the op */
};

struct CUstream_st {
	unsigned int magic;
	unsigned int flags;
	struct CUstream_st *next_live;
	pthread_t thread;
	pthread_cond_t work;
	struct emu_op *head, *tail;
	uint64_t queued, done;	/* ops ever queued, ops run */
	bool destroyed;		/* drain, then free */
	uint64_t rng;
};

struct CUevent_st {
	unsigned int magic;
	struct emu_mark *last;	/* latest record; NULL: never recorded */
};

enum emu_range_kind { RANGE_DEVICE, RANGE_HOST_ALLOC, RANGE_HOST_REG };

struct emu_range {
	char *base;
	size_t bytes;
	enum emu_range_kind kind;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t changed;		/* an op ran or a mark got done */
	struct CUstream_st *live;	/* every stream, legacy included */
	struct CUstream_st *legacy;
	struct emu_range *ranges;
	size_t nranges, cap;
	cudaError_t sticky;		/* a device fault */
	uint64_t seed;
	unsigned int streams_made;
} emu = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.changed = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t seed_once = PTHREAD_ONCE_INIT;
static __thread cudaError_t last_error;
static __thread int current_device;

/* ---- errors ---- */

static cudaError_t ret(cudaError_t e)
{
	if (e != cudaSuccess && e != cudaErrorNotReady)
		last_error = e;
	return e;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = emu.sticky;
	return e;
}

cudaError_t cudaPeekAtLastError(void)
{
	return last_error;
}

/* the runtime's own texts for the codes this emulation returns */
const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInvalidDevice:
		return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle:
		return "invalid resource handle";
	case cudaErrorInvalidMemcpyDirection:
		return "invalid copy direction for memcpy";
	case cudaErrorNotReady:
		return "device not ready";
	case cudaErrorIllegalAddress:
		return "an illegal memory access was encountered";
	case cudaErrorLaunchFailure:
		return "unspecified launch failure";
	case cudaErrorHostMemoryAlreadyRegistered:
		return "part or all of the requested memory range is already "
		       "mapped";
	case cudaErrorHostMemoryNotRegistered:
		return "pointer does not correspond to a registered memory "
		       "region";
	case cudaErrorNoDevice:
		return "no CUDA-capable device is detected";
	case cudaErrorInsufficientDriver:
		return "CUDA driver version is insufficient for CUDA runtime "
		       "version";
	case cudaErrorNotSupported:
		return "operation not supported";
	default:
		return "unrecognized error code";
	}
}

const char *cudaGetErrorName(cudaError_t error)
{
	switch (error) {
	case cudaSuccess:
		return "cudaSuccess";
	case cudaErrorInvalidValue:
		return "cudaErrorInvalidValue";
	case cudaErrorNotReady:
		return "cudaErrorNotReady";
	case cudaErrorIllegalAddress:
		return "cudaErrorIllegalAddress";
	default:
		return "cudaErrorUnknown";
	}
}

/* ---- jitter ---- */

static void seed_init(void)
{
	const char *env = getenv("TALLY_CUDA_EMU_SEED");
	struct timespec ts;

	if (env && *env) {
		emu.seed = strtoull(env, NULL, 0);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	emu.seed = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20 ^
		   (uint64_t)getpid() << 40;
}

uint64_t emu_seed(void)
{
	pthread_once(&seed_once, seed_init);
	return emu.seed;
}

static uint64_t next_rand(uint64_t *s)	/* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* none a quarter of the time, mostly up to 30 us, now and then 0.2-1 ms */
static void jitter(uint64_t *rng)
{
	uint64_t r = next_rand(rng);
	struct timespec ts = { 0, 0 };

	if ((r & 3) == 0)
		return;
	if (((r >> 2) & 31) == 0)
		ts.tv_nsec = 200000 + (long)((r >> 8) % 800000);
	else
		ts.tv_nsec = (long)((r >> 8) % 30000);
	nanosleep(&ts, NULL);
}

/* ---- memory tables (emu.lock held) ---- */

static struct emu_range *range_of(const void *p, size_t bytes)
{
	const char *c = p;
	size_t i;

	for (i = 0; i < emu.nranges; i++) {
		struct emu_range *r = &emu.ranges[i];

		if (c >= r->base && c < r->base + r->bytes &&
		    bytes <= (size_t)(r->base + r->bytes - c))
			return r;
	}
	return NULL;
}

static bool overlaps(const void *p, size_t bytes)
{
	const char *c = p;
	size_t i;

	for (i = 0; i < emu.nranges; i++)
		if (c < emu.ranges[i].base + emu.ranges[i].bytes &&
		    emu.ranges[i].base < c + bytes)
			return true;
	return false;
}

static cudaError_t range_add(void *p, size_t bytes, enum emu_range_kind k)
{
	if (emu.nranges == emu.cap) {
		size_t cap = emu.cap ? emu.cap * 2 : 16;
		struct emu_range *r = realloc(emu.ranges, cap * sizeof(*r));

		if (!r)
			return cudaErrorMemoryAllocation;
		emu.ranges = r;
		emu.cap = cap;
	}
	emu.ranges[emu.nranges++] = (struct emu_range){ p, bytes, k };
	return cudaSuccess;
}

static void range_remove(struct emu_range *r)
{
	*r = emu.ranges[--emu.nranges];
}

bool emu_device_accessible(const void *p, size_t bytes)
{
	bool ok;

	pthread_mutex_lock(&emu.lock);
	ok = range_of(p, bytes) != NULL;
	pthread_mutex_unlock(&emu.lock);
	return ok;
}

/* ---- marks and streams (emu.lock held) ---- */

static struct emu_mark *mark_new(void)
{
	struct emu_mark *m = calloc(1, sizeof(*m));

	if (m)
		m->refs = 1;
	return m;
}

static void mark_put(struct emu_mark *m)
{
	if (m && --m->refs == 0)
		free(m);
}

static void op_free(struct emu_op *op)
{
	if (op->kind == OP_RECORD || op->kind == OP_WAIT)
		mark_put(op->mark);
	free(op->arg);
	free(op);
}

static void run_op(struct CUstream_st *s, struct emu_op *op)
{
	size_t at, n;
	cudaError_t e;

	switch (op->kind) {
	case OP_RECORD:
		op->mark->done = true;
		break;
	case OP_WAIT:
		while (!op->mark->done)
			pthread_cond_wait(&emu.changed, &emu.lock);
		break;
	case OP_COPY:
		if (emu.sticky)
			break;
		pthread_mutex_unlock(&emu.lock);
		for (at = 0; at < op->bytes; at += n) {
			n = op->bytes - at;
			if (n > EMU_COPY_PIECE)
				n = EMU_COPY_PIECE;
			if (at)
				jitter(&s->rng);
			memmove((char *)op->dst + at,
				(const char *)op->src + at, n);
		}
		pthread_mutex_lock(&emu.lock);
		break;
	case OP_SET:
		if (emu.sticky)
			break;
		pthread_mutex_unlock(&emu.lock);
		memset(op->dst, op->value, op->bytes);
		pthread_mutex_lock(&emu.lock);
		break;
	case OP_KERNEL:
		if (emu.sticky)
			break;
		pthread_mutex_unlock(&emu.lock);
		e = op->fn(op->arg);
		pthread_mutex_lock(&emu.lock);
		if (e != cudaSuccess && !emu.sticky)
			emu.sticky = e;
		break;
	}
}

static void stream_unlink(struct CUstream_st *s)
{
	struct CUstream_st **pp;

	for (pp = &emu.live; *pp; pp = &(*pp)->next_live)
		if (*pp == s) {
			*pp = s->next_live;
			return;
		}
}

static void *stream_main(void *arg)
{
	struct CUstream_st *s = arg;
	struct emu_op *op;

	pthread_mutex_lock(&emu.lock);
	for (;;) {
		while (!s->head && !s->destroyed)
			pthread_cond_wait(&s->work, &emu.lock);
		op = s->head;
		if (!op)
			break;		/* destroyed and drained */
		pthread_mutex_unlock(&emu.lock);
		jitter(&s->rng);
		pthread_mutex_lock(&emu.lock);
		run_op(s, op);
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->done++;
		op_free(op);
		pthread_cond_broadcast(&emu.changed);
	}
	stream_unlink(s);
	pthread_mutex_unlock(&emu.lock);
	pthread_cond_destroy(&s->work);
	free(s);
	return NULL;
}

static struct CUstream_st *stream_new(unsigned int flags)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));
	pthread_attr_t attr;
	int r;

	if (!s)
		return NULL;
	emu_seed();
	s->magic = EMU_STREAM_MAGIC;
	s->flags = flags;
	s->rng = emu.seed ^ (0x9e3779b97f4a7c15ull * ++emu.streams_made);
	pthread_cond_init(&s->work, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&s->thread, &attr, stream_main, s);
	pthread_attr_destroy(&attr);
	if (r) {
		pthread_cond_destroy(&s->work);
		free(s);
		return NULL;
	}
	s->next_live = emu.live;
	emu.live = s;
	return s;
}

/* the stream a handle names: NULL and cudaStreamLegacy are the legacy
 * default stream (made on first use) */
static struct CUstream_st *stream_of(cudaStream_t h)
{
	if (!h || h == cudaStreamLegacy) {
		if (!emu.legacy)
			emu.legacy = stream_new(cudaStreamDefault);
		return emu.legacy;
	}
	if (h == cudaStreamPerThread || h->magic != EMU_STREAM_MAGIC ||
	    h->destroyed)
		return NULL;	/* the per-thread stream is not emulated */
	return h;
}

static void push(struct CUstream_st *s, struct emu_op *op)
{
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	s->queued++;
	pthread_cond_signal(&s->work);
}

static bool is_blocking(const struct CUstream_st *s)
{
	return !(s->flags & cudaStreamNonBlocking);
}

/* @s waits for the work queued so far on @t: a mark recorded on @t */
static cudaError_t push_dependency(struct CUstream_st *s,
				   struct CUstream_st *t)
{
	struct emu_op *rec = calloc(1, sizeof(*rec));
	struct emu_op *wait = calloc(1, sizeof(*wait));
	struct emu_mark *m = mark_new();

	if (!rec || !wait || !m) {
		free(rec);
		free(wait);
		free(m);
		return cudaErrorMemoryAllocation;
	}
	m->refs = 2;
	rec->kind = OP_RECORD;
	rec->mark = m;
	wait->kind = OP_WAIT;
	wait->mark = m;
	push(t, rec);
	push(s, wait);
	return cudaSuccess;
}

/* the legacy stream and the blocking streams wait for each other's
 * earlier work (CUDA's implicit synchronization) */
static cudaError_t implicit_sync(struct CUstream_st *s)
{
	struct CUstream_st *t;
	cudaError_t e = cudaSuccess;

	if (s == emu.legacy) {
		for (t = emu.live; t && !e; t = t->next_live)
			if (t != s && is_blocking(t) && t->head)
				e = push_dependency(s, t);
	} else if (is_blocking(s) && emu.legacy && emu.legacy->head) {
		e = push_dependency(s, emu.legacy);
	}
	return e;
}

/* queue @op on @h, after the implicit dependencies; frees @op on failure */
static cudaError_t enqueue(cudaStream_t h, struct emu_op *op,
			   struct CUstream_st **out)
{
	struct CUstream_st *s;
	cudaError_t e;

	if (emu.sticky) {
		e = emu.sticky;
		goto fail;
	}
	s = stream_of(h);
	if (!s) {
		e = h == NULL || h == cudaStreamLegacy ?
		    cudaErrorMemoryAllocation : cudaErrorInvalidResourceHandle;
		goto fail;
	}
	e = implicit_sync(s);
	if (e)
		goto fail;
	push(s, op);
	if (out)
		*out = s;
	return cudaSuccess;

fail:
	op_free(op);
	return e;
}

/* wait until @s has run its first @n ops */
static void wait_done(struct CUstream_st *s, uint64_t n)
{
	while (s->done < n)
		pthread_cond_wait(&emu.changed, &emu.lock);
}

/* until every stream is idle (cudaDeviceSynchronize); rescans after each
 * wake-up, since a destroyed stream frees itself once drained */
static void device_sync(void)
{
	struct CUstream_st *s;

	for (;;) {
		for (s = emu.live; s && s->done >= s->queued; s = s->next_live)
			;
		if (!s)
			return;
		pthread_cond_wait(&emu.changed, &emu.lock);
	}
}

static cudaError_t locked_ret(cudaError_t e)
{
	pthread_mutex_unlock(&emu.lock);
	return ret(e);
}

/* ---- device ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return ret(cudaErrorInvalidValue);
	*count = 1;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return ret(cudaErrorInvalidValue);
	*device = current_device;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	if (device != 0)
		return ret(cudaErrorInvalidDevice);
	current_device = device;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	pthread_mutex_lock(&emu.lock);
	device_sync();
	return locked_ret(emu.sticky);
}

static int first_pci_device(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* a real PCI device of this host, so that sysfs has its numa_node */
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
	struct dirent **names = NULL;
	char id[32] = "0000:00:00.0";
	int n, i;

	if (device != 0)
		return ret(cudaErrorInvalidDevice);
	if (!pciBusId || len < 13)
		return ret(cudaErrorInvalidValue);
	n = scandir("/sys/bus/pci/devices", &names, first_pci_device,
		    alphasort);
	if (n > 0)
		snprintf(id, sizeof(id), "%.31s", names[0]->d_name);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	for (i = 0; id[i]; i++)		/* the runtime writes upper case */
		if (id[i] >= 'a' && id[i] <= 'f')
			id[i] = (char)(id[i] - 'a' + 'A');
	snprintf(pciBusId, (size_t)len, "%s", id);
	return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol,
	void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus)
{
	(void)cudaVersion;
	(void)flags;
	if (!symbol || !funcPtr)
		return ret(cudaErrorInvalidValue);
	*funcPtr = NULL;
	if (driverStatus)
		*driverStatus = cudaDriverEntryPointSymbolNotFound;
	return cudaSuccess;
}

/* ---- memory ---- */

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	void *p;
	cudaError_t e;

	if (!devPtr)
		return ret(cudaErrorInvalidValue);
	*devPtr = NULL;
	if (!size)
		return cudaSuccess;
	p = aligned_alloc(256, (size + 255) & ~(size_t)255);
	if (!p)
		return ret(cudaErrorMemoryAllocation);
	memset(p, 0xff, size);	/* uninitialized: reads as NaN / -1 */
	pthread_mutex_lock(&emu.lock);
	e = range_add(p, size, RANGE_DEVICE);
	pthread_mutex_unlock(&emu.lock);
	if (e) {
		free(p);
		return ret(e);
	}
	*devPtr = p;
	return cudaSuccess;
}

/* free a range of @kind starting at @p, after the device is idle (CUDA's
 * frees synchronize the device) */
static cudaError_t range_free(void *p, enum emu_range_kind kind,
			      cudaError_t not_found, bool free_memory)
{
	struct emu_range *r;

	pthread_mutex_lock(&emu.lock);
	device_sync();
	r = range_of(p, 0);
	if (!r || r->base != p || r->kind != kind)
		return locked_ret(not_found);
	range_remove(r);
	pthread_mutex_unlock(&emu.lock);
	if (free_memory)
		free(p);
	return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
	if (!devPtr)
		return cudaSuccess;
	return range_free(devPtr, RANGE_DEVICE, cudaErrorInvalidValue, true);
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	void *p;
	cudaError_t e;

	(void)flags;
	if (!pHost || !size)
		return ret(cudaErrorInvalidValue);
	p = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!p)
		return ret(cudaErrorMemoryAllocation);
	pthread_mutex_lock(&emu.lock);
	e = range_add(p, size, RANGE_HOST_ALLOC);
	pthread_mutex_unlock(&emu.lock);
	if (e) {
		free(p);
		return ret(e);
	}
	*pHost = p;
	return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
	if (!ptr)
		return cudaSuccess;
	return range_free(ptr, RANGE_HOST_ALLOC, cudaErrorInvalidValue, true);
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	cudaError_t e;

	(void)flags;
	if (!ptr || !size)
		return ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&emu.lock);
	if (overlaps(ptr, size))
		return locked_ret(cudaErrorHostMemoryAlreadyRegistered);
	e = range_add(ptr, size, RANGE_HOST_REG);
	return locked_ret(e);
}

cudaError_t cudaHostUnregister(void *ptr)
{
	return range_free(ptr, RANGE_HOST_REG,
			  cudaErrorHostMemoryNotRegistered, false);
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost,
				     unsigned int flags)
{
	struct emu_range *r;

	if (!pDevice || flags)
		return ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&emu.lock);
	r = range_of(pHost, 0);
	if (!r || r->kind == RANGE_DEVICE)
		return locked_ret(cudaErrorInvalidValue);
	pthread_mutex_unlock(&emu.lock);
	*pDevice = pHost;	/* unified addressing: the same address */
	return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
				     const void *ptr)
{
	struct emu_range *r;

	if (!attributes)
		return ret(cudaErrorInvalidValue);
	memset(attributes, 0, sizeof(*attributes));
	pthread_mutex_lock(&emu.lock);
	r = range_of(ptr, 0);
	if (!r) {
		attributes->type = cudaMemoryTypeUnregistered;
		attributes->device = cudaInvalidDeviceId;
	} else if (r->kind == RANGE_DEVICE) {
		attributes->type = cudaMemoryTypeDevice;
		attributes->devicePointer = (void *)ptr;
	} else {
		attributes->type = cudaMemoryTypeHost;
		attributes->devicePointer = (void *)ptr;
		attributes->hostPointer = (void *)ptr;
	}
	pthread_mutex_unlock(&emu.lock);
	return cudaSuccess;
}

/* does the copy's device side lie in device or pinned memory, and its
 * host side outside device memory */
static bool copy_valid(void *dst, const void *src, size_t n,
		       enum cudaMemcpyKind kind)
{
	struct emu_range *r;

	switch (kind) {
	case cudaMemcpyHostToDevice:
		r = range_of(src, 0);
		return range_of(dst, n) && !(r && r->kind == RANGE_DEVICE);
	case cudaMemcpyDeviceToHost:
		r = range_of(dst, 0);
		return range_of(src, n) && !(r && r->kind == RANGE_DEVICE);
	case cudaMemcpyDeviceToDevice:
		return range_of(src, n) && range_of(dst, n);
	default:
		return true;
	}
}

/*
 * Queue @op on @stream if @valid (found by the caller under emu.lock,
 * which this releases); with @sync, wait until it ran and report the
 * device's sticky error, as a synchronous call does.
 */
static cudaError_t queue_locked(struct emu_op *op, bool valid,
				cudaStream_t stream, bool sync)
{
	struct CUstream_st *s;
	cudaError_t e;

	if (!valid) {
		free(op);
		return locked_ret(cudaErrorInvalidValue);
	}
	e = enqueue(stream, op, &s);
	if (!e && sync) {
		wait_done(s, s->queued);
		e = emu.sticky;
	}
	return locked_ret(e);
}

static cudaError_t copy_queue(void *dst, const void *src, size_t count,
			      enum cudaMemcpyKind kind, cudaStream_t stream,
			      bool sync)
{
	struct emu_op *op;

	if ((unsigned int)kind > cudaMemcpyDefault)
		return ret(cudaErrorInvalidMemcpyDirection);
	if (!count)
		return cudaSuccess;
	op = calloc(1, sizeof(*op));
	if (!op)
		return ret(cudaErrorMemoryAllocation);
	op->kind = OP_COPY;
	op->dst = dst;
	op->src = src;
	op->bytes = count;
	pthread_mutex_lock(&emu.lock);
	return queue_locked(op, copy_valid(dst, src, count, kind), stream,
			    sync);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
		       enum cudaMemcpyKind kind)
{
	return copy_queue(dst, src, count, kind, NULL, true);
}

/* emu_fail_async_copy(): the copy kind and countdown (0: disarmed) */
static struct {
	enum cudaMemcpyKind kind;
	unsigned int countdown;
} copy_fault;

void emu_fail_async_copy(enum cudaMemcpyKind kind, unsigned int nth)
{
	pthread_mutex_lock(&emu.lock);
	copy_fault.kind = kind;
	copy_fault.countdown = nth;
	pthread_mutex_unlock(&emu.lock);
}

static bool copy_fault_now(enum cudaMemcpyKind kind)
{
	bool now = false;

	pthread_mutex_lock(&emu.lock);
	if (copy_fault.countdown && kind == copy_fault.kind)
		now = --copy_fault.countdown == 0;
	pthread_mutex_unlock(&emu.lock);
	return now;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
			    enum cudaMemcpyKind kind, cudaStream_t stream)
{
	if (copy_fault_now(kind))
		return ret(cudaErrorMemoryAllocation);
	return copy_queue(dst, src, count, kind, stream, false);
}

static cudaError_t set_queue(void *devPtr, int value, size_t count,
			     cudaStream_t stream, bool sync)
{
	struct emu_op *op;

	if (!count)
		return cudaSuccess;
	op = calloc(1, sizeof(*op));
	if (!op)
		return ret(cudaErrorMemoryAllocation);
	op->kind = OP_SET;
	op->dst = devPtr;
	op->value = value;
	op->bytes = count;
	pthread_mutex_lock(&emu.lock);
	return queue_locked(op, range_of(devPtr, count) != NULL, stream, sync);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	return set_queue(devPtr, value, count, NULL, true);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
			    cudaStream_t stream)
{
	return set_queue(devPtr, value, count, stream, false);
}

/* ---- kernels ---- */

cudaError_t emu_launch(cudaStream_t stream, emu_kernel_fn fn,
		       const void *arg, size_t arg_bytes)
{
	struct emu_op *op = calloc(1, sizeof(*op));
	cudaError_t e;

	if (!op)
		return ret(cudaErrorMemoryAllocation);
	op->kind = OP_KERNEL;
	op->fn = fn;
	if (arg_bytes) {
		op->arg = malloc(arg_bytes);
		if (!op->arg) {
			free(op);
			return ret(cudaErrorMemoryAllocation);
		}
		memcpy(op->arg, arg, arg_bytes);
	}
	pthread_mutex_lock(&emu.lock);
	e = enqueue(stream, op, NULL);
	return locked_ret(e);
}

struct host_fn_call {
	cudaHostFn_t fn;
	void *user;
};

static cudaError_t host_fn_run(void *arg)
{
	struct host_fn_call *c = arg;

	c->fn(c->user);
	return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
			       void *userData)
{
	struct host_fn_call c = { fn, userData };

	if (!fn)
		return ret(cudaErrorInvalidValue);
	return emu_launch(stream, host_fn_run, &c, sizeof(c));
}

/* ---- streams ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream,
				      unsigned int flags)
{
	struct CUstream_st *s;

	if (!pStream || flags & ~(unsigned int)cudaStreamNonBlocking)
		return ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&emu.lock);
	s = stream_new(flags);
	pthread_mutex_unlock(&emu.lock);
	if (!s)
		return ret(cudaErrorMemoryAllocation);
	*pStream = s;
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

/* queued work still runs; the thread frees the stream when it is done */
cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	struct CUstream_st *s;

	pthread_mutex_lock(&emu.lock);
	s = stream_of(stream);
	if (!s || s == emu.legacy)
		return locked_ret(cudaErrorInvalidResourceHandle);
	s->destroyed = true;
	s->magic = 0;
	pthread_cond_signal(&s->work);
	return locked_ret(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	struct CUstream_st *s;

	pthread_mutex_lock(&emu.lock);
	s = stream_of(stream);
	if (!s)
		return locked_ret(cudaErrorInvalidResourceHandle);
	wait_done(s, s->queued);
	return locked_ret(emu.sticky);
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	struct CUstream_st *s;

	pthread_mutex_lock(&emu.lock);
	s = stream_of(stream);
	if (!s)
		return locked_ret(cudaErrorInvalidResourceHandle);
	if (emu.sticky)
		return locked_ret(emu.sticky);
	return locked_ret(s->done < s->queued ? cudaErrorNotReady :
			  cudaSuccess);
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	struct CUevent_st *ev;

	(void)flags;
	if (!event)
		return ret(cudaErrorInvalidValue);
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return ret(cudaErrorMemoryAllocation);
	ev->magic = EMU_EVENT_MAGIC;
	*event = ev;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, cudaEventDefault);
}

static bool event_valid(cudaEvent_t ev)
{
	return ev && ev->magic == EMU_EVENT_MAGIC;
}

/* waits queued on the event keep their marks: destroying is safe */
cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	pthread_mutex_lock(&emu.lock);
	if (!event_valid(event))
		return locked_ret(cudaErrorInvalidResourceHandle);
	event->magic = 0;
	mark_put(event->last);
	pthread_mutex_unlock(&emu.lock);
	free(event);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	struct emu_op *op;
	struct emu_mark *m;
	cudaError_t e;

	op = calloc(1, sizeof(*op));
	m = mark_new();
	if (!op || !m) {
		free(op);
		free(m);
		return ret(cudaErrorMemoryAllocation);
	}
	op->kind = OP_RECORD;
	op->mark = m;
	pthread_mutex_lock(&emu.lock);
	if (!event_valid(event)) {
		op_free(op);
		return locked_ret(cudaErrorInvalidResourceHandle);
	}
	m->refs = 2;	/* the op's and the event's */
	e = enqueue(stream, op, NULL);
	if (e) {
		mark_put(m);	/* the event's: enqueue freed the op's */
		return locked_ret(e);
	}
	mark_put(event->last);
	event->last = m;
	return locked_ret(cudaSuccess);
}

/* waits for the mark the event holds now, not for later records */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
				unsigned int flags)
{
	struct emu_op *op;
	cudaError_t e;

	if (flags)
		return ret(cudaErrorInvalidValue);
	op = calloc(1, sizeof(*op));
	if (!op)
		return ret(cudaErrorMemoryAllocation);
	op->kind = OP_WAIT;
	pthread_mutex_lock(&emu.lock);
	if (!event_valid(event)) {
		free(op);
		return locked_ret(cudaErrorInvalidResourceHandle);
	}
	if (!stream_of(stream)) {
		free(op);
		return locked_ret(cudaErrorInvalidResourceHandle);
	}
	if (!event->last || event->last->done) {	/* nothing to wait for */
		free(op);
		return locked_ret(emu.sticky);
	}
	op->mark = event->last;
	op->mark->refs++;
	e = enqueue(stream, op, NULL);
	return locked_ret(e);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	pthread_mutex_lock(&emu.lock);
	if (!event_valid(event))
		return locked_ret(cudaErrorInvalidResourceHandle);
	if (emu.sticky)
		return locked_ret(emu.sticky);
	return locked_ret(event->last && !event->last->done ?
			  cudaErrorNotReady : cudaSuccess);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	struct emu_mark *m;

	pthread_mutex_lock(&emu.lock);
	if (!event_valid(event))
		return locked_ret(cudaErrorInvalidResourceHandle);
	m = event->last;
	if (m) {
		m->refs++;
		while (!m->done)
			pthread_cond_wait(&emu.changed, &emu.lock);
		mark_put(m);
	}
	return locked_ret(emu.sticky);
}
