// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_conformance.c - the conformance cases (docs/conformance.md) against
 * one backend:
 *
 *   test_conformance sw          tally's aggregator, software profile
 *   test_conformance sw-switch   tally's aggregator, switch profile
 *   test_conformance xdp         the XDP program (switch; root)
 *   test_conformance udp-self    tally's aggregator behind a UDP socket
 *                                this test starts (software profile)
 *   test_conformance sw-mutant-int  issue 14's aggregator (INT not echoed
 *                                on re-sent RESULTs): must fail
 *   test_conformance addr        TALLY_CONFORMANCE_AGG=ip:port and the
 *                                job from TALLY_CONFORMANCE_{JOB,COOKIE,
 *                                N,K,SLOTS,PROFILE}
 *
 * A further argument runs only the cases whose name contains it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "conf.h"
#include "dataplane/engine/wire.h"

struct cf_backend *cf_be_udp_self(const struct cf_job *j);
struct cf_backend *cf_be_sw_mutant(const struct cf_job *j);

static const char *mode = "sw";

static uint8_t mode_profile(void)
{
	const char *p = getenv("TALLY_CONFORMANCE_PROFILE");

	if (!strcmp(mode, "sw-switch") || !strcmp(mode, "xdp"))
		return TLY_PROFILE_SWITCH;
	if (!strcmp(mode, "addr") && p && !strcmp(p, "switch"))
		return TLY_PROFILE_SWITCH;
	return TLY_PROFILE_SOFTWARE;
}

int cf_be_fixed_job(void)
{
	return !strcmp(mode, "addr");
}

static unsigned long env_num(const char *name, unsigned long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

/* the case's job; an aggregator at an address has one job, from env */
static void job_of(struct cf_job *j, uint16_t n, uint32_t slots)
{
	*j = (struct cf_job){
		.job = 0x2a17, .cookie = 0x5eed1234u, .k = 64, .n = n,
		.slots = slots, .profile = mode_profile(),
	};
	if (!cf_be_fixed_job())
		return;
	j->job = (uint16_t)env_num("TALLY_CONFORMANCE_JOB", j->job);
	j->cookie = (uint32_t)env_num("TALLY_CONFORMANCE_COOKIE", j->cookie);
	j->k = (uint16_t)env_num("TALLY_CONFORMANCE_K", j->k);
	j->n = (uint16_t)env_num("TALLY_CONFORMANCE_N", j->n);
	j->slots = (uint32_t)env_num("TALLY_CONFORMANCE_SLOTS", j->slots);
	if (j->k < TLY_K_MIN || j->k > CF_K_MAX) {
		fprintf(stderr, "TALLY_CONFORMANCE_K = %u: K is %u .. %u\n",
			j->k, TLY_K_MIN, CF_K_MAX);
		exit(2);
	}
}

struct cf_backend *cf_be_open(const struct cf_job *j)
{
	struct cf_backend *be = NULL;

	if (!strcmp(mode, "sw") || !strcmp(mode, "sw-switch"))
		be = cf_be_sw(j);
	else if (!strcmp(mode, "xdp"))
		be = cf_be_xdp(j);
	else if (!strcmp(mode, "sw-mutant-int"))
		be = cf_be_sw_mutant(j);
	else if (!strcmp(mode, "udp-self"))
		be = cf_be_udp_self(j);
	else if (!strcmp(mode, "addr") && getenv("TALLY_CONFORMANCE_AGG"))
		be = cf_be_udp(j, getenv("TALLY_CONFORMANCE_AGG"));
	if (!be)
		fail_msg("backend %s unavailable", mode);
	return be;
}

/* virtual time for in-process backends; the real clock runs slower */
static uint64_t budget(uint64_t virt_ns)
{
	return !strcmp(mode, "sw") || !strcmp(mode, "sw-switch") ||
	       !strcmp(mode, "xdp") ? virt_ns : 60000000000ull;
}

static void base_case(struct cf_case *c, uint16_t n, enum tly_dtype dt,
		      enum cf_op op)
{
	*c = (struct cf_case){
		.dtype = dt, .op = op, .n_tensors = 2, .count = 64 * 40 + 17,
		.window = 32, .f = { .seed = 1 }, .max_ns = budget(2000000000),
	};
	job_of(&c->job, n, 256);
}

/* --- every dtype x op at 2 and 4 workers --- */

#define DT_CASE(name, n, dt, op)					\
static void name(void **state)						\
{									\
	struct cf_case c;						\
									\
	(void)state;							\
	base_case(&c, n, dt, op);					\
	c.f.seed = 100 + n * 8 + dt * 2 + op;				\
	cf_allreduce(&c);						\
}
DT_CASE(f32_sum_2, 2, TLY_DT_F32, CF_SUM)
DT_CASE(f32_avg_2, 2, TLY_DT_F32, CF_AVG)
DT_CASE(f16_sum_2, 2, TLY_DT_F16, CF_SUM)
DT_CASE(f16_avg_2, 2, TLY_DT_F16, CF_AVG)
DT_CASE(bf16_sum_2, 2, TLY_DT_BF16, CF_SUM)
DT_CASE(bf16_avg_2, 2, TLY_DT_BF16, CF_AVG)
DT_CASE(i32_sum_2, 2, TLY_DT_I32, CF_SUM)
DT_CASE(i32_avg_2, 2, TLY_DT_I32, CF_AVG)
DT_CASE(f32_sum_4, 4, TLY_DT_F32, CF_SUM)
DT_CASE(f32_avg_4, 4, TLY_DT_F32, CF_AVG)
DT_CASE(f16_sum_4, 4, TLY_DT_F16, CF_SUM)
DT_CASE(f16_avg_4, 4, TLY_DT_F16, CF_AVG)
DT_CASE(bf16_sum_4, 4, TLY_DT_BF16, CF_SUM)
DT_CASE(bf16_avg_4, 4, TLY_DT_BF16, CF_AVG)
DT_CASE(i32_sum_4, 4, TLY_DT_I32, CF_SUM)
DT_CASE(i32_avg_4, 4, TLY_DT_I32, CF_AVG)

/* --- faults --- */

#define FAULT_CASE(name, dt, l, d, ro)					\
static void name(void **state)						\
{									\
	struct cf_case c;						\
									\
	(void)state;							\
	base_case(&c, 4, dt, CF_SUM);					\
	c.f = (struct cf_faults){ .seed = 7 + dt, .loss = l, .dup = d,	\
				  .reorder_ns = ro };			\
	cf_allreduce(&c);						\
}
FAULT_CASE(loss10_f32, TLY_DT_F32, 0.10, 0, 0)
FAULT_CASE(loss10_i32, TLY_DT_I32, 0.10, 0, 0)
FAULT_CASE(dup10_f32, TLY_DT_F32, 0, 0.10, 0)
FAULT_CASE(dup10_i32, TLY_DT_I32, 0, 0.10, 0)
FAULT_CASE(reorder_f32, TLY_DT_F32, 0, 0, 200000)
FAULT_CASE(reorder_i32, TLY_DT_I32, 0, 0, 200000)
FAULT_CASE(all_faults_bf16, TLY_DT_BF16, 0.10, 0.10, 200000)

/* the frame a daemon sends when dataplane.k is not set: K = 352 in the
 * switch profile (5 passes of 64 lanes and a half pass), 360 in the
 * software one */
static void default_k(void **state)
{
	struct cf_case c;

	(void)state;
	base_case(&c, 4, TLY_DT_F32, CF_SUM);
	if (!cf_be_fixed_job())
		c.job.k = c.job.profile == TLY_PROFILE_SWITCH ? 352 : 360;
	c.count = (size_t)c.job.k * 30 + 11;
	c.f = (struct cf_faults){ .seed = 31, .loss = 0.05, .dup = 0.05,
				  .reorder_ns = 200000 };
	cf_allreduce(&c);
}

/* a pool of 2 slots: every chunk contends */
static void pool2(void **state)
{
	struct cf_case c;

	(void)state;
	base_case(&c, 3, TLY_DT_I32, CF_SUM);
	c.job.slots = cf_be_fixed_job() ? c.job.slots : 2;
	c.count = 64 * 24;
	c.f.loss = 0.02;
	c.expect_busy = !cf_be_fixed_job();
	c.max_ns = budget(4000000000ull);
	cf_allreduce(&c);
}

/* every worker in its own order: the four tensors submitted rotated by
 * rank (all in progress at once: with one at a time the application
 * itself would deadlock, as with any collective), chunks sent from a
 * start rotated by rank, a pool smaller than a tensor */
static void orders(void **state)
{
	struct cf_case c;

	(void)state;
	base_case(&c, 4, TLY_DT_F32, CF_SUM);
	c.job.slots = cf_be_fixed_job() ? c.job.slots : 32;
	c.n_tensors = 4;
	c.orders = 1;
	c.count = 64 * 100;
	c.max_ns = budget(4000000000ull);
	cf_allreduce(&c);
}

/* issue 14's stall: 3 hosts, K = 64, 10.5 k chunks against 4096 slots,
 * one worker's first receipts lost */
static void stall(void **state)
{
	struct cf_case c;

	(void)state;
	base_case(&c, 3, TLY_DT_I32, CF_SUM);
	c.job.slots = cf_be_fixed_job() ? c.job.slots : 4096;
	c.n_tensors = 1;
	c.count = 64 * 10500;
	c.window = 64;
	c.f.confirm_rank = 2;
	c.f.confirm_drop = 8;
	c.f.loss = 0.01;
	c.expect_busy = !cf_be_fixed_job();
	c.max_ns = budget(4000000000ull);
	cf_allreduce(&c);
}

/* --- section 13 obligations, probed packet by packet (2 workers) --- */

#define T_ID 0x7e570001u
#define MAXR 64

static struct cf_reply rep[MAXR];

static struct cf_run *raw_open(struct cf_job *j)
{
	struct cf_run *r;

	job_of(j, 2, 256);
	r = cf_raw_open(j);
	assert_non_null(r);
	return r;
}

static void lanes_of(int32_t *l, uint16_t k, uint16_t rank, uint16_t chunk)
{
	uint16_t i;

	for (i = 0; i < k; i++)
		l[i] = (int32_t)(0x7fff0000u + i * 2654435761u +
				 rank * 40503u + chunk * 977u);
}

static void send_data(struct cf_run *r, const struct cf_job *j,
		      uint16_t rank, uint16_t chunk, uint8_t flags,
		      int8_t shift, uint32_t cookie)
{
	int32_t l[CF_K_MAX];
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = flags, .rank = rank,
		.tensor = T_ID, .chunk = chunk, .shift = shift,
		.cookie = cookie,
		.slot = (uint16_t)tly_slot_of(T_ID, chunk,
					      flags & TLY_F_EXP, j->slots),
	};

	lanes_of(l, j->k, rank, chunk);
	cf_raw_send(r, &h, l, j->k);
}

/* a receipt for one chunk, in the job's profile's form */
static void send_confirm(struct cf_run *r, const struct cf_job *j,
			 uint16_t rank, uint16_t chunk)
{
	struct tly_hdr h = { .type = TLY_T_CONFIRM, .rank = rank };
	int32_t range[2];

	if (j->profile == TLY_PROFILE_SWITCH) {
		h.flags = TLY_F_ACK_REQ;
		h.tensor = T_ID;
		h.chunk = chunk;
		h.slot = (uint16_t)tly_slot_of(T_ID, chunk, 0, j->slots);
		cf_raw_send(r, &h, NULL, 0);
		return;
	}
	h.aux = 1;
	range[0] = (int32_t)T_ID;
	range[1] = (int32_t)((uint32_t)chunk << 16);	/* EXP 0, count 1 */
	cf_raw_send(r, &h, range, 2);
}

static unsigned int count(unsigned int n, uint8_t type, int rank)
{
	unsigned int i, c = 0;

	for (i = 0; i < n; i++)
		if (rep[i].h.type == type && (rank < 0 || rep[i].rank == rank))
			c++;
	return c;
}

/* the wrapping sum of the two workers' lanes */
static void check_sum(const struct cf_reply *x, const struct cf_job *j,
		      uint16_t chunk)
{
	int32_t a[CF_K_MAX], b[CF_K_MAX];
	uint16_t i;

	assert_non_null(x);
	lanes_of(a, j->k, 0, chunk);
	lanes_of(b, j->k, 1, chunk);
	for (i = 0; i < j->k; i++)
		assert_int_equal(x->lanes[i],
				 (int32_t)((uint32_t)a[i] + (uint32_t)b[i]));
}

static const struct cf_reply *find_flag(unsigned int n, uint8_t type,
				       int rank, uint8_t flag)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (rep[i].h.type == type && (rank < 0 || rep[i].rank == rank)
		    && (rep[i].h.flags & flag) == flag)
			return &rep[i];
	return NULL;
}

static const struct cf_reply *find(unsigned int n, uint8_t type, int rank)
{
	return find_flag(n, type, rank, 0);
}

/* rules 4 and 5: a DATA with ACK_REQ gets one ACK echoing INT (and EXP) */
static void ob_ack_echoes_mode(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	unsigned int n;

	(void)state;
	send_data(r, &j, 0, 3, TLY_F_INT | TLY_F_ACK_REQ, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_int_equal(count(n, TLY_T_ACK, 0), 1);
	assert_true(find(n, TLY_T_ACK, 0)->h.flags & TLY_F_INT);
	assert_int_equal(count(n, TLY_T_RESULT, -1), 0);
	send_data(r, &j, 0, 4, TLY_F_EXP | TLY_F_ACK_REQ, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_int_equal(count(n, TLY_T_ACK, 0), 1);
	assert_true(find(n, TLY_T_ACK, 0)->h.flags & TLY_F_EXP);
	cf_raw_close(r);
}

/* rule 3: no RESULT before all n; then one to every worker, exact */
static void ob_result_after_all(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	unsigned int n;

	(void)state;
	send_data(r, &j, 0, 5, TLY_F_INT, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_int_equal(count(n, TLY_T_RESULT, -1), 0);
	send_data(r, &j, 1, 5, TLY_F_INT, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_true(count(n, TLY_T_RESULT, 0) >= 1);
	assert_true(count(n, TLY_T_RESULT, 1) >= 1);
	check_sum(find(n, TLY_T_RESULT, 0), &j, 5);
	check_sum(find(n, TLY_T_RESULT, 1), &j, 5);
	cf_raw_close(r);
}

/* rule 2: a duplicate contribution is added once */
static void ob_duplicate_once(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	unsigned int n;

	(void)state;
	send_data(r, &j, 0, 6, TLY_F_INT, 0, 0);
	send_data(r, &j, 0, 6, TLY_F_INT | TLY_F_RETX | TLY_F_ACK_REQ, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_int_equal(count(n, TLY_T_RESULT, -1), 0);
	assert_int_equal(count(n, TLY_T_BUSY, -1), 0);	/* rule 6 */
	send_data(r, &j, 1, 6, TLY_F_INT, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_non_null(find(n, TLY_T_RESULT, 1));
	check_sum(find(n, TLY_T_RESULT, 1), &j, 6);
	cf_raw_close(r);
}

/* rule 2: a DATA whose mode or shift disagrees with the sum is dropped */
static void ob_mismatch_dropped(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	unsigned int n;

	(void)state;
	send_data(r, &j, 0, 7, TLY_F_INT, 0, 0);
	send_data(r, &j, 1, 7, 0, 5, 0);		/* float mode */
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_int_equal(count(n, TLY_T_RESULT, -1), 0);
	send_data(r, &j, 1, 7, TLY_F_INT, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_non_null(find(n, TLY_T_RESULT, 0));
	check_sum(find(n, TLY_T_RESULT, 0), &j, 7);
	cf_raw_close(r);
}

/* rule 1: a packet without the epoch's cookie is never acted on */
static void ob_foreign_cookie(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	unsigned int n;

	(void)state;
	send_data(r, &j, 0, 8, TLY_F_INT | TLY_F_ACK_REQ, 0, j.cookie ^ 1);
	send_data(r, &j, 1, 8, TLY_F_INT | TLY_F_ACK_REQ, 0, j.cookie ^ 1);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_int_equal(n, 0);
	send_data(r, &j, 0, 8, TLY_F_INT, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_int_equal(count(n, TLY_T_RESULT, -1), 0);
	send_data(r, &j, 1, 8, TLY_F_INT, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	check_sum(find(n, TLY_T_RESULT, 1), &j, 8);
	cf_raw_close(r);
}

/* rule 7: a kept (DONE) chunk answers a re-sent DATA with the RESULT, to
 * its sender only, also after another worker's receipt */
static void ob_done_answers_data(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	const struct cf_reply *x;
	unsigned int n;

	(void)state;
	send_data(r, &j, 0, 9, TLY_F_INT, 0, 0);
	send_data(r, &j, 1, 9, TLY_F_INT, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_non_null(find(n, TLY_T_RESULT, 0));
	send_confirm(r, &j, 0, 9);
	(void)cf_raw_collect(r, rep, MAXR, 20000);
	send_data(r, &j, 1, 9, TLY_F_INT | TLY_F_RETX | TLY_F_ACK_REQ, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 20000);
	x = find(n, TLY_T_RESULT, 1);
	assert_non_null(x);
	assert_true(x->h.flags & TLY_F_INT);
	check_sum(x, &j, 9);
	cf_raw_close(r);
}

/* rule 8 (software profile): the RESULT is re-sent to a worker whose
 * receipt is missing, until it comes, and only then the slot is freed */
static void ob_resend_until_confirmed(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	unsigned int n, i;

	(void)state;
	if (j.profile == TLY_PROFILE_SWITCH) {
		cf_raw_close(r);
		skip();		/* the switch profile: the worker re-sends */
	}
	send_data(r, &j, 0, 10, TLY_F_INT, 0, 0);
	send_data(r, &j, 1, 10, TLY_F_INT, 0, 0);
	(void)cf_raw_collect(r, rep, MAXR, 20000);
	send_confirm(r, &j, 0, 10);
	/* any back-off is allowed, with a ceiling: tally's is 64 probe
	 * intervals, 16 ms here; the case waits 20 ms for each re-send */
	for (i = 0; i < 3; i++) {
		n = cf_raw_collect(r, rep, MAXR, 20000000);
		assert_non_null(find_flag(n, TLY_T_RESULT, 1, TLY_F_RETX));
		check_sum(find_flag(n, TLY_T_RESULT, 1, TLY_F_RETX), &j, 10);
	}
	send_confirm(r, &j, 1, 10);
	(void)cf_raw_collect(r, rep, MAXR, 20000000);
	n = cf_raw_collect(r, rep, MAXR, 20000000);
	assert_int_equal(count(n, TLY_T_RESULT, -1), 0);
	cf_raw_close(r);
}

/* rule 9: a CONFIRM of a freed chunk (again, duplicated) is harmless */
static void ob_confirm_freed(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	unsigned int n, i;

	(void)state;
	send_data(r, &j, 0, 11, TLY_F_INT, 0, 0);
	send_data(r, &j, 1, 11, TLY_F_INT, 0, 0);
	(void)cf_raw_collect(r, rep, MAXR, 20000);
	for (i = 0; i < 3; i++) {
		send_confirm(r, &j, 0, 11);
		send_confirm(r, &j, 1, 11);
		n = cf_raw_collect(r, rep, MAXR, 50000);
		/* the first round may cross a re-send of the aggregator */
		if (i)
			assert_int_equal(count(n, TLY_T_RESULT, -1), 0);
		assert_int_equal(count(n, TLY_T_BUSY, -1), 0);
		/* switch profile: every CONFIRM with ACK_REQ gets its ACK
		 * with RELEASED, whatever the slot's state */
		if (j.profile == TLY_PROFILE_SWITCH) {
			assert_non_null(find_flag(n, TLY_T_ACK, 0,
						  TLY_F_RELEASED));
			assert_non_null(find_flag(n, TLY_T_ACK, 1,
						  TLY_F_RELEASED));
		}
	}
	/* the aggregator still works: another chunk, exact */
	send_data(r, &j, 0, 12, TLY_F_INT, 0, 0);
	send_data(r, &j, 1, 12, TLY_F_INT, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 200000);
	check_sum(find(n, TLY_T_RESULT, 0), &j, 12);
	cf_raw_close(r);
}

/* switch profile: BUSY for a chunk whose slot another chunk holds, while
 * the started chunk is still accepted (rule 6) and completes */
static void ob_busy_on_collision(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	uint16_t a = 20, b;
	unsigned int n;

	(void)state;
	if (j.profile != TLY_PROFILE_SWITCH) {
		cf_raw_close(r);
		skip();		/* software: evicts or uses its fallback */
	}
	for (b = a + 1; tly_slot_of(T_ID, b, 0, j.slots) !=
			tly_slot_of(T_ID, a, 0, j.slots); b++)
		;
	send_data(r, &j, 0, a, TLY_F_INT | TLY_F_ACK_REQ, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 20000);
	assert_int_equal(count(n, TLY_T_ACK, 0), 1);
	send_data(r, &j, 0, b, TLY_F_INT | TLY_F_ACK_REQ, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 20000);
	assert_int_equal(count(n, TLY_T_BUSY, 0), 1);
	assert_int_equal(rep[0].h.chunk, b);
	assert_true(rep[0].h.flags & TLY_F_INT);
	send_data(r, &j, 1, a, TLY_F_INT | TLY_F_ACK_REQ, 0, 0);
	n = cf_raw_collect(r, rep, MAXR, 20000);
	assert_int_equal(count(n, TLY_T_BUSY, -1), 0);
	check_sum(find(n, TLY_T_RESULT, 1), &j, a);
	cf_raw_close(r);
}

/* switch profile: a CONFIRM of several chunks (section 13, rule 9): every
 * receipt in it is taken, so all its slots are freed, and its ACK with
 * RELEASED echoes them */
static void ob_confirm_receipts(void **state)
{
	struct cf_job j;
	struct cf_run *r = raw_open(&j);
	const struct cf_reply *x;
	uint16_t c[4] = { 40 }, i, b, rank;
	int32_t rl[6];
	unsigned int n;

	(void)state;
	if (j.profile != TLY_PROFILE_SWITCH) {
		cf_raw_close(r);
		skip();		/* software: ranges (ob_confirm_freed) */
	}
	/* four chunks in four slots */
	for (i = 1; i < 4; i++) {
		uint16_t k;

		c[i] = (uint16_t)(c[i - 1] + 1);
		for (k = 0; k < i; k++)
			if (tly_slot_of(T_ID, c[i], 0, j.slots) ==
			    tly_slot_of(T_ID, c[k], 0, j.slots)) {
				c[i]++;
				k = (uint16_t)-1;
			}
	}
	for (i = 0; i < 4; i++) {
		send_data(r, &j, 0, c[i], TLY_F_INT, 0, 0);
		send_data(r, &j, 1, c[i], TLY_F_INT, 0, 0);
	}
	n = cf_raw_collect(r, rep, MAXR, 200000);
	assert_true(count(n, TLY_T_RESULT, 0) >= 4);
	for (i = 0; i < 3; i++) {
		rl[2 * i] = (int32_t)T_ID;
		rl[2 * i + 1] = (int32_t)((uint32_t)c[i + 1] << 16 |
			tly_slot_of(T_ID, c[i + 1], 0, j.slots));
	}
	for (rank = 0; rank < 2; rank++) {
		struct tly_hdr h = {
			.type = TLY_T_CONFIRM, .flags = TLY_F_ACK_REQ,
			.rank = rank, .tensor = T_ID, .chunk = c[0], .aux = 3,
			.slot = (uint16_t)tly_slot_of(T_ID, c[0], 0, j.slots),
		};

		cf_raw_send(r, &h, rl, 6);
		n = cf_raw_collect(r, rep, MAXR, 50000);
		x = find_flag(n, TLY_T_ACK, rank, TLY_F_RELEASED);
		assert_non_null(x);
		assert_int_equal(x->h.chunk, c[0]);
		assert_int_equal(x->h.aux, 3);
		assert_memory_equal(x->lanes, rl, sizeof(rl));
	}
	/* every slot is free: a chunk hashed to each is taken, not BUSY */
	for (i = 0; i < 4; i++) {
		for (b = (uint16_t)(c[3] + 1);
		     tly_slot_of(T_ID, b, 0, j.slots) !=
		     tly_slot_of(T_ID, c[i], 0, j.slots); b++)
			;
		send_data(r, &j, 0, b, TLY_F_INT | TLY_F_ACK_REQ, 0, 0);
		n = cf_raw_collect(r, rep, MAXR, 20000);
		assert_int_equal(count(n, TLY_T_BUSY, -1), 0);
		assert_int_equal(count(n, TLY_T_ACK, 0), 1);
		send_data(r, &j, 1, b, TLY_F_INT, 0, 0);
		n = cf_raw_collect(r, rep, MAXR, 200000);
		check_sum(find(n, TLY_T_RESULT, 1), &j, b);
	}
	cf_raw_close(r);
}

static int name_matches(const char *name, const char *filter)
{
	return !filter || strstr(name, filter);
}

#define T(f) cmocka_unit_test(f)

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		T(f32_sum_2), T(f32_avg_2), T(f16_sum_2), T(f16_avg_2),
		T(bf16_sum_2), T(bf16_avg_2), T(i32_sum_2), T(i32_avg_2),
		T(f32_sum_4), T(f32_avg_4), T(f16_sum_4), T(f16_avg_4),
		T(bf16_sum_4), T(bf16_avg_4), T(i32_sum_4), T(i32_avg_4),
		T(loss10_f32), T(loss10_i32), T(dup10_f32), T(dup10_i32),
		T(reorder_f32), T(reorder_i32), T(all_faults_bf16),
		T(default_k),
		T(pool2), T(orders), T(stall),
		T(ob_ack_echoes_mode), T(ob_result_after_all),
		T(ob_duplicate_once), T(ob_mismatch_dropped),
		T(ob_foreign_cookie), T(ob_done_answers_data),
		T(ob_resend_until_confirmed), T(ob_confirm_freed),
		T(ob_busy_on_collision), T(ob_confirm_receipts),
	};
	struct CMUnitTest sel[sizeof(all) / sizeof(all[0])];
	const char *filter = argc > 2 ? argv[2] : NULL;
	char group[64];
	size_t i, n = 0;

	if (argc > 1)
		mode = argv[1];
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (name_matches(all[i].name, filter))
			sel[n++] = all[i];
	snprintf(group, sizeof(group), "conformance-%s", mode);
	return _cmocka_run_group_tests(group, sel, n, NULL, NULL);
}
