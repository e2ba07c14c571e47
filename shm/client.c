// SPDX-License-Identifier: BSD-3-Clause
/*
 * client.c - libtally set-up: connecting to tallyd, the rings, and shared
 * buffers (tally_connect, tally_connect_opts, tally_disconnect, tally_alloc,
 * tally_free).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "shm/client_internal.h"
#include "shm/fdpass.h"
#include "shm/job_env.h"

/* A daemon that does not answer a control message within this is lost. */
#define CLIENT_CTRL_TIMEOUT_S 10

static int open_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = CLIENT_CTRL_TIMEOUT_S };
	int s;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -TALLY_EINVAL;
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -TALLY_ECONNECT;
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
		close(s);
		return -TALLY_ECONNECT;
	}
	return s;
}

/* All of @len bytes on the blocking socket: 0, or -errno. */
static int send_all(int sock, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = send(sock, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Send a control message, then the @tail_len bytes at @tail that follow it
 * (HELLO's job description; 0: none), and wait for its reply of type
 * @want.  The fds the reply carries go to @rfds (TALLY_MSG_MAX_FDS slots,
 * count in *@rn) when it is not NULL, else they are closed. */
static int ctrl_call(struct tally_client *c, struct tally_msg *msg,
		     const int *fds, int nfds, const void *tail,
		     size_t tail_len, enum tally_msg_type want, int *rfds,
		     int *rn)
{
	int tmp[TALLY_MSG_MAX_FDS], tn, ret;

	if (!rfds) {
		rfds = tmp;
		rn = &tn;
	}
	if (c->daemon_lost)
		return -TALLY_EDAEMONLOST;
	if (msg_send(c->sock, msg, fds, nfds))
		goto lost;
	if (tail_len && send_all(c->sock, tail, tail_len))
		goto lost;
	ret = msg_recv(c->sock, msg, rfds, rn);
	if (rfds == tmp)
		for (int i = 0; i < tn; i++)
			close(tmp[i]);
	if (ret == -EPROTO)
		return -TALLY_EPROTO;
	if (ret <= 0 || msg->type != want)
		goto lost;
	return msg->status;
lost:
	c->daemon_lost = true;
	return -TALLY_EDAEMONLOST;
}

static int setup_rings(struct tally_client *c)
{
	int ret = segment_create(&c->ctrl, client_ctrl_bytes(), "tally-rings");

	if (ret)
		return ret;
	ring_attach(&c->sq, c->ctrl.base, CLIENT_SQ_ENTRIES,
		    sizeof(struct tally_sqe), true, true);
	ring_attach(&c->cq, (char *)c->ctrl.base + client_cq_offset(),
		    CLIENT_CQ_ENTRIES, sizeof(struct tally_cqe), false, true);
	return 0;
}

static void client_free(struct tally_client *c)
{
	client_ef_free(c);
	client_fast_unmap(c);
	for (int i = 0; i < TALLY_MAX_SEGMENTS; i++)
		if (c->segs[i].id)
			segment_destroy(&c->segs[i].seg);
	if (c->ctrl.base)
		segment_destroy(&c->ctrl);
	if (c->sock >= 0)
		close(c->sock);
	if (c->sq_kick_fd >= 0)
		close(c->sq_kick_fd);
	if (c->cq_kick_fd >= 0)
		close(c->cq_kick_fd);
	free(c);
}

/* The struct tally_connect_opts of TALLY_1.3 ends after .job: a caller's
 * .size says at least this much.  Later versions add fields after it. */
#define CONNECT_OPTS_SIZE_1_3 \
	(offsetof(struct tally_connect_opts, job) + sizeof(struct tally_job))

int tally_connect_opts(const struct tally_connect_opts *opts,
		       struct tally_client **out)
{
	static const struct tally_connect_opts unset = TALLY_CONNECT_OPTS_INIT;
	struct tally_job_wire job;
	struct tally_client *c;
	struct tally_msg msg;
	const char *socket_path;
	char why[256];
	int fds[TALLY_MSG_MAX_FDS], nfds = 0, ret, has_job;

	if (!out)
		return -TALLY_EINVAL;
	*out = NULL;
	if (!opts)
		opts = &unset;
	if (opts->size < CONNECT_OPTS_SIZE_1_3)
		return -TALLY_EINVAL;
	has_job = job_resolve(&opts->job, opts->flags,
			      (const char *const *)environ, &job, why,
			      sizeof(why));
	if (has_job < 0) {
		/* the one word the caller gets is EINVAL: say which field */
		fprintf(stderr, "libtally: tally_connect: job: %s\n", why);
		return has_job;
	}
	socket_path = opts->socket;
	if (!socket_path)
		socket_path = getenv("TALLY_SOCKET");
	if (!socket_path || !*socket_path)
		socket_path = TALLY_DEFAULT_SOCKET;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -TALLY_ENOMEM;
	c->sq_kick_fd = c->cq_kick_fd = -1;
	c->ctrl.fd = -1;
	c->next_seg_id = 1;
	c->sock = open_socket(socket_path);
	if (c->sock < 0) {
		ret = c->sock;
		goto fail;
	}
	ret = setup_rings(c);
	if (ret)
		goto fail;

	msg_init(&msg, TALLY_MSG_HELLO);
	msg.arg[0] = CLIENT_SQ_ENTRIES;
	msg.arg[1] = CLIENT_CQ_ENTRIES;
	msg.arg[2] = c->ctrl.size;
	msg.arg[3] = has_job == 0 ? sizeof(job) : 0;
	ret = ctrl_call(c, &msg, &c->ctrl.fd, 1, &job, msg.arg[3],
			TALLY_MSG_WELCOME, fds, &nfds);
	if (ret == -TALLY_EDAEMONLOST)
		ret = -TALLY_ECONNECT;
	/* two doorbells, and the fast path's table when arg[3] says so */
	if (!ret && nfds != (msg.arg[3] ? 3 : 2))
		ret = -TALLY_EPROTO;
	if (ret) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		goto fail;
	}
	c->sq_kick_fd = fds[0];
	c->cq_kick_fd = fds[1];
	c->rank = (int)msg.arg[0];
	c->size = (int)msg.arg[1];
	c->job_method = (int)msg.arg[2];
	if (nfds == 3) {
		/* a client without the table its peers use would wait for
		 * them in the daemon for ever: no table, no connection */
		ret = client_fast_map(c, fds[2], msg.arg[3]);
		close(fds[2]);
		if (ret)
			goto fail;
	}
	*out = c;
	return 0;
fail:
	client_free(c);
	return ret;
}

int tally_connect(const char *socket_path, struct tally_client **out)
{
	struct tally_connect_opts opts = TALLY_CONNECT_OPTS_INIT;

	opts.socket = socket_path;
	return tally_connect_opts(&opts, out);
}

void tally_disconnect(struct tally_client *c)
{
	if (c)
		client_free(c);
}

int tally_rank(const struct tally_client *c)
{
	return c ? c->rank : -TALLY_EINVAL;
}

int tally_size(const struct tally_client *c)
{
	return c ? c->size : -TALLY_EINVAL;
}

void *tally_alloc(struct tally_client *c, size_t bytes)
{
	struct client_seg *slot = NULL;
	struct tally_msg msg;
	int ret;

	if (!c)
		return NULL;
	c->last_error = -TALLY_EINVAL;
	if (bytes == 0)
		return NULL;
	c->last_error = -TALLY_ELIMIT;	/* all TALLY_MAX_SEGMENTS in use */
	for (int i = 0; i < TALLY_MAX_SEGMENTS && !slot; i++)
		if (!c->segs[i].id)
			slot = &c->segs[i];
	if (!slot)
		return NULL;
	c->last_error = bytes > SEGMENT_MAX_BYTES ? -TALLY_ELIMIT :
			segment_create(&slot->seg, bytes, "tally-buf");
	if (c->last_error)
		return NULL;

	msg_init(&msg, TALLY_MSG_SEG_ADD);
	msg.arg[0] = c->next_seg_id;
	msg.arg[1] = slot->seg.size;
	ret = ctrl_call(c, &msg, &slot->seg.fd, 1, NULL, 0, TALLY_MSG_SEG_ACK,
			NULL, NULL);
	if (ret) {
		c->last_error = ret;
		segment_destroy(&slot->seg);
		return NULL;
	}
	slot->id = c->next_seg_id++;
	c->last_error = 0;
	return slot->seg.base;
}

void tally_free(struct tally_client *c, void *ptr)
{
	struct tally_msg msg;

	if (!c || !ptr)
		return;
	for (int i = 0; i < TALLY_MAX_SEGMENTS; i++) {
		struct client_seg *s = &c->segs[i];

		if (!s->id || s->seg.base != ptr)
			continue;
		msg_init(&msg, TALLY_MSG_SEG_DEL);
		msg.arg[0] = s->id;
		c->last_error = ctrl_call(c, &msg, NULL, 0, NULL, 0,
					  TALLY_MSG_SEG_ACK, NULL, NULL);
		segment_destroy(&s->seg);
		s->id = 0;
		return;
	}
	c->last_error = -TALLY_EINVAL;
}

int tally_last_error(const struct tally_client *c)
{
	return c ? c->last_error : -TALLY_EINVAL;
}

int client_translate(const struct tally_client *c, const void *ptr,
		     uint64_t len, uint32_t *seg_id, uint64_t *off)
{
	uintptr_t p = (uintptr_t)ptr;

	for (int i = 0; i < TALLY_MAX_SEGMENTS; i++) {
		const struct client_seg *s = &c->segs[i];
		uintptr_t base = (uintptr_t)s->seg.base;

		if (!s->id || p < base || p - base >= s->seg.size)
			continue;
		if (!segment_contains(&s->seg, p - base, len))
			return -TALLY_ERANGE;
		*seg_id = s->id;
		*off = p - base;
		return 0;
	}
	return -TALLY_ERANGE;
}
