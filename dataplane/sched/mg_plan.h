/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mg_plan.h - MG-WFBP's merge plan over one backward pass (Shi et al.,
 * INFOCOM'19), computed by every process alike from the same profile and
 * cost model: the groups the scheduler's mgwfbp policy then sends as one
 * unit each (sched_item.group).  Used by tools/replay (with a and b
 * measured through tally) and by tally-sim (a and b from its network
 * model), so both plan with the same code.
 */
#ifndef TALLY_DATAPLANE_MG_PLAN_H
#define TALLY_DATAPLANE_MG_PLAN_H

#include <stdint.h>

/*
 * Walking the gradients in backward order (gradient i becomes ready
 * bwd[i] after gradient i-1, bytes[i] bytes), a gradient joins the group
 * before it when that group's all-reduce, time(bytes) = a + b * bytes,
 * would still be running when the gradient is ready (it would wait
 * anyway; merging saves one startup a); otherwise it starts a new group.
 * group[i] gets 1, 2, ... (at most UINT16_MAX groups).  Returns the number
 * of groups.  Times in any one unit (the caller's), bytes in bytes.
 */
uint32_t mg_plan(int n, const double *bwd, const double *bytes, double a,
		 double b, uint32_t *group);

#endif /* TALLY_DATAPLANE_MG_PLAN_H */
