// SPDX-License-Identifier: BSD-3-Clause
/* mg_plan.c - MG-WFBP's merge plan (see mg_plan.h). */
#include "dataplane/sched/mg_plan.h"

uint32_t mg_plan(int n, const double *bwd, const double *bytes, double a,
		 double b, uint32_t *group)
{
	double ready = 0, start = 0, end = 0, sum = 0;
	uint32_t g = 0;

	for (int i = 0; i < n; i++) {
		ready += bwd[i];
		if (g && end > ready && g < UINT16_MAX) {
			sum += bytes[i];		/* merge */
			end = start + a + b * sum;
		} else {
			g++;
			start = ready > end ? ready : end;
			sum = bytes[i];
			end = start + a + b * sum;
		}
		group[i] = g;
	}
	return g;
}
