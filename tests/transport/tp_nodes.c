// SPDX-License-Identifier: BSD-3-Clause
/* tp_nodes.c - the transport tests' nodes: see tp_nodes.h. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "tp_nodes.h"

#define TP_MAX_OPENED 16

static struct transport *opened[TP_MAX_OPENED];
static int n_opened;

void tp_loopback_addrs(struct tly_addr *addrs, int n, uint16_t base)
{
	uint16_t first = (uint16_t)(base + (getpid() % 1500) * 8);
	int i;

	for (i = 0; i < n; i++) {
		addrs[i].ip = 0x7f000002u + (uint32_t)i;
		addrs[i].port = (uint16_t)(first + i);
	}
}

void tp_track(struct transport *tp)
{
	int i;

	for (i = 0; i < n_opened; i++)
		if (opened[i] == tp)
			return;
	assert_true(n_opened < TP_MAX_OPENED);
	opened[n_opened++] = tp;
}

int tp_close_all(void **state)
{
	(void)state;
	while (n_opened)
		transport_close(opened[--n_opened]);
	return 0;
}
