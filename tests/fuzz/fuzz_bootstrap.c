// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_bootstrap.c - libFuzzer target for the daemons' control-message
 * decoder: any byte stream is decoded message by message, as the
 * membership code reads a TCP stream; a decoded message must re-encode to
 * the same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/bootstrap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t again[BOOT_MAX_MSG];
	struct boot_msg m;
	size_t off = 0;

	while (off < size) {
		int len = boot_decode(data + off, size - off, &m);

		if (len <= 0)
			break;
		/* what we accepted we can say again, byte for byte except
		 * padding, which the decoder ignores */
		if (boot_encode(&m, again, sizeof(again)) != len)
			abort();
		off += (size_t)len;
	}
	return 0;
}
