// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_notify.c - tallyd under a service manager's notification socket
 * (sd_notify(3)): the test binds the datagram socket of $NOTIFY_SOCKET
 * itself and checks that READY=1 comes only once the client socket
 * accepts (and, in a multi-host job, only once the job is formed), that
 * a SIGHUP reload says RELOADING=1 then READY=1, and that SIGTERM says
 * STOPPING=1 before the daemon exits.
 */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cluster_harness.h"

struct notify {
	char dir[64];
	char path[100];
	int fd;
	char msg[1024];		/* the last datagram */
};

static void notify_open(struct notify *n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(n->dir, sizeof(n->dir), "/tmp/tally-notify-XXXXXX");
	assert_non_null(mkdtemp(n->dir));
	snprintf(n->path, sizeof(n->path), "%s/notify", n->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", n->path);
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(n->fd >= 0);
	assert_int_equal(bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

static void notify_close(struct notify *n)
{
	close(n->fd);
	unlink(n->path);
	rmdir(n->dir);
}

/* The next datagram into n->msg within @timeout_ms: 0, or -1. */
static int notify_next(struct notify *n, int timeout_ms)
{
	struct pollfd p = { .fd = n->fd, .events = POLLIN };
	ssize_t len;

	if (poll(&p, 1, timeout_ms) != 1)
		return -1;
	len = recv(n->fd, n->msg, sizeof(n->msg) - 1, 0);
	if (len < 0)
		return -1;
	n->msg[len] = '\0';
	return 0;
}

/* Does the datagram hold the line @var (e.g. "READY=1")? */
static int has_line(const char *msg, const char *var)
{
	size_t len = strlen(var);

	for (const char *p = msg; (p = strstr(p, var)); p += len)
		if ((p == msg || p[-1] == '\n') &&
		    (p[len] == '\0' || p[len] == '\n'))
			return 1;
	return 0;
}

/* Read datagrams until one holds @var, at most @timeout_ms. */
static int notify_wait(struct notify *n, const char *var, int timeout_ms)
{
	uint64_t end = test_now_ms() + (uint64_t)timeout_ms;

	while (test_now_ms() < end) {
		if (notify_next(n, (int)(end - test_now_ms())))
			break;
		if (has_line(n->msg, var))
			return 0;
	}
	fprintf(stderr, "no %s from the daemon\n", var);
	return -1;
}

/*
 * Start $TALLYD with @args (NULL-ended, after the binary) under
 * $NOTIFY_SOCKET = @n, log to @log, and return at once: unlike
 * daemon_start(), which waits for the socket, the test watches the order.
 */
static pid_t spawn(const struct notify *n, const char *log,
		   const char *const *args)
{
	const char *argv[32] = { getenv("TALLYD") };
	int argc = 1;
	pid_t pid;

	assert_non_null(argv[0]);
	for (int i = 0; args[i] && argc < 31; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setenv("NOTIFY_SOCKET", n->path, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* SIGTERM: STOPPING=1, then a clean exit. */
static void stop(struct notify *n, pid_t pid)
{
	int status = 0;

	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(notify_wait(n, "STOPPING=1", 5000), 0);
	for (int i = 0; waitpid(pid, &status, WNOHANG) != pid; i++) {
		if (i == 500)
			kill(pid, SIGKILL);
		assert_true(i < 600);
		usleep(10000);
	}
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_ready_reload_stopping(void **state)
{
	struct notify n;
	char sock[100], log[128], conf[128];
	const char *args[] = { "--socket", sock, "--local-size", "2",
			       "--config", conf, NULL };
	pid_t pid;
	FILE *f;

	(void)state;
	notify_open(&n);
	snprintf(sock, sizeof(sock), "%s/tallyd.sock", n.dir);
	snprintf(log, sizeof(log), "%s/tallyd.log", n.dir);
	snprintf(conf, sizeof(conf), "%s/tally.conf", n.dir);
	f = fopen(conf, "w");
	assert_non_null(f);
	fputs("[daemon]\nstuck_ms = 5000\n", f);
	fclose(f);
	pid = spawn(&n, log, args);
	/* whatever comes first, READY=1 finds the socket accepting */
	for (;;) {
		assert_int_equal(notify_next(&n, 10000), 0);
		if (has_line(n.msg, "READY=1"))
			break;
	}
	assert_true(can_connect(sock));
	/* the status that follows says how many clients there are */
	if (!strstr(n.msg, "clients connected"))
		assert_int_equal(notify_wait(&n, "STATUS=0 of 2 clients "
					     "connected; 0 operations done, 0 "
					     "failed", 5000), 0);

	assert_int_equal(kill(pid, SIGHUP), 0);
	assert_int_equal(notify_wait(&n, "RELOADING=1", 5000), 0);
	assert_int_equal(notify_wait(&n, "READY=1", 5000), 0);
	assert_non_null(strstr(n.msg, "STATUS=reloaded"));
	stop(&n, pid);
	unlink(sock);
	unlink(log);
	unlink(conf);
	notify_close(&n);
}

/* A multi-host job: rank 0 listens at once but is ready only once rank 1
 * has joined and the roster arrived. */
static void test_ready_after_join(void **state)
{
	struct notify n;
	struct test_daemon d1;
	char sock[100], log[128], coord[32], addr0[32], addr1[32];
	int port = test_port_base(3);
	const char *args[] = { "--socket", sock, "--local-size", "1",
			       "--world", "2", "--rank", "0",
			       "--coordinator", coord, "--address", addr0,
			       "--job-key", "77", NULL };
	const char *extra1[] = { "--world", "2", "--rank", "1",
				 "--coordinator", coord, "--address", addr1,
				 "--job-key", "77", NULL };
	pid_t pid;

	(void)state;
	cluster_default_secret();
	notify_open(&n);
	snprintf(sock, sizeof(sock), "%s/tallyd.sock", n.dir);
	snprintf(log, sizeof(log), "%s/tallyd.log", n.dir);
	snprintf(coord, sizeof(coord), "127.0.0.1:%d", port);
	snprintf(addr0, sizeof(addr0), "127.0.0.1:%d", port + 1);
	snprintf(addr1, sizeof(addr1), "127.0.0.1:%d", port + 2);
	pid = spawn(&n, log, args);
	for (int i = 0; i < 500 && !can_connect(sock); i++)
		usleep(10000);
	assert_true(can_connect(sock));
	/* alone, the job is not formed: no READY=1 however long we wait
	 * (a second is plenty for a daemon that would send it) */
	while (notify_next(&n, 1000) == 0)
		assert_false(has_line(n.msg, "READY=1"));

	assert_int_equal(daemon_start(&d1, 1, extra1), 0);
	assert_int_equal(notify_wait(&n, "READY=1", 10000), 0);
	stop(&n, pid);
	assert_int_equal(daemon_stop(&d1), 0);
	unlink(sock);
	unlink(log);
	notify_close(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ready_reload_stopping),
		cmocka_unit_test(test_ready_after_join),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
