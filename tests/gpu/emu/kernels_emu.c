// SPDX-License-Identifier: BSD-3-Clause
/*
 * kernels_emu.c - libtally-cuda's kernel launchers (gpu/kernels/kernels.h,
 * tcu_wait_kernel_geq of gpu/stream_wait.h) for the CUDA emulation: each
 * queues, on the stream, the kernel's C reference (gpu/kernels/ref.h) run
 * on the host.  A kernel whose pointers leave device or pinned memory
 * faults (cudaErrorIllegalAddress, sticky) as it would on a GPU.
 *
 * The launchers return the launch's own status, as the .cu ones do
 * (tcu_launch(), cudaLaunchKernel): never an earlier error of the
 * caller's thread.
 */
#include <time.h>

#include "cuda_emu.h"
#include "gpu/kernels/kernels.h"
#include "gpu/kernels/numerics.h"
#include "gpu/kernels/ref.h"
#include "gpu/stream_wait.h"

#define WAIT_SLEEP_MIN_NS 1000L
#define WAIT_SLEEP_MAX_NS 100000L

struct kernel_args {
	void *out;
	const void *in;
	const int32_t *shift;
	size_t n, k;
	uint32_t value;
};

static size_t blocks_of(const struct kernel_args *a)
{
	return (a->n + a->k - 1) / a->k;
}

static cudaError_t queue(cudaStream_t stream, emu_kernel_fn fn,
			 const struct kernel_args *a)
{
	return emu_launch(stream, fn, a, sizeof(*a));
}

/* ---- conversions ---- */

static cudaError_t convert_check(const struct kernel_args *a,
				 size_t out_size, size_t in_size)
{
	if (!emu_device_accessible(a->out, a->n * out_size) ||
	    !emu_device_accessible(a->in, a->n * in_size))
		return cudaErrorIllegalAddress;
	return cudaSuccess;
}

static cudaError_t run_f32_to_f16(void *arg)
{
	struct kernel_args *a = arg;
	cudaError_t e = convert_check(a, 2, 4);

	if (!e)
		tcu_ref_convert_f32_to_f16(a->out, a->in, a->n);
	return e;
}

static cudaError_t run_f32_to_bf16(void *arg)
{
	struct kernel_args *a = arg;
	cudaError_t e = convert_check(a, 2, 4);

	if (!e)
		tcu_ref_convert_f32_to_bf16(a->out, a->in, a->n);
	return e;
}

static cudaError_t run_f16_to_f32(void *arg)
{
	struct kernel_args *a = arg;
	cudaError_t e = convert_check(a, 4, 2);

	if (!e)
		tcu_ref_convert_f16_to_f32(a->out, a->in, a->n);
	return e;
}

static cudaError_t run_bf16_to_f32(void *arg)
{
	struct kernel_args *a = arg;
	cudaError_t e = convert_check(a, 4, 2);

	if (!e)
		tcu_ref_convert_bf16_to_f32(a->out, a->in, a->n);
	return e;
}

static cudaError_t convert_launch(emu_kernel_fn fn, void *dst,
				  const void *src, size_t n,
				  cudaStream_t stream)
{
	struct kernel_args a = { .out = dst, .in = src, .n = n };

	if (!n)
		return cudaSuccess;
	return queue(stream, fn, &a);
}

cudaError_t tcu_convert_f32_to_f16(uint16_t *dst, const float *src, size_t n,
				   cudaStream_t stream)
{
	return convert_launch(run_f32_to_f16, dst, src, n, stream);
}

cudaError_t tcu_convert_f32_to_bf16(uint16_t *dst, const float *src,
				    size_t n, cudaStream_t stream)
{
	return convert_launch(run_f32_to_bf16, dst, src, n, stream);
}

cudaError_t tcu_convert_f16_to_f32(float *dst, const uint16_t *src, size_t n,
				   cudaStream_t stream)
{
	return convert_launch(run_f16_to_f32, dst, src, n, stream);
}

cudaError_t tcu_convert_bf16_to_f32(float *dst, const uint16_t *src,
				    size_t n, cudaStream_t stream)
{
	return convert_launch(run_bf16_to_f32, dst, src, n, stream);
}

/* ---- block fixed point ---- */

static cudaError_t run_block_exp(void *arg)
{
	struct kernel_args *a = arg;

	if (!emu_device_accessible(a->out, blocks_of(a) * 4) ||
	    !emu_device_accessible(a->in, a->n * 4))
		return cudaErrorIllegalAddress;
	tcu_ref_block_exp_f32(a->out, a->in, a->n, a->k);
	return cudaSuccess;
}

static cudaError_t run_quantize(void *arg)
{
	struct kernel_args *a = arg;

	if (!emu_device_accessible(a->out, blocks_of(a) * a->k * 4) ||
	    !emu_device_accessible(a->in, a->n * 4) ||
	    !emu_device_accessible(a->shift, blocks_of(a) * 4))
		return cudaErrorIllegalAddress;
	tcu_ref_quantize_f32(a->out, a->in, a->n, a->k, a->shift);
	return cudaSuccess;
}

static cudaError_t run_dequantize(void *arg)
{
	struct kernel_args *a = arg;

	if (!emu_device_accessible(a->out, a->n * 4) ||
	    !emu_device_accessible(a->in, a->n * 4) ||
	    !emu_device_accessible(a->shift, blocks_of(a) * 4))
		return cudaErrorIllegalAddress;
	tcu_ref_dequantize_f32(a->out, a->in, a->n, a->k, a->shift);
	return cudaSuccess;
}

static cudaError_t block_launch(emu_kernel_fn fn, void *out, const void *in,
				size_t n, size_t k, const int32_t *shift,
				cudaStream_t stream)
{
	struct kernel_args a = { .out = out, .in = in, .n = n, .k = k,
				 .shift = shift };

	if (!n)
		return cudaSuccess;
	if (!k)
		return cudaErrorInvalidValue;
	return queue(stream, fn, &a);
}

cudaError_t tcu_block_exp_f32(int32_t *exp, const float *x, size_t n,
			      size_t k, cudaStream_t stream)
{
	return block_launch(run_block_exp, exp, x, n, k, NULL, stream);
}

cudaError_t tcu_quantize_f32(uint32_t *out, const float *x, size_t n,
			     size_t k, const int32_t *shift,
			     cudaStream_t stream)
{
	return block_launch(run_quantize, out, x, n, k, shift, stream);
}

cudaError_t tcu_dequantize_f32(float *x, const uint32_t *in, size_t n,
			       size_t k, const int32_t *shift,
			       cudaStream_t stream)
{
	return block_launch(run_dequantize, x, in, n, k, shift, stream);
}

/* ---- error feedback (ef.cu) ---- */

struct ef_args {
	void *p;
	float *e;
	const void *x;		/* g, or sent */
	int p_type, x_type;
	float inv_l;
	size_t n;
};

static size_t type_size(int t)
{
	return t == TCU_F32 ? 4 : 2;
}

static bool type_valid(int t)
{
	return t == TCU_F32 || t == TCU_F16 || t == TCU_BF16;
}

static cudaError_t run_ef_accumulate(void *arg)
{
	struct ef_args *a = arg;

	if (!emu_device_accessible(a->p, a->n * type_size(a->p_type)) ||
	    !emu_device_accessible(a->e, a->n * 4) ||
	    !emu_device_accessible(a->x, a->n * type_size(a->x_type)))
		return cudaErrorIllegalAddress;
	tcu_ref_ef_accumulate(a->p, a->p_type, a->e, a->x, a->x_type, a->n);
	return cudaSuccess;
}

static cudaError_t run_ef_feedback(void *arg)
{
	struct ef_args *a = arg;

	if (!emu_device_accessible(a->e, a->n * 4) ||
	    !emu_device_accessible(a->x, a->n * type_size(a->x_type)))
		return cudaErrorIllegalAddress;
	tcu_ref_ef_feedback(a->e, a->x, a->x_type, a->inv_l, a->n);
	return cudaSuccess;
}

cudaError_t tcu_ef_accumulate(void *p, int p_type, float *e, const void *g,
			      int g_type, size_t n, cudaStream_t stream)
{
	struct ef_args a = { .p = p, .e = e, .x = g, .p_type = p_type,
			     .x_type = g_type, .n = n };

	if (!type_valid(p_type) || !type_valid(g_type))
		return cudaErrorInvalidValue;
	if (!n)
		return cudaSuccess;
	return emu_launch(stream, run_ef_accumulate, &a, sizeof(a));
}

cudaError_t tcu_ef_feedback(float *e, const void *sent, int sent_type,
			    float inv_l, size_t n, cudaStream_t stream)
{
	struct ef_args a = { .e = e, .x = sent, .x_type = sent_type,
			     .inv_l = inv_l, .n = n };

	if (!type_valid(sent_type))
		return cudaErrorInvalidValue;
	if (!n)
		return cudaSuccess;
	return emu_launch(stream, run_ef_feedback, &a, sizeof(a));
}

/* ---- the flag wait (wait_kernel.cu) ---- */

/* poll the word, as the one-thread kernel does, until cyclic >= value */
static cudaError_t run_wait_geq(void *arg)
{
	struct kernel_args *a = arg;
	const uint32_t *flag = a->in;
	struct timespec ts = { 0, WAIT_SLEEP_MIN_NS };

	if (!emu_device_accessible(flag, sizeof(*flag)))
		return cudaErrorIllegalAddress;
	while ((int32_t)(__atomic_load_n(flag, __ATOMIC_ACQUIRE) -
			 a->value) < 0) {
		nanosleep(&ts, NULL);
		ts.tv_nsec = ts.tv_nsec * 2 > WAIT_SLEEP_MAX_NS ?
			     WAIT_SLEEP_MAX_NS : ts.tv_nsec * 2;
	}
	return cudaSuccess;
}

cudaError_t tcu_wait_kernel_geq(cudaStream_t stream, const uint32_t *flag_dev,
				uint32_t value)
{
	struct kernel_args a = { .in = flag_dev, .value = value };

	return queue(stream, run_wait_geq, &a);
}
