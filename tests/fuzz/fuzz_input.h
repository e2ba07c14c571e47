/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_input.h - reading a fuzz input as a stream of fields: past its end
 * every byte reads as zero, so any input is a complete script.
 */
#ifndef TALLY_TESTS_FUZZ_INPUT_H
#define TALLY_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static inline int fuzz_more(const struct fuzz_in *in)
{
	return in->n > 0;
}

static inline uint8_t fuzz_u8(struct fuzz_in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static inline uint16_t fuzz_u16(struct fuzz_in *in)
{
	uint16_t hi = fuzz_u8(in);

	return (uint16_t)(hi << 8 | fuzz_u8(in));
}

static inline uint32_t fuzz_u32(struct fuzz_in *in)
{
	uint32_t hi = fuzz_u16(in);

	return hi << 16 | fuzz_u16(in);
}

/* Copy up to @len bytes into @buf (zero-filled); how many were there. */
static inline size_t fuzz_bytes(struct fuzz_in *in, void *buf, size_t len)
{
	size_t n = len < in->n ? len : in->n;

	memset(buf, 0, len);
	memcpy(buf, in->p, n);
	in->p += n;
	in->n -= n;
	return n;
}

#endif /* TALLY_TESTS_FUZZ_INPUT_H */
