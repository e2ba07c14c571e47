/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * job_env.h - the client library's view of its job: the fields of
 * tally_connect_opts(), completed from the launcher's environment
 * (torchrun, Open MPI, Slurm) and the TALLY_* variables, resolved into the
 * struct tally_job_wire that follows HELLO.  The rules are in docs/jobs.md
 * and tally_connect_opts(3).  Not installed.
 */
#ifndef TALLY_SHM_JOB_ENV_H
#define TALLY_SHM_JOB_ENV_H

#include <stddef.h>
#include <tally/tally.h>

#include "shm/proto.h"

/* Largest job the client describes: hosts, and processes on one host. */
#define JOB_MAX_HOSTS 256
#define JOB_MAX_LOCAL 64

/*
 * job_resolve - the job of this process.
 * @given:  the caller's fields (NULL: all unset); set ones win over the
 *          environment.
 * @flags:  TALLY_CONNECT_* (TALLY_CONNECT_NO_ENV: @envp is not read).
 * @envp:   "NAME=value" strings, NULL-terminated (the client passes
 *          environ); NULL is an empty environment.
 * @out:    the description, filled on success (zeroed otherwise).
 * @err:    why it failed, NUL-terminated, when @errlen > 0.
 * Returns 0 with *@out filled, 1 when no source names any job (the client
 * then sends no description), or -TALLY_EINVAL for a malformed or
 * incomplete job, with the reason in @err.
 */
int job_resolve(const struct tally_job *given, unsigned int flags,
		const char *const *envp, struct tally_job_wire *out,
		char *err, size_t errlen);

/*
 * job_nodelist_first - the first host of a Slurm node list ("a,b",
 * "pre[01-04,7]", "r[1-2]-n[3-4]") into @host (@len bytes with the NUL).
 * 0, or -TALLY_EINVAL for an empty or malformed list or a name too long.
 */
int job_nodelist_first(const char *list, char *host, size_t len);

/*
 * job_slurm_tasks_on_node - the entry of Slurm's tasks-per-node list
 * ("2(x3),1": 2 tasks on each of the first 3 nodes, then 1) for node
 * @node (0-based) in *@tasks.  0, or -TALLY_EINVAL for a malformed list or
 * one that has no entry for @node.
 */
int job_slurm_tasks_on_node(const char *spec, long node, long *tasks);

#endif /* TALLY_SHM_JOB_ENV_H */
