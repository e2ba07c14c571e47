// SPDX-License-Identifier: BSD-3-Clause
/*
 * udp_agg.c - an aggregator at an address for CI: tally's software
 * aggregator in a thread of its own behind a UDP socket on 127.0.0.1,
 * answering each rank at the address its packets came from.  The address
 * backend (be_udp.c) reaches it only through the socket, as it would a
 * user's aggregator.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf.h"
#include "dataplane/clock.h"
#include "dataplane/engine/agg.h"

struct udp_agg {
	struct cf_backend *inner;
	void (*inner_destroy)(struct cf_backend *be);
	int fd;
	atomic_int stop;
	pthread_t th;
	struct tly_agg *a;
	struct sockaddr_in peer[TLY_MAX_WORKERS];
	/* the aggregator allocates a frame per worker before sending */
	uint8_t buf[TLY_MAX_WORKERS + 2][CF_PKT_MAX];
	unsigned int next;
};

/* the backend's destroy is wrapped: it stops the server too */
static struct udp_agg *servers[8];

static uint8_t *ua_alloc(void *ctx, size_t len)
{
	struct udp_agg *s = ctx;

	return len <= CF_PKT_MAX ?
	       s->buf[s->next++ % (TLY_MAX_WORKERS + 2)] : NULL;
}

static void ua_send(void *ctx, uint16_t dst, uint8_t *f, size_t len)
{
	struct udp_agg *s = ctx;

	if (dst < TLY_MAX_WORKERS && s->peer[dst].sin_port)
		(void)sendto(s->fd, f, len, MSG_DONTWAIT,
			     (struct sockaddr *)&s->peer[dst],
			     sizeof(s->peer[dst]));
}

static void *ua_main(void *arg)
{
	struct udp_agg *s = arg;
	uint8_t in[CF_PKT_MAX];

	while (!atomic_load(&s->stop)) {
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t l;

		(void)poll(&p, 1, 1);
		while ((l = recvfrom(s->fd, in, sizeof(in), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl)) > 0) {
			uint16_t rank = (size_t)l >= TLY_HDR_LEN ?
					tly_get16(in + 4) : 0xffff;

			if (rank < TLY_MAX_WORKERS)
				s->peer[rank] = from;
			tly_agg_rx(s->a, in, (size_t)l, tly_now_ns());
			fl = sizeof(from);
		}
		tly_agg_poll(s->a, tly_now_ns());
		if (tly_agg_sweep_interval(s->a))
			tly_agg_sweep(s->a, tly_now_ns());
	}
	return NULL;
}

static void ua_destroy(struct cf_backend *be)
{
	unsigned int i;

	for (i = 0; i < 8; i++) {
		struct udp_agg *s = servers[i];

		if (!s || s->inner != be)
			continue;
		atomic_store(&s->stop, 1);
		pthread_join(s->th, NULL);
		s->inner_destroy(be);
		tly_agg_destroy(s->a);
		close(s->fd);
		free(s);
		servers[i] = NULL;
		return;
	}
}

struct cf_backend *cf_be_udp_self(const struct cf_job *j)
{
	struct udp_agg *s = calloc(1, sizeof(*s));
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	char addr[32];
	unsigned int i;
	int rb = 4 << 20;

	if (!s)
		return NULL;
	struct tly_agg_cfg ac = {
		.job = j->job, .cookie = j->cookie, .k = j->k,
		.n_workers = j->n, .self = j->n, .n_slots = j->slots,
		/* the workers' retry ceiling on the real clock: 20 ms; re-sends
		 * back off to 64 probe intervals */
		.evict_ns = 500000000, .probe_ns = 1000000,
		.profile = j->profile,
		.ops = { .alloc = ua_alloc, .send = ua_send, .ctx = s },
	};

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->fd = socket(AF_INET, SOCK_DGRAM, 0);
	s->a = tly_agg_create(&ac);
	if (s->fd < 0 || !s->a ||
	    bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(s->fd, (struct sockaddr *)&sa, &sl))
		goto fail;
	(void)setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	s->inner = cf_be_udp(j, addr);
	if (!s->inner)
		goto fail;
	for (i = 0; i < 8 && servers[i]; i++)
		;
	if (i == 8 || pthread_create(&s->th, NULL, ua_main, s)) {
		s->inner->destroy(s->inner);
		goto fail;
	}
	servers[i] = s;
	s->inner_destroy = s->inner->destroy;
	s->inner->destroy = ua_destroy;
	return s->inner;
fail:
	if (s->fd >= 0)
		close(s->fd);
	tly_agg_destroy(s->a);
	free(s);
	return NULL;
}
