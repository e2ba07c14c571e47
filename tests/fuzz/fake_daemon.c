// SPDX-License-Identifier: BSD-3-Clause
/*
 * fake_daemon.c - tallyd's admission and submission code without its
 * event loop, for the fuzz targets (see fake_daemon.h).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <tally/tally.h>
#include "ctrl/cluster.h"
#include "ctrl/job.h"
#include "ctrl/job_table.h"
#include "ctrl/log.h"
#include "shm/fdpass.h"
#include "fake_daemon.h"

/* The fake daemon's one job is alone on its host (cluster.world = 1):
 * job.c starts no cluster, so these stand in for ctrl/cluster.c and are
 * reached with a NULL cluster only (job_stop, job_dead, the metrics). */
static void fail(const char *what);

struct cluster *cluster_start(const struct cluster_env *env)
{
	(void)env;
	fail("a cluster started for a job on one host");
	return NULL;
}

void cluster_stop(struct cluster *c)
{
	if (c)
		fail("cluster_stop of a cluster that never started");
}

bool cluster_joined(const struct cluster *c)
{
	(void)c;
	return false;
}

bool cluster_dead(const struct cluster *c)
{
	(void)c;
	return false;
}

void cluster_submit_group(struct cluster *c, struct lg_group *g)
{
	(void)c;
	(void)g;
	fail("a group went to a cluster on one host");
}

int cluster_poll(struct cluster *c, uint64_t now_ns)
{
	(void)c;
	(void)now_ns;
	return 0;
}

uint64_t cluster_idle_ns(struct cluster *c)
{
	(void)c;
	return UINT64_MAX;
}

void cluster_event(struct cluster *c, uint64_t tag)
{
	(void)c;
	(void)tag;
	fail("a cluster event on one host");
}

void cluster_tick(struct cluster *c, uint64_t now_ms)
{
	(void)c;
	(void)now_ms;
}

void cluster_local_abort(struct cluster *c)
{
	(void)c;
	fail("a cluster abort on one host");
}

int cluster_describe_op(struct cluster *c, uint32_t idx, char *buf,
			size_t len)
{
	(void)c;
	(void)idx;
	(void)buf;
	(void)len;
	return -1;
}

void cluster_snapshot(const struct cluster *c, struct cluster_snapshot *s)
{
	(void)c;
	memset(s, 0, sizeof(*s));
}

void cluster_log_counters(const struct cluster *c)
{
	(void)c;
}

static void fail(const char *what)
{
	fprintf(stderr, "fake_daemon: %s\n", what);
	abort();
}

static int count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = -1;		/* the directory's own fd */

	if (!dir)
		fail("cannot list /proc/self/fd");
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* The command line's job, as tallyd's start_static_job() makes it: every
 * client that says HELLO is a member, at the first free local rank. */
static int start_static_job(struct fake_daemon *f)
{
	struct tallyd *d = f->d;
	struct job_env env = { .reducer = d->reducer,
			       .epoll_fd = d->epoll_fd };
	struct job *j;

	if (job_table_init(&d->jobs, 1))
		return -1;
	j = job_table_alloc(&d->jobs, 1);
	if (!j)
		return -1;
	j->cfg = d->cfg;
	j->static_job = true;
	snprintf(j->id, sizeof(j->id), "local");
	if (job_table_start(&d->jobs, j, &env))
		return -1;
	d->static_job = j;
	f->job = j;
	return 0;
}

/* The member of local rank @rank, or NULL. */
static struct daemon_client *member(const struct fake_daemon *f, int rank)
{
	struct daemon_client *cl;

	if (rank < 0 || rank >= f->job->cfg.local_size)
		return NULL;
	cl = f->job->members[rank];
	if (cl && (!cl->active || cl->rank != rank || cl->job != f->job))
		fail("a job member that is not an active client of it");
	return cl;
}

int fake_daemon_init(struct fake_daemon *f, int local_size)
{
	struct tallyd *d;

	memset(f, 0, sizeof(*f));
	for (int r = 0; r < CONFIG_MAX_LOCAL_SIZE; r++) {
		f->c[r].sock = -1;
		f->c[r].sq_bell = f->c[r].cq_bell = -1;
	}
	for (int i = 0; i < DAEMON_MAX_PENDING; i++)
		f->pend[i].sock = -1;
	f->fds_at_start = count_fds();
	log_set_level(LOG_ERR);	/* refusals are what we feed it */
	d = calloc(1, sizeof(*d));
	if (!d)
		return -1;
	config_defaults(&d->cfg);
	d->cfg.local_size = local_size;
	d->listen_fd = -1;
	d->signal_fd = -1;
	d->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	/* daemon_listen() makes it in tallyd: the pending connections'
	 * sweep (fake_pending_end lets a deadline pass) */
	d->conn_timer_fd = timerfd_create(CLOCK_MONOTONIC,
					  TFD_CLOEXEC | TFD_NONBLOCK);
	if (d->epoll_fd < 0 || d->conn_timer_fd < 0)
		fail("cannot set up");
	d->reducer = reduce_pool_create(1);
	if (!d->reducer)
		fail("cannot make the reduce pool");
	f->d = d;
	if (start_static_job(f))
		fail("cannot start the job");
	return 0;
}

static void unmap(void **base, size_t *size)
{
	if (*base)
		munmap(*base, *size);
	*base = NULL;
	*size = 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void forget(struct fake_client *c)
{
	close_fd(&c->sock);
	close_fd(&c->sq_bell);
	close_fd(&c->cq_bell);
	unmap(&c->base, &c->size);
	memset(&c->sq, 0, sizeof(c->sq));
	memset(&c->cq, 0, sizeof(c->cq));
	c->sent = c->acks = 0;
}

static void forget_conn(struct fake_conn *cn)
{
	close_fd(&cn->sock);
	unmap(&cn->base, &cn->size);
	cn->sent = 0;
}

void fake_daemon_fini(struct fake_daemon *f)
{
	struct tallyd *d = f->d;
	int left;

	daemon_conns_close(d);
	for (int i = 0; i < DAEMON_MAX_PENDING; i++)
		forget_conn(&f->pend[i]);
	/* as tallyd's daemon_fini() */
	for (int i = 0; i < DAEMON_MAX_CLIENTS; i++)
		daemon_client_drop(d, &d->clients[i], "closed at shutdown");
	for (int r = 0; r < CONFIG_MAX_LOCAL_SIZE; r++)
		forget(&f->c[r]);
	if (d->n_clients || f->job->n_members)
		fail("clients left after every one was dropped");
	job_table_fini(&d->jobs);
	close(d->epoll_fd);
	reduce_pool_destroy(d->reducer);
	free(d);
	f->d = NULL;
	left = count_fds();
	if (left != f->fds_at_start) {
		fprintf(stderr, "fake_daemon: %d fds open, %d at start\n",
			left, f->fds_at_start);
		fail("file descriptor leak");
	}
}

int fake_active(const struct fake_daemon *f, int rank)
{
	return member(f, rank) != NULL;
}

/* A memfd of @size bytes, its memory allocated unless @sparse. */
static int memfd(size_t size, unsigned int flags, bool sparse)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC | flags);

	if (fd < 0 || ftruncate(fd, (off_t)size) ||
	    (!sparse && size && fallocate(fd, 0, 0, (off_t)size)))
		fail("memfd");
	return fd;
}

int fake_fd(enum fake_fd_kind kind, size_t size)
{
	char path[64];
	int p[2], fd;

	switch (kind) {
	case FD_MEMFD:
	case FD_MEMFD_SPARSE:
		return memfd(size, MFD_ALLOW_SEALING, kind == FD_MEMFD_SPARSE);
	case FD_MEMFD_UNSEALABLE:
		return memfd(size, 0, false);
	case FD_MEMFD_SEALED:
		fd = memfd(size, MFD_ALLOW_SEALING, false);
		if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_WRITE))
			fail("seal");
		return fd;
	case FD_MEMFD_RDONLY:
		fd = memfd(size, MFD_ALLOW_SEALING, false);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		p[0] = open(path, O_RDONLY | O_CLOEXEC);
		close(fd);
		return p[0];
	case FD_EVENTFD:
		return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	case FD_DEVNULL:
		return open("/dev/null", O_RDWR | O_CLOEXEC);
	case FD_PIPE_READ:
	case FD_PIPE_WRITE:
		if (pipe2(p, O_CLOEXEC | O_NONBLOCK))
			return -1;
		close(p[kind == FD_PIPE_READ]);
		return p[kind == FD_PIPE_WRITE];
	case FD_SOCKET:
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p))
			return -1;
		close(p[1]);
		return p[0];
	case FD_DIRECTORY:
		return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	default:
		return -1;
	}
}

/* Send @len bytes with @fds, as a client would: all of it, fds with the
 * first byte. */
static void send_bytes(int sock, const void *buf, size_t len, const int *fds,
		       int nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * 16)];
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (len == 0)
		return;	/* a stream carries no fds without bytes */
	if (nfds > 0 && nfds <= 16)	/* more than the library sends */
		msg_put_fds(&mh, ctl, fds, nfds);
	/* fails once we shut our side down: the client cannot send then */
	(void)sendmsg(sock, &mh, MSG_NOSIGNAL);
}

static int unread(int sock)
{
	int avail = 0;

	if (ioctl(sock, FIONREAD, &avail))
		return 0;
	return avail;
}

/* One reply waiting on @sock, or -1 if none; the fds it carried go to
 * @fds (up to 2, the rest closed), their count to *@nfds. */
static int take_reply(int sock, struct tally_msg *rep, int *fds, int *nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * TALLY_MSG_MAX_FDS)];
	struct iovec iov = { rep, sizeof(*rep) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm;
	ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	int got = 0;

	for (cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (int i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(fd));
			if (fds && got < 2)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	if (nfds)
		*nfds = got;
	if (n != (ssize_t)sizeof(*rep)) {
		for (int i = 0; i < got; i++)
			close(fds[i]);
		if (nfds)
			*nfds = 0;
		return -1;
	}
	return 0;
}

static bool is_pipe(int fd, int mode)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && fl >= 0 &&
	       (fl & O_ACCMODE) == mode;
}

/* Map the rings as the client that sent HELLO @m sees them, from the
 * mapping @cn made before sending it. */
static void map_rings(struct fake_client *c, const struct tally_msg *m,
		      struct fake_conn *cn)
{
	uint32_t sq_n = (uint32_t)m->arg[0], cq_n = (uint32_t)m->arg[1];
	size_t cq_off = (ring_bytes(sq_n, sizeof(struct tally_sqe)) +
			 RING_CACHELINE - 1) & ~(size_t)(RING_CACHELINE - 1);

	if (!cn->base || cn->size < m->arg[2])
		fail("the daemon mapped a ring segment we cannot");
	c->base = cn->base;
	c->size = cn->size;
	cn->base = NULL;
	cn->size = 0;
	ring_attach(&c->sq, c->base, sq_n, sizeof(struct tally_sqe),
		    true, false);
	ring_attach(&c->cq, (char *)c->base + cq_off, cq_n,
		    sizeof(struct tally_cqe), false, false);
	c->sq_n = sq_n;
	c->cq_n = cq_n;
}

static int pending_slot(const struct tallyd *d, int sock)
{
	for (int i = 0; i < DAEMON_MAX_PENDING; i++)
		if (d->pending[i].used && d->pending[i].sock == sock)
			return i;
	return -1;
}

/* Note what pending connection @cn sends: its HELLO bytes, and a mapping
 * of the first fd it offers (libtally maps the rings before HELLO). */
static void conn_sent(struct fake_conn *cn, const void *msg, size_t len,
		      const int *fds, int nfds)
{
	struct stat st;
	size_t n = sizeof(cn->hello) - cn->sent;

	if (len == 0)
		return;
	if (nfds > 0 && !cn->base && fstat(fds[0], &st) == 0 &&
	    st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
			       MAP_SHARED, fds[0], 0);

		if (p != MAP_FAILED) {
			cn->base = p;
			cn->size = (size_t)st.st_size;
		}
	}
	if (len < n)
		n = len;
	memcpy(cn->hello + cn->sent, msg, n);
	cn->sent += n;
}

/* The daemon handled what pending connection @slot (client end @cn) sent:
 * it is pending still (-2), refused (-1), or admitted (its rank). */
static int conn_outcome(struct fake_daemon *f, struct fake_conn *cn,
			int daemon_sock)
{
	struct tallyd *d = f->d;
	struct tally_msg rep, hello;
	int bells[2], nbells = 0, rank = -1;
	int slot = pending_slot(d, daemon_sock);

	if (slot >= 0) {
		if (take_reply(cn->sock, &rep, NULL, NULL) == 0)
			fail("a pending connection got a reply");
		if (cn != &f->pend[slot]) {
			f->pend[slot] = *cn;
			cn->sock = -1;
			cn->base = NULL;
		}
		return -2;
	}
	if (take_reply(cn->sock, &rep, bells, &nbells) == 0 &&
	    rep.type == TALLY_MSG_WELCOME && rep.status == 0)
		rank = (int)rep.arg[0];
	for (int i = 0; i < DAEMON_MAX_CLIENTS; i++)
		if (d->clients[i].active && d->clients[i].sock == daemon_sock &&
		    d->clients[i].rank != rank)
			fail("admitted a client without telling it");
	if (rank < 0) {
		for (int i = 0; i < nbells; i++)
			close(bells[i]);
		forget_conn(cn);
		return -1;
	}
	if (!member(f, rank) || member(f, rank)->sock != daemon_sock ||
	    f->c[rank].sock >= 0 ||
	    rep.arg[1] != (uint64_t)f->job->cfg.local_size ||
	    cn->sent < sizeof(hello))
		fail("WELCOME disagrees with the daemon");
	if (nbells != 2 || !is_pipe(bells[0], O_WRONLY) ||
	    !is_pipe(bells[1], O_RDONLY))
		fail("WELCOME without its two doorbell pipes");
	memcpy(&hello, cn->hello, sizeof(hello));
	f->c[rank].sock = cn->sock;
	f->c[rank].sq_bell = bells[0];
	f->c[rank].cq_bell = bells[1];
	fcntl(bells[1], F_SETFL, O_NONBLOCK);	/* fake_reap empties it */
	cn->sock = -1;
	map_rings(&f->c[rank], &hello, cn);
	forget_conn(cn);
	return rank;
}

int fake_connect(struct fake_daemon *f, const void *msg, size_t len,
		 const int *fds, int nfds)
{
	struct fake_conn cn = { .sock = -1 };
	int sv[2];

	/* the daemon's end as accept4() makes it */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ||
	    fcntl(sv[1], F_SETFL, O_NONBLOCK))
		fail("socketpair");
	cn.sock = sv[0];
	send_bytes(sv[0], msg, len, fds, nfds);
	conn_sent(&cn, msg, len, fds, nfds);
	daemon_admit(f->d, sv[1]);
	return conn_outcome(f, &cn, sv[1]);
}

int fake_more(struct fake_daemon *f, int slot, const void *msg, size_t len,
	      const int *fds, int nfds)
{
	struct fake_conn *cn = &f->pend[slot];
	struct tallyd *d = f->d;
	int sock;

	if (cn->sock < 0)
		return -1;
	if (!d->pending[slot].used)
		fail("a pending connection vanished");
	sock = d->pending[slot].sock;
	send_bytes(cn->sock, msg, len, fds, nfds);
	conn_sent(cn, msg, len, fds, nfds);
	daemon_conn_event(d, slot);
	return conn_outcome(f, cn, sock);
}

void fake_pending_end(struct fake_daemon *f, int slot, int how)
{
	struct fake_conn *cn = &f->pend[slot];
	struct tallyd *d = f->d;
	int sock;

	if (cn->sock < 0)
		return;
	sock = d->pending[slot].sock;
	if (how == 0) {
		close_fd(&cn->sock);
		daemon_conn_event(d, slot);
	} else if (how == 1) {
		shutdown(cn->sock, SHUT_WR);
		daemon_conn_event(d, slot);
	} else {
		d->pending[slot].deadline_ns = 0;
		daemon_conn_event(d, DAEMON_MAX_PENDING);
	}
	if (d->pending[slot].used && d->pending[slot].sock == sock)
		fail("a pending connection outlived its end");
	if (cn->sock >= 0 && conn_outcome(f, cn, sock) >= 0)
		fail("a connection was admitted at its end");
	forget_conn(cn);
}

/* Let the daemon read what client @rank sent, as the loop would while the
 * socket stays readable; then take the replies. */
static void client_events(struct fake_daemon *f, int rank, bool hangup,
			  int *status)
{
	struct daemon_client *cl = member(f, rank);
	struct fake_client *c = &f->c[rank];
	struct tally_msg rep;

	/* each call reads at most one message; an EOF is one more event */
	for (int i = 0; i < 8 && cl->active; i++) {
		if (!hangup && unread(cl->sock) == 0)
			break;
		daemon_client_ctrl(f->d, cl);
	}
	while (c->sock >= 0 && take_reply(c->sock, &rep, NULL, NULL) == 0) {
		if (rep.type != TALLY_MSG_SEG_ACK)
			fail("a control reply that is not a SEG_ACK");
		if (rep.status > 0 || rep.status <= -TALLY_ERROR_MAX)
			fail("a SEG_ACK with an impossible status");
		c->acks++;
		if (status)
			*status = rep.status;
	}
	if (!cl->active) {
		if (member(f, rank) == cl)
			fail("a dropped client is still a member of its job");
		forget(c);
		return;
	}
	if (hangup)
		fail("a client that hung up was kept");
	if (c->acks != c->sent / sizeof(struct tally_msg))
		fail("a whole control message got no SEG_ACK");
}

int fake_control(struct fake_daemon *f, int rank, const void *msg,
		 size_t len, const int *fds, int nfds)
{
	struct fake_client *c = &f->c[rank];
	int status = 2;

	if (!fake_active(f, rank))
		return 1;
	send_bytes(c->sock, msg, len, fds, nfds);
	c->sent += len;
	client_events(f, rank, false, &status);
	return fake_active(f, rank) ? status : 1;
}

void fake_hangup(struct fake_daemon *f, int rank, int half)
{
	struct fake_client *c = &f->c[rank];

	if (!fake_active(f, rank))
		return;
	if (half)
		shutdown(c->sock, SHUT_WR);
	else
		close_fd(&c->sock);
	/* EPOLLRDHUP in the real loop; whole messages still queued are
	 * handled first (their replies to a closed socket fail) */
	client_events(f, rank, true, NULL);
}

void fake_submit(struct fake_daemon *f, int rank,
		 const struct tally_sqe *sqe, int n)
{
	if (!fake_active(f, rank))
		return;
	for (int i = 0; i < n; i++)
		if (ring_push(&f->c[rank].sq, &sqe[i]))
			break;
}

void fake_drain(struct fake_daemon *f, int rank)
{
	struct daemon_client *cl = member(f, rank);

	if (!cl)
		return;
	daemon_drain_sq(f->d, cl);
	if (cl->doomed)
		daemon_client_drop(f->d, cl, "broke the ring protocol");
	if (!cl->active)
		forget(&f->c[rank]);
}

int fake_reap(struct fake_daemon *f, int rank)
{
	struct tally_cqe cqe;
	char bells[64];
	int n = 0;

	if (!fake_active(f, rank))
		return 0;
	/* the daemon's end is non-blocking: a full pipe must not stall it,
	 * and an emptied one takes the next ring again */
	while (read(f->c[rank].cq_bell, bells, sizeof(bells)) > 0)
		;
	while (ring_pop(&f->c[rank].cq, &cqe) == 1) {
		if (cqe.res > 0 || cqe.res <= -TALLY_ERROR_MAX)
			fail("a completion with an impossible result");
		n++;
	}
	return n;
}

void fake_corrupt(struct fake_daemon *f, int rank, int which,
		  uint32_t value)
{
	struct ring_shared *sh;
	_Atomic uint32_t *word;

	if (!fake_active(f, rank))
		return;
	sh = which < 3 ? f->c[rank].sq.sh : f->c[rank].cq.sh;
	switch (which % 3) {
	case 0:
		word = &sh->tail;
		break;
	case 1:
		word = &sh->head;
		break;
	default:
		word = &sh->asleep;
		break;
	}
	atomic_store_explicit(word, value, memory_order_release);
}

/* What the pending (arrived, not failed) groups hold: per client, the
 * operations owed to it and the references on each of its segments. */
struct pending {
	uint32_t owed[CONFIG_MAX_LOCAL_SIZE];
	uint32_t refs[CONFIG_MAX_LOCAL_SIZE][TALLY_MAX_SEGMENTS];
};

static void count_ref(struct pending *p, const struct job *j,
		      unsigned int r, const void *ref)
{
	const struct daemon_seg *s = ref, *first;

	if (!j->members[r])
		fail("a pending member that is not in the job");
	first = j->members[r]->segs;

	if (s < first || s >= first + TALLY_MAX_SEGMENTS)
		fail("a member refers to another client's segment");
	p->refs[r][s - first]++;
}

static void count_pending(struct pending *p, const struct job *j)
{
	const struct local_group *lg = &j->groups;

	memset(p, 0, sizeof(*p));
	for (uint32_t i = 0; i < lg->n_pool; i++) {
		const struct lg_group *g = &lg->pool[i];

		if (!g->used || g->failed)
			continue;
		for (unsigned int r = 0; r < lg->size; r++) {
			if (!(g->arrived & (1ull << r)))
				continue;
			p->owed[r]++;
			count_ref(p, j, r, g->m[r].send_ref);
			count_ref(p, j, r, g->m[r].recv_ref);
		}
	}
}

void fake_daemon_check(struct fake_daemon *f)
{
	static struct pending p;
	struct tallyd *d = f->d;
	struct job *j = f->job;
	int active = 0, members = 0;

	if (d->jobs.n_used != 1 || d->static_job != j || !j->used)
		fail("the static job is gone");
	count_pending(&p, j);
	for (int i = 0; i < DAEMON_MAX_CLIENTS; i++) {
		const struct daemon_client *cl = &d->clients[i];

		if (!cl->active)
			continue;
		active++;
		if (cl->job != j || cl->rank < 0 ||
		    cl->rank >= j->cfg.local_size || j->members[cl->rank] != cl)
			fail("an active client that is not a member of the job");
	}
	for (int r = 0; r < j->cfg.local_size; r++) {
		struct daemon_client *cl = member(f, r);

		if (!cl) {
			if (f->c[r].sock >= 0)
				fail("the daemon forgot a client silently");
			if (p.owed[r])
				fail("a group waits on a client that left");
			continue;
		}
		members++;
		if (f->c[r].base == NULL)
			fail("a client the harness never saw is active");
		if (p.owed[r] != cl->outstanding)
			fail("outstanding differs from the pending groups");
		if (!cl->doomed &&
		    cl->cq.local + cl->outstanding != cl->sq.local)
			fail("a submission was taken but never completed");
		for (int i = 0; i < TALLY_MAX_SEGMENTS; i++) {
			const struct daemon_seg *s = &cl->segs[i];

			if (!s->id) {
				if (p.refs[r][i])
					fail("a member holds a freed segment");
				continue;
			}
			if (s->refs == 0 ||
			    s->refs != !s->deleted + p.refs[r][i])
				fail("segment references out of step");
		}
	}
	for (int r = j->cfg.local_size; r < CONFIG_MAX_LOCAL_SIZE; r++)
		if (f->c[r].sock >= 0 || j->members[r])
			fail("a member beyond the job's local size");
	if (active != d->n_clients || members != j->n_members ||
	    active != members)
		fail("n_clients, n_members and the active clients differ");
	for (int i = 0; i < DAEMON_MAX_PENDING; i++)
		if (d->pending[i].used != (f->pend[i].sock >= 0))
			fail("pending connections out of step");
}

void fake_fill(int fd, size_t bytes, uint64_t seed)
{
	uint64_t buf[512];

	for (size_t off = 0; off < bytes; off += sizeof(buf)) {
		size_t n = bytes - off < sizeof(buf) ? bytes - off :
			   sizeof(buf);

		for (size_t i = 0; i < sizeof(buf) / 8; i++) {
			seed ^= seed << 13;	/* xorshift64 */
			seed ^= seed >> 7;
			seed ^= seed << 17;
			buf[i] = seed;
		}
		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			fail("pwrite");
	}
}

/* libFuzzer's start-up hook, for both targets on the fake daemon. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);	/* as tallyd does */
	return 0;
}
