// SPDX-License-Identifier: BSD-3-Clause
/*
 * elem.c - the error-feedback accumulation shared by the sign and block
 * sparsification codecs.
 */
#include "dataplane/compress/elem.h"

void tly_elem_accumulate(float *r, const void *g, enum tly_dtype dt,
			 size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		r[i] += tly_elem_load(g, dt, i);
}
