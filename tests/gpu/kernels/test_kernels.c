// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_kernels.c - each kernel of gpu/kernels/ on a device against its C
 * reference (ref.c, itself checked against dataplane/ by test_ref.c), bit
 * for bit, on the inputs of inputs.c: every binary16 and bfloat16 value
 * and the float32 values around each, random bits, tensors of assorted
 * blocks for k from 1 to past a thread block, and lengths past one grid
 * stride (element-wise kernels) and past the reduction's grid (block
 * exponent), and the error-feedback kernels for every pair of float types
 * (there any NaN matches any NaN).
 * Every output buffer is poisoned before each run and a few
 * elements past its end must stay poisoned.  Suite 'gpu': needs a device.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#include "gpu/kernels/kernels.h"
#include "gpu/kernels/numerics.h"
#include "gpu/kernels/ref.h"
#include "inputs.h"

#define POISON 0xa5
#define GUARD 16		/* elements past the end that must stay */

static cudaStream_t stream;

static void cu_check(cudaError_t e, const char *call, int line)
{
	if (e != cudaSuccess)
		fail_msg("line %d: %s: %s", line, call, cudaGetErrorString(e));
}
#define CU(call) cu_check((call), #call, __LINE__)

static void *host_alloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);

	assert_non_null(p);
	return p;
}

/* a device buffer of @bytes plus @guard bytes, all poisoned */
static void *dev_poisoned(size_t bytes, size_t guard)
{
	void *d = NULL;

	CU(cudaMalloc(&d, bytes + guard));
	CU(cudaMemset(d, POISON, bytes + guard));
	return d;
}

static void *dev_copy_of(const void *host, size_t bytes)
{
	void *d = NULL;

	CU(cudaMalloc(&d, bytes ? bytes : 1));
	CU(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
	return d;
}

/*
 * Wait for the stream, fetch @bytes + @guard bytes of @dev and compare
 * @bytes of them with @want in units of @unit bytes, the guard with the
 * poison.  Frees @dev.
 */
static void expect_bits(const char *what, void *dev, const void *want,
			size_t bytes, size_t unit, size_t guard)
{
	uint8_t *got = host_alloc(bytes + guard);
	const uint8_t *w = want;
	size_t i;

	CU(cudaStreamSynchronize(stream));
	CU(cudaMemcpy(got, dev, bytes + guard, cudaMemcpyDeviceToHost));
	CU(cudaFree(dev));
	for (i = 0; i < bytes; i += unit)
		if (memcmp(got + i, w + i, unit)) {
			uint32_t g = 0, x = 0;

			memcpy(&g, got + i, unit);
			memcpy(&x, w + i, unit);
			fail_msg("%s: element %zu: device 0x%08x, "
				 "reference 0x%08x", what, i / unit, g, x);
		}
	for (i = bytes; i < bytes + guard; i++)
		if (got[i] != POISON)
			fail_msg("%s: byte %zu past the end written",
				 what, i - bytes);
	free(got);
}

/* ---- conversions ---- */

/*
 * float32 inputs: the edge cases, every bfloat16 value with the bits
 * that round to it or tie, every binary16 value with its neighbours and
 * the ties above it, then random bits: past one grid stride.
 */
static float *conversion_inputs(size_t n)
{
	static const uint32_t low[] = {
		0, 1, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff,
	};
	float *x = host_alloc(n * sizeof(float));
	uint64_t s = 42;
	size_t i = 0, j;
	uint32_t h, sign;

	for (j = 0; j < kin_n_edge_f32; j++)
		x[i++] = kin_float_of_bits(kin_edge_f32[j]);
	for (h = 0; h < 65536; h++)
		for (j = 0; j < 8; j++)
			x[i++] = kin_float_of_bits((h << 16) | low[j]);
	for (sign = 0; sign < 2; sign++)
		for (h = 0; h < 0x7c00; h++) {
			uint16_t sg = (uint16_t)(sign << 15);
			float v = tcu_f16_to_f32(sg | (uint16_t)h);
			float w = h + 1 < 0x7c00 ?
				  tcu_f16_to_f32(sg | (uint16_t)(h + 1)) :
				  (sign ? -65536.0f : 65536.0f);
			uint32_t mb = kin_bits_of_float((v + w) / 2);

			x[i++] = v;
			for (j = 0; j < 5; j++)
				x[i++] = kin_float_of_bits(mb - 2 + (uint32_t)j);
		}
	while (i < n)
		x[i++] = kin_float_of_bits(kin_rand_bits(&s));
	return x;
}

static void test_convert(void **state)
{
	const size_t n = (3u << 20) + 7;	/* > 4096 * 256 elements */
	float *x = conversion_inputs(n);
	uint16_t *h = host_alloc(n * sizeof(uint16_t));
	uint16_t *want16 = host_alloc(n * sizeof(uint16_t));
	float *want32 = host_alloc(n * sizeof(float));
	uint64_t s = 7;
	float *dx = dev_copy_of(x, n * sizeof(float));
	uint16_t *dh, *d16;
	float *d32;
	size_t i;

	(void)state;
	/* narrowing */
	tcu_ref_convert_f32_to_f16(want16, x, n);
	d16 = dev_poisoned(n * 2, GUARD * 2);
	CU(tcu_convert_f32_to_f16(d16, dx, n, stream));
	expect_bits("f32 to f16", d16, want16, n * 2, 2, GUARD * 2);
	tcu_ref_convert_f32_to_bf16(want16, x, n);
	d16 = dev_poisoned(n * 2, GUARD * 2);
	CU(tcu_convert_f32_to_bf16(d16, dx, n, stream));
	expect_bits("f32 to bf16", d16, want16, n * 2, 2, GUARD * 2);

	/* widening: every 16-bit value, then random ones */
	for (i = 0; i < n; i++)
		h[i] = i < 65536 ? (uint16_t)i : (uint16_t)kin_rand(&s);
	dh = dev_copy_of(h, n * 2);
	tcu_ref_convert_f16_to_f32(want32, h, n);
	d32 = dev_poisoned(n * 4, GUARD * 4);
	CU(tcu_convert_f16_to_f32(d32, dh, n, stream));
	expect_bits("f16 to f32", d32, want32, n * 4, 4, GUARD * 4);
	tcu_ref_convert_bf16_to_f32(want32, h, n);
	d32 = dev_poisoned(n * 4, GUARD * 4);
	CU(tcu_convert_bf16_to_f32(d32, dh, n, stream));
	expect_bits("bf16 to f32", d32, want32, n * 4, 4, GUARD * 4);

	/* short lengths: the tail of a thread block */
	for (i = 1; i <= 600; i += 37) {
		tcu_ref_convert_f32_to_f16(want16, x + 1000, i);
		d16 = dev_poisoned(i * 2, GUARD * 2);
		CU(tcu_convert_f32_to_f16(d16, dx + 1000, i, stream));
		expect_bits("f32 to f16, short", d16, want16, i * 2, 2,
			    GUARD * 2);
	}
	CU(cudaFree(dh));
	CU(cudaFree(dx));
	free(want32);
	free(want16);
	free(h);
	free(x);
}

/* ---- block fixed point ---- */

static void check_blocks(size_t n, size_t k, unsigned int workers,
			 uint64_t *s)
{
	size_t nb = (n + k - 1) / k, words = nb * k;
	float *x = host_alloc(n * sizeof(float));
	int32_t *exp = host_alloc(nb * sizeof(int32_t));
	int32_t *shift = host_alloc(nb * sizeof(int32_t));
	uint32_t *q = host_alloc(words * sizeof(uint32_t));
	uint32_t *words_in[3];
	float *y = host_alloc(n * sizeof(float));
	float *dx, *dy;
	int32_t *dexp, *dshift;
	uint32_t *dq, *din;
	char what[96];
	size_t i, j;

	kin_fill_blocks(x, n, k, s);
	snprintf(what, sizeof(what), "block exp, n %zu k %zu", n, k);
	dx = dev_copy_of(x, n * sizeof(float));
	tcu_ref_block_exp_f32(exp, x, n, k);
	dexp = dev_poisoned(nb * 4, GUARD * 4);
	CU(tcu_block_exp_f32(dexp, dx, n, k, stream));
	expect_bits(what, dexp, exp, nb * 4, 4, GUARD * 4);

	kin_pick_shifts(shift, exp, nb, workers, s);
	dshift = dev_copy_of(shift, nb * sizeof(int32_t));
	snprintf(what, sizeof(what), "quantize, n %zu k %zu", n, k);
	tcu_ref_quantize_f32(q, x, n, k, shift);
	dq = dev_poisoned(words * 4, GUARD * 4);
	CU(tcu_quantize_f32(dq, dx, n, k, dshift, stream));
	expect_bits(what, dq, q, words * 4, 4, GUARD * 4);

	/* dequantize the words, their sum over workers, random words */
	words_in[0] = q;
	/* (few workers on long tensors: the host's time, not the device's) */
	words_in[1] = kin_summed_words(q, n, k, shift,
				       n > (1u << 20) ? 2 : workers, s);
	assert_non_null(words_in[1]);
	words_in[2] = host_alloc(words * sizeof(uint32_t));
	for (i = 0; i < words; i++)
		words_in[2][i] = kin_rand_bits(s);
	for (j = 0; j < 3; j++) {
		snprintf(what, sizeof(what), "dequantize %zu, n %zu k %zu",
			 j, n, k);
		din = dev_copy_of(words_in[j], words * sizeof(uint32_t));
		tcu_ref_dequantize_f32(y, words_in[j], n, k, shift);
		dy = dev_poisoned(n * 4, GUARD * 4);
		CU(tcu_dequantize_f32(dy, din, n, k, dshift, stream));
		expect_bits(what, dy, y, n * 4, 4, GUARD * 4);
		CU(cudaFree(din));
	}
	free(words_in[1]);
	free(words_in[2]);
	CU(cudaFree(dshift));
	CU(cudaFree(dx));
	free(y);
	free(q);
	free(shift);
	free(exp);
	free(x);
}

/*
 * k around the warp (32) and the thread block (256), and long tensors:
 * past 4096 * 256 elements for the element-wise kernels, and past the
 * reduction's grid (65535 blocks of k > 32; 4096 * 256 lanes for k <= 32).
 */
static void test_blocks(void **state)
{
	static const size_t ks[] = {
		1, 2, 3, 5, 16, 31, 32, 33, 64, 100, 255, 256, 257, 363, 1024,
		4099,
	};
	static const unsigned int workers[] = { 1, 2, 3, 64 };
	size_t ki;

	(void)state;
	for (ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
		size_t k = ks[ki];
		uint64_t s = 1000 + k;
		size_t lengths[] = {
			1, k > 1 ? k - 1 : 1, k, k + 1, 3 * k + 5,
			1 + kin_rand(&s) % 20000,
			k <= 363 ? 66000 * (k < 32 ? 32 : k) + 17 : 70 * k + 3,
		};
		size_t li;

		for (li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++)
			check_blocks(lengths[li], k,
				     workers[kin_rand(&s) % 4], &s);
	}
}

/* a count of 0 queues nothing; k of 0 is refused */
/* ---- error feedback ---- */

static const int ef_types[] = { TCU_F32, TCU_F16, TCU_BF16 };
#define N_EF_TYPES 3

static size_t type_bytes(int t)
{
	return t == TCU_F32 ? 4 : 2;
}

/*
 * As expect_bits() for @n elements of @type, but any NaN matches any NaN:
 * the GPU's arithmetic returns its canonical NaN where the host's
 * propagates an operand's payload (IEEE leaves the payload open).
 */
static void expect_values(const char *what, void *dev, const void *want,
			  size_t n, int type)
{
	size_t unit = type_bytes(type), guard = GUARD * unit, i;
	uint8_t *got = host_alloc(n * unit + guard);

	CU(cudaStreamSynchronize(stream));
	CU(cudaMemcpy(got, dev, n * unit + guard, cudaMemcpyDeviceToHost));
	CU(cudaFree(dev));
	for (i = 0; i < n; i++) {
		float g = tcu_load(got, type, i), w = tcu_load(want, type, i);

		if (isnan(g) && isnan(w))
			continue;
		if (memcmp(got + i * unit, (const uint8_t *)want + i * unit,
			   unit))
			fail_msg("%s: element %zu: device %a, reference %a",
				 what, i, (double)g, (double)w);
	}
	for (i = n * unit; i < n * unit + guard; i++)
		if (got[i] != POISON)
			fail_msg("%s: byte %zu past the end written", what,
				 i - n * unit);
	free(got);
}

/* e += g, p = e: every pair of types, past one grid stride */
static void test_ef_accumulate(void **state)
{
	const size_t n = (1u << 20) + 4099;	/* > 4096 * 256 elements */
	uint64_t s = 5;

	(void)state;
	for (int a = 0; a < N_EF_TYPES; a++)
		for (int b = 0; b < N_EF_TYPES; b++) {
			int pt = ef_types[a], gt = ef_types[b];
			size_t pb = type_bytes(pt), gb = type_bytes(gt);
			float *e = host_alloc(n * 4);
			void *g = host_alloc(n * gb);
			void *p = host_alloc(n * pb);
			void *d_e, *d_g, *d_p = dev_poisoned(n * pb, GUARD * pb);
			char what[64];

			kin_fill_typed(e, TCU_F32, n, &s);
			kin_fill_typed(g, gt, n, &s);
			d_e = dev_poisoned(n * 4, GUARD * 4);
			CU(cudaMemcpy(d_e, e, n * 4, cudaMemcpyHostToDevice));
			d_g = dev_copy_of(g, n * gb);
			CU(tcu_ef_accumulate(d_p, pt, d_e, d_g, gt, n, stream));
			tcu_ref_ef_accumulate(p, pt, e, g, gt, n);
			snprintf(what, sizeof(what), "ef_accumulate p %d g %d",
				 pt, gt);
			expect_values(what, d_p, p, n, pt);
			expect_values(what, d_e, e, n, TCU_F32);
			CU(cudaFree(d_g));
			free(e);
			free(g);
			free(p);
		}
}

/* e := e - sent / L, 0 where sent is not finite: each type of sent */
static void test_ef_feedback(void **state)
{
	static const float inv_l[] = { 1.0f, 0.5f, 1.0f / 3, 1.0f / 7 };
	const size_t n = (1u << 20) + 4099;
	uint64_t s = 9;

	(void)state;
	for (int a = 0; a < N_EF_TYPES; a++)
		for (size_t l = 0; l < 4; l++) {
			int st = ef_types[a];
			size_t sb = type_bytes(st);
			float *e = host_alloc(n * 4);
			void *sent = host_alloc(n * sb);
			void *d_e, *d_s;
			char what[64];

			kin_fill_typed(e, TCU_F32, n, &s);
			kin_fill_typed(sent, st, n, &s);
			d_e = dev_poisoned(n * 4, GUARD * 4);
			CU(cudaMemcpy(d_e, e, n * 4, cudaMemcpyHostToDevice));
			d_s = dev_copy_of(sent, n * sb);
			CU(tcu_ef_feedback(d_e, d_s, st, inv_l[l], n, stream));
			tcu_ref_ef_feedback(e, sent, st, inv_l[l], n);
			snprintf(what, sizeof(what), "ef_feedback sent %d "
				 "1/L %g", st, (double)inv_l[l]);
			expect_values(what, d_e, e, n, TCU_F32);
			CU(cudaFree(d_s));
			free(e);
			free(sent);
		}
}

static void test_empty(void **state)
{
	void *d = dev_poisoned(64, 0);
	uint8_t none[64];

	(void)state;
	memset(none, POISON, sizeof(none));
	CU(tcu_convert_f32_to_f16(d, d, 0, stream));
	CU(tcu_convert_f32_to_bf16(d, d, 0, stream));
	CU(tcu_convert_f16_to_f32(d, d, 0, stream));
	CU(tcu_convert_bf16_to_f32(d, d, 0, stream));
	CU(tcu_block_exp_f32(d, d, 0, 64, stream));
	CU(tcu_quantize_f32(d, d, 0, 64, d, stream));
	CU(tcu_dequantize_f32(d, d, 0, 64, d, stream));
	assert_int_equal(tcu_block_exp_f32(d, d, 4, 0, stream),
			 cudaErrorInvalidValue);
	assert_int_equal(tcu_quantize_f32(d, d, 4, 0, d, stream),
			 cudaErrorInvalidValue);
	assert_int_equal(tcu_dequantize_f32(d, d, 4, 0, d, stream),
			 cudaErrorInvalidValue);
	CU(tcu_ef_accumulate(d, TCU_F16, d, d, TCU_F32, 0, stream));
	CU(tcu_ef_feedback(d, d, TCU_BF16, 0.5f, 0, stream));
	assert_int_equal(tcu_ef_accumulate(d, 3, d, d, TCU_F32, 4, stream),
			 cudaErrorInvalidValue);
	assert_int_equal(tcu_ef_accumulate(d, TCU_F32, d, d, -1, 4, stream),
			 cudaErrorInvalidValue);
	assert_int_equal(tcu_ef_feedback(d, d, 3, 0.5f, 4, stream),
			 cudaErrorInvalidValue);
	expect_bits("empty", d, none, 64, 1, 0);
}

static int setup(void **state)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);

	(void)state;
	if (e != cudaSuccess || count < 1) {
		print_error("cudaGetDeviceCount: %s (%d devices)\n",
			    cudaGetErrorString(e), count);
		return -1;
	}
	e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		print_error("cudaStreamCreateWithFlags: %s\n",
			    cudaGetErrorString(e));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (!stream)			/* setup failed */
		return 0;
	return cudaStreamDestroy(stream) == cudaSuccess ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_convert),
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_ef_accumulate),
		cmocka_unit_test(test_ef_feedback),
		cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
