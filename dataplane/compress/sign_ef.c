// SPDX-License-Identifier: BSD-3-Clause
/*
 * sign_ef.c - the sign codec with error feedback and its majority vote
 * (see sign_ef.h).
 */
#include "dataplane/compress/sign_ef.h"

#include <math.h>
#include <string.h>

#include "dataplane/compress/elem.h"
#include "dataplane/engine/quant.h"
#include "dataplane/engine/wire.h"

static int get_bit(const uint8_t *plane, size_t i)
{
	return (plane[i / 8] >> (7 - i % 8)) & 1;
}

static void set_bit(uint8_t *plane, size_t i)
{
	plane[i / 8] |= (uint8_t)(0x80u >> (i % 8));
}

float tly_sign_scale(const float *p, size_t m)
{
	double s = 0;
	size_t i;

	if (m == 0)
		return 0;
	for (i = 0; i < m; i++)
		s += fabs((double)p[i]);
	return (float)(s / (double)m);
}

void tly_sign_pack(uint8_t *out, const float *p, size_t m, float a,
		   int shift)
{
	uint8_t *bits = out + 4;
	size_t i;

	tly_quantize_f32(out, &a, 1, 1, shift);
	memset(bits, 0, (m + 7) / 8);
	if (shift == TLY_SHIFT_NONFINITE)
		return;		/* non-finite everywhere: signs carry nothing */
	for (i = 0; i < m; i++)
		if (p[i] >= 0)
			set_bit(bits, i);
}

void tly_sign_feedback(float *p, const uint8_t *data, size_t m, int shift)
{
	float ahat;
	size_t i;

	if (shift == TLY_SHIFT_NONFINITE) {
		memset(p, 0, m * sizeof(*p));
		return;
	}
	tly_dequantize_f32(&ahat, data, 1, shift);
	for (i = 0; i < m; i++) {
		if (get_bit(data + 4, i))
			p[i] -= ahat;
		else
			p[i] += ahat;
	}
}

void tly_sign_encode(uint8_t *out, float *p, size_t m, float a, int shift)
{
	tly_sign_pack(out, p, m, a, shift);
	tly_sign_feedback(p, out, m, shift);
}

void tly_sign_acc_init(struct tly_sign_acc *acc, uint8_t *count, size_t m)
{
	acc->scale_sum = 0;
	acc->count = count;
	acc->m = m;
	memset(count, 0, m);
}

void tly_sign_acc_add(struct tly_sign_acc *acc, const uint8_t *data)
{
	size_t i;

	acc->scale_sum += tly_get32(data);
	for (i = 0; i < acc->m; i++)
		acc->count[i] += (uint8_t)get_bit(data + 4, i);
}

void tly_sign_result(uint8_t *out, const struct tly_sign_acc *acc,
		     unsigned int n_workers, uint64_t seed)
{
	uint8_t *vote = out + 4;
	size_t i;

	tly_put32(out, acc->scale_sum);
	memset(vote, 0, (acc->m + 7) / 8);
	for (i = 0; i < acc->m; i++) {
		unsigned int twice = 2u * acc->count[i];

		if (twice > n_workers ||
		    (twice == n_workers && tly_sign_tie(seed, i)))
			set_bit(vote, i);
	}
}

void tly_sign_decode(void *out, enum tly_dtype dt, const uint8_t *res,
		     size_t len, int shift)
{
	const uint8_t *vote = res + 4;
	float s;
	size_t i;

	tly_dequantize_f32(&s, res, 1, shift);
	for (i = 0; i < len; i++)
		tly_elem_store(out, dt, i, get_bit(vote, i) ? s : -s);
}
