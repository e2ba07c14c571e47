// SPDX-License-Identifier: BSD-3-Clause
/*
 * admission.c - the daemon's Unix socket: admitting clients (HELLO),
 * their shared segments (SEG_ADD/SEG_DEL), and losing them.
 *
 * Client sockets carry a 1 s receive timeout: a client that sends half a
 * message is dropped instead of stalling the daemon.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <tally/tally.h>
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/loop_tags.h"
#include "shm/fdpass.h"

#define MAX_RING_ENTRIES 4096

/* Is something already serving @path?  Else remove the stale socket. */
static int claim_path(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int busy;

	if (s < 0)
		return -1;
	strcpy(sa.sun_path, path);
	busy = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(s);
	if (busy) {
		log_err("%s: another tallyd is serving it", path);
		return -1;
	}
	unlink(path);
	return 0;
}

static void make_parent_dir(const char *path)
{
	char dir[CONFIG_PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		mkdir(dir, 0755);	/* fails harmlessly if it exists */
	}
}

int daemon_listen(struct tallyd *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = d->cfg.socket;

	make_parent_dir(path);
	if (claim_path(path))
		return -1;
	d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
			      SOCK_NONBLOCK, 0);
	if (d->listen_fd < 0)
		return -1;
	strcpy(sa.sun_path, path);
	if (bind(d->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(d->listen_fd, 64)) {
		log_err("%s: %s", path, strerror(errno));
		return -1;
	}
	/* owner and its group only: clients get at our memory through it */
	if (chmod(path, 0660))
		log_warn("chmod %s: %s", path, strerror(errno));
	if (d->cfg.socket_group[0]) {
		struct group *gr = getgrnam(d->cfg.socket_group);

		if (!gr || chown(path, (uid_t)-1, gr->gr_gid)) {
			log_err("socket_group '%s': cannot give %s to it",
				d->cfg.socket_group, path);
			return -1;
		}
	}
	log_info("listening on %s (mode 0660), local size %d", path,
		 d->cfg.local_size);
	return 0;
}

static int reply(int sock, enum tally_msg_type type, int status,
		 uint64_t a0, uint64_t a1)
{
	struct tally_msg msg;

	msg_init(&msg, type);
	msg.status = status;
	msg.arg[0] = a0;
	msg.arg[1] = a1;
	return msg_send(sock, &msg, NULL, 0);
}

static bool ring_size_ok(uint64_t n)
{
	return n >= 2 && n <= MAX_RING_ENTRIES && (n & (n - 1)) == 0;
}

/* Check HELLO, map the rings.  0 or -TALLY_E*. */
static int attach_client(struct daemon_client *cl, const struct tally_msg *m,
			 int *fds, int nfds)
{
	uint64_t sq_n = m->arg[0], cq_n = m->arg[1], size = m->arg[2];
	size_t sq_bytes, cq_off, need;
	int ret;

	if (m->type != TALLY_MSG_HELLO || nfds != 3 || !ring_size_ok(sq_n) ||
	    !ring_size_ok(cq_n))
		return -TALLY_EINVAL;
	sq_bytes = ring_bytes((uint32_t)sq_n, sizeof(struct tally_sqe));
	cq_off = (sq_bytes + RING_CACHELINE - 1) & ~(size_t)(RING_CACHELINE - 1);
	need = cq_off + ring_bytes((uint32_t)cq_n, sizeof(struct tally_cqe));
	if (size < need || size > (64u << 20))
		return -TALLY_EINVAL;
	ret = segment_map_fd(&cl->ctrl, fds[0], size);
	fds[0] = -1;		/* owned (and on error closed) by the segment */
	if (ret)
		return ret;
	ring_attach(&cl->sq, cl->ctrl.base, (uint32_t)sq_n,
		    sizeof(struct tally_sqe), false, false);
	ring_attach(&cl->cq, (char *)cl->ctrl.base + cq_off, (uint32_t)cq_n,
		    sizeof(struct tally_cqe), true, false);
	cl->cq_entries = (uint32_t)cq_n;
	cl->sq_kick_fd = fds[1];
	cl->cq_kick_fd = fds[2];
	fds[1] = fds[2] = -1;
	return 0;
}

static struct daemon_client *free_rank(struct tallyd *d)
{
	for (int r = 0; r < d->cfg.local_size; r++)
		if (!d->clients[r].active)
			return &d->clients[r];
	return NULL;
}

static void epoll_add(struct tallyd *d, int fd, uint64_t tag, uint32_t ev)
{
	struct epoll_event e = { .events = ev, .data.u64 = tag };

	if (epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, fd, &e))
		log_err("epoll_ctl: %s", strerror(errno));
}

void daemon_admit(struct tallyd *d, int sock)
{
	struct timeval tv = { .tv_sec = 1 };
	struct daemon_client *cl;
	struct tally_msg m;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fds[TALLY_MSG_MAX_FDS], nfds, ret;

	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		close(sock);
		return;
	}
	ret = msg_recv(sock, &m, fds, &nfds);
	if (ret <= 0) {
		/* a bare connect-and-close is a liveness probe, not news */
		log_msg(ret == 0 ? LOG_DEBUG : LOG_WARN,
			"client pid %d: no valid HELLO (%s)", cred.pid,
			ret == -EPROTO ? "protocol version" : "closed");
		if (ret == -EPROTO)
			reply(sock, TALLY_MSG_WELCOME, -TALLY_EPROTO, 0, 0);
		close(sock);
		return;
	}
	cl = free_rank(d);
	if (!cl || d->job_broken) {
		log_warn("client pid %d uid %d refused: %s", cred.pid, cred.uid,
			 d->job_broken ? "job aborted, waiting for members to leave"
				       : "local group full");
		ret = -TALLY_EDENIED;
	} else {
		memset(cl, 0, sizeof(*cl));
		cl->ctrl.fd = -1;
		ret = attach_client(cl, &m, fds, nfds);
	}
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (ret) {
		if (ret != -TALLY_EDENIED)
			log_warn("client pid %d: bad HELLO", cred.pid);
		if (cl)
			segment_destroy(&cl->ctrl);
		reply(sock, TALLY_MSG_WELCOME, ret, 0, 0);
		close(sock);
		return;
	}
	cl->active = true;
	cl->rank = (int)(cl - d->clients);
	cl->sock = sock;
	cl->pid = cred.pid;
	cl->uid = cred.uid;
	d->n_clients++;
	epoll_add(d, sock, TAG_SOCK | (uint64_t)cl->rank, EPOLLIN | EPOLLRDHUP);
	epoll_add(d, cl->sq_kick_fd, TAG_KICK | (uint64_t)cl->rank, EPOLLIN);
	if (reply(sock, TALLY_MSG_WELCOME, 0, (uint64_t)cl->rank,
		  (uint64_t)d->cfg.local_size)) {
		daemon_client_drop(d, cl, "lost during admission");
		return;
	}
	log_info("client rank %d admitted: pid %d uid %d (%d/%d)", cl->rank,
		 cred.pid, cred.uid, d->n_clients, d->cfg.local_size);
}

void daemon_accept(struct tallyd *d)
{
	for (;;) {
		int s = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (s < 0)
			return;
		daemon_admit(d, s);
	}
}

struct daemon_seg *daemon_seg_find(struct daemon_client *cl, uint32_t id)
{
	if (id == 0)
		return NULL;
	for (int i = 0; i < TALLY_MAX_SEGMENTS; i++)
		if (cl->segs[i].id == id && !cl->segs[i].deleted)
			return &cl->segs[i];
	return NULL;
}

void daemon_seg_put(struct daemon_seg *s)
{
	if (--s->refs == 0 && s->deleted) {
		segment_destroy(&s->seg);
		s->id = 0;
		s->deleted = false;
	}
}

static int seg_add(struct daemon_client *cl, const struct tally_msg *m,
		   int *fds, int nfds)
{
	struct daemon_seg *slot = NULL;
	uint64_t id = m->arg[0];
	int ret;

	if (nfds != 1 || id == 0 || id > UINT32_MAX || m->arg[1] == 0 ||
	    daemon_seg_find(cl, (uint32_t)id))
		return -TALLY_EINVAL;
	for (int i = 0; i < TALLY_MAX_SEGMENTS && !slot; i++)
		if (!cl->segs[i].id)
			slot = &cl->segs[i];
	if (!slot)
		return -TALLY_ENOMEM;
	ret = segment_map_fd(&slot->seg, fds[0], m->arg[1]);
	fds[0] = -1;
	if (ret)
		return ret;
	slot->id = (uint32_t)id;
	slot->refs = 1;		/* the client's own reference */
	slot->deleted = false;
	return 0;
}

static int seg_del(struct daemon_client *cl, const struct tally_msg *m)
{
	struct daemon_seg *s = m->arg[0] <= UINT32_MAX ?
			       daemon_seg_find(cl, (uint32_t)m->arg[0]) : NULL;

	if (!s)
		return -TALLY_EINVAL;
	s->deleted = true;	/* pending operations keep it mapped */
	daemon_seg_put(s);
	return 0;
}

void daemon_client_ctrl(struct tallyd *d, struct daemon_client *cl)
{
	struct tally_msg m;
	int fds[TALLY_MSG_MAX_FDS], nfds, ret, status;

	ret = msg_recv(cl->sock, &m, fds, &nfds);
	if (ret <= 0) {
		daemon_client_drop(d, cl, ret == 0 ? "disconnected" :
				   "broken control message");
		return;
	}
	switch (m.type) {
	case TALLY_MSG_SEG_ADD:
		status = seg_add(cl, &m, fds, nfds);
		break;
	case TALLY_MSG_SEG_DEL:
		status = seg_del(cl, &m);
		break;
	default:
		status = -TALLY_EBADOP;
		break;
	}
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (status)
		log_warn("client rank %d: control message %u refused: %s",
			 cl->rank, m.type, tally_strerror(status));
	if (reply(cl->sock, TALLY_MSG_SEG_ACK, status, m.arg[0], 0))
		daemon_client_drop(d, cl, "control reply failed");
}

/* Fail every pending group: the member that left can never contribute. */
static void abort_groups(struct tallyd *d)
{
	struct local_group *lg = &d->groups;

	for (uint32_t i = 0; i < lg->n_pool; i++) {
		struct lg_group *g = &lg->pool[i];

		if (!g->used)
			continue;
		for (unsigned int r = 0; r < lg->size; r++) {
			struct daemon_client *cl = &d->clients[r];

			if (!(g->arrived & (1ull << r)) || g->failed)
				continue;
			daemon_seg_put(g->m[r].send_ref);
			daemon_seg_put(g->m[r].recv_ref);
			if (cl->active)
				daemon_complete(d, cl, g->m[r].user_data,
						-TALLY_EPEERLOST);
		}
		local_group_release(lg, g);
	}
}

void daemon_abort_job(struct tallyd *d, const char *why)
{
	abort_groups(d);
	if (d->n_clients > 0 && !d->job_broken)
		log_warn("job aborted (%s): pending and new operations of the "
			 "%d remaining member(s) fail with peer-lost", why,
			 d->n_clients);
	d->job_broken = d->n_clients > 0;
	if (!d->job_broken)
		d->cluster_aborted = false;	/* a new job may form */
}

void daemon_client_drop(struct tallyd *d, struct daemon_client *cl,
			const char *why)
{
	if (!cl->active)
		return;
	log_info("client rank %d (pid %d) %s", cl->rank, cl->pid, why);
	cl->active = false;
	d->n_clients--;
	epoll_ctl(d->epoll_fd, EPOLL_CTL_DEL, cl->sock, NULL);
	epoll_ctl(d->epoll_fd, EPOLL_CTL_DEL, cl->sq_kick_fd, NULL);
	/* Other hosts wait for what this job had pending: tell them.  A
	 * member leaving with nothing pending (the end of training) does
	 * not end the others' job. */
	if (d->cluster && !d->cluster_aborted && d->groups.n_used > 0) {
		d->cluster_aborted = true;
		cluster_local_abort(d);
	}
	daemon_abort_job(d, "a member left");
	for (int i = 0; i < TALLY_MAX_SEGMENTS; i++)
		if (cl->segs[i].id)
			segment_destroy(&cl->segs[i].seg);
	memset(cl->segs, 0, sizeof(cl->segs));
	segment_destroy(&cl->ctrl);
	close(cl->sock);
	close(cl->sq_kick_fd);
	close(cl->cq_kick_fd);
}
