// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_job_desc.c - libFuzzer target for the job a client names: the
 * daemon's side (ctrl/job_desc.c: daemon_job_desc_check() on the struct
 * tally_job_wire that follows a HELLO, and daemon_job_config() on the ones
 * it accepts) and the client's (shm/job_env.c: job_resolve() on an
 * environment and tally_connect_opts() fields).
 *
 * Input: one byte of set-up, then the rest.
 *   setup & 0x80 == 0  the rest is a struct tally_job_wire (zero-filled
 *                      when short), checked under the daemon configuration
 *                      the low bits pick: 1 service.enabled, 2
 *                      service.require_secret, 4 dataplane.address set,
 *                      8 transport dpdk instead of udp.
 *   setup & 0x80       the rest is text, one "NAME=value" environment
 *                      string per line; lines "opt.FIELD=value" set that
 *                      field of struct tally_job instead (id, secret,
 *                      coordinator, hosts, host_rank, local_size,
 *                      local_rank) and a line "opt.noenv" passes
 *                      TALLY_CONNECT_NO_ENV.
 *
 * Checks: an accepted description makes a job configuration with rank <
 * world, a local size in 1..CONFIG_MAX_LOCAL_SIZE above the local rank, a
 * coordinator port, an address and coordinator when it spans hosts, the
 * daemon's require_secret honoured, that config_check() accepts; a refused
 * one says why.  job_resolve() returns 0, 1 or -TALLY_EINVAL with a reason,
 * leaves the description zeroed unless it returns 0, gives the same answer
 * twice, and what it accepts the daemon accepts too (on a default service
 * configuration with dataplane.address set).
 *
 * Host names are not looked up: getaddrinfo() is replaced here by a
 * deterministic stand-in (a fuzzer must not wait on DNS), under which
 * "localhost" and names starting "node" resolve (to 127.0.0.1 and 10.x.y.z
 * from a hash of the name; "node0" to 0.0.0.0, which job_env.c refuses)
 * and every other name is unknown.
 */
#include <limits.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <tally/tally.h>
#include "ctrl/auth.h"
#include "ctrl/bootstrap.h"
#include "ctrl/config.h"
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "fuzz_input.h"
#include "shm/job_env.h"

#define MAX_LINES 128

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_job_desc: %s\n", what);
	abort();
}

/* --- the name lookup job_env.c does, without DNS --- */

struct fake_ai {
	struct addrinfo ai;
	struct sockaddr_in sin;
};

int getaddrinfo(const char *node, const char *service,
		const struct addrinfo *hints, struct addrinfo **res)
{
	struct fake_ai *f;
	uint32_t ip, h = 2166136261u;

	(void)service;
	if (!node || !res)
		return EAI_NONAME;
	if (hints && hints->ai_family != AF_INET &&
	    hints->ai_family != AF_UNSPEC)
		return EAI_FAMILY;
	if (!strcmp(node, "localhost")) {
		ip = INADDR_LOOPBACK;
	} else if (!strncmp(node, "node", 4)) {
		for (const char *p = node; *p; p++)
			h = (h ^ (uint8_t)*p) * 16777619u;
		ip = !strcmp(node, "node0") ? 0 : 0x0a000000u | (h & 0xffffff);
	} else {
		return EAI_NONAME;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return EAI_MEMORY;
	f->sin.sin_family = AF_INET;
	f->sin.sin_addr.s_addr = htonl(ip);
	f->ai.ai_family = AF_INET;
	f->ai.ai_socktype = SOCK_STREAM;
	f->ai.ai_addrlen = sizeof(f->sin);
	f->ai.ai_addr = (struct sockaddr *)&f->sin;
	*res = &f->ai;
	return 0;
}

void freeaddrinfo(struct addrinfo *res)
{
	free(res);	/* the struct fake_ai it is the start of */
}

/* --- the daemon's side --- */

static void daemon_config(struct tally_config *cfg, uint8_t setup)
{
	config_defaults(cfg);
	cfg->service = setup & 1;
	cfg->require_secret = (setup & 2) != 0;
	if (setup & 4) {
		cfg->address.ip = 0x0a000001u;	/* 10.0.0.1 */
		cfg->address.port = 9191;
	}
	if (setup & 8)
		snprintf(cfg->transport, sizeof(cfg->transport), "dpdk");
}

static void check_accepted(const struct tally_config *cfg,
			   const struct tally_job_wire *w)
{
	struct tally_config out;
	char err[256];

	if (strnlen(w->id, sizeof(w->id)) == 0 ||
	    strnlen(w->id, sizeof(w->id)) >= sizeof(w->id))
		fail("accepted an id that is empty or not NUL-terminated");
	if (w->secret_len > sizeof(w->secret) ||
	    (w->secret_len && w->secret_len < AUTH_SECRET_MIN) ||
	    (cfg->require_secret && !w->secret_len))
		fail("accepted a secret it should have refused");
	daemon_job_config(cfg, w, &out);
	if (out.service)
		fail("a job's configuration is a service's");
	if (out.world < 1 || out.world > BOOT_MAX_MEMBERS ||
	    out.rank < 0 || out.rank >= out.world)
		fail("a job whose rank is not below its world");
	if (out.local_size < 1 || out.local_size > CONFIG_MAX_LOCAL_SIZE ||
	    w->local_rank >= out.local_size)
		fail("a job whose local size is out of range");
	if (out.coordinator.port == 0)
		fail("a job without a coordinator port");
	if (w->coord_port && out.coordinator.port != w->coord_port)
		fail("the client's coordinator port was not kept");
	if (out.world > 1 &&
	    (!out.coordinator.ip || !out.address.ip ||
	     strcmp(out.transport, "udp")))
		fail("a job on several hosts without what a cluster needs");
	if (out.address.port != 0 || out.secret_file[0])
		fail("a job kept the daemon's data port or secret file");
	if (config_check(&out, err, sizeof(err))) {
		fprintf(stderr, "config_check: %s\n", err);
		fail("daemon_job_config made a configuration config_check "
		     "refuses");
	}
}

static void fuzz_wire(uint8_t setup, struct fuzz_in *in)
{
	struct tally_config cfg;
	struct tally_job_wire w;
	const char *why = NULL;
	int ret;

	daemon_config(&cfg, setup);
	fuzz_bytes(in, &w, sizeof(w));
	ret = daemon_job_desc_check(&cfg, &w, &why);
	if (ret == 0) {
		if (why)
			fail("accepted with a reason to refuse");
		check_accepted(&cfg, &w);
	} else if (ret != -TALLY_EDENIED || !why || !*why) {
		fail("refused without -TALLY_EDENIED and a reason");
	}
}

/* --- the client's side --- */

struct env_input {
	char text[4096];
	const char *envp[MAX_LINES + 1];
	struct tally_job given;
	bool have_given;
	unsigned int flags;
};

static int opt_int(const char *v)
{
	long n = strtol(v, NULL, 10);

	return n < INT_MIN ? INT_MIN : n > INT_MAX ? INT_MAX : (int)n;
}

/* "opt.FIELD=value": a field of the caller's struct tally_job. */
static void set_opt(struct env_input *e, char *line)
{
	char *eq = strchr(line, '=');
	const char *name = line + 4, *v = eq ? eq + 1 : "";

	if (eq)
		*eq = '\0';
	if (!strcmp(name, "noenv")) {
		e->flags |= TALLY_CONNECT_NO_ENV;
		return;
	}
	e->have_given = true;
	if (!strcmp(name, "id"))
		e->given.id = v;
	else if (!strcmp(name, "secret"))
		e->given.secret = v;
	else if (!strcmp(name, "coordinator"))
		e->given.coordinator = v;
	else if (!strcmp(name, "hosts"))
		e->given.hosts = opt_int(v);
	else if (!strcmp(name, "host_rank"))
		e->given.host_rank = opt_int(v);
	else if (!strcmp(name, "local_size"))
		e->given.local_size = opt_int(v);
	else if (!strcmp(name, "local_rank"))
		e->given.local_rank = opt_int(v);
}

static void parse_env(struct env_input *e, struct fuzz_in *in)
{
	size_t n = fuzz_bytes(in, e->text, sizeof(e->text) - 1), k = 0;
	char *p = e->text;

	e->text[n] = '\0';
	e->given = (struct tally_job){ .host_rank = -1, .local_rank = -1 };
	e->have_given = false;
	e->flags = 0;
	while (p < e->text + n && k < MAX_LINES) {
		char *nl = memchr(p, '\n', (size_t)(e->text + n - p));

		if (nl)
			*nl = '\0';
		if (!strncmp(p, "opt.", 4))
			set_opt(e, p);
		else
			e->envp[k++] = p;
		if (!nl)
			break;
		p = nl + 1;
	}
	e->envp[k] = NULL;
}

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static void fuzz_env(struct fuzz_in *in)
{
	static struct env_input e;
	struct tally_job_wire w, again;
	struct tally_config cfg;
	char err[256], err2[256];
	const char *why = NULL;
	int ret, ret2;

	parse_env(&e, in);
	memset(err, 0x55, sizeof(err));
	ret = job_resolve(e.have_given ? &e.given : NULL, e.flags, e.envp, &w,
			  err, sizeof(err));
	if (strnlen(err, sizeof(err)) == sizeof(err))
		fail("job_resolve left its error unterminated");
	ret2 = job_resolve(e.have_given ? &e.given : NULL, e.flags, e.envp,
			   &again, err2, sizeof(err2));
	if (ret2 != ret || memcmp(&w, &again, sizeof(w)) || strcmp(err, err2))
		fail("job_resolve gave two answers to one question");
	if (ret == 1 || ret == -TALLY_EINVAL) {
		if (!all_zero(&w, sizeof(w)))
			fail("job_resolve failed but filled the description");
		if (ret == -TALLY_EINVAL && !err[0])
			fail("job_resolve failed without a reason");
		return;
	}
	if (ret != 0)
		fail("job_resolve returned something else");
	if (err[0])
		fail("job_resolve succeeded with an error message");
	if (w.pad || w.source < TALLY_JOB_SRC_OPTS ||
	    w.source > TALLY_JOB_SRC_OMPI ||
	    !all_zero(w.secret + (w.secret_len < sizeof(w.secret) ?
				  w.secret_len : sizeof(w.secret)),
		      sizeof(w.secret) - (w.secret_len < sizeof(w.secret) ?
					  w.secret_len : sizeof(w.secret))) ||
	    !all_zero(w.id + strnlen(w.id, sizeof(w.id)),
		      sizeof(w.id) - strnlen(w.id, sizeof(w.id))))
		fail("job_resolve filled the description badly");
	if (!w.coord_ip && w.coord_port)
		fail("a coordinator port without its address");
	daemon_config(&cfg, 1 | 4);	/* a service with dataplane.address */
	if (daemon_job_desc_check(&cfg, &w, &why)) {
		fprintf(stderr, "the daemon says: %s\n", why);
		fail("the client resolved a job the daemon refuses");
	}
	check_accepted(&cfg, &w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	uint8_t setup = fuzz_u8(&in);

	if (setup & 0x80)
		fuzz_env(&in);
	else
		fuzz_wire(setup, &in);
	return 0;
}
