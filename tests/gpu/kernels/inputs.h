/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inputs.h - the inputs both kernel tests use: the references against
 * dataplane/ (test_ref.c) and the kernels against the references on a
 * device (test_kernels.c).  A seeded generator, a list of float32 edge
 * cases, and tensors made of blocks of assorted kinds (zeros, subnormals,
 * one magnitude with exact halves at the quantization step, inf and NaN,
 * the extremes of the exponent range).
 */
#ifndef TALLY_TESTS_GPU_KERNELS_INPUTS_H
#define TALLY_TESTS_GPU_KERNELS_INPUTS_H

#include <stddef.h>
#include <stdint.h>

extern const uint32_t kin_edge_f32[];
extern const size_t kin_n_edge_f32;

uint64_t kin_rand(uint64_t *state);
float kin_float_of_bits(uint32_t u);
uint32_t kin_bits_of_float(float f);

/* any float32 bits at all (NaN payloads included) */
uint32_t kin_rand_bits(uint64_t *state);
/* a finite float, exponent uniform over the whole range, subnormals too */
float kin_rand_finite(uint64_t *state);

/* x[0..n) as blocks of k of random kinds */
void kin_fill_blocks(float *x, size_t n, size_t k, uint64_t *state);

/*
 * Shifts for each of @nblocks blocks with exponents @exp, as @workers
 * workers would use them: mostly from the block's exponent (or a larger
 * one, another worker's), sometimes the extremes (127, the smallest
 * ordinary shift, TCU_SHIFT_NONFINITE) or any ordinary shift at all.
 */
void kin_pick_shifts(int32_t *shift, const int32_t *exp, size_t nblocks,
		     unsigned int workers, uint64_t *state);

/* per element, the sum over @workers workers of random count codes */
uint32_t kin_rand_code_sum(unsigned int workers, uint64_t *state);

/*
 * What the aggregator hands back for quantized words @q (ceil(n / k) * k
 * of them, big-endian): per word the sum over @workers workers, the
 * first contributing @q, the others random values at the same shift, or
 * in a non-finite block (@shift TCU_SHIFT_NONFINITE) a sum of random count
 * codes.  Malloc'ed; NULL if out of memory.
 */
uint32_t *kin_summed_words(const uint32_t *q, size_t n, size_t k,
			   const int32_t *shift, unsigned int workers,
			   uint64_t *state);

/*
 * @n elements of type @type (TCU_F32, TCU_F16, TCU_BF16 of numerics.h)
 * for the error-feedback kernels: mostly finite values of assorted
 * magnitudes (subnormals and the largest included), the edge cases, and
 * about one in 64 random bits (inf and NaN among them).
 */
void kin_fill_typed(void *x, int type, size_t n, uint64_t *state);

#endif /* TALLY_TESTS_GPU_KERNELS_INPUTS_H */
