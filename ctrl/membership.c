// SPDX-License-Identifier: BSD-3-Clause
/*
 * membership.c - registration, roster, heartbeats and failure detection
 * (see membership.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ctrl/log.h"
#include "ctrl/loop_tags.h"
#include "ctrl/membership.h"
#include "dataplane/clock.h"

static void conn_close(struct membership *m, struct mb_conn *c)
{
	if (c->fd >= 0) {
		epoll_ctl(m->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	c->fd = -1;
	c->rank = -1;
	c->rlen = 0;
	c->keyed = false;
	free(c->rbuf);
	c->rbuf = NULL;
	memset(&c->tx, 0, sizeof(c->tx));
	memset(&c->rx, 0, sizeof(c->rx));
}

/* @c takes @fd, with a receive buffer.  0, or -1: @fd closed. */
static int conn_attach(struct mb_conn *c, int fd)
{
	if (!c->rbuf)
		c->rbuf = malloc(BOOT_MAX_MSG);
	if (!c->rbuf) {
		log_err("membership: no memory for a connection's buffer");
		close(fd);
		return -1;
	}
	c->fd = fd;
	c->rank = -1;
	c->rlen = 0;
	c->keyed = false;
	return 0;
}

static int conn_send(struct mb_conn *c, const struct boot_msg *msg,
		     uint64_t now)
{
	uint8_t buf[BOOT_MAX_MSG];
	int len = boot_encode(msg, buf, sizeof(buf));

	if (len < 0 || (msg->type != BOOT_CHALLENGE && !c->keyed))
		return -1;
	if (msg->type != BOOT_CHALLENGE)
		auth_seal(&c->tx, buf, (size_t)len);
	/* Control messages are small and rare: a peer whose socket buffer
	 * is full is not reading, and counts as gone. */
	if (send(c->fd, buf, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) != len)
		return -1;
	c->last_tx_ms = now;
	return 0;
}

static void set_sock_opts(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Watch @c for @events (@op: EPOLL_CTL_ADD or _MOD), tagged with the
 * job's slot and the connection's.  0, or -1 (errno). */
static int conn_watch(struct membership *m, struct mb_conn *c, int op,
		      uint32_t events)
{
	struct epoll_event ev = {
		.events = events,
		.data.u64 = TAG_JOB_SOCK(TAG_BOOT, m->cfg.tag_job,
					 (uint64_t)(c - m->conn)),
	};

	return epoll_ctl(m->epoll_fd, op, c->fd, &ev);
}

/* A MAC failed: count it, and say so at most once a second. */
static void auth_failed(struct membership *m, const char *who, uint64_t now)
{
	m->auth_failures++;
	if (m->auth_failures > 1 && now - m->auth_log_ms < 1000)
		return;
	m->auth_log_ms = now;
	log_warn("%s: control message failed authentication (another job "
		 "secret, or forged); %llu so far", who,
		 (unsigned long long)m->auth_failures);
}

/* ---- coordinator ------------------------------------------------------ */

/* Workers (and co-located members) first, by rank, then aggregators: the
 * engine numbers workers 0..n-1.  Without any aggregator left, workers
 * aggregate themselves (co-located shards). */
static void build_roster(struct membership *m, struct boot_msg *r)
{
	bool have_agg = false;
	uint16_t n = 0;

	memset(r, 0, sizeof(*r));
	r->type = BOOT_ROSTER;
	r->epoch = m->epoch;
	r->roster.job_key = m->cfg.job_key;
	r->roster.k = m->cfg.k;
	r->roster.pool_slots = m->cfg.pool_slots;
	r->roster.algorithm = m->cfg.algorithm;
	for (int i = 0; i < BOOT_MAX_MEMBERS; i++)
		if (m->present[i] && m->reg[i].role != ROLE_WORKER)
			have_agg = true;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < BOOT_MAX_MEMBERS; i++) {
			struct boot_member e = m->reg[i];

			if (!m->present[i] ||
			    (pass == 0) != (e.role != ROLE_AGGREGATOR))
				continue;
			if (!have_agg && e.role == ROLE_WORKER &&
			    m->cfg.algorithm == ALGO_AGGREGATE)
				e.role = ROLE_COLOCATED;
			r->roster.m[n++] = e;
			/* rdma: thread s of every member has its own
			 * queue pair, so its own address */
			if (boot_has_thread_macs(&e, m->cfg.dp_threads))
				r->roster.threads = m->cfg.dp_threads;
		}
	}
	r->roster.n = n;
}

static void send_roster(struct membership *m, uint64_t now)
{
	struct boot_msg r;

	m->epoch++;
	build_roster(m, &r);
	log_info("roster epoch %u: %u members", r.epoch, r.roster.n);
	for (int i = 0; i < MB_MAX_CONNS; i++) {
		struct mb_conn *c = &m->conn[i];

		if (c->fd >= 0 && c->rank >= 0 && conn_send(c, &r, now))
			log_warn("rank %d: roster not sent", c->rank);
	}
	m->formed = true;
	m->ops.roster(m->ops.ctx, &r);
}

static int count_present(const struct membership *m)
{
	int n = 0;

	for (int i = 0; i < BOOT_MAX_MEMBERS; i++)
		n += m->present[i];
	return n;
}

/* A member left: tell the others, then give them a roster without it. */
static void member_gone(struct membership *m, struct mb_conn *c,
			const char *why, uint64_t now)
{
	int rank = c->rank;
	struct boot_msg down = { .type = BOOT_PEER_DOWN };

	conn_close(m, c);
	if (rank < 0)
		return;
	m->present[rank] = false;
	log_warn("rank %d %s", rank, why);
	if (!m->formed)
		return;		/* it may register again before the start */
	down.epoch = m->epoch;
	down.peer.rank = (uint16_t)rank;
	for (int i = 0; i < MB_MAX_CONNS; i++)
		if (m->conn[i].fd >= 0 && m->conn[i].rank >= 0)
			conn_send(&m->conn[i], &down, now);
	m->ops.peer_down(m->ops.ctx, rank, why);
	send_roster(m, now);
}

static void refuse(struct mb_conn *c, enum boot_refusal why, uint64_t now)
{
	struct boot_msg r = { .type = BOOT_REFUSE, .refuse.reason = why };

	conn_send(c, &r, now);
}

static void on_register(struct membership *m, struct mb_conn *c,
			const struct boot_msg *msg, uint64_t now)
{
	const struct boot_member *e = &msg->reg.self;

	if (msg->reg.job_key != m->cfg.job_key) {
		log_warn("registration of rank %u refused: wrong job key",
			 e->rank);
		refuse(c, REFUSE_JOB_KEY, now);
		conn_close(m, c);
		return;
	}
	if (msg->reg.world != m->cfg.world ||
	    msg->reg.algorithm != m->cfg.algorithm ||
	    msg->reg.threads != (m->cfg.dp_threads ? m->cfg.dp_threads : 1) ||
	    msg->reg.profile != m->cfg.dp_profile ||
	    msg->reg.compression != m->cfg.compression) {
		/* shard s of every daemon talks to shard s of the others: a
		 * different thread count would leave tensors unanswered; a
		 * different profile, receipts no aggregator takes; another
		 * compression method, lanes the aggregators drop */
		log_warn("registration of rank %u refused: world %u algorithm "
			 "%u dataplane.threads %u profile %u compression %u, "
			 "ours %u %u %u %u %u",
			 e->rank, msg->reg.world, msg->reg.algorithm,
			 msg->reg.threads, msg->reg.profile,
			 msg->reg.compression, m->cfg.world,
			 m->cfg.algorithm,
			 m->cfg.dp_threads ? m->cfg.dp_threads : 1,
			 m->cfg.dp_profile, m->cfg.compression);
		refuse(c, REFUSE_CONFIG, now);
		conn_close(m, c);
		return;
	}
	if (c->rank >= 0 || e->rank >= m->cfg.world || m->present[e->rank]) {
		log_warn("registration of rank %u refused: rank taken",
			 e->rank);
		refuse(c, REFUSE_RANK, now);
		conn_close(m, c);
		return;
	}
	c->rank = e->rank;
	m->reg[e->rank] = *e;
	m->present[e->rank] = true;
	log_info("rank %u registered as %s", e->rank,
		 boot_role_name(e->role));
	if (m->formed || count_present(m) == m->cfg.world)
		send_roster(m, now);
}

static void coordinator_accept(struct membership *m, uint64_t now)
{
	struct boot_msg ch = { 0 };

	for (;;) {
		int fd = accept4(m->listen_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct mb_conn *c = NULL;

		if (fd < 0)
			return;
		for (int i = 1; i < MB_MAX_CONNS && !c; i++)
			if (m->conn[i].fd < 0)
				c = &m->conn[i];
		if (!c) {
			close(fd);
			continue;
		}
		set_sock_opts(fd);
		if (conn_attach(c, fd))
			continue;
		c->last_rx_ms = c->last_tx_ms = now;
		auth_nonce(c->nonce_c);
		ch.type = BOOT_CHALLENGE;
		ch.epoch = m->epoch;
		memcpy(ch.challenge.nonce, c->nonce_c, AUTH_NONCE_LEN);
		if (conn_send(c, &ch, now) ||
		    conn_watch(m, c, EPOLL_CTL_ADD, EPOLLIN | EPOLLRDHUP)) {
			conn_close(m, c);
			continue;
		}
	}
}

/* ---- member ----------------------------------------------------------- */

static void member_lost(struct membership *m, const char *why)
{
	if (m->dead)
		return;
	m->dead = true;
	conn_close(m, &m->conn[0]);
	log_err("job lost: %s", why);
	m->ops.lost(m->ops.ctx, why);
}

static void coord_name(const struct membership *m, char *buf, size_t len)
{
	struct in_addr a = { .s_addr = htonl(m->cfg.coord_ip) };
	char ip[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, m->cfg.coord_port);
}

/* connect_err: the coordinator accepted, then hung up before its CHALLENGE */
#define MB_ERR_HUNG_UP (-1)

/* MB_RETRY_MS, doubled per try so far, at most MB_RETRY_MAX_MS. */
static uint64_t member_retry_delay(const struct membership *m)
{
	uint64_t d = MB_RETRY_MS;

	for (uint32_t i = 1; i < m->connect_tries && d < MB_RETRY_MAX_MS; i++)
		d *= 2;
	return d < MB_RETRY_MAX_MS ? d : MB_RETRY_MAX_MS;
}

/* The connection attempt failed: close it; membership_tick() tries again
 * after member_retry_delay(), or gives up past the deadline. */
static void member_retry(struct membership *m, int err, uint64_t now)
{
	conn_close(m, &m->conn[0]);
	m->connect_err = err;
	m->join = MB_JOIN_RETRY;
	m->retry_ms = now + member_retry_delay(m);
}

#define MB_ERR_OTHER_JOB (-2)

/*
 * Before our first roster, a coordinator that refuses our job key or our
 * secret may be another job's, still on the port: a host service keeps
 * an ended job a moment (service.job_linger_ms) while ours starts.  Try
 * again until the deadline rather than give the job up.  True if so.
 */
static bool member_other_job(struct membership *m, uint64_t now)
{
	if (m->coordinator || m->formed || !m->cfg.retry_other_job)
		return false;
	member_retry(m, MB_ERR_OTHER_JOB, now);
	return true;
}

/* TCP is up: wait for the coordinator's CHALLENGE (@op: how to watch). */
static int member_connected(struct membership *m, int op, uint64_t now)
{
	struct mb_conn *c = &m->conn[0];

	m->join = MB_JOIN_CHALLENGE;
	m->connected_ms = now;
	c->last_rx_ms = c->last_tx_ms = now;
	return conn_watch(m, c, op, EPOLLIN | EPOLLRDHUP);
}

/*
 * One non-blocking connect to the coordinator: it completes (or fails)
 * in membership_event(), or fails at once into MB_JOIN_RETRY.  0, or a
 * negative errno on a local error (no socket, epoll), nothing left open.
 */
static int member_connect(struct membership *m, uint64_t now)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_port = htons(m->cfg.coord_port),
		.sin_addr.s_addr = htonl(m->cfg.coord_ip) };
	struct mb_conn *c = &m->conn[0];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	int err;

	if (fd < 0)
		return -errno;
	m->connect_tries++;
	set_sock_opts(fd);
	if (conn_attach(c, fd))
		return -ENOMEM;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		err = member_connected(m, EPOLL_CTL_ADD, now) ? -errno : 0;
	} else if (errno == EINPROGRESS) {
		m->join = MB_JOIN_CONNECTING;
		err = conn_watch(m, c, EPOLL_CTL_ADD, EPOLLOUT) ? -errno : 0;
	} else {	/* refused at once (loopback), no route, ... */
		member_retry(m, errno, now);
		return 0;
	}
	if (err)
		conn_close(m, c);
	return err;
}

/* The non-blocking connect finished: connected, or try again later. */
static void member_connect_done(struct membership *m, uint64_t now)
{
	struct mb_conn *c = &m->conn[0];
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	socklen_t elen = sizeof(int);
	int err = 0;

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &elen))
		err = errno;
	if (err) {
		member_retry(m, err, now);
		return;
	}
	if (getpeername(c->fd, (struct sockaddr *)&peer, &len))
		return;		/* still in progress: a spurious wakeup */
	if (member_connected(m, EPOLL_CTL_MOD, now))
		member_retry(m, errno, now);
}

static void conn_parse(struct membership *m, struct mb_conn *c,
		       uint64_t now);

/* The CHALLENGE came: register under keys from both nonces. */
static void member_register(struct membership *m, const struct boot_msg *ch,
			    uint64_t now)
{
	struct mb_conn *c = &m->conn[0];
	struct boot_msg reg = { .type = BOOT_REGISTER };

	auth_nonce(reg.reg.nonce);
	auth_stream_init(&c->tx, &m->cfg.keys, AUTH_M2C, ch->challenge.nonce,
			 reg.reg.nonce);
	auth_stream_init(&c->rx, &m->cfg.keys, AUTH_C2M, ch->challenge.nonce,
			 reg.reg.nonce);
	c->keyed = true;
	reg.reg.self = m->cfg.self;
	reg.reg.job_key = m->cfg.job_key;
	reg.reg.world = m->cfg.world;
	reg.reg.algorithm = m->cfg.algorithm;
	reg.reg.threads = m->cfg.dp_threads ? m->cfg.dp_threads : 1;
	reg.reg.profile = m->cfg.dp_profile;
	reg.reg.compression = m->cfg.compression;
	c->rank = 0;
	c->last_rx_ms = now;
	if (conn_send(c, &reg, now)) {
		member_lost(m, "cannot register with the coordinator");
		return;
	}
	m->join = MB_JOIN_REGISTERED;
	if (c->rlen)		/* it did not wait for our REGISTER */
		conn_parse(m, c, now);
}

/* Read what the coordinator sent before our REGISTER: its CHALLENGE. */
static void member_read_challenge(struct membership *m, uint64_t now)
{
	struct mb_conn *c = &m->conn[0];
	char who[32], why[160];
	struct boot_msg ch;
	int len;

	while ((len = boot_decode(c->rbuf, c->rlen, &ch)) == 0) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen,
				 BOOT_MAX_MSG - c->rlen, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
			      errno == EINTR))
			return;
		if (n <= 0) {
			/* a coordinator restarting, or full: again later */
			member_retry(m, n == 0 ? MB_ERR_HUNG_UP : errno, now);
			return;
		}
		c->rlen += (size_t)n;
	}
	coord_name(m, who, sizeof(who));
	if (len < 0 || ch.type != BOOT_CHALLENGE) {
		snprintf(why, sizeof(why), "coordinator %s did not open with "
			 "a challenge%s%s", who, len < 0 ? ": " : "",
			 len < 0 ? boot_error_str(len) : "");
		member_lost(m, why);
		return;
	}
	c->rlen -= (size_t)len;
	memmove(c->rbuf, c->rbuf + len, c->rlen);
	member_register(m, &ch, now);
}

/* An event on conn[0] before it registered. */
static void member_join_event(struct membership *m, uint64_t now)
{
	if (m->join == MB_JOIN_CONNECTING)
		member_connect_done(m, now);
	else if (m->join == MB_JOIN_CHALLENGE)
		member_read_challenge(m, now);
}

/* Joining, from membership_tick(): retry a refused connect, give up past
 * connect_timeout_ms after the start. */
static void member_join_tick(struct membership *m, uint64_t now)
{
	uint64_t deadline = m->start_ms + m->cfg.connect_timeout_ms;
	char who[32], why[200];
	int err;

	if (m->join == MB_JOIN_CHALLENGE) {
		uint64_t late = m->connected_ms + MB_CHALLENGE_MS;

		member_read_challenge(m, now);	/* it may be here */
		if (m->join != MB_JOIN_CHALLENGE || m->dead ||
		    now < (late > deadline ? late : deadline))
			return;
		coord_name(m, who, sizeof(who));
		snprintf(why, sizeof(why), "coordinator %s sent no challenge "
			 "in %llu ms", who,
			 (unsigned long long)(now - m->connected_ms));
		member_lost(m, why);
		return;
	}
	if (now >= deadline) {
		coord_name(m, who, sizeof(who));
		snprintf(why, sizeof(why), "coordinator %s unreachable for "
			 "%llu ms (%u tries; %s)", who,
			 (unsigned long long)(now - m->start_ms),
			 m->connect_tries,
			 m->connect_err == MB_ERR_HUNG_UP ?
			 "it closed the connection before its challenge" :
			 m->connect_err == MB_ERR_OTHER_JOB ?
			 "another job's coordinator answered: job key or "
			 "secret differ" :
			 m->connect_err ? strerror(m->connect_err) :
			 "no answer");
		member_lost(m, why);
		return;
	}
	if (m->join != MB_JOIN_RETRY || now < m->retry_ms)
		return;
	err = member_connect(m, now);
	if (err)	/* out of sockets for now: counts as a failed try */
		member_retry(m, -err, now);
}

/* ---- both ------------------------------------------------------------- */

static void handle_msg(struct membership *m, struct mb_conn *c,
		       const struct boot_msg *msg, uint64_t now)
{
	if (m->coordinator) {
		if (msg->type == BOOT_REGISTER) {
			on_register(m, c, msg, now);
		} else if (msg->type == BOOT_ABORT && c->rank >= 0) {
			log_warn("rank %d aborted its local job", c->rank);
			m->ops.peer_down(m->ops.ctx, c->rank,
					 "aborted its local job");
			if (m->formed)
				send_roster(m, now);
		} else if (msg->type != BOOT_HEARTBEAT) {
			member_gone(m, c, "sent an unexpected message", now);
		}
		return;
	}
	switch (msg->type) {
	case BOOT_ROSTER:
		if (msg->roster.job_key != m->cfg.job_key) {
			member_lost(m, "roster of another job");
			return;
		}
		m->epoch = msg->epoch;
		m->formed = true;
		m->ops.roster(m->ops.ctx, msg);
		break;
	case BOOT_PEER_DOWN:
		m->ops.peer_down(m->ops.ctx, msg->peer.rank, "left the job");
		break;
	case BOOT_REFUSE:
		if ((msg->refuse.reason == REFUSE_JOB_KEY ||
		     msg->refuse.reason == REFUSE_AUTH) &&
		    member_other_job(m, now))
			break;
		member_lost(m, msg->refuse.reason == REFUSE_JOB_KEY ?
			       "refused: wrong job key" :
			       msg->refuse.reason == REFUSE_RANK ?
			       "refused: rank taken or out of range" :
			       msg->refuse.reason == REFUSE_AUTH ?
			       "refused: the job secret differs from the "
			       "coordinator's" :
			       "refused: configuration differs from rank 0's");
		break;
	case BOOT_HEARTBEAT:
		break;
	default:
		member_lost(m, "unexpected message from the coordinator");
		break;
	}
}

/*
 * Check a message's MAC before anything acts on it.  A registration sets
 * up the connection's keys from its nonce first.  0, or -1 when the
 * connection (coordinator) or the job (member) is gone.
 */
static int msg_verify(struct membership *m, struct mb_conn *c,
		      const struct boot_msg *msg, const uint8_t *raw,
		      size_t len, uint64_t now)
{
	if (m->coordinator && !c->keyed && msg->type == BOOT_REGISTER) {
		auth_stream_init(&c->rx, &m->cfg.keys, AUTH_M2C, c->nonce_c,
				 msg->reg.nonce);
		auth_stream_init(&c->tx, &m->cfg.keys, AUTH_C2M, c->nonce_c,
				 msg->reg.nonce);
		c->keyed = true;
		if (auth_open(&c->rx, raw, len) == 0)
			return 0;
		auth_failed(m, "registration", now);
		log_warn("registration of rank %u refused: authentication "
			 "failed", msg->reg.self.rank);
		refuse(c, REFUSE_AUTH, now);
		conn_close(m, c);
		return -1;
	}
	if (c->keyed && auth_open(&c->rx, raw, len) == 0)
		return 0;
	if (m->coordinator) {
		char who[32] = "an unregistered peer";

		if (c->rank >= 0)
			snprintf(who, sizeof(who), "rank %d", c->rank);
		auth_failed(m, who, now);
		member_gone(m, c, "sent a message that failed "
			    "authentication", now);
	} else {
		auth_failed(m, "the coordinator", now);
		if (member_other_job(m, now))
			return -1;
		member_lost(m, msg->type == BOOT_REFUSE &&
			       msg->refuse.reason == REFUSE_AUTH ?
			       "refused: the job secret differs from the "
			       "coordinator's" :
			       "a message from the coordinator failed "
			       "authentication: is the job secret the same "
			       "on every host?");
	}
	return -1;
}

/* Act on the whole messages in @c's buffer; keep a partial one. */
static void conn_parse(struct membership *m, struct mb_conn *c, uint64_t now)
{
	size_t off = 0;

	while (c->fd >= 0) {
		struct boot_msg msg;
		int len = boot_decode(c->rbuf + off, c->rlen - off, &msg);

		if (len == 0)
			break;
		if (len < 0) {
			log_warn("control connection: %s", boot_error_str(len));
			if (m->coordinator)
				member_gone(m, c, "sent a malformed message",
					    now);
			else
				member_lost(m, boot_error_str(len));
			return;
		}
		if (msg_verify(m, c, &msg, c->rbuf + off, (size_t)len, now))
			return;
		off += (size_t)len;
		handle_msg(m, c, &msg, now);
	}
	if (c->fd < 0)
		return;
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
}

static void conn_read(struct membership *m, struct mb_conn *c, uint64_t now)
{
	while (c->fd >= 0) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen,
				 BOOT_MAX_MSG - c->rlen, MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			if (m->coordinator)
				member_gone(m, c, "closed its connection", now);
			else
				member_lost(m, "coordinator closed the "
					       "connection");
			return;
		}
		if (n < 0)
			return;
		c->rlen += (size_t)n;
		c->last_rx_ms = now;
		conn_parse(m, c, now);
	}
}

static int listen_on(struct membership *m)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_port = htons(m->cfg.coord_port),
		.sin_addr.s_addr = htonl(m->cfg.coord_ip) };
	struct epoll_event ev = { .events = EPOLLIN,
		.data.u64 = TAG_JOB_SOCK(TAG_BOOT_LISTEN, m->cfg.tag_job, 0) };
	int one = 1;

	m->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK |
			      SOCK_CLOEXEC, 0);
	if (m->listen_fd < 0)
		return -1;
	setsockopt(m->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(m->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(m->listen_fd, 64)) {
		log_err("coordinator: cannot listen on %s:%u: %s",
			inet_ntoa(sa.sin_addr), m->cfg.coord_port,
			strerror(errno));
		return -1;
	}
	if (epoll_ctl(m->epoll_fd, EPOLL_CTL_ADD, m->listen_fd, &ev)) {
		log_err("coordinator: epoll: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int membership_start(struct membership *m, const struct membership_cfg *cfg,
		     const struct membership_ops *ops, int epoll_fd)
{
	memset(m, 0, sizeof(*m));
	m->cfg = *cfg;
	m->ops = *ops;
	m->epoll_fd = epoll_fd;
	m->listen_fd = -1;
	for (int i = 0; i < MB_MAX_CONNS; i++) {
		m->conn[i].fd = -1;
		m->conn[i].rank = -1;
	}
	m->coordinator = cfg->self.rank == 0;
	m->start_ms = tly_now_ms();
	if (!m->coordinator) {
		int err = member_connect(m, m->start_ms);

		if (err)
			log_err("cannot connect to the coordinator: %s",
				strerror(-err));
		return err ? -1 : 0;
	}
	if (listen_on(m))
		return -1;
	m->reg[0] = cfg->self;
	m->present[0] = true;
	if (cfg->world == 1)
		send_roster(m, tly_now_ms());
	return 0;
}

void membership_stop(struct membership *m)
{
	/* connections in every state, a connect in flight included */
	for (int i = 0; i < MB_MAX_CONNS; i++)
		if (m->conn[i].fd >= 0)
			conn_close(m, &m->conn[i]);
	if (m->listen_fd >= 0) {
		epoll_ctl(m->epoll_fd, EPOLL_CTL_DEL, m->listen_fd, NULL);
		close(m->listen_fd);
	}
	m->listen_fd = -1;
	m->dead = true;		/* no tick connects again */
}

void membership_event(struct membership *m, uint64_t tag, uint64_t now_ms)
{
	int slot = TAG_SLOT(tag);

	if (TAG_JOB(tag) != m->cfg.tag_job)
		return;		/* another job's */
	if (TAG_KIND(tag) == TAG_BOOT_LISTEN) {
		if (m->listen_fd >= 0)
			coordinator_accept(m, now_ms);
		return;
	}
	if (TAG_KIND(tag) != TAG_BOOT || slot >= MB_MAX_CONNS ||
	    m->conn[slot].fd < 0)
		return;
	if (!m->coordinator && m->join != MB_JOIN_REGISTERED)
		member_join_event(m, now_ms);
	else
		conn_read(m, &m->conn[slot], now_ms);
}

/*
 * A judge that did not run cannot tell a silent peer: when our own ticks
 * stopped for longer than half the timeout (a machine too busy to run us,
 * a paused VM; ticks normally come every heartbeat_ms / 2), the time we
 * were away is not held against anyone.  A peer that hangs while we run
 * is still declared lost after peer_timeout_ms.
 */
static void skip_own_absence(struct membership *m, uint64_t now)
{
	uint64_t gap = now - m->last_tick_ms;

	if (m->last_tick_ms && gap > m->cfg.peer_timeout_ms / 2) {
		for (int i = 0; i < MB_MAX_CONNS; i++) {
			struct mb_conn *c = &m->conn[i];

			if (c->fd >= 0)
				c->last_rx_ms = c->last_rx_ms + gap < now ?
						c->last_rx_ms + gap : now;
		}
	}
	m->last_tick_ms = now;
}

void membership_tick(struct membership *m, uint64_t now)
{
	struct boot_msg hb = { .type = BOOT_HEARTBEAT };

	if (m->dead)
		return;
	skip_own_absence(m, now);
	if (!m->coordinator && m->join != MB_JOIN_REGISTERED) {
		member_join_tick(m, now);
		if (m->dead || m->join != MB_JOIN_REGISTERED)
			return;
	}
	hb.epoch = m->epoch;
	hb.peer.rank = m->cfg.self.rank;
	for (int i = 0; i < MB_MAX_CONNS; i++) {
		struct mb_conn *c = &m->conn[i];

		if (c->fd < 0)
			continue;
		if (now - c->last_rx_ms > m->cfg.peer_timeout_ms) {
			/* What arrived while we ourselves did not run (a
			 * busy machine, a paused VM) counts: read it before
			 * judging the peer. */
			conn_read(m, c, now);
			if (m->dead)
				return;
			if (c->fd < 0)
				continue;
		}
		if (now - c->last_rx_ms > m->cfg.peer_timeout_ms) {
			if (m->coordinator)
				member_gone(m, c, "stopped answering", now);
			else
				member_lost(m, "coordinator stopped "
					       "answering");
			continue;
		}
		/* a connection not yet registered has no keys to send
		 * with; it only has peer_timeout_ms to register */
		if (c->keyed && now - c->last_tx_ms >= m->cfg.heartbeat_ms &&
		    conn_send(c, &hb, now)) {
			if (m->coordinator)
				member_gone(m, c, "cannot be written to", now);
			else
				member_lost(m, "cannot write to the "
					       "coordinator");
		}
	}
}

bool membership_joining(const struct membership *m)
{
	return !m->coordinator && !m->dead && m->join != MB_JOIN_REGISTERED;
}

void membership_abort(struct membership *m)
{
	struct boot_msg a = { .type = BOOT_ABORT };

	a.epoch = m->epoch;
	a.peer.rank = m->cfg.self.rank;
	if (m->coordinator) {
		if (m->formed)
			send_roster(m, tly_now_ms());
	} else if (m->conn[0].fd >= 0 && m->join == MB_JOIN_REGISTERED) {
		conn_send(&m->conn[0], &a, tly_now_ms());
	}
}
