// SPDX-License-Identifier: BSD-3-Clause
/*
 * fake_daemon.c - tallyd's admission and submission code without its
 * event loop, for the fuzz targets (see fake_daemon.h).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tally/tally.h>
#include "ctrl/log.h"
#include "shm/fdpass.h"
#include "fake_daemon.h"

/* The fake daemon is alone: its cluster pointer stays NULL, so these are
 * never reached; they stand in for ctrl/cluster.c. */
void cluster_local_abort(struct tallyd *d)
{
	(void)d;
	abort();
}

void cluster_submit_group(struct tallyd *d, struct lg_group *g)
{
	(void)d;
	(void)g;
	abort();
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

int fake_daemon_init(struct fake_daemon *f, int local_size)
{
	struct tallyd *d;

	memset(f, 0, sizeof(*f));
	for (int r = 0; r < CONFIG_MAX_LOCAL_SIZE; r++) {
		f->c[r].sock = -1;
		f->c[r].ctrl.fd = -1;
	}
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
	if (d->epoll_fd < 0 ||
	    local_group_init(&d->groups, (unsigned int)local_size,
			     (uint32_t)local_size * TALLY_MAX_INFLIGHT))
		fail("cannot set up");
	d->reducer = reduce_pool_create(1);
	if (!d->reducer)
		fail("cannot make the reduce pool");
	f->d = d;
	return 0;
}

static void forget(struct fake_client *c)
{
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
	segment_destroy(&c->ctrl);
	memset(&c->sq, 0, sizeof(c->sq));
	memset(&c->cq, 0, sizeof(c->cq));
}

void fake_daemon_fini(struct fake_daemon *f)
{
	struct tallyd *d = f->d;
	int left;

	for (int r = 0; r < d->cfg.local_size; r++) {
		daemon_client_drop(d, &d->clients[r], "closed at shutdown");
		forget(&f->c[r]);
	}
	close(d->epoll_fd);
	local_group_destroy(&d->groups);
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
	return rank >= 0 && rank < f->d->cfg.local_size &&
	       f->d->clients[rank].active;
}

int fake_fd(enum fake_fd_kind kind, size_t size)
{
	char path[64];
	int p[2], fd;

	switch (kind) {
	case FD_MEMFD:
	case FD_MEMFD_RDONLY:
		fd = memfd_create("fuzz", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)size))
			fail("memfd");
		if (kind == FD_MEMFD)
			return fd;
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
	if (nfds > 0 && nfds <= 16) {
		struct cmsghdr *cm;

		memset(ctl, 0, sizeof(ctl));
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	/* fails once we shut our side down: the client cannot send then */
	(void)sendmsg(sock, &mh, MSG_NOSIGNAL);
}

/* Less than a message waiting would block the daemon in its 1 s receive
 * timeout: a client that sends half a message and then nothing is the
 * same, for the daemon, as one that then hangs up. */
static void end_if_short(int client, int daemon_end)
{
	int avail = 0;

	if (ioctl(daemon_end, FIONREAD, &avail) ||
	    avail < (int)sizeof(struct tally_msg))
		shutdown(client, SHUT_WR);
}

/* One reply waiting on @sock, or -1 if none. */
static int take_reply(int sock, struct tally_msg *rep)
{
	ssize_t n = recv(sock, rep, sizeof(*rep), MSG_DONTWAIT);

	return n == (ssize_t)sizeof(*rep) ? 0 : -1;
}

/* Map the rings as the client that sent HELLO @m sees them. */
static void map_rings(struct fake_client *c, const struct tally_msg *m,
		      int ctrl_fd)
{
	uint32_t sq_n = (uint32_t)m->arg[0], cq_n = (uint32_t)m->arg[1];
	size_t cq_off = (ring_bytes(sq_n, sizeof(struct tally_sqe)) +
			 RING_CACHELINE - 1) & ~(size_t)(RING_CACHELINE - 1);

	if (segment_map_fd(&c->ctrl, dup(ctrl_fd), m->arg[2]))
		fail("the daemon mapped a ring segment we cannot");
	ring_attach(&c->sq, c->ctrl.base, sq_n, sizeof(struct tally_sqe),
		    true, false);
	ring_attach(&c->cq, (char *)c->ctrl.base + cq_off, cq_n,
		    sizeof(struct tally_cqe), false, false);
	c->sq_n = sq_n;
	c->cq_n = cq_n;
}

int fake_connect(struct fake_daemon *f, const void *msg, size_t len,
		 const int *fds, int nfds)
{
	struct tallyd *d = f->d;
	struct tally_msg rep, hello;
	int sv[2], rank = -1;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		fail("socketpair");
	send_bytes(sv[0], msg, len, fds, nfds);
	end_if_short(sv[0], sv[1]);
	daemon_admit(d, sv[1]);
	if (take_reply(sv[0], &rep) == 0 && rep.type == TALLY_MSG_WELCOME &&
	    rep.status == 0)
		rank = (int)rep.arg[0];
	for (int r = 0; r < d->cfg.local_size; r++)
		if (d->clients[r].active && d->clients[r].sock == sv[1] &&
		    r != rank)
			fail("admitted a client without telling it");
	if (rank < 0) {
		close(sv[0]);
		return -1;
	}
	if (rank >= d->cfg.local_size || !d->clients[rank].active ||
	    d->clients[rank].sock != sv[1] || f->c[rank].sock >= 0 ||
	    rep.arg[1] != (uint64_t)d->cfg.local_size || len < sizeof(hello) ||
	    nfds < 1)
		fail("WELCOME disagrees with the daemon");
	memcpy(&hello, msg, sizeof(hello));
	f->c[rank].sock = sv[0];
	map_rings(&f->c[rank], &hello, fds[0]);
	return rank;
}

int fake_control(struct fake_daemon *f, int rank, const void *msg,
		 size_t len, const int *fds, int nfds)
{
	struct daemon_client *cl = &f->d->clients[rank];
	struct fake_client *c = &f->c[rank];
	struct tally_msg rep;

	if (!fake_active(f, rank))
		return 1;
	send_bytes(c->sock, msg, len, fds, nfds);
	end_if_short(c->sock, cl->sock);
	daemon_client_ctrl(f->d, cl);
	if (!cl->active) {
		forget(c);
		return 1;
	}
	if (take_reply(c->sock, &rep) || rep.type != TALLY_MSG_SEG_ACK)
		fail("a control message kept the client but got no SEG_ACK");
	return rep.status;
}

void fake_hangup(struct fake_daemon *f, int rank, int half)
{
	struct daemon_client *cl = &f->d->clients[rank];
	struct fake_client *c = &f->c[rank];
	struct tally_msg rep;

	if (!fake_active(f, rank))
		return;
	if (half) {
		shutdown(c->sock, SHUT_WR);
	} else {
		close(c->sock);
		c->sock = -1;
	}
	/* EPOLLRDHUP in the real loop; a message still queued is handled
	 * first, and its reply to a closed socket fails */
	daemon_client_ctrl(f->d, cl);
	if (!cl->active)
		forget(c);
	else if (!half)
		fail("a client that closed its socket was kept");
	else if (take_reply(c->sock, &rep))
		fail("a queued control message got no reply");
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
	struct daemon_client *cl = &f->d->clients[rank];

	if (!fake_active(f, rank))
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
	int n = 0;

	if (!fake_active(f, rank))
		return 0;
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

static void count_ref(struct pending *p, const struct tallyd *d,
		      unsigned int r, const void *ref)
{
	const struct daemon_seg *s = ref, *first = d->clients[r].segs;

	if (s < first || s >= first + TALLY_MAX_SEGMENTS)
		fail("a member refers to another client's segment");
	p->refs[r][s - first]++;
}

static void count_pending(struct pending *p, const struct tallyd *d)
{
	const struct local_group *lg = &d->groups;

	memset(p, 0, sizeof(*p));
	for (uint32_t i = 0; i < lg->n_pool; i++) {
		const struct lg_group *g = &lg->pool[i];

		if (!g->used || g->failed)
			continue;
		for (unsigned int r = 0; r < lg->size; r++) {
			if (!(g->arrived & (1ull << r)))
				continue;
			p->owed[r]++;
			count_ref(p, d, r, g->m[r].send_ref);
			count_ref(p, d, r, g->m[r].recv_ref);
		}
	}
}

void fake_daemon_check(struct fake_daemon *f)
{
	static struct pending p;
	struct tallyd *d = f->d;
	int active = 0;

	count_pending(&p, d);
	for (int r = 0; r < d->cfg.local_size; r++) {
		struct daemon_client *cl = &d->clients[r];

		if (!cl->active) {
			if (f->c[r].sock >= 0)
				fail("the daemon forgot a client silently");
			if (p.owed[r])
				fail("a group waits on a client that left");
			continue;
		}
		active++;
		if (f->c[r].ctrl.base == NULL)
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
	if (active != d->n_clients)
		fail("n_clients differs from the active clients");
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
