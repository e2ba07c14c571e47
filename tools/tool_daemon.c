// SPDX-License-Identifier: BSD-3-Clause
/*
 * tool_daemon.c - a tallyd started by a benchmark (tool_daemon.h).
 */
#include "tool_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

int tool_can_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok;

	if (s < 0)
		return 0;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(s);
	return ok;
}

int tool_daemon_start(struct tool_daemon *d, const char *const argv[],
		      const char *who)
{
	fflush(NULL);
	d->pid = fork();
	if (d->pid < 0) {
		perror("fork");
		d->pid = 0;
		return -1;
	}
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {	/* up to 10 s */
		if (tool_can_connect(d->sock))
			return 0;
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			fprintf(stderr, "%s: %s exited at start-up (log %s)\n",
				who, argv[0], d->log);
			d->pid = 0;
			return -1;
		}
		usleep(10000);
	}
	fprintf(stderr, "%s: %s does not listen on %s\n", who, argv[0],
		d->sock);
	return -1;
}

int tool_daemon_stop(struct tool_daemon *d, const char *who)
{
	int status = 0;

	if (d->pid <= 0)
		return 0;
	if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
		/* "Terminated: stopping" in its log: someone else's SIGTERM */
		fprintf(stderr, "%s: daemon %s had ended before we stopped it "
			"(%s %d)\n", who, d->sock,
			WIFSIGNALED(status) ? "signal" : "exit status",
			WIFSIGNALED(status) ? WTERMSIG(status) :
			WEXITSTATUS(status));
		d->pid = 0;
		return -1;
	}
	kill(d->pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		if (waitpid(d->pid, &status, WNOHANG) == d->pid)
			break;
		usleep(10000);
		if (i == 499) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &status, 0);
		}
	}
	d->pid = 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
