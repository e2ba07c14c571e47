/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally.h - the client API of tally, the only header a training process
 * includes.
 *
 * A training process (one per GPU) connects to the tallyd daemon of its host,
 * allocates its gradient buffers inside shared memory, and submits
 * asynchronous all-reduce operations on them.  The daemon matches the
 * submissions of all local processes by (key, iteration), reduces them (and,
 * in a multi-host job, aggregates them with the other hosts) and writes the
 * result into every process's receive buffer.
 *
 *	struct tally_client *c;
 *	float *grad;
 *	uint64_t req;
 *
 *	tally_connect(NULL, &c);                  // $TALLY_SOCKET or default
 *	grad = tally_alloc(c, n * sizeof(float)); // shared with the daemon
 *	...fill grad...
 *	tally_allreduce(c, &(struct tally_allreduce_args){
 *		.key = layer_id, .iteration = step,
 *		.sendbuf = grad, .recvbuf = grad, .count = n,
 *		.dtype = TALLY_FLOAT32, .op = TALLY_AVG }, &req);
 *	tally_wait(c, req, -1);
 *	tally_disconnect(c);
 *
 * Errors: every call returns 0 or a negative TALLY_E* code (never sets
 * errno as its only report); tally_strerror() names it.
 *
 * Thread safety: a struct tally_client is NOT thread-safe; it owns one
 * single-producer/single-consumer submission ring and completion ring.  Use
 * it from one thread at a time (external locking is fine), or open one
 * client per thread.  Different clients may be used concurrently.  The one
 * exception is tally_wait_ready(), made for a progress thread: it may run
 * while another thread uses the client.
 * tally_strerror() and tally_dtype_size() are thread-safe.
 *
 * The library links libc only: no DPDK, rdma-core or CUDA.
 */
#ifndef TALLY_TALLY_H
#define TALLY_TALLY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_API_VERSION 1

/* Default daemon socket when neither the argument nor $TALLY_SOCKET is set. */
#define TALLY_DEFAULT_SOCKET "/run/tally/tallyd.sock"

/* Error codes, returned negated. */
enum tally_error {
	TALLY_OK = 0,
	TALLY_EINVAL = 1,	/* bad argument */
	TALLY_ENOMEM = 2,	/* out of memory or shared memory */
	TALLY_ECONNECT = 3,	/* cannot reach the daemon */
	TALLY_EPROTO = 4,	/* daemon and library disagree (version) */
	TALLY_EAGAIN = 5,	/* rings full: reap completions and retry */
	TALLY_ETIMEDOUT = 6,	/* tally_wait() timed out; request pending */
	TALLY_EMISMATCH = 7,	/* group members disagree on size/dtype/op */
	TALLY_EPEERLOST = 8,	/* another member died mid-operation */
	TALLY_EDAEMONLOST = 9,	/* the daemon died or closed us */
	TALLY_EBADOP = 10,	/* daemon rejected the request (opcode...) */
	TALLY_ERANGE = 11,	/* buffer outside the shared segments */
	TALLY_ENOENT = 12,	/* unknown request handle */
	TALLY_EDENIED = 13,	/* admission refused (job full, credentials) */
	TALLY_ENETWORK = 14,	/* multi-host aggregation failed */
	TALLY_EINPROGRESS = 15,	/* tally_test(): not finished yet */
	TALLY_ELIMIT = 16,	/* a tallyd limit: segments, segment size,
				 * pending connections (see client-api.md) */
	TALLY_EDEVICE = 17,	/* a CUDA call failed (libtally-cuda) */
	TALLY_ERROR_MAX
};

enum tally_dtype {
	TALLY_FLOAT32 = 0,
	TALLY_FLOAT16 = 1,	/* IEEE binary16 */
	TALLY_BFLOAT16 = 2,
	TALLY_INT32 = 3,
	TALLY_DTYPE_MAX
};

enum tally_op {
	TALLY_SUM = 0,
	TALLY_AVG = 1,		/* sum divided by the number of contributors */
	TALLY_OP_MAX
};

struct tally_client;

/* Submission arguments.  sendbuf and recvbuf must lie inside buffers from
 * tally_alloc(); recvbuf == sendbuf is an in-place all-reduce. */
struct tally_allreduce_args {
	uint64_t key;		/* tensor identity, equal on every process */
	uint64_t iteration;	/* training step; (key, iteration) matches */
	const void *sendbuf;
	void *recvbuf;
	uint64_t count;		/* elements, not bytes */
	enum tally_dtype dtype;
	enum tally_op op;
	uint32_t priority;	/* 0 is most urgent (input-side layers);
				 * values above 65535 count as 65535 */
	uint32_t group;		/* merge group for the mgwfbp schedule: the
				 * consecutive gradients of one group travel
				 * as one message; 0 = none (<= 65535) */
	uint32_t flags;		/* TALLY_F_* */
};

/* The iteration's last gradient: the bsp schedule starts communicating
 * when it arrives. */
#define TALLY_F_LAST_OF_ITERATION 0x1u

/*
 * Per-tensor compression (docs/compression.md), a 3-bit field in
 * tally_allreduce_args.flags: TALLY_F_COMPRESS(TALLY_COMPRESS_INT8).  The
 * struct has no size member, so it cannot grow without breaking programs
 * built against TALLY_1; in flags an older library or daemon refuses the
 * bits (-TALLY_EINVAL, -TALLY_EBADOP) instead of misreading them.
 * DEFAULT (0): the job's [compression] method.  A lossy method named for
 * an int32 tensor, or in a ring job, is refused at submission
 * (-TALLY_EINVAL); DEFAULT leaves int32 tensors exact.  Every process
 * must name the same method for a tensor (like count, dtype and op).
 */
enum tally_compression {
	TALLY_COMPRESS_DEFAULT = 0,
	TALLY_COMPRESS_NONE = 1,	/* int32 block fixed point */
	TALLY_COMPRESS_INT16 = 2,	/* 16-bit lanes: half the bytes */
	TALLY_COMPRESS_INT8 = 3,	/* 8-bit lanes: a quarter */
	/* 1-bit signs with a scale per chunk, majority vote, and error
	 * feedback kept by the library per key (float tensors; the job's
	 * algorithm must be aggregate in the software profile): about
	 * 1/32 of the bytes up, 2/32 down.  The library submits
	 * sendbuf + residual from a buffer of its own (tally_ef_reset()) */
	TALLY_COMPRESS_SIGN_EF = 4,
	/* block sparsification with error feedback (OmniReduce style):
	 * each process sends the top 10 % (1 %) of a tensor's blocks of
	 * K elements by L2 norm of sendbuf + residual, every process gets
	 * the sum over the senders of each block, zeros where none sent;
	 * the residual keeps the rest (float tensors, aggregate, software
	 * profile; tally_ef_reset()).  (TALLY_1.4, tallyd of issue 15) */
	TALLY_COMPRESS_BLOCK_TOPK10_EF = 5,
	TALLY_COMPRESS_BLOCK_TOPK1_EF = 6,
};
#define TALLY_F_COMPRESS_SHIFT 4
/* 0x30 until TALLY_1.4 (values 0..3), widened to 3 bits for SIGN_EF
 * and the BLOCK_TOPK methods (7 is refused) */
#define TALLY_F_COMPRESS_MASK 0x70u
#define TALLY_F_COMPRESS(m) \
	(((uint32_t)(m) << TALLY_F_COMPRESS_SHIFT) & TALLY_F_COMPRESS_MASK)
#define TALLY_F_COMPRESSION(flags) \
	((enum tally_compression)(((flags) & TALLY_F_COMPRESS_MASK) >> \
				  TALLY_F_COMPRESS_SHIFT))
#define TALLY_F_ALL (TALLY_F_LAST_OF_ITERATION | TALLY_F_COMPRESS_MASK)

/*
 * The caller keeps the error-feedback residual (TALLY_1.5; libtally-cuda
 * keeps its residuals in device memory this way).  For a tensor that
 * travels with error feedback (SIGN_EF, BLOCK_TOPK*: named, or the job's
 * method through DEFAULT; a float dtype) the library keeps no residual of
 * its own: sendbuf travels as it is (the caller's p = g + e) and must not
 * overlap recvbuf (-TALLY_EINVAL: the daemon writes into it).  When the
 * request completes (tally_test/tally_wait), sendbuf holds in its dtype
 * what the host sent, decoded ("sent"): NaN in a chunk some worker found
 * non-finite, and NaN throughout when nothing was compressed (one host
 * alone: the sum is exact) or the request failed.  The caller then sets
 * e := p - sent / tally_size() where sent is finite, else e := 0
 * (docs/compression.md section 5).  A submission that fails leaves
 * sendbuf as it was.  Ignored for a tensor without error feedback; never
 * sent to tallyd (not in TALLY_F_ALL).
 */
#define TALLY_F_EF_CALLER 0x100u

/*
 * tally_connect - connect to the host's daemon.
 * @socket_path: Unix socket of tallyd; NULL means $TALLY_SOCKET, then
 *               TALLY_DEFAULT_SOCKET.
 * @out:         the new client on success.
 * Blocks until the daemon admitted the process (or refused it).
 */
int tally_connect(const char *socket_path, struct tally_client **out);

/*
 * A job's identity and this process's place in it.  A long-lived tallyd
 * serves many jobs; each client names its job when it connects.  Fields
 * left unset (NULL, or the TALLY_CONNECT_OPTS_INIT value) come from the
 * launcher's environment (torchrun, Slurm, Open MPI; precedence in
 * tally_connect_opts(3) and docs/jobs.md).
 */
struct tally_job {
	const char *id;		/* job id, at most 63 bytes */
	const char *secret;	/* shared by the job's hosts; NULL: none */
	const char *coordinator; /* "IPv4[:port]" of the job's host 0 */
	int hosts;		/* hosts with clients of the job; 0: unset */
	int host_rank;		/* this host's place, 0..hosts-1; -1: unset */
	int local_size;		/* the job's processes on this host; 0: unset */
	int local_rank;		/* this process among them; -1: unset */
};

/* Read no launcher environment: only the fields given count. */
#define TALLY_CONNECT_NO_ENV 0x1u

struct tally_connect_opts {
	size_t size;		/* sizeof(struct tally_connect_opts) */
	const char *socket;	/* NULL: $TALLY_SOCKET, then the default */
	unsigned int flags;	/* TALLY_CONNECT_* */
	struct tally_job job;
};

#define TALLY_CONNECT_OPTS_INIT { \
	.size = sizeof(struct tally_connect_opts), \
	.job = { .host_rank = -1, .local_rank = -1 } }

/*
 * tally_connect_opts - connect to the host's daemon as a member of a job.
 * The job comes from @opts->job, completed from the launcher's
 * environment; a job that cannot be resolved (a malformed variable)
 * fails with -TALLY_EINVAL.  A daemon started for one job (its job on
 * its command line) ignores the description.  tally_connect() is this
 * with every field unset.  (TALLY_1.3)
 */
int tally_connect_opts(const struct tally_connect_opts *opts,
		       struct tally_client **out);

/*
 * tally_disconnect - close the client.  Pending operations are abandoned
 * (other members get TALLY_EPEERLOST); buffers from tally_alloc() are
 * unmapped.  NULL is ignored.
 */
void tally_disconnect(struct tally_client *c);

/*
 * tally_ef_reset - forget the error-feedback residual of tensor @key
 * (TALLY_COMPRESS_SIGN_EF): its next submission sends the gradient alone.
 * For a skipped step (GradScaler), a checkpoint restore, a change of
 * method.  0, or -TALLY_ENOENT when the key has no residual.
 * tally_ef_reset_all - every key's.  (TALLY_1.4)
 */
int tally_ef_reset(struct tally_client *c, uint64_t key);
void tally_ef_reset_all(struct tally_client *c);

/*
 * tally_job_compression - the job's [compression] method, as tallyd told
 * at connect: what TALLY_COMPRESS_DEFAULT means for a float tensor.
 * TALLY_COMPRESS_NONE or TALLY_COMPRESS_DEFAULT (an older tallyd) when the
 * job has none.  For callers that keep their own residual
 * (TALLY_F_EF_CALLER) and must know whether a tensor has one.  (TALLY_1.5)
 */
enum tally_compression tally_job_compression(const struct tally_client *c);

/* Local rank of this process on its host (admission order) and group size. */
int tally_rank(const struct tally_client *c);
int tally_size(const struct tally_client *c);

/*
 * tally_alloc - allocate @bytes of memory shared with the daemon.
 * Backed by a memfd (huge pages when the host has free ones), pre-faulted,
 * 64-byte aligned.  Returns NULL on failure.
 */
void *tally_alloc(struct tally_client *c, size_t bytes);

/* tally_free - release a buffer from tally_alloc(); it must not be in use. */
void tally_free(struct tally_client *c, void *ptr);

/*
 * tally_last_error - why the last tally_alloc() returned NULL (or what the
 * last tally_free() met): 0, or a negative TALLY_E* code, e.g.
 * -TALLY_ELIMIT when all TALLY_MAX_SEGMENTS buffers exist or @bytes is
 * above the 64 GiB a segment may hold, -TALLY_ENOMEM when the host has no
 * memory for it.
 */
int tally_last_error(const struct tally_client *c);

/*
 * tally_allreduce - submit an asynchronous all-reduce.
 * On success stores a request handle in @req, valid until tally_test() or
 * tally_wait() returned its completion.  Returns -TALLY_EAGAIN when the
 * client already has TALLY_MAX_INFLIGHT requests pending (back-pressure:
 * wait for one, then retry); nothing is dropped.
 */
#define TALLY_MAX_INFLIGHT 256
int tally_allreduce(struct tally_client *c,
		    const struct tally_allreduce_args *args, uint64_t *req);

/*
 * tally_test - non-blocking completion check.
 * Returns -TALLY_EINPROGRESS while pending, else the request's result
 * (0 or a negative error) and forgets the handle.
 */
int tally_test(struct tally_client *c, uint64_t req);

/*
 * tally_wait - wait for a request.
 * @timeout_ms: -1 waits forever, 0 polls.
 * Spins briefly, then sleeps on the completion doorbell.  Returns the
 * request's result and forgets the handle, or -TALLY_ETIMEDOUT (the request
 * stays pending), or -TALLY_EDAEMONLOST if the daemon went away.
 */
int tally_wait(struct tally_client *c, uint64_t req, int timeout_ms);

/*
 * tally_wait_ready - sleep until a completion is ready to be collected, the
 * daemon is gone, or @timeout_ms passes (-1 waits forever, 0 polls).
 * Returns 0 when at least one completion is ready (collect it with
 * tally_test() on the pending handles), -TALLY_ETIMEDOUT, or
 * -TALLY_EDAEMONLOST (every pending request then fails with it).
 *
 * It consumes nothing, so unlike every other call it may run in one
 * thread while other threads use the client under their own lock: a
 * progress thread sleeps here without the lock, then takes it to call
 * tally_test().  At most one thread may be inside tally_wait_ready() or
 * tally_wait() at a time.  (TALLY_1.2)
 */
int tally_wait_ready(struct tally_client *c, int timeout_ms);

/* tally_strerror - static text for a (negative or positive) error code. */
const char *tally_strerror(int err);

/* tally_dtype_size - bytes per element, 0 for an unknown dtype. */
size_t tally_dtype_size(enum tally_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_TALLY_H */
