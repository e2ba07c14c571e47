// SPDX-License-Identifier: BSD-3-Clause
/*
 * harness.c - real daemons and client processes for integration tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

uint64_t test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int can_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(s);
	return ok;
}

int daemon_start(struct test_daemon *d, int n, const char *const *extra)
{
	return daemon_start_in(d, n, extra, NULL);
}

int daemon_start_in(struct test_daemon *d, int n, const char *const *extra,
		    const char *netns)
{
	const char *bin = getenv("TALLYD");
	char nbuf[16];
	const char *argv[80];
	int argc = 0;

	memset(d, 0, sizeof(*d));
	if (!bin) {
		fprintf(stderr, "TALLYD is not set\n");
		return -1;
	}
	snprintf(d->dir, sizeof(d->dir), "/tmp/tally-test-XXXXXX");
	if (!mkdtemp(d->dir))
		return -1;
	snprintf(d->sock, sizeof(d->sock), "%s/tallyd.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/tallyd.log", d->dir);
	snprintf(nbuf, sizeof(nbuf), "%d", n);
	if (netns) {	/* the client socket is a path: visible from here */
		argv[argc++] = "/usr/bin/ip";
		argv[argc++] = "netns";
		argv[argc++] = "exec";
		argv[argc++] = netns;
	}
	argv[argc++] = bin;
	argv[argc++] = "--socket";
	argv[argc++] = d->sock;
	argv[argc++] = "--local-size";
	argv[argc++] = nbuf;
	argv[argc++] = "--reduce-threads";
	argv[argc++] = "2";
	for (int i = 0; extra && extra[i] && argc < 78; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;

	fflush(NULL);
	d->pid = fork();
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0) {	/* never hold the test runner's pipes */
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	/* up to 10 s: on the starved machine a DPDK daemon's start (its
	 * memory mapped) has stalled in the kernel for over 5 s */
	for (int i = 0; i < 1000; i++) {
		if (can_connect(d->sock))
			return 0;
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			char cmd[160];

			fprintf(stderr, "tallyd exited at start-up:\n");
			snprintf(cmd, sizeof(cmd), "tail -5 %s >&2", d->log);
			(void)!system(cmd);
			d->pid = 0;
			return -1;
		}
		usleep(10000);
	}
	return -1;
}

int test_port_base(int span)
{
	return test_port_base_try(span, 0);
}

int test_port_base_try(int span, int attempt)
{
	const int first = 20000, last = 32767;
	int blocks = (last - first + 1) / span;

	/* 7919 is prime: each retry lands on a far, different block */
	return first + ((getpid() + attempt * 7919) % blocks) * span;
}

int daemon_alive(const struct test_daemon *d)
{
	return d->pid > 0 && waitpid(d->pid, NULL, WNOHANG) == 0;
}

/* run the shell command @fmt, whose one %d is @pid */
static void sh_pid(const char *fmt, pid_t pid)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), fmt, (int)pid);
	(void)!system(cmd);
}

/* where a hung process's threads are: each one's kernel stack, every
 * other task of the machine blocked in the kernel (D) or running (R),
 * and kdamond (who holds what it waits for), then (while the process
 * can still be traced) gdb's backtraces */
static void threads_show(pid_t pid)
{
	sh_pid("cd /proc/%d/task 2>/dev/null && for t in *; do "
	       "echo \"thread $t: $(cat $t/comm) $(cut -d' ' -f3 $t/stat) "
	       "$(cat $t/wchan)\"; cat $t/stack; done >&2", pid);
	sh_pid("for t in /proc/[0-9]*/task/[0-9]*; do "
	       "case $t in /proc/%d/*) continue;; esac; "
	       "c=$(cat $t/comm 2>/dev/null); "
	       "s=$(cut -d' ' -f3 $t/stat 2>/dev/null); "
	       "case \"$s $c\" in 'D '*|'R '*|*kdamond*) "
	       "echo \"other task $t: $c $s\"; cat $t/stack;; esac; "
	       "done 2>/dev/null >&2", pid);
	sh_pid("timeout 30 gdb -batch -nx -p %d -ex 'thread apply all bt' "
	       "2>&1 | grep -E '^(Thread|#)' >&2", pid);
}

#define TASK_PF_EXITING 0x4u	/* include/linux/sched.h */

/* Has @pid's exit begun (its main thread a zombie, or exiting: killed, or
 * past exit())?  Then what is left is the kernel's: tearing down its
 * memory. */
static bool exit_begun(pid_t pid)
{
	char path[64], st[512], state;
	unsigned int flags;
	const char *p;
	FILE *f;
	bool begun = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	/* "pid (comm) state ppid pgrp session tty tpgid flags ..."; the
	 * name may hold anything */
	if (fgets(st, sizeof(st), f) && (p = strrchr(st, ')')) &&
	    sscanf(p + 1, " %c %*d %*d %*d %*d %*d %u", &state, &flags) == 2)
		begun = state == 'Z' || state == 'X' ||
			(flags & TASK_PF_EXITING);
	fclose(f);
	return begun;
}

int daemon_reap(pid_t pid, int *status, int wait_ms)
{
	uint64_t t0 = test_now_ms(), end = t0 + (uint64_t)wait_ms;
	bool told = false;

	for (;;) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return (int)(test_now_ms() - t0);
		if (test_now_ms() >= end) {
			if (!exit_begun(pid))
				return -1;
			/* tally's code has ended: give the kernel its time,
			 * and say where it spends it */
			if (!told) {
				fprintf(stderr, "daemon %d: exit begun, still in the kernel after %d ms:\n",
					(int)pid, wait_ms);
				threads_show(pid);
				told = true;
				end = test_now_ms() + 60000;
				continue;
			}
			return -1;
		}
		usleep(2000);
	}
}

int daemon_terminate(struct test_daemon *d, int wait_ms)
{
	int status = 0, took;

	if (d->pid <= 0)
		return 0;
	kill(d->pid, SIGTERM);
	took = daemon_reap(d->pid, &status, wait_ms);
	if (took >= 0) {
		if (took > wait_ms)
			fprintf(stderr, "daemon %d: gone after %d ms\n",
				d->pid, took);
		goto reaped;
	}
	fprintf(stderr, "daemon %d did not exit within %d ms: killed\n",
		d->pid, wait_ms);
	if (!exit_begun(d->pid))	/* else daemon_reap() showed them */
		threads_show(d->pid);
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &status, 0);
	d->pid = 0;
	return -1;
reaped:
	if (WIFSIGNALED(status))
		fprintf(stderr, "daemon %d died of signal %d%s\n", d->pid,
			WTERMSIG(status),
			WCOREDUMP(status) ? " (core dumped)" : "");
	else if (WEXITSTATUS(status))
		fprintf(stderr, "daemon %d exited with %d\n", d->pid,
			WEXITSTATUS(status));
	d->pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int daemon_stop(struct test_daemon *d)
{
	int ret = daemon_terminate(d, 3000);
	char cmd[160];

	if (ret) {	/* show what it said */
		snprintf(cmd, sizeof(cmd), "tail -20 %s >&2", d->log);
		(void)!system(cmd);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
	(void)!system(cmd);
	return ret;
}

int daemon_log_count(const struct test_daemon *d, const char *what)
{
	char line[1024];
	FILE *f = fopen(d->log, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

pid_t child_start(int (*fn)(void *), void *arg)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(fn(arg));
	return pid;
}

int child_wait(pid_t pid, int timeout_ms)
{
	uint64_t end = test_now_ms() + (uint64_t)timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid && WIFEXITED(status)) {
			if (WEXITSTATUS(status))
				fprintf(stderr, "child %d exited with %d\n",
					pid, WEXITSTATUS(status));
			return WEXITSTATUS(status);
		}
		if (r == pid) {
			fprintf(stderr, "child %d killed by signal %d%s\n", pid,
				WTERMSIG(status),
				WCOREDUMP(status) ? " (core dumped)" : "");
			return -1;
		}
		if (r < 0 || test_now_ms() > end)
			break;
		usleep(2000);
	}
	fprintf(stderr, "child %d timed out after %d ms\n", pid, timeout_ms);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

void sync_signal(int fd)
{
	char c = 1;

	(void)!write(fd, &c, 1);
}

int sync_wait(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	if (poll(&p, 1, timeout_ms) != 1 || read(fd, &c, 1) != 1)
		return -1;
	return 0;
}

int netlab_run(const char *lab, const char *args, char *out, size_t cap)
{
	char cmd[512];
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s --name %s", getenv("NETLAB"), args,
		 lab);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (out) {
		if (!fgets(out, (int)cap, p))
			out[0] = '\0';
		out[strcspn(out, "\n")] = '\0';
	}
	while (fgetc(p) != EOF)	/* let it finish writing */
		;
	st = pclose(p);
	return st == 0 ? 0 : -1;
}

int daemon_refuses(const char *const *extra, const char *says)
{
	struct test_daemon d;
	bool exited, said;

	/* it may exit before or after its client socket accepts */
	(void)daemon_start(&d, 1, extra);
	for (int i = 0; i < 500 && d.pid && daemon_alive(&d); i++)
		usleep(10000);
	exited = !d.pid || !daemon_alive(&d);
	if (exited)
		d.pid = 0;		/* reaped */
	said = daemon_log_count(&d, says) > 0;
	daemon_stop(&d);
	return !exited ? -1 : !said ? -2 : 0;
}
