// SPDX-License-Identifier: BSD-3-Clause
/*
 * admission.c - the daemon's Unix socket: admitting clients (HELLO),
 * their shared segments (SEG_ADD/SEG_DEL), and losing them.
 *
 * Nothing a connecting process does may stall the event loop that serves
 * every other client: sockets are non-blocking and only the daemon holds
 * its ends, messages are assembled piece by piece (struct msg_rx), a
 * connection has DAEMON_HELLO_TIMEOUT_NS to say HELLO and at most
 * DAEMON_MAX_PENDING may be saying it at once, and a reply that does not
 * fit the socket drops the client (an honest one waits for each reply).
 * See "Hostile clients" in docs/architecture.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <tally/tally.h>
#include "dataplane/clock.h"
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/loop_tags.h"
#include "dataplane/transport/transport.h"
#include "shm/fdpass.h"

#define MAX_RING_ENTRIES 4096
/* Refused connections logged one by one; then one line per this many. */
#define REFUSED_LOG_EVERY 1000

static void epoll_add(struct tallyd *d, int fd, uint64_t tag, uint32_t ev);

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
	/* sweeps connections that do not complete their HELLO in time */
	d->conn_timer_fd = timerfd_create(CLOCK_MONOTONIC,
					  TFD_CLOEXEC | TFD_NONBLOCK);
	if (d->conn_timer_fd < 0) {
		log_err("timerfd: %s", strerror(errno));
		return -1;
	}
	epoll_add(d, d->conn_timer_fd, TAG_CONN | DAEMON_MAX_PENDING, EPOLLIN);
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

/* The doorbells: pipes of which the daemon keeps one end each, never
 * shared, non-blocking.  @give gets the client's ends (sq write end, cq
 * read end).  0 or -TALLY_ENOMEM. */
static int make_doorbells(struct daemon_client *cl, int give[2])
{
	int sq[2], cq[2];

	if (pipe2(sq, O_CLOEXEC | O_NONBLOCK))
		return -TALLY_ENOMEM;
	if (pipe2(cq, O_CLOEXEC | O_NONBLOCK)) {
		close(sq[0]);
		close(sq[1]);
		return -TALLY_ENOMEM;
	}
	cl->sq_kick_fd = sq[0];
	cl->cq_kick_fd = cq[1];
	give[0] = sq[1];
	give[1] = cq[0];
	return 0;
}

/* Check HELLO, map the rings, make the doorbells.  0 or -TALLY_E*. */
static int attach_client(struct daemon_client *cl, struct msg_rx *rx,
			 int give[2])
{
	const struct tally_msg *m = &rx->msg;
	uint64_t sq_n = m->arg[0], cq_n = m->arg[1], size = m->arg[2];
	size_t sq_bytes, cq_off, need;
	int ret;

	if (m->type != TALLY_MSG_HELLO || rx->nfds != 1 ||
	    !ring_size_ok(sq_n) || !ring_size_ok(cq_n))
		return -TALLY_EINVAL;
	sq_bytes = ring_bytes((uint32_t)sq_n, sizeof(struct tally_sqe));
	cq_off = (sq_bytes + RING_CACHELINE - 1) &
		 ~(size_t)(RING_CACHELINE - 1);
	need = cq_off + ring_bytes((uint32_t)cq_n, sizeof(struct tally_cqe));
	if (size < need || size > (64u << 20))
		return -TALLY_EINVAL;
	ret = segment_map_fd(&cl->ctrl, rx->fds[0], size);
	rx->fds[0] = -1;	/* owned (and on error closed) by the segment */
	if (ret)
		return ret;
	ret = make_doorbells(cl, give);
	if (ret) {
		segment_destroy(&cl->ctrl);
		return ret;
	}
	ring_attach(&cl->sq, cl->ctrl.base, (uint32_t)sq_n,
		    sizeof(struct tally_sqe), false, false);
	ring_attach(&cl->cq, (char *)cl->ctrl.base + cq_off, (uint32_t)cq_n,
		    sizeof(struct tally_cqe), true, false);
	cl->cq_entries = (uint32_t)cq_n;
	return 0;
}

static void epoll_add(struct tallyd *d, int fd, uint64_t tag, uint32_t ev)
{
	struct epoll_event e = { .events = ev, .data.u64 = tag };

	if (epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, fd, &e))
		log_err("epoll_ctl: %s", strerror(errno));
}

static void epoll_del(struct tallyd *d, int fd)
{
	epoll_ctl(d->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
}

static void conn_close(struct tallyd *d, struct daemon_conn *cn)
{
	epoll_del(d, cn->sock);
	close(cn->sock);
	msg_rx_reset(&cn->rx);
	cn->used = false;
	cn->hello_done = false;
	cn->job_len = cn->job_got = 0;
}

/* Refuse a connection with a reason (the socket is fresh: a 48-byte
 * reply always fits) and close it; @sock -1: one we could not accept. */
static void refuse(struct tallyd *d, int sock, int status, pid_t pid,
		   const char *why)
{
	d->stat_conns_refused++;
	if (d->stat_conns_refused <= 10 ||
	    d->stat_conns_refused % REFUSED_LOG_EVERY == 0)
		log_warn("client pid %d refused: %s (%llu refused so far)",
			 pid, why, (unsigned long long)d->stat_conns_refused);
	if (sock >= 0) {
		reply(sock, TALLY_MSG_WELCOME, status, 0, 0);
		close(sock);
	}
}

/* Undo an admission whose WELCOME could not be sent: the process never
 * learnt it was a member, nothing of it can be pending, so unlike a member
 * that leaves it does not break the job. */
static void unadmit(struct tallyd *d, struct daemon_client *cl)
{
	epoll_del(d, cl->sock);
	epoll_del(d, cl->sq_kick_fd);
	job_member_undo(cl->job, cl);
	client_release(cl);
	cl->active = false;
	d->n_clients--;
	log_info("client pid %d gone before its WELCOME", cl->pid);
}

static struct daemon_client *free_client(struct tallyd *d)
{
	for (int i = 0; i < DAEMON_MAX_CLIENTS; i++)
		if (!d->clients[i].active)
			return &d->clients[i];
	return NULL;
}

/* The static job's first free local rank (admission order). */
static int static_rank(const struct job *j)
{
	for (int r = 0; r < j->cfg.local_size; r++)
		if (!j->members[r])
			return r;
	return -1;
}

/* A whole HELLO (and its job description) arrived on pending connection
 * @cn: admit it or say no. */
static void admit(struct tallyd *d, struct daemon_conn *cn)
{
	struct daemon_client *cl = free_client(d);
	int give[3] = { -1, -1, -1 }, sock = cn->sock, ret, rank = -1;
	const char *why = NULL;
	struct tally_msg welcome;
	struct job *j = NULL;

	epoll_del(d, sock);
	cn->sock = -1;
	cn->used = false;
	if (!cl) {
		ret = daemon_limit_hit(d, &why, "too many clients on this daemon");
	} else if (d->static_job) {
		j = d->static_job;
		rank = static_rank(j);
		ret = -TALLY_EDENIED;
		why = j->broken ? "job aborted, waiting for members to leave" :
		      rank < 0 ? "local group full" : NULL;
		if (!why)
			ret = 0;
	} else if (!cn->job_len) {
		ret = -TALLY_EDENIED;
		why = "no job: this daemon is a service and the client named "
		      "none (tally_connect_opts, or a launcher's environment)";
	} else {
		j = daemon_service_job(d, &cn->job, cn->uid, &ret, &why);
		rank = cn->job.local_rank;
	}
	if (!ret) {
		memset(cl, 0, sizeof(*cl));
		cl->ctrl.fd = cl->sq_kick_fd = cl->cq_kick_fd = -1;
		cl->sock = -1;
		ret = attach_client(cl, &cn->rx, give);
		if (ret)
			why = tally_strerror(ret);
	}
	if (!ret) {
		ret = job_member_add(j, cl, rank, &why);
		if (ret) {
			close(give[0]);
			close(give[1]);
			segment_destroy(&cl->ctrl);
			close(cl->sq_kick_fd);
			close(cl->cq_kick_fd);
		}
	}
	msg_rx_reset(&cn->rx);	/* closes any fds HELLO should not carry */
	explicit_bzero(&cn->job, sizeof(cn->job));
	if (ret) {
		refuse(d, sock, ret, cn->pid, why);
		return;
	}
	cl->active = true;
	cl->slot = (int)(cl - d->clients);
	cl->sock = sock;
	cl->pid = cn->pid;
	cl->uid = cn->uid;
	msg_rx_init(&cl->rx);
	d->n_clients++;
	epoll_add(d, sock, TAG_SOCK | (uint64_t)cl->slot, EPOLLIN | EPOLLRDHUP);
	epoll_add(d, cl->sq_kick_fd, TAG_KICK | (uint64_t)cl->slot, EPOLLIN);
	msg_init(&welcome, TALLY_MSG_WELCOME);
	welcome.arg[0] = (uint64_t)cl->rank;
	welcome.arg[1] = (uint64_t)j->cfg.local_size;
	/* the library keeps sign_ef's residuals (enum tly_codec + 1 is
	 * enum tally_compression) */
	welcome.arg[2] = (uint64_t)j->cfg.compression + 1;
	if (local_fast_on(&j->fast)) {
		/* the job's fast-path table: the same memfd for every member
		 * (docs/local-fast-path.md) */
		welcome.arg[3] = j->fast.seg.size;
		give[2] = j->fast.seg.fd;
	}
	ret = msg_send(sock, &welcome, give, local_fast_on(&j->fast) ? 3 : 2);
	close(give[0]);
	close(give[1]);
	if (ret) {
		unadmit(d, cl);
		return;
	}
	log_info("client rank %d admitted: pid %d uid %d (%d/%d of job %s)",
		 cl->rank, cl->pid, cl->uid, j->n_members, j->cfg.local_size,
		 j->id);
}

static struct daemon_conn *free_conn(struct tallyd *d);

/* Tick while connections are pending (they expire), stop when none is. */
static void conn_timer_update(struct tallyd *d)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	bool any = false;

	for (int i = 0; i < DAEMON_MAX_PENDING && !any; i++)
		any = d->pending[i].used;
	if (any == d->conn_timer_armed)
		return;
	if (any)
		its.it_interval.tv_nsec = its.it_value.tv_nsec =
			DAEMON_HELLO_TIMEOUT_NS / 4 % 1000000000;
	if (any)
		its.it_interval.tv_sec = its.it_value.tv_sec =
			DAEMON_HELLO_TIMEOUT_NS / 4 / 1000000000;
	timerfd_settime(d->conn_timer_fd, 0, &its, NULL);
	d->conn_timer_armed = any;
}

/* The job description after a HELLO, as much as is there: 1 once whole,
 * -EAGAIN for more later, else the connection is closed here. */
static int read_job(struct tallyd *d, struct daemon_conn *cn)
{
	ssize_t n = recv(cn->sock, (char *)&cn->job + cn->job_got,
			 cn->job_len - cn->job_got, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -EAGAIN;
	if (n <= 0) {
		refuse(d, -1, 0, cn->pid, n == 0 ?
		       "closed within its job description" : strerror(errno));
		conn_close(d, cn);
		conn_timer_update(d);
		return -1;
	}
	cn->job_got += (size_t)n;
	return cn->job_got == cn->job_len ? 1 : -EAGAIN;
}

void daemon_conn_event(struct tallyd *d, int slot)
{
	struct daemon_conn *cn;
	int ret;

	if (slot == DAEMON_MAX_PENDING) {	/* the sweep timer */
		uint64_t ticks;

		(void)!read(d->conn_timer_fd, &ticks, sizeof(ticks));
		free_conn(d);
		conn_timer_update(d);
		return;
	}
	if (slot < 0 || slot >= DAEMON_MAX_PENDING || !d->pending[slot].used)
		return;
	cn = &d->pending[slot];
	if (cn->hello_done) {
		ret = read_job(d, cn);
		if (ret == -EAGAIN)
			return;
		if (ret == 1) {
			admit(d, cn);
			conn_timer_update(d);
		}
		return;
	}
	ret = msg_recv_step(cn->sock, &cn->rx);
	if (ret == -EAGAIN)
		return;		/* the rest later, or its deadline */
	if (ret == 1 && cn->rx.msg.type == TALLY_MSG_CTL_QUERY) {
		/* tally-ctl: one reply, never a client (ctl.c) */
		if (cn->rx.nfds) {
			refuse(d, -1, 0, cn->pid, "control query with fds");
			reply(cn->sock, TALLY_MSG_CTL_REPLY, -TALLY_EINVAL, 0,
			      0);
		} else {
			daemon_ctl_reply(d, cn->sock, &cn->rx.msg);
		}
		conn_close(d, cn);	/* closes any fds it carried */
		conn_timer_update(d);
		return;
	}
	if (ret == 1 && cn->rx.msg.type == TALLY_MSG_HELLO &&
	    cn->rx.msg.arg[3]) {
		/* a job description follows (proto.h) */
		if (cn->rx.msg.arg[3] != sizeof(struct tally_job_wire)) {
			refuse(d, -1, 0, cn->pid, "job description of a "
			       "wrong size");
			reply(cn->sock, TALLY_MSG_WELCOME, -TALLY_EPROTO, 0, 0);
			conn_close(d, cn);
			conn_timer_update(d);
			return;
		}
		cn->hello_done = true;
		cn->job_len = sizeof(struct tally_job_wire);
		cn->job_got = 0;
		daemon_conn_event(d, slot);
		return;
	}
	if (ret == 1) {
		admit(d, cn);
		conn_timer_update(d);
		return;
	}
	/* a bare connect-and-close is a liveness probe, not news */
	if (ret == 0)
		log_debug("client pid %d: closed before HELLO", cn->pid);
	else
		refuse(d, -1, 0, cn->pid, ret == -EPROTO ?
		       "another protocol version" : "broken HELLO");
	if (ret == -EPROTO)
		reply(cn->sock, TALLY_MSG_WELCOME, -TALLY_EPROTO, 0, 0);
	conn_close(d, cn);
	conn_timer_update(d);
}

/* Drop the pending connections past their deadline; a free slot or NULL. */
static struct daemon_conn *free_conn(struct tallyd *d)
{
	uint64_t now = tly_now_ns();
	struct daemon_conn *free_cn = NULL;

	for (int i = 0; i < DAEMON_MAX_PENDING; i++) {
		struct daemon_conn *cn = &d->pending[i];

		if (cn->used && now > cn->deadline_ns) {
			refuse(d, -1, 0, cn->pid, "no whole HELLO in time");
			conn_close(d, cn);
		}
		if (!cn->used && !free_cn)
			free_cn = cn;
	}
	return free_cn;
}

void daemon_admit(struct tallyd *d, int s)
{
	struct ucred cred = { .pid = -1 };
	socklen_t len = sizeof(cred);
	struct daemon_conn *cn;

	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		close(s);
		return;
	}
	cn = free_conn(d);
	if (!cn) {
		refuse(d, s, -TALLY_ELIMIT, cred.pid,
		       "too many connections waiting for admission");
		return;
	}
	cn->used = true;
	cn->hello_done = false;
	cn->job_len = cn->job_got = 0;
	cn->sock = s;
	cn->pid = cred.pid;
	cn->uid = cred.uid;
	cn->deadline_ns = tly_now_ns() + DAEMON_HELLO_TIMEOUT_NS;
	msg_rx_init(&cn->rx);
	epoll_add(d, s, TAG_CONN | (uint64_t)(cn - d->pending),
		  EPOLLIN | EPOLLRDHUP);
	conn_timer_update(d);
	/* an honest client sent its HELLO right after connecting */
	daemon_conn_event(d, (int)(cn - d->pending));
}

/* Connections taken per wake-up: a process connecting in a tight loop
 * must not keep the event loop here. */
#define ACCEPT_BURST 64

void daemon_accept(struct tallyd *d)
{
	for (int i = 0; i < ACCEPT_BURST; i++) {
		int s = accept4(d->listen_fd, NULL, NULL,
				SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (s < 0) {
			if (errno == EMFILE || errno == ENFILE)
				refuse(d, -1, 0, -1, strerror(errno));
			return;
		}
		daemon_admit(d, s);
	}
}

void daemon_conns_close(struct tallyd *d)
{
	for (int i = 0; i < DAEMON_MAX_PENDING; i++)
		if (d->pending[i].used)
			conn_close(d, &d->pending[i]);
	if (d->conn_timer_fd > 0)
		close(d->conn_timer_fd);
	d->conn_timer_fd = -1;
}

static int seg_add(const struct tally_config *cfg, struct daemon_client *cl,
		   struct msg_rx *rx, const char **why)
{
	const struct tally_msg *m = &rx->msg;
	struct daemon_seg *slot = NULL;
	uint64_t id = m->arg[0];
	int ret;

	if (rx->nfds != 1 || id == 0 || id > UINT32_MAX || m->arg[1] == 0 ||
	    client_seg_find(cl, (uint32_t)id))
		return -TALLY_EINVAL;
	for (int i = 0; i < TALLY_MAX_SEGMENTS && !slot; i++)
		if (!cl->segs[i].id)
			slot = &cl->segs[i];
	if (!slot || cl->n_segs >= (uint32_t)cfg->max_segments) {
		*why = "segments per client (service.max_segments)";
		return -TALLY_ELIMIT;
	}
	if (cfg->max_client_bytes &&
	    m->arg[1] > cfg->max_client_bytes - cl->seg_bytes) {
		*why = "bytes per client (service.max_client_bytes)";
		return -TALLY_ELIMIT;
	}
	ret = segment_map_fd(&slot->seg, rx->fds[0], m->arg[1]);
	rx->fds[0] = -1;
	if (ret)
		return ret;
	cl->n_segs++;
	cl->seg_bytes += slot->seg.size;
	slot->id = (uint32_t)id;
	slot->refs = 1;		/* the client's own reference */
	slot->deleted = false;
	return 0;
}

static int seg_del(struct daemon_client *cl, const struct tally_msg *m)
{
	struct daemon_seg *s = m->arg[0] <= UINT32_MAX ?
			       client_seg_find(cl, (uint32_t)m->arg[0]) : NULL;

	if (!s)
		return -TALLY_EINVAL;
	s->deleted = true;	/* pending operations keep it mapped */
	cl->n_segs--;
	cl->seg_bytes -= s->seg.size;
	client_seg_put(s);
	return 0;
}

void daemon_client_ctrl(struct tallyd *d, struct daemon_client *cl)
{
	struct tally_msg *m = &cl->rx.msg;
	const char *why = NULL;
	int ret, status;

	ret = msg_recv_step(cl->sock, &cl->rx);
	if (ret == -EAGAIN)
		return;		/* half a message: the rest later */
	if (ret <= 0) {
		daemon_client_drop(d, cl, ret == 0 ? "disconnected" :
				   "broken control message");
		return;
	}
	switch (m->type) {
	case TALLY_MSG_SEG_ADD:
		status = seg_add(&d->cfg, cl, &cl->rx, &why);
		if (status == -TALLY_ELIMIT && why) {
			d->stat_limit_refusals++;
			log_warn("client pid %d (job %s): segment refused: "
				 "over the limit of %s", cl->pid, cl->job->id,
				 why);
		}
		break;
	case TALLY_MSG_SEG_DEL:
		status = cl->rx.nfds ? -TALLY_EINVAL : seg_del(cl, m);
		break;
	default:
		status = -TALLY_EBADOP;
		break;
	}
	if (status && !why && client_log_bad(cl))
		log_warn("client rank %d: control message %u refused: %s",
			 cl->rank, m->type, tally_strerror(status));
	/* a client that does not read its replies fills the socket: it is
	 * dropped rather than block us */
	ret = reply(cl->sock, TALLY_MSG_SEG_ACK, status, m->arg[0], 0);
	msg_rx_reset(&cl->rx);	/* closes fds the message should not carry */
	if (ret)
		daemon_client_drop(d, cl, ret == -EAGAIN ?
				   "does not read its control replies" :
				   "gone before its control reply");
}

void daemon_client_drop(struct tallyd *d, struct daemon_client *cl,
			const char *why)
{
	if (!cl->active)
		return;
	log_info("client rank %d (pid %d) %s", cl->rank, cl->pid, why);
	cl->active = false;
	d->n_clients--;
	epoll_del(d, cl->sock);
	epoll_del(d, cl->sq_kick_fd);
	if (cl->job)
		job_member_left(cl->job, cl);
	client_release(cl);
}
