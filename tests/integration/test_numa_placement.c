// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_numa_placement.c - [daemon] cpus and numa_node on a real tallyd
 * (docs/numa.md), read back from outside as an operator would: the
 * reduce threads' Cpus_allowed_list in /proc/PID/task, the memory policy
 * in /proc/PID/numa_maps, the exit status and message of a daemon given a
 * node or CPU this host does not have.
 *
 * Expectations come from the kernel, not from tallyd: node 0's CPUs from
 * sysfs, the test's own affinity from /proc/self/status.  A teardown
 * stops every daemon a failed check leaves behind.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <tally/tally.h>
#include "harness.h"

#define NCLIENTS 2
#define COUNT (1u << 18)	/* 1 MiB of float32: the helpers take shares */
#define REDUCE_THREAD_PREFIX "tly-reduce"	/* dataplane/reduce_pool.h */

struct fixture {
	struct test_daemon d;	/* a daemon that started */
	pid_t child;		/* a daemon expected to refuse */
	char dir[64];		/* its log's directory */
};

static int setup(void **state)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	if (f->d.pid > 0 || f->d.dir[0])
		daemon_stop(&f->d);
	if (f->child > 0) {
		kill(f->child, SIGKILL);
		waitpid(f->child, NULL, 0);
	}
	if (f->dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
		(void)!system(cmd);
	}
	return 0;
}

/* The value of "@key:" in a /proc status file, blanks trimmed. */
static int status_value(const char *path, const char *key, char *out,
			size_t len)
{
	FILE *f = fopen(path, "r");
	char line[512];
	size_t klen = strlen(key);
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *v = line + klen + 1;

		if (strncmp(line, key, klen) || line[klen] != ':')
			continue;
		v += strspn(v, " \t");
		v[strcspn(v, "\n")] = '\0';
		snprintf(out, len, "%s", v);
		found = 0;
		break;
	}
	fclose(f);
	return found;
}

static void first_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "r");

	out[0] = '\0';
	if (f) {
		if (!fgets(out, (int)len, f))
			out[0] = '\0';
		fclose(f);
	}
	out[strcspn(out, "\n")] = '\0';
}

/*
 * The daemon's reduce helpers: counts them, and fails the test on one
 * whose CPUs are not @want.  The control thread (TID = PID) must keep
 * @control: only the helpers are pinned.
 */
static int check_reduce_threads(pid_t pid, const char *want,
				const char *control)
{
	char path[320], comm[32], cpus[256];
	struct dirent *e;
	DIR *dir;
	int helpers = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	assert_non_null(dir);
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm",
			 (int)pid, e->d_name);
		first_line(path, comm, sizeof(comm));
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status",
			 (int)pid, e->d_name);
		assert_int_equal(status_value(path, "Cpus_allowed_list", cpus,
					      sizeof(cpus)), 0);
		if (atoi(e->d_name) == pid) {
			if (strcmp(cpus, control))
				fail_msg("control thread on %s, want %s", cpus,
					 control);
			continue;
		}
		if (strncmp(comm, REDUCE_THREAD_PREFIX,
			    strlen(REDUCE_THREAD_PREFIX)))
			continue;
		helpers++;
		if (strcmp(cpus, want))
			fail_msg("%s (TID %s) on CPUs %s, want %s", comm,
				 e->d_name, cpus, want);
	}
	closedir(dir);
	return helpers;
}

/* Lines of /proc/PID/numa_maps whose policy (the second field) is
 * @policy; the task's policy shows on every mapping without its own. */
static int numa_maps_lines_with(pid_t pid, const char *policy, int *lines)
{
	char path[64], line[1024], field[64];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/numa_maps", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	*lines = 0;
	while (fgets(line, sizeof(line), f)) {
		(*lines)++;
		if (sscanf(line, "%*s %63s", field) == 1 &&
		    !strcmp(field, policy))
			n++;
	}
	fclose(f);
	return n;
}

static int value(int rank, size_t i)
{
	return (int)((i * 13 + (size_t)rank * 5) % 17) - 8;
}

/* One large SUM through the pinned daemon, checked exactly (small
 * integers: every partial sum is exact in float32). */
static int client_sum(void *p)
{
	const char *sock = p;
	struct tally_client *c;
	struct tally_allreduce_args args = { .count = COUNT,
					     .dtype = TALLY_FLOAT32,
					     .op = TALLY_SUM };
	uint64_t req;
	float *buf;
	int rank;

	CHECK(tally_connect(sock, &c) == 0, 2);
	rank = tally_rank(c);
	buf = tally_alloc(c, COUNT * sizeof(float));
	CHECK(buf, 3);
	for (size_t i = 0; i < COUNT; i++)
		buf[i] = (float)value(rank, i);
	args.sendbuf = args.recvbuf = buf;
	CHECK(tally_allreduce(c, &args, &req) == 0, 4);
	CHECK(tally_wait(c, req, 10000) == 0, 5);
	for (size_t i = 0; i < COUNT; i++) {
		int want = 0;

		for (int r = 0; r < NCLIENTS; r++)
			want += value(r, i);
		CHECK(buf[i] == (float)want, 6);
	}
	tally_free(c, buf);
	tally_disconnect(c);
	return 0;
}

static void run_clients(const char *sock)
{
	pid_t kids[NCLIENTS];

	for (int i = 0; i < NCLIENTS; i++)
		kids[i] = child_start(client_sum, (void *)sock);
	for (int i = 0; i < NCLIENTS; i++)
		assert_int_equal(child_wait(kids[i], 30000), 0);
}

static void test_cpus_pin_reduce_threads(void **state)
{
	struct fixture *f = *state;
	char self[256], set[32], want_log[64];
	int cpus[2] = { -1, -1 };
	cpu_set_t mine;

	assert_int_equal(status_value("/proc/self/status", "Cpus_allowed_list",
				      self, sizeof(self)), 0);
	/* the highest and the lowest CPU we may use: 1, then 0 here */
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &mine)) {
			if (cpus[1] < 0)
				cpus[1] = cpu;
			cpus[0] = cpu;
		}
	for (int i = 0; i < 2 && (i == 0 || cpus[1] != cpus[0]); i++) {
		const char *extra[] = { "--set", set, NULL };
		int cpu = cpus[i];

		snprintf(set, sizeof(set), "daemon.cpus=%d", cpu);
		assert_int_equal(daemon_start(&f->d, NCLIENTS, extra), 0);
		snprintf(set, sizeof(set), "%d", cpu);
		/* the harness starts it with --reduce-threads 2: 1 helper */
		assert_int_equal(check_reduce_threads(f->d.pid, set, self), 1);
		snprintf(want_log, sizeof(want_log),
			 "placement: reduce threads on CPUs %d ", cpu);
		assert_int_equal(daemon_log_count(&f->d, want_log), 1);
		run_clients(f->d.sock);
		/* still there after work */
		assert_int_equal(check_reduce_threads(f->d.pid, set, self), 1);
		assert_int_equal(daemon_stop(&f->d), 0);
	}
}

/* numa_node alone: the helpers on the node's CPUs, the memory policy
 * "prefer:0" on the daemon's mappings; without it, the default policy. */
static void test_numa_node_places_threads_and_memory(void **state)
{
	struct fixture *f = *state;
	const char *extra[] = { "--set", "daemon.numa_node=0", NULL };
	char node_cpus[256], self[256], online[256];
	int lines, n;

	first_line("/sys/devices/system/node/node0/cpulist", node_cpus,
		   sizeof(node_cpus));
	if (!node_cpus[0])
		skip();		/* no NUMA in this kernel */
	assert_int_equal(status_value("/proc/self/status", "Cpus_allowed_list",
				      self, sizeof(self)), 0);
	first_line("/sys/devices/system/cpu/online", online, sizeof(online));
	/* the node's CPUs that the daemon may use: all of them, unless the
	 * test runs under a narrower affinity (taskset) on a one-node host */
	if (strcmp(self, online)) {
		if (strcmp(node_cpus, online))
			skip();
		snprintf(node_cpus, sizeof(node_cpus), "%s", self);
	}
	assert_int_equal(daemon_start(&f->d, NCLIENTS, extra), 0);
	assert_int_equal(check_reduce_threads(f->d.pid, node_cpus, self), 1);
	n = numa_maps_lines_with(f->d.pid, "prefer:0", &lines);
	assert_true(lines > 0);
	assert_int_equal(n, lines);
	assert_int_equal(daemon_log_count(&f->d,
					  "placement: memory prefers node 0"),
			 1);
	run_clients(f->d.sock);
	assert_int_equal(daemon_stop(&f->d), 0);

	/* the same daemon without the key: nothing placed */
	assert_int_equal(daemon_start(&f->d, NCLIENTS, NULL), 0);
	n = numa_maps_lines_with(f->d.pid, "default", &lines);
	assert_true(lines > 0);
	assert_int_equal(n, lines);
	assert_int_equal(daemon_log_count(&f->d, "placement:"), 0);
	assert_int_equal(daemon_stop(&f->d), 0);
}

/* Run tallyd with @set; it must exit non-zero within 5 s and say
 * @needle.  Not through daemon_start(): that one waits for a socket. */
static void expect_refusal(struct fixture *f, const char *set,
			   const char *needle)
{
	const char *bin = getenv("TALLYD");
	char sock[128], log[128], cmd[256];
	int status = 0, fd;
	pid_t r = 0;

	assert_non_null(bin);
	snprintf(f->dir, sizeof(f->dir), "/tmp/tally-numa-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(sock, sizeof(sock), "%s/tallyd.sock", f->dir);
	snprintf(log, sizeof(log), "%s/tallyd.log", f->dir);
	fflush(NULL);
	f->child = fork();
	assert_true(f->child >= 0);
	if (f->child == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(bin, bin, "--socket", sock, "--set", set, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && r != f->child; i++) {
		r = waitpid(f->child, &status, WNOHANG);
		if (r != f->child)
			usleep(10000);
	}
	assert_int_equal(r, f->child);		/* it did not keep running */
	f->child = 0;
	assert_true(WIFEXITED(status));
	assert_int_not_equal(WEXITSTATUS(status), 0);
	snprintf(cmd, sizeof(cmd), "grep -qF -- \"%s\" %s", needle, log);
	if (system(cmd) != 0) {
		snprintf(cmd, sizeof(cmd), "cat %s >&2", log);
		(void)!system(cmd);
		fail_msg("the log does not say \"%s\"", needle);
	}
	assert_int_equal(can_connect(sock), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	(void)!system(cmd);
	f->dir[0] = '\0';
}

static void test_refuses_bad_node_and_cpus(void **state)
{
	struct fixture *f = *state;
	char set[64], needle[64];
	long conf = sysconf(_SC_NPROCESSORS_CONF);

	/* this host has node 0 only */
	expect_refusal(f, "daemon.numa_node=7", "daemon.numa_node = 7");
	/* a CPU past the host's last, a form the kernel does not write */
	snprintf(set, sizeof(set), "daemon.cpus=%ld", conf);
	snprintf(needle, sizeof(needle), "daemon.cpus = '%ld'", conf);
	expect_refusal(f, set, needle);
	expect_refusal(f, "daemon.cpus=all", "bad value 'all' for daemon.cpus");
	expect_refusal(f, "daemon.numa_node=-2",
		       "bad value '-2' for daemon.numa_node");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cpus_pin_reduce_threads,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_numa_node_places_threads_and_memory, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_refuses_bad_node_and_cpus,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
