// SPDX-License-Identifier: BSD-3-Clause
/*
 * job_desc.c - the job a client names in its HELLO (struct
 * tally_job_wire): checked field by field, then turned into the job's
 * configuration (docs/jobs.md).
 *
 * A service job's membership is its description's: cluster.rank and
 * cluster.world are its host rank and host count, the coordinator is its
 * host 0 (at the port the clients name, else one hashed from the job id
 * into service.rendezvous_port_base + [0, rendezvous_ports)), the job key
 * is a hash of the id, every host is a worker+aggregator, and the data
 * port is one the kernel picks for the job.
 */
#include <ctype.h>
#include <string.h>

#include <tally/tally.h>
#include "ctrl/auth.h"
#include "ctrl/bootstrap.h"
#include "ctrl/daemon.h"

_Static_assert(TALLY_JOB_SECRET_MIN >= AUTH_SECRET_MIN,
	       "a job's secret must make keys");

/* FNV-1a: the same 32 bits on every host for the same id. */
static uint32_t id_hash(const char *id)
{
	uint32_t h = 2166136261u;

	for (; *id; id++)
		h = (h ^ (uint8_t)*id) * 16777619u;
	return h;
}

/* NULL, or what is wrong with the id. */
static const char *check_id(const char *id, size_t cap)
{
	size_t len = strnlen(id, cap);

	if (len == 0 || len == cap)
		return "job id empty or not terminated";
	for (size_t i = 0; i < len; i++)
		if (!isprint((unsigned char)id[i]))
			return "job id with a non-printable byte";
	return NULL;
}

int daemon_job_desc_check(const struct tally_config *cfg,
			  const struct tally_job_wire *w, const char **why)
{
	*why = check_id(w->id, sizeof(w->id));
	if (*why)
		return -TALLY_EDENIED;
	if (w->secret_len > sizeof(w->secret))
		*why = "job secret longer than 64 bytes";
	else if (w->secret_len && w->secret_len < TALLY_JOB_SECRET_MIN)
		*why = "job secret shorter than 16 bytes";
	else if (!w->secret_len && cfg->require_secret)
		*why = "this daemon requires a job secret "
		       "(service.require_secret)";
	else if (w->hosts < 1 || w->hosts > BOOT_MAX_MEMBERS ||
		 w->host_rank >= w->hosts)
		*why = "host rank or host count out of range";
	else if (w->local_size < 1 || w->local_size > CONFIG_MAX_LOCAL_SIZE ||
		 w->local_rank >= w->local_size)
		*why = "local rank or local size out of range";
	else if (w->source < TALLY_JOB_SRC_OPTS ||
		 w->source > TALLY_JOB_SRC_OMPI || w->pad)
		*why = "malformed job description";
	else if (w->hosts > 1 && !w->coord_ip)
		*why = "a job on several hosts needs a coordinator";
	else if (w->hosts > 1 && !cfg->address.ip)
		*why = "this daemon has no dataplane.address: it serves "
		       "single-host jobs only";
	else if (w->hosts > 1 && strcmp(cfg->transport, "udp"))
		*why = "jobs of a service span hosts over the udp transport "
		       "only (docs/jobs.md)";
	return *why ? -TALLY_EDENIED : 0;
}

void daemon_job_config(const struct tally_config *base,
		       const struct tally_job_wire *w,
		       struct tally_config *out)
{
	uint32_t h = id_hash(w->id);

	*out = *base;
	out->service = 0;
	out->rank = w->host_rank;
	out->world = w->hosts;
	out->local_size = w->local_size;
	out->role = ROLE_COLOCATED;
	out->job_key = h;
	out->coordinator.ip = w->coord_ip;
	out->coordinator.port = w->coord_port ? w->coord_port :
		(uint16_t)(base->rendezvous_port_base +
			   (int)(h % (uint32_t)base->rendezvous_ports));
	out->address.port = 0;		/* the kernel picks the job's port */
	out->secret_file[0] = '\0';
}
