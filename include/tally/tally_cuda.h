/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_cuda.h - the GPU side of the client: all-reduce of device buffers,
 * ordered on a CUDA stream (library libtally-cuda).
 *
 *	struct tally_client *c;
 *	struct tally_cuda *tc;
 *	struct tally_cuda_opts o = TALLY_CUDA_OPTS_INIT;
 *
 *	tally_connect(NULL, &c);
 *	tally_cuda_open(c, &o, &tc);             // the client now belongs to tc
 *	...backward pass queues grad on stream...
 *	tally_cuda_allreduce(tc, &(struct tally_cuda_allreduce_args){
 *		.key = layer_id, .iteration = step,
 *		.sendbuf = d_grad, .recvbuf = d_grad, .count = n,
 *		.dtype = TALLY_FLOAT32, .wire_dtype = TALLY_BFLOAT16,
 *		.op = TALLY_AVG }, stream);
 *	...optimizer kernels queued on stream see the result...
 *	cudaStreamSynchronize(stream);
 *	if (tally_cuda_async_error(tc)) ...tally_cuda_error_message(tc)...
 *	tally_cuda_close(tc);
 *	tally_disconnect(c);
 *
 * tally_cuda_allreduce() returns as soon as the work is queued: the host
 * thread never waits for the GPU or the daemon.  The tensor is cut into
 * chunks that flow through a pipeline of staging buffers in shared memory
 * (pinned for the GPU, placed on the GPU's NUMA node): device-to-host copy
 * of chunk i+1, the daemon's reduce of chunk i and host-to-device copy of
 * chunk i-1 run at the same time.  A helper thread submits each chunk to
 * tallyd when its copy has landed and releases the stream's copy back when
 * tallyd completes it (docs/gpu.md).
 *
 * Errors: calls return 0 or a negative TALLY_E* code.  A failure after the
 * call returned (a CUDA error on the internal streams, a daemon or peer
 * lost) never blocks the stream: the operation's recvbuf is then
 * unspecified, and tally_cuda_async_error() reports it, as NCCL's
 * ncclCommGetAsyncError() does.  Every CUDA failure names the CUDA call and
 * cudaGetErrorString() in tally_cuda_error_message().
 *
 * Thread safety: a struct tally_cuda is used by one thread at a time (its
 * helper thread is internal).  The client handed to tally_cuda_open() must
 * not be used directly until tally_cuda_close().
 */
#ifndef TALLY_TALLY_CUDA_H
#define TALLY_TALLY_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include <tally/tally.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tally_cuda;

/* numa_node: bind the staging segments to the GPU's node (sysfs) */
#define TALLY_CUDA_NUMA_GPU (-1)
/* numa_node: leave the segments to the kernel's default policy */
#define TALLY_CUDA_NUMA_NONE (-2)

/* default pipeline chunk and depth (docs/gpu.md says how they were chosen) */
#define TALLY_CUDA_CHUNK_DEFAULT (4u << 20)
#define TALLY_CUDA_DEPTH_DEFAULT 4u
#define TALLY_CUDA_DEPTH_MIN 3u
#define TALLY_CUDA_DEPTH_MAX 64u

struct tally_cuda_opts {
	size_t size;		/* sizeof(struct tally_cuda_opts) */
	int device;		/* CUDA device ordinal; -1: the current one */
	size_t chunk_bytes;	/* pipeline chunk on the wire side; 0: the
				 * default (or $TALLY_CUDA_CHUNK_BYTES) */
	unsigned int depth;	/* staging buffers (chunks in flight),
				 * DEPTH_MIN..DEPTH_MAX; 0: the default */
	int numa_node;		/* >= 0: this node; TALLY_CUDA_NUMA_GPU or
				 * TALLY_CUDA_NUMA_NONE */
};

#define TALLY_CUDA_OPTS_INIT { \
	.size = sizeof(struct tally_cuda_opts), .device = -1, \
	.numa_node = TALLY_CUDA_NUMA_GPU }

/*
 * tally_cuda_open - take over @client for GPU all-reduces on @opts->device.
 * Allocates the staging segments (tally_alloc(), registered with
 * cudaHostRegister, NUMA-bound), the internal streams and events, and
 * starts the helper thread.  Fails with -TALLY_EDEVICE (no usable device;
 * tally_cuda_open_error() says which CUDA call and why), -TALLY_EINVAL,
 * -TALLY_ENOMEM or -TALLY_ELIMIT.
 */
int tally_cuda_open(struct tally_client *client,
		    const struct tally_cuda_opts *opts,
		    struct tally_cuda **out);

/* why the calling thread's last tally_cuda_open() failed ("" if it did not) */
const char *tally_cuda_open_error(void);

/*
 * tally_cuda_close - wait until every queued operation has finished (or
 * failed), stop the helper thread and free the staging memory.  The client
 * stays connected and is the caller's again.  NULL is ignored.
 */
void tally_cuda_close(struct tally_cuda *tc);

/*
 * Arguments of a device all-reduce.  sendbuf and recvbuf are device
 * pointers (equal: in place) on the context's device.  wire_dtype is what
 * crosses PCIe, shared memory and the network: equal to dtype, or, for a
 * TALLY_FLOAT32 tensor, TALLY_FLOAT16 or TALLY_BFLOAT16 (converted on the
 * GPU, round to nearest even, and the result widened back).
 */
struct tally_cuda_allreduce_args {
	uint64_t key;		/* below 2^48: the chunk index goes above */
	uint64_t iteration;
	const void *sendbuf;
	void *recvbuf;
	uint64_t count;		/* elements */
	enum tally_dtype dtype;
	enum tally_dtype wire_dtype;
	enum tally_op op;
	uint32_t priority;
	uint32_t flags;		/* TALLY_F_*: LAST_OF_ITERATION marks the
				 * tensor's last chunk; the compression on
				 * every chunk (error feedback: below) */
};

/* keys are below this; chunk c of key k travels as key k | c << 48 */
#define TALLY_CUDA_KEY_LIMIT (1ull << 48)
#define TALLY_CUDA_MAX_CHUNKS 65536u

/*
 * tally_cuda_allreduce - queue an all-reduce of a device buffer on @stream.
 * Work queued on @stream before it is reduced; work queued after it sees
 * the result.  Returns 0, -TALLY_EINVAL (bad arguments, key too large, more
 * than TALLY_CUDA_MAX_CHUNKS chunks), -TALLY_EDEVICE (a CUDA call failed
 * while queueing; nothing of the operation was queued on @stream), or the

 */
int tally_cuda_allreduce(struct tally_cuda *tc,
			 const struct tally_cuda_allreduce_args *args,
			 cudaStream_t stream);

/*
 * Error feedback on the device.  A tensor that travels with error feedback
 * (TALLY_COMPRESS_SIGN_EF, _BLOCK_TOPK10_EF or _BLOCK_TOPK1_EF in flags,
 * or DEFAULT in a job whose method is one of them; dtype float32, float16
 * or bfloat16, any wire_dtype) keeps its residual e in the context's
 * device memory, one float32 per element per key (libtally keeps none for
 * it): each chunk sends p = g + e, rounded to wire_dtype, and after the
 * result e := p - sent / L, sent being what the host sent, decoded, and L
 * the host's clients (docs/compression.md section 5, docs/gpu.md).  A
 * chunk some worker found inf or NaN in, and an operation that failed,
 * reset their residual.  A key's operations run one after another: the
 * next one's copy waits for the last one's feedback.
 *
 * tally_cuda_ef_reset - zero @key's residual after the work queued so far
 * (an operation of the key in flight completes first): its next
 * all-reduce sends the gradient alone.  0, -TALLY_ENOENT when the key has
 * no residual, -TALLY_EDEVICE.  tally_cuda_ef_reset_all - every key's.
 * (TALLY_CUDA_1.1)
 */
int tally_cuda_ef_reset(struct tally_cuda *tc, uint64_t key);
int tally_cuda_ef_reset_all(struct tally_cuda *tc);

/*
 * tally_cuda_async_error - the first error of an operation that failed
 * after being queued, 0 if none; reading it clears it.
 */
int tally_cuda_async_error(struct tally_cuda *tc);

/* text of the last error of @tc, naming the CUDA or tally call */
const char *tally_cuda_error_message(const struct tally_cuda *tc);

/*
 * tally_cuda_alloc - shared memory the daemon can reduce in place, pinned
 * and mapped for the GPU and bound to the context's NUMA node, for callers
 * that copy themselves.  Free with tally_cuda_free().
 */
void *tally_cuda_alloc(struct tally_cuda *tc, size_t bytes);
void tally_cuda_free(struct tally_cuda *tc, void *ptr);

/* the NUMA node the staging memory is bound to, -1 when unbound */
int tally_cuda_numa_node(const struct tally_cuda *tc);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_TALLY_CUDA_H */
