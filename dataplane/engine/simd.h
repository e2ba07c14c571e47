/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * simd.h - helpers for loops the compiler vectorises.
 *
 * The project builds for baseline x86-64 (SSE2).  Hot loops are cloned for
 * AVX2 and picked at load time (ifunc), so one binary runs everywhere and
 * uses the wide units where present; the aggregator's swap-and-add loops
 * are written with AVX2 intrinsics instead and picked when an aggregator
 * is created (agg.c).  Payload words are big-endian and unaligned (the
 * tally payload sits at offset 62 of a frame).
 */
#ifndef TALLY_DATAPLANE_ENGINE_SIMD_H
#define TALLY_DATAPLANE_ENGINE_SIMD_H

#include <stdint.h>

#include "dataplane/engine/wire.h"	/* tly_be32() */

/* not under ASan or TSan: the ifunc resolver runs before the sanitizer's
 * run time is set up, and its instrumented prologue crashes there */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TLY_HOT __attribute__((target_clones("avx2", "default")))
#else
#define TLY_HOT
#endif

typedef uint32_t tly_u32_una __attribute__((aligned(1), may_alias));
typedef int32_t tly_i32_una __attribute__((aligned(1), may_alias));

#endif /* TALLY_DATAPLANE_ENGINE_SIMD_H */
