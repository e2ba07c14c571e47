// SPDX-License-Identifier: BSD-3-Clause
/*
 * ctl.c - the control query (tally-ctl) on the client socket.
 *
 * A connection may send CTL_QUERY instead of HELLO.  It stays a pending
 * connection until then (the pending limit and the HELLO timeout apply),
 * is never a client, and gets one CTL_REPLY: a 48-byte header and the
 * daemon's metrics as Prometheus text, the same that daemon_collect_metrics()
 * gives the HTTP endpoint.  Nothing in the daemon changes but a counter.
 * The reply is sent without blocking: the send buffer is grown to hold it
 * first, and a peer that does not read gets a cut reply, not our time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <tally/tally.h>
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "shm/fdpass.h"

static void send_all(int sock, const char *p, size_t len)
{
	while (len) {
		ssize_t n = send(sock, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;		/* full or gone: the reply is cut */
		p += n;
		len -= (size_t)n;
	}
}

static void reply_error(struct tallyd *d, int sock, int status)
{
	struct tally_msg r;

	d->stat_ctl_refused++;
	msg_init(&r, TALLY_MSG_CTL_REPLY);
	r.status = status;
	msg_send(sock, &r, NULL, 0);
}

void daemon_ctl_reply(struct tallyd *d, int sock, const struct tally_msg *q)
{
	struct metrics *m;
	struct tally_msg r;
	char *text = NULL;
	size_t len = 0;
	int buf;

	if (q->arg[0] != TALLY_CTL_VERSION || q->arg[1] || q->arg[2] ||
	    q->arg[3] || q->status) {
		reply_error(d, sock, -TALLY_EINVAL);
		return;
	}
	m = metrics_new();
	if (!m || daemon_collect_metrics(d, m) ||
	    metrics_write(m, &text, &len) || len > TALLY_CTL_MAX_REPLY) {
		metrics_free(m);
		free(text);
		reply_error(d, sock, -TALLY_ENOMEM);
		return;
	}
	metrics_free(m);
	d->stat_ctl_queries++;
	buf = (int)len + 4096;
	setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	msg_init(&r, TALLY_MSG_CTL_REPLY);
	r.arg[0] = len;
	if (msg_send(sock, &r, NULL, 0) == 0)
		send_all(sock, text, len);
	free(text);
	log_debug("control query answered (%zu bytes)", len);
}
