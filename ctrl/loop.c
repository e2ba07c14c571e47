// SPDX-License-Identifier: BSD-3-Clause
/*
 * loop.c - tallyd's event loop: poll the clients' submission rings while
 * there is work, spin a little when it stops (the next submission usually
 * follows within microseconds), then announce sleep on every ring and
 * block in epoll until a doorbell, a control message or a new client.
 *
 * The spin yields the CPU on every turn: on a small shared machine the
 * clients that would submit may need our core.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/loop_tags.h"
#include "ctrl/metrics_http.h"
#include "ctrl/notify.h"
#include "dataplane/clock.h"

#define MAX_EVENTS 64

static void handle_event(struct tallyd *d, uint64_t tag)
{
	struct daemon_client *cl;
	char v[256];

	if (TAG_KIND(tag) == TAG_LISTEN) {
		daemon_accept(d);
		return;
	}
	if (TAG_KIND(tag) == TAG_SIGNAL) {
		struct signalfd_siginfo si;

		while (read(d->signal_fd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGHUP) {
				daemon_reload(d);
				continue;
			}
			log_info("%s: stopping", strsignal((int)si.ssi_signo));
			notify_send("STOPPING=1\nSTATUS=stopping (%s)",
				    strsignal((int)si.ssi_signo));
			d->stop = true;
		}
		return;
	}
	if (TAG_KIND(tag) == TAG_CONN) {
		daemon_conn_event(d, TAG_RANK(tag));
		return;
	}
	if (TAG_KIND(tag) == TAG_METRICS) {
		if (d->metrics_http)
			metrics_http_run(d->metrics_http);
		return;
	}
	if (TAG_KIND(tag) == TAG_NET)
		return;		/* frames arrived: the loop polls them */
	if (TAG_KIND(tag) == TAG_BOOT || TAG_KIND(tag) == TAG_BOOT_LISTEN) {
		if (TAG_JOB(tag) < d->jobs.cap &&
		    d->jobs.jobs[TAG_JOB(tag)].used)
			job_event(&d->jobs.jobs[TAG_JOB(tag)], tag);
		return;
	}
	if (TAG_RANK(tag) >= DAEMON_MAX_CLIENTS)
		return;
	cl = &d->clients[TAG_RANK(tag)];
	if (!cl->active)
		return;
	if (TAG_KIND(tag) == TAG_SOCK)
		daemon_client_ctrl(d, cl);
	else if (TAG_KIND(tag) == TAG_KICK)	/* our own non-blocking end */
		(void)!read(cl->sq_kick_fd, v, sizeof(v));
}

/* Handle pending epoll events, waiting at most @timeout_ns (-1: forever). */
static int poll_events(struct tallyd *d, int64_t timeout_ns)
{
	struct epoll_event ev[MAX_EVENTS];
	struct timespec ts = { .tv_sec = timeout_ns / 1000000000,
			       .tv_nsec = timeout_ns % 1000000000 };
	int n = epoll_pwait2(d->epoll_fd, ev, MAX_EVENTS,
			     timeout_ns < 0 ? NULL : &ts, NULL);

	if (n < 0 && errno != EINTR) {
		log_err("epoll_wait: %s", strerror(errno));
		d->stop = true;
	}
	for (int i = 0; i < n; i++)
		handle_event(d, ev[i].data.u64);
	return n > 0 ? n : 0;
}

static int drain_all(struct tallyd *d)
{
	int work = 0;

	for (int i = 0; i < DAEMON_MAX_CLIENTS; i++) {
		struct daemon_client *cl = &d->clients[i];

		if (!cl->active)
			continue;
		work += daemon_drain_sq(d, cl);
		if (cl->doomed)
			daemon_client_drop(d, cl, "broke the ring protocol");
	}
	return work;
}

static int poll_jobs(struct tallyd *d, uint64_t now)
{
	struct job *j;
	int work = 0;

	job_table_for_each(&d->jobs, j)
		work += job_poll(j, now);
	return work;
}

/* Announce sleep on every ring; true if a submission raced in. */
static bool prepare_sleep(struct tallyd *d, bool sleeping)
{
	bool ready = false;

	for (int i = 0; i < DAEMON_MAX_CLIENTS; i++) {
		struct daemon_client *cl = &d->clients[i];

		if (!cl->active)
			continue;
		if (sleeping) {
			ring_sleep_prepare(&cl->sq);
			ready |= ring_ready(&cl->sq) != 0;
		} else {
			ring_sleep_done(&cl->sq);
		}
	}
	return ready;
}

static uint64_t linger_ns(const struct tallyd *d)
{
	return (uint64_t)d->cfg.job_linger_ms * 1000000ull;
}

static int64_t min_timeout(int64_t a, int64_t b)
{
	return b >= 0 && (a < 0 || b < a) ? b : a;
}

/* Every job's timers and watchdog, the end of lingering jobs and the
 * metrics endpoint's connection timeouts bound the sleep. */
static int64_t sleep_ns(struct tallyd *d, uint64_t now)
{
	int64_t t = d->metrics_http ?
		    metrics_http_timeout_ns(d->metrics_http) : -1;
	struct job *j;

	job_table_for_each(&d->jobs, j) {
		t = min_timeout(t, job_sleep_ns(j, now));
		if (!j->static_job && !j->n_members && j->empty_since_ns) {
			uint64_t end = j->empty_since_ns + linger_ns(d);

			t = min_timeout(t, end > now ? (int64_t)(end - now) : 0);
		}
	}
	return t;
}

int daemon_run(struct tallyd *d)
{
	uint64_t idle_since = tly_now_ns();
	unsigned int turns = 0;

	while (!d->stop) {
		uint64_t now = tly_now_ns();
		int work = drain_all(d);

		work += poll_jobs(d, now);
		/* control traffic is rare: look at it every 64 turns; and end
		 * the jobs past their linger even while others keep us busy */
		if ((++turns & 63) == 0) {
			work += poll_events(d, 0);
			/* a fresh clock: a client that left in poll_events()
			 * stamped its job's empty_since_ns after @now, and
			 * now - empty_since would wrap and end the job at once,
			 * without its linger */
			job_table_reap(&d->jobs, tly_now_ns(), linger_ns(d), false);
		}
		if (work) {
			idle_since = tly_now_ns();
			continue;
		}
		/* read each turn: a reload may change it */
		if (now - idle_since < (uint64_t)d->cfg.idle_spin_us * 1000) {
			sched_yield();
			continue;
		}
		job_table_reap(&d->jobs, tly_now_ns(), linger_ns(d), false);
		notify_poll(d);
		if (!prepare_sleep(d, true))
			poll_events(d, sleep_ns(d, now));
		prepare_sleep(d, false);
		/* MHD's timeouts (idle connections) are due without an event */
		if (d->metrics_http && metrics_http_timeout_ns(d->metrics_http)
		    == 0)
			metrics_http_run(d->metrics_http);
		idle_since = tly_now_ns();
	}
	return 0;
}
