// SPDX-License-Identifier: BSD-3-Clause
/*
 * wait_kernel.cu - the fallback of stream_wait.c: one thread polls a word
 * of mapped host memory until it reaches the value.  The volatile load
 * goes to host memory each time; the sleep keeps the poll off the PCIe
 * bus most of the time.
 */
#include "gpu/stream_wait.h"
#include "gpu/kernels/launch.h"

__global__ void wait_geq_kernel(const volatile uint32_t *flag, uint32_t value)
{
	while ((int32_t)(*flag - value) < 0)
		__nanosleep(1000);
}

extern "C" cudaError_t tcu_wait_kernel_geq(cudaStream_t stream,
					   const uint32_t *flag_dev,
					   uint32_t value)
{
	return tcu_launch(wait_geq_kernel, 1, 1, stream, flag_dev, value);
}
