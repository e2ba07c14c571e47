/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * metrics_http.h - the Prometheus endpoint (GET /metrics) on
 * metrics.listen, served by libmicrohttpd inside tallyd's event loop: no
 * thread of its own, so the handler reads the daemon without locks.
 */
#ifndef TALLY_CTRL_METRICS_HTTP_H
#define TALLY_CTRL_METRICS_HTTP_H

#include <stdint.h>

struct tallyd;
struct metrics_http;

/* Listen on d->cfg.metrics_listen and add MHD's epoll fd to d->epoll_fd
 * with @tag.  NULL on error (logged). */
struct metrics_http *metrics_http_start(struct tallyd *d, uint64_t tag);
void metrics_http_stop(struct metrics_http *h);
/* MHD's epoll fd is readable, or its timeout passed: serve. */
void metrics_http_run(struct metrics_http *h);
/* How long the loop may sleep before MHD needs to run (-1: no limit). */
int64_t metrics_http_timeout_ns(struct metrics_http *h);

#endif /* TALLY_CTRL_METRICS_HTTP_H */
