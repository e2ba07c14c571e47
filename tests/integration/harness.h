/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness.h - integration-test helpers: a real tallyd in a temporary
 * directory, client processes, and bounded waits so a broken daemon fails
 * a test instead of hanging it.
 */
#ifndef TALLY_TESTS_HARNESS_H
#define TALLY_TESTS_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

struct test_daemon {
	pid_t pid;
	char dir[64];
	char sock[100];
	char log[128];
};

/* Start $TALLYD with --local-size @n (and @extra args, may be NULL) and
 * wait until its socket accepts.  0 or -1. */
int daemon_start(struct test_daemon *d, int n, const char *const *extra);
/* The same, run inside network namespace @netns when it is not NULL. */
int daemon_start_in(struct test_daemon *d, int n, const char *const *extra,
		    const char *netns);
/* SIGTERM, and reap it within @wait_ms (SIGKILL past that, unless its
 * exit has begun: see daemon_reap()).  Returns its
 * exit status, or -1 if it died of a signal (a crash) or had to be
 * killed.  Its directory (the log) stays; d->pid is 0 after. */
int daemon_terminate(struct test_daemon *d, int wait_ms);
/* Reap @pid within @wait_ms, or, if its exit has begun by then (the
 * kernel tearing down its memory, slow on a starved machine), within 60 s
 * more, showing where its threads are.  Returns the ms it took, or -1
 * (not reaped). */
int daemon_reap(pid_t pid, int *status, int wait_ms);
/* daemon_terminate() within 3 s, the log's tail shown when it did not
 * exit cleanly, then remove the directory.  Returns as
 * daemon_terminate(). */
int daemon_stop(struct test_daemon *d);
/* Lines of the daemon's log that contain @what (-1: no log). */
int daemon_log_count(const struct test_daemon *d, const char *what);

/*
 * Start a daemon with @extra that must refuse to run: 0 when it exited
 * within 5 s and its log says @says, -1 when it kept running, -2 when it
 * exited without saying it.  The daemon is stopped either way.
 */
int daemon_refuses(const char *const *extra, const char *says);
/* Does a Unix stream socket at @path accept a connection?  (The daemon
 * sees one that closes before its HELLO.) */
int can_connect(const char *path);
/* Is the daemon process still running? */
int daemon_alive(const struct test_daemon *d);

/* Fork a child that exits with fn(arg). */
pid_t child_start(int (*fn)(void *), void *arg);
/* Wait for a child at most @timeout_ms; its exit code, or -1 if it was
 * killed by a signal or had to be killed at the timeout. */
int child_wait(pid_t pid, int timeout_ms);

uint64_t test_now_ms(void);

/*
 * tools/netlab (its path in $NETLAB) with @args on lab @lab; the first
 * line of its output into @out (when not NULL).  0, or -1 when it failed.
 */
int netlab_run(const char *lab, const char *args, char *out, size_t cap);

/* The first of @span consecutive ports for this test process (from its
 * pid), all below the kernel's ephemeral range (32768 and up): there an
 * outgoing connection, or one in TIME_WAIT, may hold a port just when a
 * daemon binds it. */
int test_port_base(int span);

/* The same, for the @attempt-th try after a port was found taken (by a
 * concurrent test of another kind): attempt 0 is test_port_base(). */
int test_port_base_try(int span, int attempt);

/* Pipes for ordering steps between processes. */
void sync_signal(int fd);
int sync_wait(int fd, int timeout_ms);	/* 0, or -1 on timeout/EOF */

#define CHECK(cond, code)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: check failed: %s\n",	\
				__FILE__, __LINE__, #cond);		\
			return (code);					\
		}							\
	} while (0)

#endif /* TALLY_TESTS_HARNESS_H */
