// SPDX-License-Identifier: BSD-3-Clause
/*
 * metrics_http.c - libmicrohttpd glue for the Prometheus endpoint.
 *
 * MHD runs in its external epoll mode (MHD_USE_EPOLL without an internal
 * thread): its epoll fd sits in tallyd's epoll set and the event loop calls
 * MHD_run() when it is readable or MHD's timeout is due (loop.c).  Every
 * request is answered inside that call from daemon_collect_metrics(),
 * on the loop's thread.  Bounded: a few connections at once, each with a
 * timeout, GET and HEAD only, no request bodies.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/metrics_http.h"

#define HTTP_MAX_CONNECTIONS 16
#define HTTP_TIMEOUT_S 10

struct metrics_http {
	struct tallyd *d;
	struct MHD_Daemon *mhd;
	int epoll_fd;		/* MHD's */
};

static enum MHD_Result answer(struct MHD_Connection *conn,
			      unsigned int code, const char *type,
			      char *body, size_t len, bool owned)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body,
		owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_size, void **req)
{
	static char not_found[] = "tallyd: see /metrics\n";
	static char bad_method[] = "tallyd: GET /metrics\n";
	static char no_memory[] = "tallyd: out of memory\n";
	struct metrics_http *h = cls;
	struct metrics *m;
	char *text;
	size_t len;

	(void)version;
	(void)upload;
	if (*upload_size)
		return MHD_NO;	/* no bodies here: drop the connection */
	(void)req;
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
			      bad_method, sizeof(bad_method) - 1, false);
	if (strcmp(url, "/metrics"))
		return answer(conn, MHD_HTTP_NOT_FOUND, "text/plain",
			      not_found, sizeof(not_found) - 1, false);
	m = metrics_new();
	if (!m || daemon_collect_metrics(h->d, m) ||
	    metrics_write(m, &text, &len)) {
		metrics_free(m);
		return answer(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
			      "text/plain", no_memory, sizeof(no_memory) - 1,
			      false);
	}
	metrics_free(m);
	return answer(conn, MHD_HTTP_OK, METRICS_CONTENT_TYPE, text, len,
		      true);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_debug("metrics http: %s", line);
}

struct metrics_http *metrics_http_start(struct tallyd *d, uint64_t tag)
{
	struct metrics_http *h = calloc(1, sizeof(*h));
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons(d->cfg.metrics_listen.port),
		.sin_addr.s_addr = htonl(d->cfg.metrics_listen.ip),
	};
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };
	const union MHD_DaemonInfo *info;
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
	if (!h)
		return NULL;
	h->d = d;
	h->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL,
				  NULL, handle, h,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				  MHD_OPTION_CONNECTION_LIMIT,
				  (unsigned int)HTTP_MAX_CONNECTIONS,
				  MHD_OPTION_CONNECTION_TIMEOUT,
				  (unsigned int)HTTP_TIMEOUT_S,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				  MHD_OPTION_END);
	if (!h->mhd) {
		log_err("metrics: cannot listen on %s:%u", ip,
			d->cfg.metrics_listen.port);
		free(h);
		return NULL;
	}
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	h->epoll_fd = info ? info->epoll_fd : -1;
	if (h->epoll_fd < 0 ||
	    epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, h->epoll_fd, &ev)) {
		log_err("metrics: no epoll fd from libmicrohttpd");
		metrics_http_stop(h);
		return NULL;
	}
	log_info("metrics on http://%s:%u/metrics", ip,
		 d->cfg.metrics_listen.port);
	return h;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->mhd);	/* closes its epoll fd too */
	free(h);
}

void metrics_http_run(struct metrics_http *h)
{
	MHD_run(h->mhd);
}

int64_t metrics_http_timeout_ns(struct metrics_http *h)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (MHD_get_timeout(h->mhd, &ms) != MHD_YES)
		return -1;
	return ms > 1000000 ? 1000000000000ll : (int64_t)ms * 1000000;
}
