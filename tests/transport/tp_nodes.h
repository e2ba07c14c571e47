/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tp_nodes.h - what the transport tests share about their nodes: loopback
 * addresses with a port range per process, and the transports a test
 * opened, closed by a cmocka teardown even when the test failed.
 */
#ifndef TALLY_TESTS_TRANSPORT_TP_NODES_H
#define TALLY_TESTS_TRANSPORT_TP_NODES_H

#include <stdint.h>

#include "dataplane/transport/transport.h"

/*
 * Nodes 127.0.0.2 .. 127.0.0.(n+1), ports @base + 8 * (pid % 1500) + i:
 * a range per process, so parallel test binaries do not collide.  Keep
 * base + 12000 below the ephemeral range (32768..) so that no client
 * socket sits there, and give each binary its own base.
 */
void tp_loopback_addrs(struct tly_addr *addrs, int n, uint16_t base);

/* remember @tp (once) for tp_close_all() */
void tp_track(struct transport *tp);

/* close every tracked transport, newest first: a cmocka teardown */
int tp_close_all(void **state);

#endif
