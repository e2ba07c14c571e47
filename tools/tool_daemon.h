/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tool_daemon.h - a tallyd started by a benchmark: fork and exec it with
 * its output in a log file, wait until its socket accepts, stop it.
 */
#ifndef TALLY_TOOLS_TOOL_DAEMON_H
#define TALLY_TOOLS_TOOL_DAEMON_H

#include <sys/types.h>

struct tool_daemon {
	pid_t pid;
	char sock[100];		/* within sun_path */
	char log[128];
};

/* does the Unix stream socket at @path accept a connection */
int tool_can_connect(const char *path);

/*
 * Run @argv (argv[0]: the tallyd binary; its socket is @d->sock) with
 * stdout and stderr into @d->log, and wait up to 10 s for the socket to
 * accept.  0, or -1 with the reason on stderr, naming @who.
 */
int tool_daemon_start(struct tool_daemon *d, const char *const argv[],
		      const char *who);

/*
 * SIGTERM it and reap it (SIGKILL after 5 s).  0 when it exited with
 * status 0; -1 when it failed, or had ended before (said on stderr).
 * A daemon that never started (pid 0) is fine.
 */
int tool_daemon_stop(struct tool_daemon *d, const char *who);

#endif /* TALLY_TOOLS_TOOL_DAEMON_H */
