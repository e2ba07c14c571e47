// SPDX-License-Identifier: BSD-3-Clause
/*
 * pipeline.c - tally_cuda_allreduce(): queue a device all-reduce as a
 * pipeline of chunks on the context's two streams, ordered after and
 * before the caller's stream, without waiting for anything.
 *
 * For chunk i in slot s = i % depth:
 *   copy_in:  wait slot s free (chunk i - depth copied back)
 *             [narrow device -> scratch s]  copy -> staging s  record copied
 *   copy_out: wait copied  wait flag s >= i + 1 (tallyd is done)
 *             copy staging s -> [scratch s ->] device  [widen]  record free s
 * The progress thread submits chunk i when `copied` fires and raises flag
 * s when tallyd completes it.  While tallyd reduces chunk i, copy_in
 * moves chunk i + 1 and copy_out chunk i - 1: three stages overlap.
 *
 * With error feedback (ef.h) the key's copy_in first waits for its last
 * feedback; chunk i's copy_in is e += g, p = e (wire dtype) into scratch
 * s, copied to the slot's `sent` buffer, and copy_out ends with `sent`
 * copied back to scratch s and e := e - sent / L.
 */
#include <stdlib.h>

#include "gpu/context.h"
#include "gpu/kernels/kernels.h"
#include "gpu/plan.h"

/* the call's device pointers must be device memory the context can use */
static int check_device_ptr(struct tally_cuda *tc, const void *p,
			    const char *name)
{
	struct cudaPointerAttributes a;
	cudaError_t e = cudaPointerGetAttributes(&a, p);

	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaPointerGetAttributes", e);
	if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
		return tcu_fail(tc, -TALLY_EINVAL, "tally_cuda_allreduce: "
				"%s is not device memory", name);
	if (a.device != tc->device)
		return tcu_fail(tc, -TALLY_EINVAL, "tally_cuda_allreduce: "
				"%s is on device %d, the context on %d", name,
				a.device, tc->device);
	return 0;
}

static cudaError_t narrow(const struct tally_cuda_allreduce_args *a,
			  void *dst, const void *src, size_t n,
			  cudaStream_t s)
{
	if (a->wire_dtype == TALLY_FLOAT16)
		return tcu_convert_f32_to_f16(dst, src, n, s);
	return tcu_convert_f32_to_bf16(dst, src, n, s);
}

static cudaError_t widen(const struct tally_cuda_allreduce_args *a,
			 void *dst, const void *src, size_t n, cudaStream_t s)
{
	if (a->wire_dtype == TALLY_FLOAT16)
		return tcu_convert_f16_to_f32(dst, src, n, s);
	return tcu_convert_bf16_to_f32(dst, src, n, s);
}

/* copy_in's part of chunk @c: into the staging slot (or, with the
 * residual @k, p into the slot's `sent`), then `copied` */
static int queue_copy_in(struct tally_cuda *tc, const struct tcu_plan *plan,
			 const struct tally_cuda_allreduce_args *a,
			 struct tcu_chunk *ch, uint64_t c,
			 struct tcu_ef_key *k)
{
	struct tcu_slot *slot = &tc->slot[ch->slot];
	const char *src = (const char *)a->sendbuf +
			  tcu_plan_first(plan, c) * plan->dev_size;
	size_t n = tcu_plan_elems(plan, c);
	void *dst = slot->host;
	cudaError_t e;

	if (ch->seq >= tc->depth) {
		e = cudaStreamWaitEvent(tc->copy_in, slot->free, 0);
		if (e != cudaSuccess)
			return tcu_fail_cuda(tc, "cudaStreamWaitEvent", e);
	}
	if (k) {
		e = tcu_ef_accumulate(slot->scratch, (int)a->wire_dtype,
				      k->e + tcu_plan_first(plan, c), src,
				      (int)a->dtype, n, tc->copy_in);
		if (e != cudaSuccess)
			return tcu_fail_cuda(tc, "error feedback "
					     "(accumulate) kernel launch", e);
		src = slot->scratch;
		dst = slot->sent;
	} else if (plan->convert) {
		e = narrow(a, slot->scratch, src, n, tc->copy_in);
		if (e != cudaSuccess)
			return tcu_fail_cuda(tc, "narrowing kernel launch", e);
		src = slot->scratch;
	}
	e = cudaMemcpyAsync(dst, src, n * plan->wire_size,
			    cudaMemcpyDeviceToHost, tc->copy_in);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaMemcpyAsync (to shared memory)", e);
	e = cudaEventRecord(ch->copied, tc->copy_in);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaEventRecord", e);
	return 0;
}

/* after the result: sent back to the device, e := e - sent / L */
static int queue_feedback(struct tally_cuda *tc, const struct tcu_plan *plan,
			  const struct tally_cuda_allreduce_args *a,
			  struct tcu_slot *slot, uint64_t c,
			  struct tcu_ef_key *k)
{
	size_t n = tcu_plan_elems(plan, c);
	cudaError_t e;

	e = cudaMemcpyAsync(slot->scratch, slot->sent, n * plan->wire_size,
			    cudaMemcpyHostToDevice, tc->copy_out);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaMemcpyAsync (sent, to the "
				     "device)", e);
	e = tcu_ef_feedback(k->e + tcu_plan_first(plan, c), slot->scratch,
			    (int)a->wire_dtype, tc->ef.inv_l, n, tc->copy_out);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "error feedback kernel launch", e);
	return 0;
}

/*
 * copy_out's part of chunk @c: wait for tallyd, copy back, free the slot.
 * On a failure part of it may be queued (the flag wait, say): the slot is
 * then still marked free after whatever was queued, so that the next
 * chunk in it waits for that, and the caller cancels the chunk, which
 * raises its flag.
 */
static int queue_copy_out(struct tally_cuda *tc, const struct tcu_plan *plan,
			  const struct tally_cuda_allreduce_args *a,
			  const struct tcu_chunk *ch, uint64_t c,
			  struct tcu_ef_key *k)
{
	struct tcu_slot *slot = &tc->slot[ch->slot];
	char *dst = (char *)a->recvbuf + tcu_plan_first(plan, c) * plan->dev_size;
	size_t n = tcu_plan_elems(plan, c);
	cudaError_t e;
	int r;

	/* CUDA must see the order the flag implies (cuStreamWaitValue32's
	 * documentation asks for it) */
	e = cudaStreamWaitEvent(tc->copy_out, ch->copied, 0);
	if (e != cudaSuccess) {
		r = tcu_fail_cuda(tc, "cudaStreamWaitEvent", e);
		goto err;
	}
	e = tcu_stream_wait_geq(&tc->wait, tc->copy_out,
				&tc->flags_dev[ch->slot],
				(uint32_t)(ch->seq + 1));
	if (e != cudaSuccess) {
		r = tcu_fail_cuda(tc, tc->wait.kind == TCU_WAIT_MEMOP ?
				  "cuStreamWaitValue32" :
				  "flag wait kernel launch", e);
		goto err;
	}
	e = cudaMemcpyAsync(plan->convert ? slot->scratch : dst, slot->host,
			    n * plan->wire_size, cudaMemcpyHostToDevice,
			    tc->copy_out);
	if (e != cudaSuccess) {
		r = tcu_fail_cuda(tc, "cudaMemcpyAsync (to the device)", e);
		goto err;
	}
	if (plan->convert) {
		e = widen(a, dst, slot->scratch, n, tc->copy_out);
		if (e != cudaSuccess) {
			r = tcu_fail_cuda(tc, "widening kernel launch", e);
			goto err;
		}
	}
	if (k) {
		r = queue_feedback(tc, plan, a, slot, c, k);
		if (r)
			goto err;
	}
	e = cudaEventRecord(slot->free, tc->copy_out);
	if (e != cudaSuccess)
		return tcu_fail_cuda(tc, "cudaEventRecord", e);
	return 0;

err:
	cudaEventRecord(slot->free, tc->copy_out);
	return r;
}

static struct tcu_chunk *chunk_new(struct tally_cuda *tc,
				   const struct tcu_plan *plan,
				   const struct tally_cuda_allreduce_args *a,
				   uint64_t c, bool ef)
{
	struct tcu_chunk *ch = calloc(1, sizeof(*ch));
	cudaError_t e;

	if (!ch) {
		tcu_fail(tc, -TALLY_ENOMEM, "tally_cuda_allreduce: calloc");
		return NULL;
	}
	e = cudaEventCreateWithFlags(&ch->copied, cudaEventDisableTiming);
	if (e != cudaSuccess) {
		tcu_fail_cuda(tc, "cudaEventCreateWithFlags", e);
		free(ch);
		return NULL;
	}
	ch->seq = tc->next_seq;
	ch->slot = (unsigned int)(ch->seq % tc->depth);
	ch->state = TCU_CHUNK_COPYING;
	ch->args = (struct tally_allreduce_args){
		.key = tcu_chunk_key(a->key, c),
		.iteration = a->iteration,
		.sendbuf = tc->slot[ch->slot].host,
		.recvbuf = tc->slot[ch->slot].host,
		.count = tcu_plan_elems(plan, c),
		.dtype = a->wire_dtype,
		.op = a->op,
		.priority = a->priority,
		/* the compression on every chunk, the iteration's end on
		 * the last */
		.flags = (a->flags & TALLY_F_COMPRESS_MASK) |
			 (c + 1 == plan->chunks ?
			  a->flags & TALLY_F_LAST_OF_ITERATION : 0),
	};
	if (ef) {
		/* p goes from `sent`, where libtally leaves sent (ef.h) */
		ch->args.sendbuf = tc->slot[ch->slot].sent;
		ch->args.flags |= TALLY_F_EF_CALLER;
	}
	return ch;
}

/*
 * Queue chunk @c, then hand it to the progress thread.  Once copy_in is
 * queued the chunk owns its slot and a sequence number, so it is handed
 * over whatever happens next: if copy_out could not be queued whole, it
 * goes over cancelled (never submitted to tallyd; the thread only raises
 * its flag, so that a flag wait already queued does not wait forever).
 */
static int queue_chunk(struct tally_cuda *tc, const struct tcu_plan *plan,
		       const struct tally_cuda_allreduce_args *a, uint64_t c,
		       struct tcu_ef_key *k)
{
	struct tcu_chunk *ch = chunk_new(tc, plan, a, c, k != NULL);
	int r;

	if (!ch)
		return -TALLY_ENOMEM;
	r = queue_copy_in(tc, plan, a, ch, c, k);
	if (r) {
		cudaEventDestroy(ch->copied);
		free(ch);
		return r;
	}
	tc->next_seq++;
	r = queue_copy_out(tc, plan, a, ch, c, k);
	if (r)
		ch->state = TCU_CHUNK_CANCELLED;
	tcu_progress_push(tc, ch);
	return r;
}

static int check_args(struct tally_cuda *tc,
		      const struct tally_cuda_allreduce_args *a,
		      struct tcu_plan *plan)
{
	const char *why;
	int r;

	if (!a)
		return tcu_fail(tc, -TALLY_EINVAL,
				"tally_cuda_allreduce: args is NULL");
	if ((unsigned int)a->op >= TALLY_OP_MAX || a->flags & ~TALLY_F_ALL)
		return tcu_fail(tc, -TALLY_EINVAL,
				"tally_cuda_allreduce: unknown op or flags");
	r = tcu_plan_make(plan, a->key, a->count, a->dtype, a->wire_dtype,
			  tc->chunk_bytes, &why);
	if (r)
		return tcu_fail(tc, r, "tally_cuda_allreduce: %s", why);
	if (!a->count)
		return 0;
	r = check_device_ptr(tc, a->sendbuf, "sendbuf");
	if (!r)
		r = check_device_ptr(tc, a->recvbuf, "recvbuf");
	return r;
}

int tally_cuda_allreduce(struct tally_cuda *tc,
			 const struct tally_cuda_allreduce_args *args,
			 cudaStream_t stream)
{
	struct tcu_ef_key *k = NULL;
	struct tcu_plan plan;
	cudaError_t e;
	uint64_t c;
	int prev = -1, r;

	if (!tc)
		return -TALLY_EINVAL;
	/* the caller's thread may be on another device */
	if (cudaGetDevice(&prev) != cudaSuccess || prev != tc->device) {
		e = cudaSetDevice(tc->device);
		if (e != cudaSuccess)
			return tcu_fail_cuda(tc, "cudaSetDevice", e);
	}
	r = check_args(tc, args, &plan);
	if (r || !plan.chunks)
		goto out;
	if (tcu_ef_applies(tc, args)) {
		r = tcu_ef_key_get(tc, args->key, args->count, &k);
		if (!r)
			r = tcu_ef_op_begin(tc, k);
		if (r)
			goto out;
	}
	e = cudaEventRecord(tc->op_start, stream);
	if (e == cudaSuccess)
		e = cudaStreamWaitEvent(tc->copy_in, tc->op_start, 0);
	if (e != cudaSuccess) {
		r = tcu_fail_cuda(tc, "cudaEventRecord/cudaStreamWaitEvent", e);
		goto out;
	}
	for (c = 0; c < plan.chunks && !r; c++)
		r = queue_chunk(tc, &plan, args, c, k);
	if (k) {
		/* a failed operation leaves its residual half fed: reset */
		if (r)
			tcu_ef_abort(tc, k);
		else
			r = tcu_ef_op_end(tc, k);
	}
	if (r)
		goto out;
	/* the caller's later work waits for the last copy back */
	e = cudaEventRecord(tc->op_end, tc->copy_out);
	if (e == cudaSuccess)
		e = cudaStreamWaitEvent(stream, tc->op_end, 0);
	if (e != cudaSuccess)
		r = tcu_fail_cuda(tc, "cudaEventRecord/cudaStreamWaitEvent", e);
out:
	if (prev >= 0 && prev != tc->device)
		cudaSetDevice(prev);
	return r;
}
