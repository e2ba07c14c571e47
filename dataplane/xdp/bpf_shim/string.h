/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * string.h for the BPF target: glibc's headers do not build for
 * -target bpf, and wire.h needs memcpy only for fixed-size loads and
 * stores, which the compiler turns into plain ones.
 */
#ifndef TALLY_XDP_BPF_SHIM_STRING_H
#define TALLY_XDP_BPF_SHIM_STRING_H
#define memcpy __builtin_memcpy
#endif
