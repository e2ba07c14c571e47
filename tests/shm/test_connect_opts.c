// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_connect_opts.c - tally_connect_opts() and tally_connect() against
 * a stand-in daemon in a thread (no tallyd): what HELLO says and the job
 * description bytes that follow it, and the arguments refused before any
 * connection.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "shm/fdpass.h"
#include "shm/job_env.h"

/* What the stand-in daemon saw of one connection. */
struct seen {
	struct tally_msg hello;
	int hello_fds;
	struct tally_job_wire job;
	ssize_t job_bytes;	/* read after HELLO, per its arg[3] */
	bool extra;		/* bytes beyond what arg[3] announced */
};

struct daemon {
	char dir[64], path[128];
	int listen_fd;
	pthread_t thread;
	bool joined;
	struct seen seen;
};

static ssize_t read_full(int s, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = recv(s, (char *)buf + got, len - got, 0);
		if (n <= 0)
			return n < 0 ? -errno : (ssize_t)got;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Accept one client, read HELLO and its description, welcome it as rank
 * 1 of 2 with two pipe ends for doorbells, then wait for it to close. */
static void *daemon_run(void *arg)
{
	struct daemon *d = arg;
	struct seen *s = &d->seen;
	int fds[TALLY_MSG_MAX_FDS], nfds = 0, p[2][2], c;
	struct pollfd pfd;
	struct tally_msg msg;
	char byte;

	c = accept(d->listen_fd, NULL, NULL);
	if (c < 0)
		return NULL;
	if (msg_recv(c, &s->hello, fds, &nfds) == 1) {
		s->hello_fds = nfds;
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (s->hello.arg[3] <= sizeof(s->job))
			s->job_bytes = read_full(c, &s->job,
						 s->hello.arg[3]);
		pfd = (struct pollfd){ .fd = c, .events = POLLIN };
		s->extra = poll(&pfd, 1, 100) > 0 &&
			   recv(c, &byte, 1, MSG_DONTWAIT) == 1;
		if (!pipe(p[0]) && !pipe(p[1])) {
			int give[2] = { p[0][1], p[1][0] };

			msg_init(&msg, TALLY_MSG_WELCOME);
			msg.arg[0] = 1;
			msg.arg[1] = 2;
			msg_send(c, &msg, give, 2);
			for (int i = 0; i < 2; i++)
				close(p[i][0]), close(p[i][1]);
		}
		while (recv(c, &byte, 1, 0) > 0)
			;
	}
	close(c);
	return NULL;
}

static int daemon_start(void **state)
{
	struct daemon *d = calloc(1, sizeof(*d));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	assert_non_null(d);
	strcpy(d->dir, "/tmp/tally-test-XXXXXX");
	assert_non_null(mkdtemp(d->dir));
	snprintf(d->path, sizeof(d->path), "%s/sock", d->dir);
	strcpy(sa.sun_path, d->path);
	d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(d->listen_fd >= 0);
	assert_int_equal(bind(d->listen_fd, (struct sockaddr *)&sa,
			      sizeof(sa)), 0);
	assert_int_equal(listen(d->listen_fd, 4), 0);
	assert_int_equal(pthread_create(&d->thread, NULL, daemon_run, d), 0);
	*state = d;
	return 0;
}

/* The stand-in is done with its one client: d->seen is complete. */
static void daemon_wait(struct daemon *d)
{
	assert_int_equal(pthread_join(d->thread, NULL), 0);
	d->joined = true;
}

static int daemon_stop(void **state)
{
	struct daemon *d = *state;

	if (!d->joined) {
		shutdown(d->listen_fd, SHUT_RDWR);	/* wakes accept() */
		pthread_join(d->thread, NULL);
	}
	close(d->listen_fd);
	unlink(d->path);
	rmdir(d->dir);
	free(d);
	return 0;
}

/* The process's own environment: no launcher, no TALLY_* job. */
static void clear_job_env(void)
{
	static const char *const names[] = {
		"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
		"GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
		"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_PROCID",
		"SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
		"SLURM_NNODES", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
		"TALLY_JOB_ID", "TALLY_JOB_SECRET", "TALLY_COORDINATOR",
		"TALLY_HOSTS", "TALLY_HOST_RANK", "TALLY_LOCAL_SIZE",
		"TALLY_LOCAL_RANK", "TALLY_SOCKET",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		unsetenv(names[i]);
}

static void test_sends_job_after_hello(void **state)
{
	struct daemon *d = *state;
	struct tally_connect_opts opts = TALLY_CONNECT_OPTS_INIT;
	struct tally_job_wire want;
	struct tally_client *c;
	char err[128];

	clear_job_env();
	setenv("TALLY_JOB_ID", "env-job", 1);
	setenv("TALLY_LOCAL_SIZE", "2", 1);
	setenv("TALLY_JOB_SECRET", "open-sesame-please", 1);
	opts.socket = d->path;
	opts.job.local_rank = 1;
	assert_int_equal(tally_connect_opts(&opts, &c), 0);
	assert_int_equal(tally_rank(c), 1);
	assert_int_equal(tally_size(c), 2);
	tally_disconnect(c);
	daemon_wait(d);

	assert_int_equal(d->seen.hello.type, TALLY_MSG_HELLO);
	assert_int_equal(d->seen.hello.version, TALLY_PROTO_VERSION);
	assert_int_equal(d->seen.hello_fds, 1);	/* the rings' memfd */
	assert_int_equal(d->seen.hello.arg[3], sizeof(struct tally_job_wire));
	assert_int_equal(d->seen.job_bytes, sizeof(struct tally_job_wire));
	assert_false(d->seen.extra);
	assert_int_equal(job_resolve(&opts.job, 0,
				     (const char *const *)environ, &want, err,
				     sizeof(err)), 0);
	assert_memory_equal(&d->seen.job, &want, sizeof(want));
	assert_string_equal(d->seen.job.id, "env-job");
	assert_int_equal(d->seen.job.local_rank, 1);
	assert_int_equal(d->seen.job.secret_len, 18);
	clear_job_env();
}

static void test_no_job_no_description(void **state)
{
	struct daemon *d = *state;
	struct tally_client *c;

	clear_job_env();
	assert_int_equal(tally_connect(d->path, &c), 0);
	tally_disconnect(c);
	daemon_wait(d);
	assert_int_equal(d->seen.hello.version, TALLY_PROTO_VERSION);
	assert_int_equal(d->seen.hello.arg[3], 0);
	assert_false(d->seen.extra);
}

static void test_connect_reads_env(void **state)
{
	struct daemon *d = *state;
	struct tally_client *c;

	clear_job_env();
	setenv("TALLY_SOCKET", d->path, 1);
	setenv("TALLY_JOB_ID", "plain", 1);
	setenv("TALLY_LOCAL_SIZE", "2", 1);
	setenv("TALLY_LOCAL_RANK", "0", 1);
	assert_int_equal(tally_connect(NULL, &c), 0);
	tally_disconnect(c);
	daemon_wait(d);
	assert_int_equal(d->seen.hello.arg[3], sizeof(struct tally_job_wire));
	assert_string_equal(d->seen.job.id, "plain");
	assert_int_equal(d->seen.job.source, TALLY_JOB_SRC_OPTS);
	clear_job_env();
}

static void test_no_env_flag(void **state)
{
	struct daemon *d = *state;
	struct tally_connect_opts opts = TALLY_CONNECT_OPTS_INIT;
	struct tally_client *c;

	clear_job_env();
	setenv("TALLY_JOB_ID", "ignored", 1);
	opts.socket = d->path;
	opts.flags = TALLY_CONNECT_NO_ENV;
	assert_int_equal(tally_connect_opts(&opts, &c), 0);
	tally_disconnect(c);
	daemon_wait(d);
	assert_int_equal(d->seen.hello.arg[3], 0);
	clear_job_env();
}

/* Refused before connecting: the socket does not exist, so a connection
 * attempt would say TALLY_ECONNECT. */
static void test_refused_before_connecting(void **state)
{
	struct tally_connect_opts opts = TALLY_CONNECT_OPTS_INIT;
	struct tally_client *c = (struct tally_client *)&opts;

	(void)state;
	clear_job_env();
	opts.socket = "/nonexistent/tally.sock";
	assert_int_equal(tally_connect_opts(&opts, NULL), -TALLY_EINVAL);

	opts.size = sizeof(opts) - 1;
	assert_int_equal(tally_connect_opts(&opts, &c), -TALLY_EINVAL);
	assert_null(c);
	opts.size = sizeof(opts);

	opts.flags = 0x100;
	assert_int_equal(tally_connect_opts(&opts, &c), -TALLY_EINVAL);
	opts.flags = 0;

	setenv("TALLY_HOSTS", "two", 1);
	assert_int_equal(tally_connect_opts(&opts, &c), -TALLY_EINVAL);
	/* NO_ENV: the same environment is not read */
	opts.flags = TALLY_CONNECT_NO_ENV;
	assert_int_equal(tally_connect_opts(&opts, &c), -TALLY_ECONNECT);
	clear_job_env();

	/* NULL opts: all unset */
	setenv("TALLY_SOCKET", "/nonexistent/tally.sock", 1);
	assert_int_equal(tally_connect_opts(NULL, &c), -TALLY_ECONNECT);
	setenv("TALLY_LOCAL_SIZE", "1", 1);	/* a job without an id */
	assert_int_equal(tally_connect_opts(NULL, &c), -TALLY_EINVAL);
	assert_int_equal(tally_connect(NULL, &c), -TALLY_EINVAL);
	clear_job_env();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sends_job_after_hello,
						daemon_start, daemon_stop),
		cmocka_unit_test_setup_teardown(test_no_job_no_description,
						daemon_start, daemon_stop),
		cmocka_unit_test_setup_teardown(test_connect_reads_env,
						daemon_start, daemon_stop),
		cmocka_unit_test_setup_teardown(test_no_env_flag,
						daemon_start, daemon_stop),
		cmocka_unit_test(test_refused_before_connecting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
