// SPDX-License-Identifier: BSD-3-Clause
/*
 * reload.c - SIGHUP: read the configuration again and apply the keys that
 * can change under running clients and jobs.
 *
 * The command line is parsed again as at start (defaults, the --config
 * file, then the other options), so options given on the command line
 * still win over the file.  A file with any error is refused whole: the
 * running configuration stays, and the error is logged.
 *
 * What can change: daemon.log_level (a level every thread reads),
 * daemon.stuck_ms (the watchdog's bound; it starts or stops with it) and
 * daemon.idle_spin_us (read by the loop on every turn).  Everything else
 * is fixed at start, and a changed value is logged and ignored until a
 * restart: the socket and its group are bound and handed to clients,
 * local_size and reduce_threads size the local groups and the reduction
 * threads, numa_node and cpus placed those threads and the daemon's
 * memory policy when they started (docs/numa.md), and the cluster,
 * dataplane and emulator keys are agreed with the other daemons of the
 * job or opened into the transport.
 */
#include <stdlib.h>
#include <string.h>

#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/notify.h"
#include "ctrl/job.h"

static const char *const reloadable[][2] = {
	{ "daemon", "log_level" },
	{ "daemon", "stuck_ms" },
	{ "daemon", "idle_spin_us" },
	/* read where they are used: the next client or request sees them */
	{ "service", "max_clients_per_job" },
	{ "service", "max_segments" },
	{ "service", "max_client_bytes" },
	{ "service", "max_outstanding" },
	{ "service", "job_linger_ms" },
	{ "service", "require_secret" },
};

bool daemon_key_reloadable(const char *section, const char *key)
{
	for (size_t i = 0; i < sizeof(reloadable) / sizeof(reloadable[0]); i++)
		if (!strcmp(reloadable[i][0], section) &&
		    !strcmp(reloadable[i][1], key))
			return true;
	return false;
}

struct reload {
	struct tallyd *d;
	const struct tally_config *next;
	int applied, kept;
};

static void on_change(void *ctx, const char *section, const char *key,
		      const char *old_value, const char *new_value)
{
	struct reload *r = ctx;
	struct tallyd *d = r->d;

	if (!daemon_key_reloadable(section, key)) {
		r->kept++;
		log_warn("reload: %s.%s changed (%s -> %s) but needs a "
			 "restart; keeping %s", section, key, old_value,
			 new_value, old_value);
		return;
	}
	r->applied++;
	log_info("reload: %s.%s %s -> %s", section, key, old_value,
		 new_value);
	if (!strcmp(key, "stuck_ms")) {
		struct job *j;

		d->cfg.stuck_ms = r->next->stuck_ms;	/* for new jobs */
		job_table_for_each(&d->jobs, j) {
			j->cfg.stuck_ms = r->next->stuck_ms;
			job_set_stuck_ms(j, r->next->stuck_ms);
		}
	} else if (!strcmp(key, "idle_spin_us")) {
		d->cfg.idle_spin_us = r->next->idle_spin_us;
	} else if (!strcmp(section, "service")) {
		d->cfg.max_clients_per_job = r->next->max_clients_per_job;
		d->cfg.max_segments = r->next->max_segments;
		d->cfg.max_client_bytes = r->next->max_client_bytes;
		d->cfg.max_outstanding = r->next->max_outstanding;
		d->cfg.job_linger_ms = r->next->job_linger_ms;
		d->cfg.require_secret = r->next->require_secret;
	}
	/* log_level: at the end of daemon_reload() */
}

void daemon_reload(struct tallyd *d)
{
	struct tally_config *next = malloc(sizeof(*next));
	struct reload r = { .d = d, .next = next };

	if (!next) {
		log_err("reload: out of memory; configuration unchanged");
		return;
	}
	if (!d->cfg.config_file[0]) {
		log_warn("SIGHUP: started without --config, nothing to "
			 "reload");
		free(next);
		return;
	}
	notify_send("RELOADING=1\nSTATUS=reloading %s", d->cfg.config_file);
	if (config_parse_args(next, d->argc, d->argv)) {
		/* config_parse_args() logged the error */
		log_err("SIGHUP: reload of %s refused, the running "
			"configuration stays", d->cfg.config_file);
		notify_send("READY=1\nSTATUS=reload of %s refused: errors "
			    "(see the log); running configuration kept",
			    d->cfg.config_file);
		free(next);
		return;
	}
	/* the reload's own lines at the more verbose of the two levels:
	 * both going quieter and going louder show what changed */
	if (next->log_level > d->cfg.log_level)
		log_set_level((enum log_level)next->log_level);
	log_info("SIGHUP: reloading %s", d->cfg.config_file);
	config_diff(&d->cfg, next, on_change, &r);
	log_info("reload: %d key%s applied, %d kept until a restart",
		 r.applied, r.applied == 1 ? "" : "s", r.kept);
	d->cfg.log_level = next->log_level;
	log_set_level((enum log_level)next->log_level);
	notify_send("READY=1\nSTATUS=reloaded %s: %d key%s applied, %d kept "
		    "until a restart", d->cfg.config_file, r.applied,
		    r.applied == 1 ? "" : "s", r.kept);
	free(next);
}
