// SPDX-License-Identifier: BSD-3-Clause
/*
 * tallyd.c - the per-host tally daemon: configuration (cmdline.c), socket,
 * event loop.
 */
#include <malloc.h>
#include <numa.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <tally/tally.h>
#include "dataplane/clock.h"
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/loop_tags.h"
#include "ctrl/notify.h"
#include "ctrl/metrics_http.h"
#include "ctrl/watchdog.h"
#include "dataplane/placement.h"
#include "dataplane/transport/transport.h"

/* libnuma's warnings (a CPU list it refuses, say) go to our log, not to
 * bare stderr: libnuma documents numa_warn() for a program to replace */
void numa_warn(int num, char *fmt, ...)
{
	char msg[256];
	va_list ap;

	(void)num;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	msg[strcspn(msg, "\n")] = '\0';
	log_warn("libnuma: %s", msg);
}

/*
 * SIGINT and SIGTERM stop the daemon, SIGHUP reloads its configuration
 * (reload.c).  They stay blocked in every thread (block them before the
 * first thread starts) and the loop reads them from a signalfd in its
 * epoll set: one that comes between the loop's last look at d->stop and
 * its sleep still wakes it, and no handler runs in the middle of the
 * loop's work.
 */
static void daemon_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

/* A daemon started for one job (its membership on the command line)
 * serves that job, whatever its clients say of theirs. */
static int start_static_job(struct tallyd *d)
{
	struct job_env env = { .reducer = d->reducer,
			       .epoll_fd = d->epoll_fd };
	struct job *j = job_table_alloc(&d->jobs, 1);

	j->cfg = d->cfg;
	j->static_job = true;
	/* its id: the job key, as the metrics named the one job before */
	if (config_is_cluster(&d->cfg))
		snprintf(j->id, sizeof(j->id), "%u", d->cfg.job_key);
	else
		snprintf(j->id, sizeof(j->id), "local");
	if (config_is_cluster(&d->cfg))
		notify_send("STATUS=joining job %u as rank %d of %d "
			    "(coordinator port %u)", d->cfg.job_key,
			    d->cfg.rank, d->cfg.world,
			    d->cfg.coordinator.port);
	if (job_table_start(&d->jobs, j, &env))
		return -1;
	d->static_job = j;
	return 0;
}

/*
 * [daemon] numa_node and cpus (docs/numa.md): the memory policy first,
 * while this is the only thread, so every thread created after it
 * inherits the preference; the reduce threads are pinned once they exist.
 */
static int daemon_place(struct tallyd *d, struct tly_placement *p)
{
	char err[512], list[256];

	if (tly_placement_resolve(p, d->cfg.numa_node, d->cfg.cpus, err,
				  sizeof(err)) ||
	    tly_placement_prefer_memory(p, err, sizeof(err))) {
		log_err("%s", err);
		return -1;
	}
	if (p->pinned) {
		tly_cpuset_format(&p->cpus, list, sizeof(list));
		log_info("placement: reduce threads on CPUs %s%s", list,
			 d->cfg.cpus[0] ? " (daemon.cpus)" : "");
	}
	if (p->numa_node >= 0)
		log_info("placement: memory prefers node %d", p->numa_node);
	return 0;
}

/* reduce_threads = 0: the cores we may run on, up to 4; placed, one
 * helper per CPU of the set besides the control thread, up to 4 in all */
static unsigned int reduce_thread_count(const struct tally_config *cfg,
					const struct tly_placement *p)
{
	long n;

	if (cfg->reduce_threads)
		return (unsigned int)cfg->reduce_threads;
	if (p->pinned)
		n = CPU_COUNT(&p->cpus) + 1;
	else
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 4 ? 4 : (unsigned int)n;
}

static int daemon_init(struct tallyd *d)
{
	struct tly_placement place;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_LISTEN };
	struct epoll_event sev = { .events = EPOLLIN, .data.u64 = TAG_SIGNAL };
	sigset_t sigs;
	int e;

	d->listen_fd = -1;
	d->epoll_fd = -1;
	d->signal_fd = -1;
	d->start_ns = tly_now_ns();
	if (job_table_init(&d->jobs, d->cfg.service ? d->cfg.max_jobs : 1)) {
		log_err("out of memory");
		return -1;
	}
	if (daemon_place(d, &place))
		return -1;
	d->reducer = reduce_pool_create(reduce_thread_count(&d->cfg, &place));
	if (!d->reducer)
		return -1;
	if (place.pinned) {
		e = reduce_pool_pin(d->reducer, &place.cpus);
		if (e) {
			log_err("%s: pthread_setaffinity_np: %s",
				d->cfg.cpus[0] ? "daemon.cpus" :
				"daemon.numa_node", strerror(e));
			return -1;
		}
	}
	d->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	daemon_signals(&sigs);
	d->signal_fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d->epoll_fd < 0 || d->signal_fd < 0 ||
	    epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, d->signal_fd, &sev) ||
	    daemon_listen(d) ||
	    epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, d->listen_fd, &ev))
		return -1;
	if (d->cfg.metrics_listen.ip) {
		d->metrics_http = metrics_http_start(d, TAG_METRICS);
		if (!d->metrics_http)
			return -1;
	}
	if (!d->cfg.service && start_static_job(d))
		return -1;
	/* READY=1 now, or once the job's roster arrives */
	notify_poll(d);
	return 0;
}

static void daemon_fini(struct tallyd *d)
{
	uint64_t done = d->jobs.past.ops_done, failed = d->jobs.past.ops_failed;
	uint64_t stuck = d->jobs.past.stuck_reports;
	struct job *j;

	metrics_http_stop(d->metrics_http);
	daemon_conns_close(d);
	for (int i = 0; i < DAEMON_MAX_CLIENTS; i++)
		daemon_client_drop(d, &d->clients[i], "closed at shutdown");
	job_table_for_each(&d->jobs, j) {
		done += job_ops(j).done;
		failed += job_ops(j).failed;
		stuck += watchdog_stats(j)->reports;
	}
	job_table_fini(&d->jobs);
	if (d->listen_fd >= 0) {
		close(d->listen_fd);
		unlink(d->cfg.socket);
	}
	if (d->epoll_fd >= 0)
		close(d->epoll_fd);
	if (d->signal_fd >= 0)
		close(d->signal_fd);
	log_info("stopped: %llu operations done, %llu failed, %llu job(s), "
		 "%llu reported stuck", (unsigned long long)done,
		 (unsigned long long)failed,
		 (unsigned long long)d->jobs.started,
		 (unsigned long long)stuck);
	reduce_pool_destroy(d->reducer);
}

int main(int argc, char **argv)
{
	struct tallyd *d = calloc(1, sizeof(*d));
	sigset_t sigs;
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
	log_take_dataplane();
	/* Jobs come and go, each allocating and freeing MBs (engine slots,
	 * staging).  glibc raises its mmap threshold past the first such
	 * free, and later ones land in the heap, where fragmentation kept a
	 * service's resident size growing by ~0.8 MB a job; a fixed
	 * threshold returns them to the kernel when the job ends. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	signal(SIGPIPE, SIG_IGN);
	daemon_signals(&sigs);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	d->argc = argc;
	d->argv = argv;
	if (daemon_init(d) == 0) {
		ret = daemon_run(d);
	} else {
		notify_send("STATUS=failed to start (see the log)");
	}
	notify_send("STOPPING=1");
	daemon_fini(d);
	free(d);
	return ret;
}
