// SPDX-License-Identifier: BSD-3-Clause
/*
 * tallyd.c - the per-host tally daemon: configuration (cmdline.c), socket,
 * event loop.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <tally/tally.h>
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/loop_tags.h"

static struct tallyd *the_daemon;

static void on_signal(int sig)
{
	(void)sig;
	if (the_daemon)
		the_daemon->stop = true;
}

static int daemon_init(struct tallyd *d)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_LISTEN };
	int threads;

	d->listen_fd = -1;
	d->epoll_fd = -1;
	if (local_group_init(&d->groups, (unsigned int)d->cfg.local_size,
			     (uint32_t)d->cfg.local_size * TALLY_MAX_INFLIGHT)) {
		log_err("out of memory");
		return -1;
	}
	threads = d->cfg.reduce_threads;
	if (threads == 0) {	/* auto: the cores we may run on, up to 4 */
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		threads = n < 1 ? 1 : n > 4 ? 4 : (int)n;
	}
	d->reducer = reduce_pool_create((unsigned int)threads);
	if (!d->reducer)
		return -1;
	d->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (d->epoll_fd < 0 || daemon_listen(d) ||
	    epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, d->listen_fd, &ev))
		return -1;
	if (config_is_cluster(&d->cfg) && cluster_start(d))
		return -1;
	return 0;
}

static void daemon_fini(struct tallyd *d)
{
	cluster_stop(d);
	for (int r = 0; r < d->cfg.local_size; r++)
		daemon_client_drop(d, &d->clients[r], "closed at shutdown");
	if (d->listen_fd >= 0) {
		close(d->listen_fd);
		unlink(d->cfg.socket);
	}
	if (d->epoll_fd >= 0)
		close(d->epoll_fd);
	local_group_destroy(&d->groups);
	reduce_pool_destroy(d->reducer);
	log_info("stopped: %llu operations done, %llu failed, %llu bytes "
		 "reduced", (unsigned long long)d->stat_ops_done,
		 (unsigned long long)d->stat_ops_failed,
		 (unsigned long long)d->stat_bytes_reduced);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct tallyd *d = calloc(1, sizeof(*d));
	int ret = 1;

	if (!d)
		return 2;
	switch (config_parse_args(&d->cfg, argc, argv)) {
	case 0:
		break;
	case CONFIG_ARGS_HELP:
		config_usage(stdout);
		free(d);
		return 0;
	case CONFIG_ARGS_USAGE:
		config_usage(stderr);
		/* fall through */
	default:
		free(d);
		return 2;
	}
	log_set_level((enum log_level)d->cfg.log_level);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	the_daemon = d;

	if (daemon_init(d) == 0)
		ret = daemon_run(d);
	daemon_fini(d);
	free(d);
	return ret;
}
