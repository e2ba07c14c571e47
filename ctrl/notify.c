// SPDX-License-Identifier: BSD-3-Clause
/*
 * notify.c - sd_notify(3) for tallyd (see notify.h).
 */
#include <stdarg.h>
#include <stdio.h>

#ifdef TALLY_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "ctrl/daemon.h"
#include "ctrl/job.h"
#include "ctrl/log.h"
#include "ctrl/notify.h"

bool notify_supported(void)
{
#ifdef TALLY_HAVE_SYSTEMD
	return true;
#else
	return false;
#endif
}

void notify_send(const char *fmt, ...)
{
#ifdef TALLY_HAVE_SYSTEMD
	char msg[512];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* 0: no $NOTIFY_SOCKET, not under systemd; keep it for reloads */
	ret = sd_notify(0, msg);
	if (ret < 0)
		log_debug("sd_notify: error %d", -ret);
#else
	(void)fmt;
#endif
}

/* A service is ready once it listens; a daemon started for one job once
 * that job's roster arrived. */
static bool is_ready(struct tallyd *d)
{
	return !d->static_job || job_joined(d->static_job);
}

void notify_poll(struct tallyd *d)
{
	bool broken = d->static_job && d->static_job->broken;
	int jobs = d->jobs.n_used;

	if (!d->notify.ready) {
		if (!is_ready(d))
			return;
		d->notify.ready = true;
		d->notify.clients = -1;		/* say the status below */
		log_info("ready: clients may connect on %s", d->cfg.socket);
		notify_send("READY=1");
	}
	if (d->notify.clients == d->n_clients && d->notify.jobs == jobs &&
	    d->notify.broken == broken)
		return;
	d->notify.clients = d->n_clients;
	d->notify.jobs = jobs;
	d->notify.broken = broken;
	if (d->static_job)
		notify_send("STATUS=%s%d of %d clients connected; %llu "
			    "operations done, %llu failed",
			    broken ? "job aborted: " : "", d->n_clients,
			    d->cfg.local_size,
			    (unsigned long long)job_ops(d->static_job).done,
			    (unsigned long long)job_ops(d->static_job).failed);
	else
		notify_send("STATUS=%d job(s), %d client(s)", jobs,
			    d->n_clients);
}
