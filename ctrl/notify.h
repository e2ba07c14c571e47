/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * notify.h - tallyd's state for its service manager (sd_notify(3)):
 * READY=1 once clients can connect (and, in a multi-host job, the job's
 * first roster arrived), RELOADING=1 and READY=1 around a SIGHUP reload,
 * STOPPING=1 at shutdown, and STATUS= lines in between.
 *
 * Without $NOTIFY_SOCKET (not started by systemd) every call does
 * nothing; a tallyd built without libsystemd (meson -Dsystemd=disabled)
 * never notifies.
 */
#ifndef TALLY_CTRL_NOTIFY_H
#define TALLY_CTRL_NOTIFY_H

#include <stdbool.h>

struct tallyd;

/* Send "@fmt" (newline-separated VAR=value assignments). */
void notify_send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* READY=1 with a status when the daemon has become ready; then a
 * STATUS= line whenever its clients or the job's health changed.
 * Called by the loop before it sleeps; cheap when nothing changed. */
void notify_poll(struct tallyd *d);

/* Was tallyd built with libsystemd? */
bool notify_supported(void);

#endif /* TALLY_CTRL_NOTIFY_H */
