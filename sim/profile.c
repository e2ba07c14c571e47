// SPDX-License-Identifier: BSD-3-Clause
/*
 * profile.c - read a model profile (tools/models/README.md: order, name,
 * layer, elements, fwd_us, bwd_us; backward order), as tools/replay does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

int sim_profile_load(const char *path, struct sim_profile *p)
{
	FILE *f = fopen(path, "r");
	char line[512], name[96];
	int cap = 0;

	memset(p, 0, sizeof(*p));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct sim_tensor t = { 0 };
		unsigned long elements;
		double fwd, bwd;
		int order;

		if (line[0] == '#' || !strncmp(line, "order", 5))
			continue;
		if (sscanf(line, "%d,%95[^,],%d,%lu,%lf,%lf", &order, name,
			   &t.layer, &elements, &fwd, &bwd) != 6 ||
		    t.layer < 0) {
			fclose(f);
			sim_profile_free(p);
			return -EINVAL;
		}
		t.bytes = 4ull * elements;
		t.fwd_ns = fwd * 1e3;
		t.bwd_ns = bwd * 1e3;
		if (p->n == cap) {
			struct sim_tensor *n;

			cap = cap ? 2 * cap : 256;
			n = realloc(p->t, (size_t)cap * sizeof(*n));
			if (!n) {
				fclose(f);
				sim_profile_free(p);
				return -ENOMEM;
			}
			p->t = n;
		}
		p->t[p->n++] = t;
		if (t.layer + 1 > p->layers)
			p->layers = t.layer + 1;
		p->compute_ns += t.fwd_ns + t.bwd_ns;
	}
	fclose(f);
	if (!p->n)
		return -EINVAL;
	return 0;
}

void sim_profile_free(struct sim_profile *p)
{
	free(p->t);
	memset(p, 0, sizeof(*p));
}
