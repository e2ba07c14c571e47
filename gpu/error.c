// SPDX-License-Identifier: BSD-3-Clause
/*
 * error.c - the error state of a tally_cuda context: the last message
 * (naming the CUDA or tally call), and the first error of an operation
 * that failed after it was queued.
 */
#include <stdio.h>

#include "gpu/context.h"

static void set_msg(struct tally_cuda *tc, const char *fmt, va_list ap)
{
	vsnprintf(tc->msg, sizeof(tc->msg), fmt, ap);
}

int tcu_fail(struct tally_cuda *tc, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&tc->err_lock);
	va_start(ap, fmt);
	set_msg(tc, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&tc->err_lock);
	return err;
}

int tcu_fail_cuda(struct tally_cuda *tc, const char *call, cudaError_t e)
{
	return tcu_fail(tc, -TALLY_EDEVICE, "%s: %s", call,
			cudaGetErrorString(e));
}

void tcu_fail_async(struct tally_cuda *tc, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&tc->err_lock);
	if (!tc->async_error) {
		tc->async_error = err;
		va_start(ap, fmt);
		set_msg(tc, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&tc->err_lock);
}

int tally_cuda_async_error(struct tally_cuda *tc)
{
	int err;

	pthread_mutex_lock(&tc->err_lock);
	err = tc->async_error;
	tc->async_error = 0;
	pthread_mutex_unlock(&tc->err_lock);
	return err;
}

/* a copy per calling thread: the progress thread may write tc->msg */
const char *tally_cuda_error_message(const struct tally_cuda *tc)
{
	static __thread char copy[TCU_MSG_MAX];
	pthread_mutex_t *lock = (pthread_mutex_t *)&tc->err_lock;

	pthread_mutex_lock(lock);
	snprintf(copy, sizeof(copy), "%s", tc->msg);
	pthread_mutex_unlock(lock);
	return copy;
}
