// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_job_env.c - unit tests of job_resolve() (shm/job_env.c): each
 * launcher's mapping, the precedence of TALLY_* and of the given fields,
 * TALLY_CONNECT_NO_ENV, the Slurm list parsers, and every malformed case
 * with its message.  The environments are the tests' own arrays, never
 * the process's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "shm/job_env.h"

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

#define IP(a, b, c, d) \
	((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

/* torchrun on 2 hosts of 4 processes: this is global rank 5 */
#define TORCHRUN_2x4 \
	"RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", \
	"GROUP_RANK=1", "MASTER_ADDR=10.1.2.3", "MASTER_PORT=29500"

/* srun on 2 nodes of 4 tasks: task 5 */
#define SLURM_2x4 \
	"SLURM_JOB_ID=4242", "SLURM_PROCID=5", "SLURM_NTASKS=8", \
	"SLURM_LOCALID=1", "SLURM_NODEID=1", "SLURM_NNODES=2"

/* mpirun on 2 hosts of 4 ranks: rank 6 */
#define OMPI_2x4 \
	"OMPI_COMM_WORLD_RANK=6", "OMPI_COMM_WORLD_SIZE=8", \
	"OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4"

static const struct tally_job unset = { .host_rank = -1, .local_rank = -1 };

static char err[256];

static int resolve(const struct tally_job *given, unsigned int flags,
		   const char *const *envp, struct tally_job_wire *w)
{
	memset(w, 0xa5, sizeof(*w));	/* job_resolve must fill every byte */
	memset(err, 'x', sizeof(err) - 1);
	err[sizeof(err) - 1] = '\0';
	return job_resolve(given, flags, envp, w, err, sizeof(err));
}

/* The job resolves; returns it. */
static struct tally_job_wire ok(const struct tally_job *given,
				unsigned int flags, const char *const *envp)
{
	struct tally_job_wire w;
	int ret = resolve(given, flags, envp, &w);

	if (ret)
		print_error("job_resolve: %d: %s\n", ret, err);
	assert_int_equal(ret, 0);
	assert_string_equal(err, "");
	assert_int_equal(w.pad, 0);
	return w;
}

/* The job is refused with a message that contains @what. */
static void bad(const struct tally_job *given, unsigned int flags,
		const char *const *envp, const char *what)
{
	struct tally_job_wire w, zero;
	int ret = resolve(given, flags, envp, &w);

	assert_int_equal(ret, -TALLY_EINVAL);
	if (!strstr(err, what))
		print_error("message '%s' lacks '%s'\n", err, what);
	assert_non_null(strstr(err, what));
	memset(&zero, 0, sizeof(zero));
	assert_memory_equal(&w, &zero, sizeof(w));
}

static void assert_layout(const struct tally_job_wire *w, unsigned hosts,
			  unsigned host_rank, unsigned local_size,
			  unsigned local_rank)
{
	assert_int_equal(w->hosts, hosts);
	assert_int_equal(w->host_rank, host_rank);
	assert_int_equal(w->local_size, local_size);
	assert_int_equal(w->local_rank, local_rank);
}

/* --- no job --- */

static void test_no_job(void **state)
{
	struct tally_job_wire w;

	(void)state;
	assert_int_equal(resolve(NULL, 0, NULL, &w), 1);
	assert_int_equal(resolve(&unset, 0, ENV("PATH=/bin"), &w), 1);
	/* not a job variable; empty TALLY_* count as unset */
	assert_int_equal(resolve(&unset, 0,
				 ENV("TALLY_SOCKET=/tmp/s", "TALLY_JOB_ID=",
				     "TALLY_HOSTS="), &w), 1);
	/* half a launcher is no launcher */
	assert_int_equal(resolve(&unset, 0, ENV("RANK=0", "WORLD_SIZE=2",
						"SLURM_JOB_ID=1"), &w), 1);
	/* NO_ENV reads nothing, whatever is there */
	assert_int_equal(resolve(&unset, TALLY_CONNECT_NO_ENV,
				 ENV(TORCHRUN_2x4, "TALLY_JOB_ID=j"), &w), 1);
}

/* --- torchrun --- */

static void test_torchrun(void **state)
{
	struct tally_job_wire w;

	(void)state;
	w = ok(NULL, 0, ENV(TORCHRUN_2x4, SLURM_2x4));
	assert_string_equal(w.id, "torchrun:10.1.2.3:29500");
	assert_layout(&w, 2, 1, 4, 1);
	assert_int_equal(w.coord_ip, IP(10, 1, 2, 3));
	assert_int_equal(w.coord_port, 29501);	/* after the store's */
	assert_int_equal(w.secret_len, 0);
	assert_int_equal(w.source, TALLY_JOB_SRC_TORCHRUN);

	w = ok(NULL, 0, ENV(TORCHRUN_2x4, "TORCHELASTIC_RUN_ID=exp7"));
	assert_string_equal(w.id, "torchrun:10.1.2.3:29500:exp7");
	w = ok(NULL, 0, ENV(TORCHRUN_2x4, "TORCHELASTIC_RUN_ID=none"));
	assert_string_equal(w.id, "torchrun:10.1.2.3:29500");
}

static void test_torchrun_single_host(void **state)
{
	struct tally_job_wire w;

	(void)state;
	w = ok(NULL, 0, ENV("RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2",
			    "LOCAL_WORLD_SIZE=4", "GROUP_RANK=0",
			    "MASTER_ADDR=localhost", "MASTER_PORT=1234"));
	assert_layout(&w, 1, 0, 4, 2);
	assert_string_equal(w.id, "torchrun:localhost:1234");
	assert_int_equal(w.coord_ip >> 24, 127);	/* looked up */
	assert_int_equal(w.coord_port, 1235);

	/* a single host does not need the coordinator: one that is no
	 * IPv4 address is dropped... */
	w = ok(NULL, 0, ENV("RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0",
			    "LOCAL_WORLD_SIZE=1", "GROUP_RANK=0",
			    "MASTER_ADDR=::1", "MASTER_PORT=1234"));
	assert_int_equal(w.coord_ip, 0);
	assert_int_equal(w.coord_port, 0);
	/* ...but two hosts do */
	bad(NULL, 0, ENV("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0",
			 "LOCAL_WORLD_SIZE=1", "GROUP_RANK=0",
			 "MASTER_ADDR=::1", "MASTER_PORT=1234"),
	    "coordinator '::1' from MASTER_ADDR is not an IPv4 address");
}

/* --- Slurm --- */

static void test_slurm(void **state)
{
	struct tally_job_wire w;

	(void)state;
	w = ok(NULL, 0, ENV(SLURM_2x4, "SLURM_STEP_ID=3",
			    "SLURM_STEP_NODELIST=10.0.0.[7-8]",
			    "SLURM_JOB_NODELIST=10.0.0.[1-9]"));
	assert_string_equal(w.id, "slurm:4242.3");
	assert_layout(&w, 2, 1, 4, 1);	/* NTASKS / NNODES */
	assert_int_equal(w.coord_ip, IP(10, 0, 0, 7));
	assert_int_equal(w.coord_port, 0);	/* the daemon derives it */
	assert_int_equal(w.source, TALLY_JOB_SRC_SLURM);

	/* no step: the job alone; the job's node list */
	w = ok(NULL, 0, ENV(SLURM_2x4, "SLURM_JOB_NODELIST=10.0.0.5,10.0.0.6"));
	assert_string_equal(w.id, "slurm:4242");
	assert_int_equal(w.coord_ip, IP(10, 0, 0, 5));
}

static void test_slurm_tasks_per_node(void **state)
{
	struct tally_job_wire w;

	(void)state;
	/* node 1's entry, not NTASKS / NNODES */
	w = ok(NULL, 0, ENV(SLURM_2x4, "SLURM_TASKS_PER_NODE=2,6",
			    "SLURM_JOB_NODELIST=10.0.0.[1-2]"));
	assert_int_equal(w.local_size, 6);
	/* the step's list wins over the job's */
	w = ok(NULL, 0, ENV(SLURM_2x4, "SLURM_TASKS_PER_NODE=2,6",
			    "SLURM_STEP_TASKS_PER_NODE=3(x2)",
			    "SLURM_JOB_NODELIST=10.0.0.[1-2]"));
	assert_int_equal(w.local_size, 3);
	bad(NULL, 0, ENV(SLURM_2x4, "SLURM_TASKS_PER_NODE=8",
			 "SLURM_JOB_NODELIST=10.0.0.[1-2]"),
	    "SLURM_TASKS_PER_NODE='8' is malformed or has no entry for SLURM_NODEID=1");
	/* uneven without a list: needs TALLY_LOCAL_SIZE */
	bad(NULL, 0, ENV("SLURM_JOB_ID=9", "SLURM_PROCID=0",
			 "SLURM_NTASKS=7", "SLURM_LOCALID=0", "SLURM_NODEID=0",
			 "SLURM_NNODES=2", "SLURM_JOB_NODELIST=10.0.0.1"),
	    "SLURM_NTASKS=7 is not a multiple of SLURM_NNODES=2");
	w = ok(NULL, 0, ENV("SLURM_JOB_ID=9", "SLURM_PROCID=0",
			    "SLURM_NTASKS=7", "SLURM_LOCALID=0",
			    "SLURM_NODEID=0", "SLURM_NNODES=2",
			    "SLURM_JOB_NODELIST=10.0.0.1",
			    "TALLY_LOCAL_SIZE=4"));
	assert_layout(&w, 2, 0, 4, 0);
}

static void test_slurm_without_nodelist(void **state)
{
	(void)state;
	bad(NULL, 0, ENV(SLURM_2x4), "has 2 hosts but no coordinator");
	bad(NULL, 0, ENV(SLURM_2x4, "SLURM_JOB_NODELIST=n[1-2"),
	    "SLURM_JOB_NODELIST='n[1-2' is not a node list");
}

/* --- Open MPI --- */

static void test_ompi(void **state)
{
	struct tally_job_wire w;

	(void)state;
	w = ok(NULL, 0, ENV(OMPI_2x4, "OMPI_MCA_ess_base_jobid=123",
			    "PMIX_NAMESPACE=ns", "TALLY_COORDINATOR=10.0.0.1:7000"));
	assert_string_equal(w.id, "ompi:123");
	assert_layout(&w, 2, 1, 4, 2);	/* rank 6 / 4 ranks a host */
	assert_int_equal(w.coord_ip, IP(10, 0, 0, 1));
	assert_int_equal(w.coord_port, 7000);
	assert_int_equal(w.source, TALLY_JOB_SRC_OMPI);

	w = ok(NULL, 0, ENV(OMPI_2x4, "PMIX_NAMESPACE=prterun-h-77@1",
			    "TALLY_COORDINATOR=10.0.0.1"));
	assert_string_equal(w.id, "ompi:prterun-h-77@1");
	assert_int_equal(w.coord_port, 0);

	/* the environment names no coordinator */
	bad(NULL, 0, ENV(OMPI_2x4, "OMPI_MCA_ess_base_jobid=123"),
	    "job 'ompi:123' has 2 hosts but no coordinator");
	/* one host needs none */
	w = ok(NULL, 0, ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
			    "OMPI_COMM_WORLD_LOCAL_RANK=3",
			    "OMPI_COMM_WORLD_LOCAL_SIZE=4",
			    "OMPI_MCA_ess_base_jobid=5"));
	assert_layout(&w, 1, 0, 4, 3);
	assert_int_equal(w.coord_ip, 0);
	/* no id from the environment */
	bad(NULL, 0, ENV(OMPI_2x4, "TALLY_COORDINATOR=10.0.0.1"),
	    "no job id: set TALLY_JOB_ID");
}

static void test_ompi_uneven(void **state)
{
	struct tally_job_wire w;

#define OMPI_UNEVEN \
	"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=6", \
	"OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2", \
	"OMPI_MCA_ess_base_jobid=8", "TALLY_COORDINATOR=10.0.0.1"
	(void)state;
	w = ok(NULL, 0, ENV(OMPI_UNEVEN));
	assert_layout(&w, 3, 2, 2, 1);
	bad(NULL, 0, ENV("OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=6",
			 "OMPI_COMM_WORLD_LOCAL_RANK=1",
			 "OMPI_COMM_WORLD_LOCAL_SIZE=4",
			 "OMPI_MCA_ess_base_jobid=8",
			 "TALLY_COORDINATOR=10.0.0.1"),
	    "OMPI_COMM_WORLD_SIZE=6 is not a multiple of OMPI_COMM_WORLD_LOCAL_SIZE=4");
	/* hosts alone is not enough: the host rank is unknown too */
	bad(NULL, 0, ENV("OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=6",
			 "OMPI_COMM_WORLD_LOCAL_RANK=1",
			 "OMPI_COMM_WORLD_LOCAL_SIZE=4",
			 "OMPI_MCA_ess_base_jobid=8", "TALLY_HOSTS=2",
			 "TALLY_COORDINATOR=10.0.0.1"),
	    "is not a multiple");
	w = ok(NULL, 0, ENV("OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=6",
			    "OMPI_COMM_WORLD_LOCAL_RANK=1",
			    "OMPI_COMM_WORLD_LOCAL_SIZE=4",
			    "OMPI_MCA_ess_base_jobid=8", "TALLY_HOSTS=2",
			    "TALLY_HOST_RANK=1", "TALLY_COORDINATOR=10.0.0.1"));
	assert_layout(&w, 2, 1, 4, 1);
#undef OMPI_UNEVEN
}

/* --- which launcher --- */

static void test_launcher_order(void **state)
{
	(void)state;
	assert_int_equal(ok(NULL, 0, ENV(OMPI_2x4, SLURM_2x4, TORCHRUN_2x4))
			 .source, TALLY_JOB_SRC_TORCHRUN);
	/* Open MPI before Slurm: test_ompi_inside_slurm */
	assert_int_equal(ok(NULL, 0, ENV(SLURM_2x4, OMPI_2x4,
					 "OMPI_MCA_ess_base_jobid=123",
					 "SLURM_JOB_NODELIST=10.0.0.1",
					 "TALLY_COORDINATOR=10.0.0.9"))
			 .source, TALLY_JOB_SRC_OMPI);
	/* Open MPI lacking its local size is not Open MPI */
	assert_int_equal(ok(NULL, 0, ENV("OMPI_COMM_WORLD_RANK=6",
					 "OMPI_COMM_WORLD_SIZE=8",
					 "OMPI_COMM_WORLD_LOCAL_RANK=2",
					 SLURM_2x4,
					 "SLURM_JOB_NODELIST=10.0.0.1"))
			 .source, TALLY_JOB_SRC_SLURM);
	/* torchrun lacking GROUP_RANK is not torchrun */
	assert_int_equal(ok(NULL, 0, ENV("RANK=5", "WORLD_SIZE=8",
					 "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4",
					 "MASTER_ADDR=10.1.2.3",
					 "MASTER_PORT=29500", SLURM_2x4,
					 "SLURM_JOB_NODELIST=10.0.0.1"))
			 .source, TALLY_JOB_SRC_SLURM);
}

/*
 * mpirun inside a Slurm allocation: its ranks inherit, through Open MPI's
 * per-node daemons, the Slurm variables of the step that started those
 * daemons (one task on each of the 2 nodes), next to Open MPI's own (4
 * ranks a host).  Open MPI's describe the job.
 */
#define SLURM_ORTED_STEP \
	"SLURM_JOB_ID=4242", "SLURM_STEP_ID=0", "SLURM_PROCID=1", \
	"SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_NODEID=1", \
	"SLURM_NNODES=2", "SLURM_STEP_TASKS_PER_NODE=1(x2)", \
	"SLURM_STEP_NODELIST=10.0.0.[7-8]", "SLURM_JOB_NODELIST=10.0.0.[7-8]"

static void test_ompi_inside_slurm(void **state)
{
	struct tally_job_wire w;

	(void)state;
	w = ok(NULL, 0, ENV(SLURM_ORTED_STEP, OMPI_2x4,
			    "OMPI_MCA_ess_base_jobid=123",
			    "TALLY_COORDINATOR=10.0.0.1:7000"));
	assert_int_equal(w.source, TALLY_JOB_SRC_OMPI);
	assert_string_equal(w.id, "ompi:123");
	assert_layout(&w, 2, 1, 4, 2);	/* not Slurm's 2, 1, 1, 0 */
	assert_int_equal(w.coord_ip, IP(10, 0, 0, 1));
	assert_int_equal(w.coord_port, 7000);
	/* wherever the variables stand in the environment */
	w = ok(NULL, 0, ENV(OMPI_2x4, "PMIX_NAMESPACE=prterun-h-1@1",
			    SLURM_ORTED_STEP, "TALLY_COORDINATOR=10.0.0.1"));
	assert_int_equal(w.source, TALLY_JOB_SRC_OMPI);
	assert_string_equal(w.id, "ompi:prterun-h-1@1");
	assert_layout(&w, 2, 1, 4, 2);
	/* nothing of Slurm's is taken: not its node list as coordinator */
	bad(NULL, 0, ENV(SLURM_ORTED_STEP, OMPI_2x4,
			 "OMPI_MCA_ess_base_jobid=123"),
	    "job 'ompi:123' has 2 hosts but no coordinator");
	/* nor its job id */
	bad(NULL, 0, ENV(SLURM_ORTED_STEP, OMPI_2x4,
			 "TALLY_COORDINATOR=10.0.0.1"),
	    "no job id: set TALLY_JOB_ID");
	/* a malformed Slurm variable does not matter then */
	w = ok(NULL, 0, ENV(OMPI_2x4, "OMPI_MCA_ess_base_jobid=123",
			    "TALLY_COORDINATOR=10.0.0.1", SLURM_2x4,
			    "SLURM_TASKS_PER_NODE=banana"));
	assert_int_equal(w.source, TALLY_JOB_SRC_OMPI);
}
#undef SLURM_ORTED_STEP

/* --- precedence --- */

static void test_tally_env_over_launcher(void **state)
{
	struct tally_job_wire w;

	(void)state;
	w = ok(NULL, 0, ENV(TORCHRUN_2x4, "TALLY_JOB_ID=mine",
			    "TALLY_JOB_SECRET=s3cret-of-20-bytes!!",
			    "TALLY_COORDINATOR=10.9.9.9", "TALLY_HOSTS=3",
			    "TALLY_HOST_RANK=2", "TALLY_LOCAL_SIZE=8",
			    "TALLY_LOCAL_RANK=7"));
	assert_string_equal(w.id, "mine");
	assert_layout(&w, 3, 2, 8, 7);
	assert_int_equal(w.coord_ip, IP(10, 9, 9, 9));
	assert_int_equal(w.coord_port, 0);	/* the whole address */
	assert_int_equal(w.secret_len, 20);
	assert_memory_equal(w.secret, "s3cret-of-20-bytes!!", 20);
	assert_int_equal(w.secret[20], 0);
	/* the launcher still says where the fields came from */
	assert_int_equal(w.source, TALLY_JOB_SRC_TORCHRUN);

	/* one field only: the others stay the launcher's */
	w = ok(NULL, 0, ENV(TORCHRUN_2x4, "TALLY_LOCAL_RANK=3"));
	assert_string_equal(w.id, "torchrun:10.1.2.3:29500");
	assert_layout(&w, 2, 1, 4, 3);
	assert_int_equal(w.coord_port, 29501);
}

static void test_tally_env_alone(void **state)
{
	struct tally_job_wire w;

	(void)state;
	w = ok(NULL, 0, ENV("TALLY_JOB_ID=solo", "TALLY_LOCAL_SIZE=2",
			    "TALLY_LOCAL_RANK=1"));
	assert_string_equal(w.id, "solo");
	assert_layout(&w, 1, 0, 2, 1);	/* hosts 1, host rank 0 */
	assert_int_equal(w.coord_ip, 0);
	assert_int_equal(w.source, TALLY_JOB_SRC_OPTS);

	w = ok(NULL, 0, ENV("TALLY_JOB_ID=duo", "TALLY_HOSTS=2",
			    "TALLY_HOST_RANK=1", "TALLY_LOCAL_SIZE=1",
			    "TALLY_LOCAL_RANK=0",
			    "TALLY_COORDINATOR=192.168.1.20:9000"));
	assert_layout(&w, 2, 1, 1, 0);
	assert_int_equal(w.coord_ip, IP(192, 168, 1, 20));
	assert_int_equal(w.coord_port, 9000);
}

static void test_given_over_env(void **state)
{
	struct tally_job g = unset;
	struct tally_job_wire w;

	(void)state;
	g.id = "given";
	g.secret = "";			/* explicitly none */
	g.coordinator = "10.7.7.7:4000";
	g.hosts = 4;
	g.host_rank = 3;
	g.local_size = 2;
	g.local_rank = 0;
	w = ok(&g, 0, ENV(TORCHRUN_2x4, "TALLY_JOB_ID=env",
			  "TALLY_JOB_SECRET=s", "TALLY_HOSTS=9",
			  "TALLY_LOCAL_RANK=1"));
	assert_string_equal(w.id, "given");
	assert_layout(&w, 4, 3, 2, 0);
	assert_int_equal(w.coord_ip, IP(10, 7, 7, 7));
	assert_int_equal(w.coord_port, 4000);
	assert_int_equal(w.secret_len, 0);

	/* unset fields leave the environment's */
	g = unset;
	g.local_rank = 2;
	w = ok(&g, 0, ENV(TORCHRUN_2x4, "TALLY_JOB_ID=env"));
	assert_string_equal(w.id, "env");
	assert_layout(&w, 2, 1, 4, 2);
}

static void test_no_env(void **state)
{
	struct tally_job g = unset;
	struct tally_job_wire w;

	(void)state;
	g.id = "only";
	g.local_size = 1;
	g.local_rank = 0;
	w = ok(&g, TALLY_CONNECT_NO_ENV,
	       ENV(TORCHRUN_2x4, "TALLY_JOB_SECRET=s", "TALLY_HOSTS=2"));
	assert_string_equal(w.id, "only");
	assert_layout(&w, 1, 0, 1, 0);
	assert_int_equal(w.secret_len, 0);
	assert_int_equal(w.coord_ip, 0);
	assert_int_equal(w.source, TALLY_JOB_SRC_OPTS);
	/* nor is a broken environment looked at */
	ok(&g, TALLY_CONNECT_NO_ENV, ENV("RANK=x", "WORLD_SIZE=x",
					 "LOCAL_RANK=x", "LOCAL_WORLD_SIZE=x",
					 "GROUP_RANK=x", "MASTER_ADDR=x",
					 "MASTER_PORT=x", "TALLY_HOSTS=x"));
	/* and the environment does not complete the given fields */
	g.local_size = 0;
	bad(&g, TALLY_CONNECT_NO_ENV, ENV("TALLY_LOCAL_SIZE=1"),
	    "job 'only' has no local size");
}

/* --- malformed --- */

static void test_not_numbers(void **state)
{
	static const char *const bad_numbers[] = {
		"", "abc", "4x", " 4", "+4", "-4", "4 ", "0x4",
		"99999999999999999999",
	};
	char world[64], hosts[64];

	(void)state;
	for (size_t i = 0; i < sizeof(bad_numbers) / sizeof(*bad_numbers);
	     i++) {
		snprintf(world, sizeof(world), "WORLD_SIZE=%s", bad_numbers[i]);
		bad(NULL, 0, ENV("RANK=0", world, "LOCAL_RANK=0",
				 "LOCAL_WORLD_SIZE=1", "GROUP_RANK=0",
				 "MASTER_ADDR=10.0.0.1", "MASTER_PORT=5"),
		    "WORLD_SIZE='");
		if (!*bad_numbers[i])
			continue;	/* an empty TALLY_* is unset */
		snprintf(hosts, sizeof(hosts), "TALLY_HOST_RANK=%s",
			 bad_numbers[i]);
		bad(NULL, 0, ENV("TALLY_JOB_ID=j", hosts), "TALLY_HOST_RANK='");
	}
	bad(NULL, 0, ENV(SLURM_2x4 "x"), "SLURM_NNODES='2x' is not a number");
	bad(NULL, 0, ENV("OMPI_COMM_WORLD_RANK=-1", "OMPI_COMM_WORLD_SIZE=8",
			 "OMPI_COMM_WORLD_LOCAL_RANK=2",
			 "OMPI_COMM_WORLD_LOCAL_SIZE=4"),
	    "OMPI_COMM_WORLD_RANK='-1' is not a number");
	/* sizes are at least 1: no division by zero */
	bad(NULL, 0, ENV("RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0",
			 "LOCAL_WORLD_SIZE=0", "GROUP_RANK=0",
			 "MASTER_ADDR=10.0.0.1", "MASTER_PORT=5"),
	    "LOCAL_WORLD_SIZE='0' is not a number in 1..");
	/* the coordinator's port is MASTER_PORT + 1 */
	bad(NULL, 0, ENV("RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0",
			 "LOCAL_WORLD_SIZE=1", "GROUP_RANK=0",
			 "MASTER_ADDR=10.0.0.1", "MASTER_PORT=65535"),
	    "MASTER_PORT='65535' is not a number in 1..65534");
}

static void test_rank_not_below_size(void **state)
{
	struct tally_job g = unset;

	(void)state;
	bad(NULL, 0, ENV("RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=4",
			 "LOCAL_WORLD_SIZE=4", "GROUP_RANK=1",
			 "MASTER_ADDR=10.1.2.3", "MASTER_PORT=29500"),
	    "local_rank=4 (from LOCAL_RANK) is not below local_size=4 (from LOCAL_WORLD_SIZE)");
	bad(NULL, 0, ENV("RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1",
			 "LOCAL_WORLD_SIZE=4", "GROUP_RANK=2",
			 "MASTER_ADDR=10.1.2.3", "MASTER_PORT=29500"),
	    "host_rank=2 (from GROUP_RANK) is not below hosts=2");
	bad(NULL, 0, ENV("RANK=8", "WORLD_SIZE=8", "LOCAL_RANK=1",
			 "LOCAL_WORLD_SIZE=4", "GROUP_RANK=1",
			 "MASTER_ADDR=10.1.2.3", "MASTER_PORT=29500"),
	    "RANK=8 is not below WORLD_SIZE=8");
	bad(NULL, 0, ENV("SLURM_JOB_ID=1", "SLURM_PROCID=2", "SLURM_NTASKS=2",
			 "SLURM_LOCALID=0", "SLURM_NODEID=0",
			 "SLURM_NNODES=1"),
	    "SLURM_PROCID=2 is not below SLURM_NTASKS=2");
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=2",
			 "TALLY_LOCAL_RANK=1", "TALLY_HOST_RANK=1"),
	    "host_rank=1 (from TALLY_HOST_RANK) is not below hosts=1 (from the default)");
	g.id = "j";
	g.local_size = 2;
	g.local_rank = 2;
	bad(&g, 0, NULL, "local_rank=2 (from tally_job) is not below local_size=2");
	g.local_rank = -2;
	bad(&g, 0, NULL, "tally_job.local_rank=-2 is negative");
	g.local_rank = 0;
	g.hosts = -1;
	bad(&g, 0, NULL, "tally_job.hosts=-1 is negative");
}

static void test_world_not_divisible(void **state)
{
	struct tally_job_wire w;

#define TORCHRUN_UNEVEN \
	"RANK=5", "WORLD_SIZE=6", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", \
	"GROUP_RANK=1", "MASTER_ADDR=10.1.2.3", "MASTER_PORT=29500"
	(void)state;
	bad(NULL, 0, ENV(TORCHRUN_UNEVEN),
	    "WORLD_SIZE=6 is not a multiple of LOCAL_WORLD_SIZE=4: set TALLY_HOSTS");
	w = ok(NULL, 0, ENV(TORCHRUN_UNEVEN, "TALLY_HOSTS=2"));
	assert_layout(&w, 2, 1, 4, 1);
#undef TORCHRUN_UNEVEN
}

static void test_sizes_out_of_range(void **state)
{
	(void)state;
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_HOSTS=257",
			 "TALLY_COORDINATOR=10.0.0.1", "TALLY_LOCAL_SIZE=1",
			 "TALLY_LOCAL_RANK=0"),
	    "hosts=257 (from TALLY_HOSTS) is not in 1..256");
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_HOSTS=0",
			 "TALLY_LOCAL_SIZE=1", "TALLY_LOCAL_RANK=0"),
	    "hosts=0 (from TALLY_HOSTS) is not in 1..256");
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=65",
			 "TALLY_LOCAL_RANK=0"),
	    "local_size=65 (from TALLY_LOCAL_SIZE) is not in 1..64");
	ok(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_HOSTS=256",
			"TALLY_HOST_RANK=255", "TALLY_COORDINATOR=10.0.0.1",
			"TALLY_LOCAL_SIZE=64", "TALLY_LOCAL_RANK=63"));
}

static void test_id(void **state)
{
	char id64[65], env[128];
	struct tally_job g = unset;
	struct tally_job_wire w;

	(void)state;
	memset(id64, 'a', 64);
	id64[64] = '\0';
	g.id = id64;
	g.local_size = 1;
	g.local_rank = 0;
	bad(&g, 0, NULL, "job id from tally_job.id is 64 bytes, not 1..63");
	id64[63] = '\0';
	w = ok(&g, 0, NULL);
	assert_string_equal(w.id, id64);

	g.id = "";
	bad(&g, 0, NULL, "is 0 bytes");
	g.id = "two words";
	bad(&g, 0, NULL, "job id 'two words' from tally_job.id has a space");
	g.id = "tab\there";
	bad(&g, 0, NULL, "not printable");
	g.id = "caf\xc3\xa9";
	bad(&g, 0, NULL, "not printable");

	/* a launcher's id too long: TALLY_JOB_ID mends it */
	memset(id64, 'r', 60);
	id64[60] = '\0';
	snprintf(env, sizeof(env), "TORCHELASTIC_RUN_ID=%s", id64);
	bad(NULL, 0, ENV(TORCHRUN_2x4, env),
	    "job id from torchrun is 84 bytes, not 1..63: set TALLY_JOB_ID");
	w = ok(NULL, 0, ENV(TORCHRUN_2x4, env, "TALLY_JOB_ID=short"));
	assert_string_equal(w.id, "short");

	/* a job needs an id */
	bad(NULL, 0, ENV("TALLY_LOCAL_SIZE=1", "TALLY_LOCAL_RANK=0"),
	    "no job id: set TALLY_JOB_ID or tally_job.id");
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1"),
	    "job 'j' has no local rank");
}

static void test_secret(void **state)
{
	char secret[128] = "TALLY_JOB_SECRET=";
	size_t n = strlen(secret);
	struct tally_job_wire w;

	(void)state;
	memset(secret + n, 'k', 64);
	secret[n + 64] = '\0';
	w = ok(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1",
			    "TALLY_LOCAL_RANK=0", secret));
	assert_int_equal(w.secret_len, 64);
	assert_int_equal(w.secret[63], 'k');
	strcat(secret, "k");
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1",
			 "TALLY_LOCAL_RANK=0", secret),
	    "the secret from TALLY_JOB_SECRET is 65 bytes, at most 64");
	/* the daemons make their keys of it: 16 bytes at least */
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1",
			 "TALLY_LOCAL_RANK=0",
			 "TALLY_JOB_SECRET=fifteen-bytes!!"),
	    "the secret from TALLY_JOB_SECRET is 15 bytes, at least 16");
	w = ok(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1",
			    "TALLY_LOCAL_RANK=0",
			    "TALLY_JOB_SECRET=sixteen-bytes!!!"));
	assert_int_equal(w.secret_len, 16);
}

static void test_coordinator(void **state)
{
	static const char *const bad_coord[] = {
		"TALLY_COORDINATOR=10.0.0.1:0",
		"TALLY_COORDINATOR=10.0.0.1:65536",
		"TALLY_COORDINATOR=10.0.0.1:",
		"TALLY_COORDINATOR=10.0.0.1:x",
		"TALLY_COORDINATOR=:80",
	};
	struct tally_job g = unset;
	struct tally_job_wire w;

	(void)state;
	for (size_t i = 0; i < sizeof(bad_coord) / sizeof(*bad_coord); i++)
		bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1",
				 "TALLY_LOCAL_RANK=0", bad_coord[i]),
		    "TALLY_COORDINATOR='");
	/* a missing coordinator for more than one host */
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_HOSTS=2",
			 "TALLY_HOST_RANK=1", "TALLY_LOCAL_SIZE=1",
			 "TALLY_LOCAL_RANK=0"),
	    "job 'j' has 2 hosts but no coordinator: set TALLY_COORDINATOR");
	/* one given is looked up even for one host, and must work */
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1",
			 "TALLY_LOCAL_RANK=0", "TALLY_COORDINATOR=::1"),
	    "TALLY_COORDINATOR='::1' is not an IPv4 address");
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1",
			 "TALLY_LOCAL_RANK=0", "TALLY_COORDINATOR=[::1]:80"),
	    "TALLY_COORDINATOR='[::1]:80' is not an IPv4 address");
	bad(NULL, 0, ENV("TALLY_JOB_ID=j", "TALLY_LOCAL_SIZE=1",
			 "TALLY_LOCAL_RANK=0", "TALLY_COORDINATOR=0.0.0.0"),
	    "coordinator '0.0.0.0'");
	/* a name */
	g.id = "j";
	g.hosts = 2;
	g.host_rank = 0;
	g.local_size = 1;
	g.local_rank = 0;
	g.coordinator = "localhost:5555";
	w = ok(&g, 0, NULL);
	assert_int_equal(w.coord_ip >> 24, 127);
	assert_int_equal(w.coord_port, 5555);
	g.coordinator = "";
	bad(&g, 0, NULL, "tally_job.coordinator=''");
}

static void test_bad_flags(void **state)
{
	struct tally_job_wire w;

	(void)state;
	assert_int_equal(resolve(NULL, 0x80, NULL, &w), -TALLY_EINVAL);
	assert_non_null(strstr(err, "unknown flags 0x80"));
}

/* --- the Slurm lists --- */

static void test_nodelist_first(void **state)
{
	static const struct {
		const char *list, *first;
	} good[] = {
		{ "node7", "node7" },
		{ "a,b", "a" },
		{ "pre[01-04,7]", "pre01" },
		{ "pre[7,01-04]", "pre7" },
		{ "pre[7]", "pre7" },
		{ "pre[01-04,7],other", "pre01" },
		{ "r[1-2]-n[03-04]", "r1-n03" },
		{ "gpu-a.cluster_x", "gpu-a.cluster_x" },
		{ "[5-6]x", "5x" },
	};
	static const char *const broken[] = {
		"", ",a", "[", "a[", "a[]", "a[x]", "a[1-2", "a]", "a b",
		"a[1-2]]", "a[1;2]", "a[-1]",
	};
	char host[16];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
		memset(host, 'z', sizeof(host));
		assert_int_equal(job_nodelist_first(good[i].list, host,
						    sizeof(host)), 0);
		assert_string_equal(host, good[i].first);
	}
	for (size_t i = 0; i < sizeof(broken) / sizeof(*broken); i++) {
		if (job_nodelist_first(broken[i], host, sizeof(host)) !=
		    -TALLY_EINVAL)
			print_error("'%s' was taken\n", broken[i]);
		assert_int_equal(job_nodelist_first(broken[i], host,
						    sizeof(host)),
				 -TALLY_EINVAL);
	}
	/* the name and its NUL must fit */
	assert_int_equal(job_nodelist_first("abcdefghijklmno", host, 16), 0);
	assert_int_equal(job_nodelist_first("abcdefghijklmnop", host, 16),
			 -TALLY_EINVAL);
	assert_int_equal(job_nodelist_first("abcdefghijklm[123]", host, 16),
			 -TALLY_EINVAL);
	assert_int_equal(job_nodelist_first(NULL, host, 16), -TALLY_EINVAL);
}

static void test_tasks_on_node(void **state)
{
	static const char *const broken[] = {
		"", "x", "0", "2(x0)", "2(3)", "2(x3", "2,,1", "-1",
		"2(x3)1", "2,", " 2", "2(x)",
	};
	long n = -1;

	(void)state;
	for (long node = 0; node < 3; node++) {
		assert_int_equal(job_slurm_tasks_on_node("2(x3),1", node, &n),
				 0);
		assert_int_equal(n, 2);
	}
	assert_int_equal(job_slurm_tasks_on_node("2(x3),1", 3, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(job_slurm_tasks_on_node("2(x3),1", 4, &n),
			 -TALLY_EINVAL);
	assert_int_equal(job_slurm_tasks_on_node("4", 0, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(job_slurm_tasks_on_node("1,2(x2),3", 3, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(job_slurm_tasks_on_node("4", -1, &n), -TALLY_EINVAL);
	for (size_t i = 0; i < sizeof(broken) / sizeof(*broken); i++) {
		if (job_slurm_tasks_on_node(broken[i], 0, &n) != -TALLY_EINVAL)
			print_error("'%s' was taken\n", broken[i]);
		assert_int_equal(job_slurm_tasks_on_node(broken[i], 0, &n),
				 -TALLY_EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_job),
		cmocka_unit_test(test_torchrun),
		cmocka_unit_test(test_torchrun_single_host),
		cmocka_unit_test(test_slurm),
		cmocka_unit_test(test_slurm_tasks_per_node),
		cmocka_unit_test(test_slurm_without_nodelist),
		cmocka_unit_test(test_ompi),
		cmocka_unit_test(test_ompi_uneven),
		cmocka_unit_test(test_launcher_order),
		cmocka_unit_test(test_ompi_inside_slurm),
		cmocka_unit_test(test_tally_env_over_launcher),
		cmocka_unit_test(test_tally_env_alone),
		cmocka_unit_test(test_given_over_env),
		cmocka_unit_test(test_no_env),
		cmocka_unit_test(test_not_numbers),
		cmocka_unit_test(test_rank_not_below_size),
		cmocka_unit_test(test_world_not_divisible),
		cmocka_unit_test(test_sizes_out_of_range),
		cmocka_unit_test(test_id),
		cmocka_unit_test(test_secret),
		cmocka_unit_test(test_coordinator),
		cmocka_unit_test(test_bad_flags),
		cmocka_unit_test(test_nodelist_first),
		cmocka_unit_test(test_tasks_on_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
