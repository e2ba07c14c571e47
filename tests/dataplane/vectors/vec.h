/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vec.h - what the protocol's test vectors (protocol.txt) share between
 * their generator (gen_vectors.c) and their check (test_vectors.c): the
 * one vector that needs the engine driven, a worker's CONFIRM, and the
 * line format's reader.
 *
 * Line format: a kind, then NAME=VALUE fields separated by blanks.
 * Integers are decimal or 0x hex; byte strings are hex without a prefix;
 * lists are comma-separated.  '#' starts a comment line.
 */
#ifndef TALLY_TESTS_DATAPLANE_VECTORS_VEC_H
#define TALLY_TESTS_DATAPLANE_VECTORS_VEC_H

#include <stddef.h>
#include <stdint.h>

#define VEC_MAX_CHUNKS 64
#define VEC_CONFIRM_MAX (20 + 8 * 64)

/*
 * The CONFIRM a worker of rank @rank (of 4; @n_aggs aggregators on nodes
 * 4.., chunk -> aggregator by tly_shard_of) sends to aggregator @to after
 * it placed the RESULTs of @chunks (in that order) of an int32 tensor
 * @tensor of @n_chunks chunks of K = 8, job 0x1234, cookie 0xc001d00d,
 * and then got RESULTs of the @n2 chunks @chunks2 (EXP from @exps2) of
 * tensor @tensor2, which it does not know (a finished one).
 * Returns its length in @out (0: none was sent).
 */
struct vec_foreign {
	uint32_t tensor2;
	const uint16_t *chunks2;
	const uint8_t *exps2;
	unsigned int n2;
};

size_t vec_confirm(uint16_t rank, uint16_t n_aggs, uint16_t to,
		   uint32_t tensor, uint32_t n_chunks, const uint16_t *chunks,
		   unsigned int n, const struct vec_foreign *fo,
		   uint8_t *out);

/*
 * The switch profile's first CONFIRM (docs/switch-profile.md) a worker of
 * rank @rank (of 4, one aggregator on node 4, 4096 slots, K = 64, the
 * default release_batch) sends after it placed the RESULTs of @chunks (in
 * that order) of an int32 tensor @tensor of @n_chunks chunks.  Returns
 * its length in @out (0: none was sent).
 */
size_t vec_confirm_switch(uint16_t rank, uint32_t tensor, uint32_t n_chunks,
			  const uint16_t *chunks, unsigned int n,
			  uint8_t *out);

/* one parsed line */
#define VEC_MAX_FIELDS 24
struct vec_line {
	char kind[32];
	unsigned int n;
	char name[VEC_MAX_FIELDS][24];
	const char *value[VEC_MAX_FIELDS];
	char buf[4096];
};

/* 0 for a vector, 1 for a blank or comment line, -1 malformed */
int vec_parse(const char *text, struct vec_line *l);
/* the field's text, or NULL */
const char *vec_str(const struct vec_line *l, const char *name);
/* the field as an integer (it must exist: -1 otherwise, with *ok = 0) */
uint64_t vec_u64(const struct vec_line *l, const char *name, int *ok);
/* the field as bytes; their count, or -1 */
long vec_hex(const struct vec_line *l, const char *name, uint8_t *out,
	     size_t cap);
/* a comma-separated list of integers; their count, or -1 */
long vec_list(const struct vec_line *l, const char *name, uint64_t *out,
	      size_t cap);
/* @n bytes as lowercase hex into @s (2n + 1 bytes) */
void vec_tohex(const uint8_t *p, size_t n, char *s);

#endif /* TALLY_TESTS_DATAPLANE_VECTORS_VEC_H */
