// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_client_ef.c - TALLY_F_EF_CALLER in the client library
 * (shm/client_ef.c): a caller that keeps its own error-feedback residual
 * (libtally-cuda) gets its sendbuf sent as it is, the library keeps no
 * residual for it, and the completion leaves "sent" in that sendbuf, or
 * NaN throughout when the caller's residual must become 0.  The request's
 * side of client_ef.c is driven directly (no daemon): prepare, then the
 * completion as req_finish() hands it over, or a submission that failed.
 * The whole path through a real tallyd runs in test_pipeline_ef_emu.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shm/client_internal.h"
#include "dataplane/half.h"

#define N 37

static struct tally_client *client_new(int size, int job_method)
{
	struct tally_client *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->size = size;
	c->job_method = job_method;
	return c;
}

static struct tally_allreduce_args args(void *send, void *recv,
					enum tally_dtype t, uint32_t flags)
{
	return (struct tally_allreduce_args){
		.key = 5, .iteration = 1, .sendbuf = send, .recvbuf = recv,
		.count = N, .dtype = t, .op = TALLY_SUM, .flags = flags };
}

static bool is_nan_elem(const void *b, enum tally_dtype t, size_t i)
{
	if (t == TALLY_FLOAT16)
		return isnan(half_to_float(((const uint16_t *)b)[i]));
	if (t == TALLY_BFLOAT16)
		return isnan(bf16_to_float(((const uint16_t *)b)[i]));
	return isnan(((const float *)b)[i]);
}

static void fill(void *b, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++)
		((unsigned char *)b)[i] = (unsigned char)(i * 7 + 3);
}

/* sendbuf goes as it is; the library keeps nothing; a completion with
 * sent leaves the buffer as the daemon wrote it */
static void test_caller_sends_its_buffer(void **state)
{
	struct tally_client *c = client_new(2, TALLY_COMPRESS_NONE);
	float send[N], recv[N], before[N];
	struct tally_allreduce_args a = args(send, recv, TALLY_FLOAT32,
		TALLY_F_COMPRESS(TALLY_COMPRESS_SIGN_EF) | TALLY_F_EF_CALLER);
	struct client_req_ef re;
	const void *s = send, *scratch;
	const float *e;

	(void)state;
	fill(send, sizeof(send));
	memcpy(before, send, sizeof(send));
	assert_int_equal(client_ef_prepare(c, &a, &s, &re), 0);
	assert_ptr_equal(s, send);
	assert_true(re.used && re.caller);
	assert_null(c->ef);	/* no store, no scratch */
	assert_int_equal(client_ef_peek(c, 5, N, &e, &scratch), -1);
	client_ef_finish(c, &re, 0, TALLY_CQE_F_SENT);
	assert_false(re.used);
	assert_memory_equal(send, before, sizeof(send));
	assert_null(c->ef);
	client_ef_free(c);
	free(c);
}

/* no sent (one host alone), or a failed request: NaN throughout, in
 * every float dtype; a submission that failed leaves the buffer */
static void test_caller_nan_when_no_sent(void **state)
{
	static const enum tally_dtype types[] = {
		TALLY_FLOAT32, TALLY_FLOAT16, TALLY_BFLOAT16 };
	struct tally_client *c = client_new(2, TALLY_COMPRESS_NONE);
	float send[N], recv[N], before[N];

	(void)state;
	for (size_t k = 0; k < 3; k++) {
		for (int way = 0; way < 3; way++) {
			struct tally_allreduce_args a = args(send, recv,
				types[k],
				TALLY_F_COMPRESS(TALLY_COMPRESS_BLOCK_TOPK10_EF) |
				TALLY_F_EF_CALLER);
			struct client_req_ef re;
			const void *s = send;
			size_t bytes = N * tally_dtype_size(types[k]);

			fill(send, sizeof(send));
			memcpy(before, send, sizeof(send));
			assert_int_equal(client_ef_prepare(c, &a, &s, &re), 0);
			if (way == 0)
				client_ef_finish(c, &re, 0, 0);
			else if (way == 1)
				client_ef_finish(c, &re, -TALLY_EPEERLOST,
						 TALLY_CQE_F_SENT);
			else
				client_ef_cancel(c, &re);
			assert_false(re.used);
			for (size_t i = 0; i < N; i++)
				assert_true(is_nan_elem(send, types[k], i) ==
					    (way != 2));
			/* nothing past the tensor */
			assert_memory_equal((char *)send + bytes,
					    (char *)before + bytes,
					    sizeof(send) - bytes);
		}
	}
	assert_null(c->ef);
	free(c);
}

/* the daemon writes sent only when no member reduces in place */
static void test_caller_refuses_overlap(void **state)
{
	struct tally_client *c = client_new(2, TALLY_COMPRESS_SIGN_EF);
	float buf[2 * N];
	struct client_req_ef re;
	const void *s;
	struct tally_allreduce_args a;

	(void)state;
	a = args(buf, buf, TALLY_FLOAT32, TALLY_F_EF_CALLER);
	s = buf;
	assert_int_equal(client_ef_prepare(c, &a, &s, &re), -TALLY_EINVAL);
	a = args(buf, buf + N - 1, TALLY_FLOAT32, TALLY_F_EF_CALLER);
	assert_int_equal(client_ef_prepare(c, &a, &s, &re), -TALLY_EINVAL);
	a = args(buf + 1, buf, TALLY_FLOAT32, TALLY_F_EF_CALLER);
	assert_int_equal(client_ef_prepare(c, &a, &s, &re), -TALLY_EINVAL);
	a = args(buf, buf + N, TALLY_FLOAT32, TALLY_F_EF_CALLER);
	assert_int_equal(client_ef_prepare(c, &a, &s, &re), 0);
	assert_true(re.caller);
	client_ef_cancel(c, &re);
	free(c);
}

/* DEFAULT takes the job's method; without error feedback (another
 * method, an int32 tensor) the flag changes nothing, in place is fine */
static void test_caller_method_resolution(void **state)
{
	struct tally_client *ef_job = client_new(2, TALLY_COMPRESS_SIGN_EF);
	struct tally_client *plain = client_new(2, TALLY_COMPRESS_INT8);
	float send[N], recv[N];
	struct client_req_ef re;
	const void *s = send;
	struct tally_allreduce_args a;

	(void)state;
	assert_int_equal(tally_job_compression(ef_job),
			 TALLY_COMPRESS_SIGN_EF);
	assert_int_equal(tally_job_compression(plain), TALLY_COMPRESS_INT8);
	assert_int_equal(tally_job_compression(NULL), TALLY_COMPRESS_DEFAULT);

	a = args(send, recv, TALLY_FLOAT32, TALLY_F_EF_CALLER);
	assert_int_equal(client_ef_prepare(ef_job, &a, &s, &re), 0);
	assert_true(re.used && re.caller);
	client_ef_cancel(ef_job, &re);

	a = args(send, send, TALLY_FLOAT32, TALLY_F_EF_CALLER);
	assert_int_equal(client_ef_prepare(plain, &a, &s, &re), 0);
	assert_false(re.used);
	a = args(send, send, TALLY_FLOAT32, TALLY_F_EF_CALLER |
		 TALLY_F_COMPRESS(TALLY_COMPRESS_NONE));
	assert_int_equal(client_ef_prepare(ef_job, &a, &s, &re), 0);
	assert_false(re.used);
	a = args(send, send, TALLY_INT32, TALLY_F_EF_CALLER);
	assert_int_equal(client_ef_prepare(ef_job, &a, &s, &re), 0);
	assert_false(re.used);
	assert_ptr_equal(s, send);
	assert_null(ef_job->ef);
	free(ef_job);
	free(plain);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_caller_sends_its_buffer),
		cmocka_unit_test(test_caller_nan_when_no_sent),
		cmocka_unit_test(test_caller_refuses_overlap),
		cmocka_unit_test(test_caller_method_resolution),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
