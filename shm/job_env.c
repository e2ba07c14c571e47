// SPDX-License-Identifier: BSD-3-Clause
/*
 * job_env.c - resolve the job a client belongs to.
 *
 * Three layers, each overriding single fields of the one before:
 *   1. the launcher's environment: torchrun, else Open MPI, else Slurm
 *      (the first whose variables are all present; see from_launcher()
 *      for why Open MPI comes before Slurm);
 *   2. the TALLY_JOB_ID, TALLY_JOB_SECRET, TALLY_COORDINATOR, TALLY_HOSTS,
 *      TALLY_HOST_RANK, TALLY_LOCAL_SIZE, TALLY_LOCAL_RANK variables;
 *   3. the fields tally_connect_opts() was given.
 * TALLY_CONNECT_NO_ENV keeps only the third.  Then defaults, checks and
 * the coordinator's name lookup.  docs/jobs.md states the rules for users;
 * keep the two in step.
 *
 * A launcher variable that is present but malformed fails at once.  A
 * field a launcher cannot derive (processes not spread evenly over the
 * hosts) stays unset with the reason kept: it fails only when no later
 * layer sets the field.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/job_env.h"

enum job_num { N_HOSTS, N_HOST_RANK, N_LOCAL_SIZE, N_LOCAL_RANK, N_MAX };

static const char *const num_names[N_MAX] = {
	"hosts", "host_rank", "local_size", "local_rank",
};

/* The job as the layers build it: unset strings are NULL / empty, unset
 * numbers -1; each field remembers where it came from, for messages. */
struct job_draft {
	bool any;			/* some source named a job */
	enum tally_job_source source;

	char id[256];			/* "" unset */
	size_t id_len;			/* as built; may exceed id[] */
	const char *id_from;

	const char *secret;		/* NULL unset */
	const char *secret_from;

	char coord_host[256];		/* "" unset */
	long coord_port;		/* 0: the daemon derives it */
	bool coord_lax;			/* a launcher's guess: may be dropped
					 * for a single-host job */
	const char *coord_from;

	long num[N_MAX];
	const char *num_from[N_MAX];

	/* why a launcher left hosts/host_rank, or local_size, unset */
	char why_hosts[160];
	char why_local[160];
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -TALLY_EINVAL;
}

/* The value of @name in @envp ("NAME=value" strings), NULL when absent;
 * the first one wins, as with getenv(). */
static const char *env_get(const char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* Set and not empty: an empty TALLY_* variable counts as unset. */
static const char *env_set(const char *const *envp, const char *name)
{
	const char *v = env_get(envp, name);

	return v && *v ? v : NULL;
}

/* A decimal number of digits only (no sign, no spaces), min..max. */
static int parse_num(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int env_num(const char *const *envp, const char *name, long min,
		   long max, long *out, char *err, size_t errlen)
{
	const char *v = env_get(envp, name);

	*out = 0;
	if (parse_num(v, min, max, out))
		return fail(err, errlen, "%s='%s' is not a number in %ld..%ld",
			    name, v ? v : "", min, max);
	return 0;
}

static void set_num(struct job_draft *d, enum job_num f, long v,
		    const char *from)
{
	d->num[f] = v;
	d->num_from[f] = from;
}

static void set_id(struct job_draft *d, const char *from, const char *fmt,
		   ...) __attribute__((format(printf, 3, 4)));

static void set_id(struct job_draft *d, const char *from, const char *fmt,
		   ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(d->id, sizeof(d->id), fmt, ap);
	va_end(ap);
	d->id_len = n < 0 ? 0 : (size_t)n;
	d->id_from = from;
}

/* "host[:port]": the host is kept for the lookup at the end. */
static int set_coord(struct job_draft *d, const char *s, const char *from,
		     char *err, size_t errlen)
{
	const char *colon = strrchr(s, ':');
	size_t hlen = colon ? (size_t)(colon - s) : strlen(s);
	long port = 0;

	if (hlen == 0 || hlen >= sizeof(d->coord_host) || memchr(s, ':', hlen))
		return fail(err, errlen,
			    "%s='%s' is not an IPv4 address or host name with an optional :port",
			    from, s);
	if (colon && parse_num(colon + 1, 1, 65535, &port))
		return fail(err, errlen, "%s='%s': the port is not in 1..65535",
			    from, s);
	memcpy(d->coord_host, s, hlen);
	d->coord_host[hlen] = '\0';
	d->coord_port = port;
	d->coord_lax = false;
	d->coord_from = from;
	return 0;
}

/* A host name of a node list: letters, digits, '-', '.', '_'. */
static bool host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

int job_nodelist_first(const char *list, char *host, size_t len)
{
	const char *p = list;
	size_t n = 0;

	if (!list || !host || !len)
		return -TALLY_EINVAL;
	while (*p && *p != ',') {
		const char *q;

		if (*p != '[') {
			if (!host_char(*p) || n + 1 >= len)
				return -TALLY_EINVAL;
			host[n++] = *p++;
			continue;
		}
		/* "[01-04,7]": the first number as written (zero padding) */
		q = ++p;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q == p || (*q != '-' && *q != ',' && *q != ']') ||
		    n + (size_t)(q - p) >= len)
			return -TALLY_EINVAL;
		memcpy(host + n, p, (size_t)(q - p));
		n += (size_t)(q - p);
		while (*q && *q != ']') {
			if ((*q < '0' || *q > '9') && *q != '-' && *q != ',')
				return -TALLY_EINVAL;
			q++;
		}
		if (*q != ']')
			return -TALLY_EINVAL;
		p = q + 1;
	}
	if (n == 0)
		return -TALLY_EINVAL;
	host[n] = '\0';
	return 0;
}

/* Digits at *@p, at least 1, moving *@p past them. */
static int take_count(const char **p, long *v)
{
	char *end;

	if (**p < '0' || **p > '9')
		return -1;
	errno = 0;
	*v = strtol(*p, &end, 10);
	if (errno || *v < 1 || *v > INT_MAX)
		return -1;
	*p = end;
	return 0;
}

int job_slurm_tasks_on_node(const char *spec, long node, long *tasks)
{
	const char *p = spec;
	long found = 0;		/* counts are >= 1: 0 is not found yet */

	if (!spec || node < 0)
		return -TALLY_EINVAL;
	for (;;) {		/* the whole list must be well formed */
		long n, times = 1;

		if (take_count(&p, &n))
			return -TALLY_EINVAL;
		if (*p == '(') {
			p++;
			if (*p++ != 'x' || take_count(&p, &times) ||
			    *p++ != ')')
				return -TALLY_EINVAL;
		}
		if (!found && node < times)
			found = n;
		else if (!found)
			node -= times;
		if (!*p)
			break;
		if (*p++ != ',')
			return -TALLY_EINVAL;
	}
	if (!found)
		return -TALLY_EINVAL;	/* no entry for the node */
	*tasks = found;
	return 0;
}

static bool all_present(const char *const *envp, const char *const *names)
{
	for (; *names; names++)
		if (!env_get(envp, *names))
			return false;
	return true;
}

static const char *const torchrun_vars[] = {
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
	"MASTER_ADDR", "MASTER_PORT", NULL,
};

static int from_torchrun(const char *const *envp, struct job_draft *d,
			 char *err, size_t errlen)
{
	const char *addr = env_get(envp, "MASTER_ADDR");
	const char *run = env_get(envp, "TORCHELASTIC_RUN_ID");
	long rank, world, lrank, lworld, group, port;

	if (env_num(envp, "RANK", 0, INT_MAX, &rank, err, errlen) ||
	    env_num(envp, "WORLD_SIZE", 1, INT_MAX, &world, err, errlen) ||
	    env_num(envp, "LOCAL_RANK", 0, INT_MAX, &lrank, err, errlen) ||
	    env_num(envp, "LOCAL_WORLD_SIZE", 1, INT_MAX, &lworld, err,
		    errlen) ||
	    env_num(envp, "GROUP_RANK", 0, INT_MAX, &group, err, errlen) ||
	    env_num(envp, "MASTER_PORT", 1, 65534, &port, err, errlen))
		return -TALLY_EINVAL;
	if (rank >= world)
		return fail(err, errlen, "RANK=%ld is not below WORLD_SIZE=%ld",
			    rank, world);
	if (!*addr)
		return fail(err, errlen, "MASTER_ADDR is empty");
	if (world % lworld)
		snprintf(d->why_hosts, sizeof(d->why_hosts),
			 "WORLD_SIZE=%ld is not a multiple of LOCAL_WORLD_SIZE=%ld: set TALLY_HOSTS",
			 world, lworld);
	else
		set_num(d, N_HOSTS, world / lworld,
			"WORLD_SIZE/LOCAL_WORLD_SIZE");
	set_num(d, N_HOST_RANK, group, "GROUP_RANK");
	set_num(d, N_LOCAL_SIZE, lworld, "LOCAL_WORLD_SIZE");
	set_num(d, N_LOCAL_RANK, lrank, "LOCAL_RANK");
	if (strlen(addr) >= sizeof(d->coord_host))
		return fail(err, errlen, "MASTER_ADDR is too long");
	strcpy(d->coord_host, addr);
	d->coord_port = port + 1;	/* the port after torchrun's store */
	d->coord_lax = true;
	d->coord_from = "MASTER_ADDR";
	if (run && *run && strcmp(run, "none"))
		set_id(d, "torchrun", "torchrun:%s:%ld:%s", addr, port, run);
	else
		set_id(d, "torchrun", "torchrun:%s:%ld", addr, port);
	d->source = TALLY_JOB_SRC_TORCHRUN;
	return 0;
}

static const char *const slurm_vars[] = {
	"SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
	"SLURM_NODEID", "SLURM_NNODES", NULL,
};

static int from_slurm(const char *const *envp, struct job_draft *d,
		      char *err, size_t errlen)
{
	const char *job = env_get(envp, "SLURM_JOB_ID");
	const char *step = env_set(envp, "SLURM_STEP_ID");
	const char *tpn = "SLURM_STEP_TASKS_PER_NODE";
	const char *nodes = "SLURM_STEP_NODELIST";
	long procid, ntasks, localid, nodeid, nnodes, local;

	if (env_num(envp, "SLURM_PROCID", 0, INT_MAX, &procid, err, errlen) ||
	    env_num(envp, "SLURM_NTASKS", 1, INT_MAX, &ntasks, err, errlen) ||
	    env_num(envp, "SLURM_LOCALID", 0, INT_MAX, &localid, err,
		    errlen) ||
	    env_num(envp, "SLURM_NODEID", 0, INT_MAX, &nodeid, err, errlen) ||
	    env_num(envp, "SLURM_NNODES", 1, INT_MAX, &nnodes, err, errlen))
		return -TALLY_EINVAL;
	if (procid >= ntasks)
		return fail(err, errlen,
			    "SLURM_PROCID=%ld is not below SLURM_NTASKS=%ld",
			    procid, ntasks);
	if (!*job)
		return fail(err, errlen, "SLURM_JOB_ID is empty");
	set_num(d, N_HOSTS, nnodes, "SLURM_NNODES");
	set_num(d, N_HOST_RANK, nodeid, "SLURM_NODEID");
	set_num(d, N_LOCAL_RANK, localid, "SLURM_LOCALID");

	if (!env_set(envp, tpn))
		tpn = "SLURM_TASKS_PER_NODE";
	if (env_set(envp, tpn)) {
		if (job_slurm_tasks_on_node(env_get(envp, tpn), nodeid, &local))
			return fail(err, errlen,
				    "%s='%s' is malformed or has no entry for SLURM_NODEID=%ld",
				    tpn, env_get(envp, tpn), nodeid);
		set_num(d, N_LOCAL_SIZE, local, tpn);
	} else if (ntasks % nnodes == 0) {
		set_num(d, N_LOCAL_SIZE, ntasks / nnodes,
			"SLURM_NTASKS/SLURM_NNODES");
	} else {
		snprintf(d->why_local, sizeof(d->why_local),
			 "SLURM_NTASKS=%ld is not a multiple of SLURM_NNODES=%ld and SLURM_TASKS_PER_NODE is unset: set TALLY_LOCAL_SIZE",
			 ntasks, nnodes);
	}

	if (!env_set(envp, nodes))
		nodes = "SLURM_JOB_NODELIST";
	if (env_set(envp, nodes)) {
		if (job_nodelist_first(env_get(envp, nodes), d->coord_host,
				       sizeof(d->coord_host)))
			return fail(err, errlen, "%s='%s' is not a node list",
				    nodes, env_get(envp, nodes));
		d->coord_port = 0;
		d->coord_lax = true;
		d->coord_from = nodes;
	}
	if (step)
		set_id(d, "Slurm", "slurm:%s.%s", job, step);
	else
		set_id(d, "Slurm", "slurm:%s", job);
	d->source = TALLY_JOB_SRC_SLURM;
	return 0;
}

static const char *const ompi_vars[] = {
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", NULL,
};

static int from_ompi(const char *const *envp, struct job_draft *d,
		     char *err, size_t errlen)
{
	const char *jobid = env_set(envp, "OMPI_MCA_ess_base_jobid");
	long rank, size, lrank, lsize;

	if (env_num(envp, "OMPI_COMM_WORLD_RANK", 0, INT_MAX, &rank, err,
		    errlen) ||
	    env_num(envp, "OMPI_COMM_WORLD_SIZE", 1, INT_MAX, &size, err,
		    errlen) ||
	    env_num(envp, "OMPI_COMM_WORLD_LOCAL_RANK", 0, INT_MAX, &lrank,
		    err, errlen) ||
	    env_num(envp, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, INT_MAX, &lsize,
		    err, errlen))
		return -TALLY_EINVAL;
	if (rank >= size)
		return fail(err, errlen,
			    "OMPI_COMM_WORLD_RANK=%ld is not below OMPI_COMM_WORLD_SIZE=%ld",
			    rank, size);
	if (size % lsize) {
		snprintf(d->why_hosts, sizeof(d->why_hosts),
			 "OMPI_COMM_WORLD_SIZE=%ld is not a multiple of OMPI_COMM_WORLD_LOCAL_SIZE=%ld: set TALLY_HOSTS and TALLY_HOST_RANK",
			 size, lsize);
	} else {
		/* by-node placement: ranks fill one host after the other */
		set_num(d, N_HOSTS, size / lsize,
			"OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_LOCAL_SIZE");
		set_num(d, N_HOST_RANK, rank / lsize,
			"OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_LOCAL_SIZE");
	}
	set_num(d, N_LOCAL_SIZE, lsize, "OMPI_COMM_WORLD_LOCAL_SIZE");
	set_num(d, N_LOCAL_RANK, lrank, "OMPI_COMM_WORLD_LOCAL_RANK");
	if (jobid)
		set_id(d, "OMPI_MCA_ess_base_jobid", "ompi:%s", jobid);
	else if ((jobid = env_set(envp, "PMIX_NAMESPACE")))
		set_id(d, "PMIX_NAMESPACE", "ompi:%s", jobid);
	d->source = TALLY_JOB_SRC_OMPI;
	return 0;
}

/*
 * Open MPI before Slurm: the processes mpirun starts inside a Slurm
 * allocation inherit, through Open MPI's per-node daemons, the Slurm
 * variables of the step that started those daemons (one task per node),
 * so when both sets are present Open MPI's describe the real launch.
 */
static int from_launcher(const char *const *envp, struct job_draft *d,
			 char *err, size_t errlen)
{
	int (*from)(const char *const *, struct job_draft *, char *, size_t);

	if (all_present(envp, torchrun_vars))
		from = from_torchrun;
	else if (all_present(envp, ompi_vars))
		from = from_ompi;
	else if (all_present(envp, slurm_vars))
		from = from_slurm;
	else
		return 0;
	d->any = true;
	return from(envp, d, err, errlen);
}

static const char *const tally_num_vars[N_MAX] = {
	"TALLY_HOSTS", "TALLY_HOST_RANK", "TALLY_LOCAL_SIZE",
	"TALLY_LOCAL_RANK",
};

static int from_tally_env(const char *const *envp, struct job_draft *d,
			  char *err, size_t errlen)
{
	const char *v;
	long n;

	if ((v = env_set(envp, "TALLY_JOB_ID"))) {
		set_id(d, "TALLY_JOB_ID", "%s", v);
		d->any = true;
	}
	/* a credential, not a job: alone it names none (the daemons of a
	 * job started on their command line read the same variable) */
	if ((v = env_set(envp, "TALLY_JOB_SECRET"))) {
		d->secret = v;
		d->secret_from = "TALLY_JOB_SECRET";
	}
	if ((v = env_set(envp, "TALLY_COORDINATOR"))) {
		d->any = true;
		if (set_coord(d, v, "TALLY_COORDINATOR", err, errlen))
			return -TALLY_EINVAL;
	}
	for (int f = 0; f < N_MAX; f++) {
		if (!env_set(envp, tally_num_vars[f]))
			continue;
		d->any = true;
		if (env_num(envp, tally_num_vars[f], 0, INT_MAX, &n, err,
			    errlen))
			return -TALLY_EINVAL;
		set_num(d, f, n, tally_num_vars[f]);
	}
	return 0;
}

static int from_given(const struct tally_job *g, struct job_draft *d,
		      char *err, size_t errlen)
{
	const int v[N_MAX] = {
		g->hosts, g->host_rank, g->local_size, g->local_rank,
	};
	/* unset: 0 for the sizes, -1 for the ranks */
	const int unset[N_MAX] = { 0, -1, 0, -1 };

	if (g->id) {
		set_id(d, "tally_job.id", "%s", g->id);
		d->any = true;
	}
	if (g->secret) {
		d->secret = g->secret;
		d->secret_from = "tally_job.secret";
		d->any = true;
	}
	if (g->coordinator) {
		d->any = true;
		if (set_coord(d, g->coordinator, "tally_job.coordinator", err,
			      errlen))
			return -TALLY_EINVAL;
	}
	for (int f = 0; f < N_MAX; f++) {
		if (v[f] == unset[f])
			continue;
		d->any = true;
		if (v[f] < 0)
			return fail(err, errlen, "tally_job.%s=%d is negative",
				    num_names[f], v[f]);
		set_num(d, f, v[f], "tally_job");
	}
	return 0;
}

/* An IPv4 literal, else a name looked up for an IPv4 address.  0 or a
 * getaddrinfo() error. */
static int resolve_ipv4(const char *host, uint32_t *ip)
{
	struct addrinfo hints = {
		.ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
	};
	struct addrinfo *res;
	struct in_addr a;
	int ret;

	if (inet_pton(AF_INET, host, &a) == 1) {
		*ip = ntohl(a.s_addr);
		return 0;
	}
	ret = getaddrinfo(host, NULL, &hints, &res);
	if (ret)
		return ret;
	*ip = ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr);
	freeaddrinfo(res);
	return 0;
}

static bool id_printable(const char *id)
{
	for (; *id; id++)
		if (*id <= ' ' || *id > '~')
			return false;
	return true;
}

static int check_num(const struct job_draft *d, enum job_num f, long min,
		     long max, char *err, size_t errlen)
{
	if (d->num[f] < min || d->num[f] > max)
		return fail(err, errlen, "%s=%ld (from %s) is not in %ld..%ld",
			    num_names[f], d->num[f], d->num_from[f], min, max);
	return 0;
}

static int check_rank(const struct job_draft *d, enum job_num rank,
		      enum job_num size, char *err, size_t errlen)
{
	if (d->num[rank] >= d->num[size])
		return fail(err, errlen,
			    "%s=%ld (from %s) is not below %s=%ld (from %s)",
			    num_names[rank], d->num[rank], d->num_from[rank],
			    num_names[size], d->num[size], d->num_from[size]);
	return 0;
}

/* Defaults and checks, then the wire form. */
static int finish(struct job_draft *d, struct tally_job_wire *out,
		  char *err, size_t errlen)
{
	uint32_t ip = 0;
	size_t slen;

	if ((d->num[N_HOSTS] < 0 || d->num[N_HOST_RANK] < 0) &&
	    d->why_hosts[0])
		return fail(err, errlen, "%s", d->why_hosts);
	if (d->num[N_LOCAL_SIZE] < 0 && d->why_local[0])
		return fail(err, errlen, "%s", d->why_local);
	if (d->num[N_HOSTS] < 0)
		set_num(d, N_HOSTS, 1, "the default");
	if (d->num[N_HOST_RANK] < 0)
		set_num(d, N_HOST_RANK, 0, "the default");

	if (!d->id_from)
		return fail(err, errlen,
			    "no job id: set TALLY_JOB_ID or tally_job.id");
	if (d->id_len == 0 || d->id_len >= TALLY_JOB_ID_MAX)
		return fail(err, errlen,
			    "job id from %s is %zu bytes, not 1..%d: set TALLY_JOB_ID",
			    d->id_from, d->id_len, TALLY_JOB_ID_MAX - 1);
	if (!id_printable(d->id))
		return fail(err, errlen,
			    "job id '%s' from %s has a space or a character that is not printable ASCII",
			    d->id, d->id_from);
	if (d->num[N_LOCAL_SIZE] < 0)
		return fail(err, errlen,
			    "job '%s' has no local size: set TALLY_LOCAL_SIZE or tally_job.local_size",
			    d->id);
	if (d->num[N_LOCAL_RANK] < 0)
		return fail(err, errlen,
			    "job '%s' has no local rank: set TALLY_LOCAL_RANK or tally_job.local_rank",
			    d->id);
	if (check_num(d, N_HOSTS, 1, JOB_MAX_HOSTS, err, errlen) ||
	    check_num(d, N_LOCAL_SIZE, 1, JOB_MAX_LOCAL, err, errlen) ||
	    check_rank(d, N_HOST_RANK, N_HOSTS, err, errlen) ||
	    check_rank(d, N_LOCAL_RANK, N_LOCAL_SIZE, err, errlen))
		return -TALLY_EINVAL;
	slen = d->secret ? strlen(d->secret) : 0;
	if (slen > TALLY_JOB_SECRET_MAX)
		return fail(err, errlen,
			    "the secret from %s is %zu bytes, at most %d",
			    d->secret_from, slen, TALLY_JOB_SECRET_MAX);
	if (slen && slen < TALLY_JOB_SECRET_MIN)
		return fail(err, errlen,
			    "the secret from %s is %zu bytes, at least %d",
			    d->secret_from, slen, TALLY_JOB_SECRET_MIN);

	if (d->coord_host[0]) {
		int ret = resolve_ipv4(d->coord_host, &ip);

		if (!ret && ip == 0)
			ret = EAI_NONAME;
		if (ret && !(d->coord_lax && d->num[N_HOSTS] == 1))
			return fail(err, errlen,
				    "coordinator '%s' from %s is not an IPv4 address or a name with one (%s)",
				    d->coord_host, d->coord_from,
				    gai_strerror(ret));
		if (ret)	/* a launcher's guess, not needed: dropped */
			ip = 0, d->coord_port = 0;
	}
	if (!ip && d->num[N_HOSTS] > 1)
		return fail(err, errlen,
			    "job '%s' has %ld hosts but no coordinator: set TALLY_COORDINATOR or tally_job.coordinator",
			    d->id, d->num[N_HOSTS]);

	memcpy(out->id, d->id, d->id_len + 1);
	if (slen)
		memcpy(out->secret, d->secret, slen);
	out->secret_len = (uint32_t)slen;
	out->coord_ip = ip;
	out->coord_port = ip ? (uint16_t)d->coord_port : 0;
	out->hosts = (uint16_t)d->num[N_HOSTS];
	out->host_rank = (uint16_t)d->num[N_HOST_RANK];
	out->local_size = (uint16_t)d->num[N_LOCAL_SIZE];
	out->local_rank = (uint16_t)d->num[N_LOCAL_RANK];
	out->source = (uint16_t)d->source;
	return 0;
}

int job_resolve(const struct tally_job *given, unsigned int flags,
		const char *const *envp, struct tally_job_wire *out,
		char *err, size_t errlen)
{
	struct job_draft d = { .source = TALLY_JOB_SRC_OPTS };
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!out)
		return fail(err, errlen, "no place for the job description");
	memset(out, 0, sizeof(*out));
	for (int f = 0; f < N_MAX; f++)
		d.num[f] = -1;
	if (flags & ~TALLY_CONNECT_NO_ENV)
		return fail(err, errlen, "unknown flags 0x%x",
			    flags & ~TALLY_CONNECT_NO_ENV);
	if (!(flags & TALLY_CONNECT_NO_ENV)) {
		ret = from_launcher(envp, &d, err, errlen);
		if (!ret)
			ret = from_tally_env(envp, &d, err, errlen);
		if (ret)
			return ret;
	}
	if (given && from_given(given, &d, err, errlen))
		return -TALLY_EINVAL;
	if (!d.any)
		return 1;
	return finish(&d, out, err, errlen);
}
