// SPDX-License-Identifier: BSD-3-Clause
/*
 * be_udp.c - backend: an aggregator at an address, over real UDP.  Each
 * worker has a socket of its own (so an aggregator that answers the
 * sender's address reaches the right worker); a reply is handed to the
 * worker whose socket got it, or to every worker when its rank is 0xffff.
 * Runs on the real clock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf.h"

struct be_udp {
	struct cf_backend be;
	uint16_t n;
	int fd[TLY_MAX_WORKERS];
};

static void u_rx(struct cf_backend *be, uint16_t rank, const uint8_t *pkt,
		 size_t len, uint64_t now)
{
	struct be_udp *u = (struct be_udp *)be;

	(void)now;
	if (rank < u->n)
		(void)send(u->fd[rank], pkt, len, MSG_DONTWAIT);
}

static void u_poll(struct cf_backend *be, uint64_t now, uint64_t wait_ns)
{
	struct be_udp *u = (struct be_udp *)be;
	struct pollfd p[TLY_MAX_WORKERS];
	uint8_t buf[CF_PKT_MAX];
	uint16_t i;

	(void)now;
	for (i = 0; i < u->n; i++)
		p[i] = (struct pollfd){ .fd = u->fd[i], .events = POLLIN };
	if (poll(p, u->n, (int)((wait_ns + 999999) / 1000000)) <= 0)
		return;
	for (i = 0; i < u->n; i++) {
		ssize_t l;

		while ((l = recv(u->fd[i], buf, sizeof(buf),
				 MSG_DONTWAIT)) > 0) {
			uint16_t to = i;

			if ((size_t)l >= TLY_HDR_LEN &&
			    tly_get16(buf + 4) == CF_GROUP)
				to = CF_GROUP;
			u->be.reply(u->be.run, to, buf, (size_t)l);
		}
	}
}

static void u_destroy(struct cf_backend *be)
{
	struct be_udp *u = (struct be_udp *)be;
	uint16_t i;

	for (i = 0; i < u->n; i++)
		close(u->fd[i]);
	free(u);
}

struct cf_backend *cf_be_udp(const struct cf_job *j, const char *addr)
{
	struct be_udp *u = calloc(1, sizeof(*u));
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(addr, ':');
	uint16_t i;

	if (!u)
		return NULL;
	if (!colon || (size_t)(colon - addr) >= sizeof(host)) {
		fprintf(stderr, "udp backend: want ip:port, got %s\n", addr);
		free(u);
		return NULL;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "udp backend: bad address %s\n", host);
		free(u);
		return NULL;
	}
	u->n = j->n;
	for (i = 0; i < j->n; i++) {
		int rb = 4 << 20;

		u->fd[i] = socket(AF_INET, SOCK_DGRAM, 0);
		if (u->fd[i] < 0 ||
		    connect(u->fd[i], (struct sockaddr *)&sa, sizeof(sa))) {
			fprintf(stderr, "udp backend: %s: %s\n", addr,
				strerror(errno));
			u->n = i + (u->fd[i] >= 0);
			u_destroy(&u->be);
			return NULL;
		}
		(void)setsockopt(u->fd[i], SOL_SOCKET, SO_RCVBUF, &rb,
				 sizeof(rb));
	}
	u->be = (struct cf_backend){
		.name = "udp", .realtime = 1, .rx = u_rx, .poll = u_poll,
		.destroy = u_destroy,
	};
	return &u->be;
}
