/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conf.h - the aggregator conformance suite (docs/conformance.md): real
 * engine workers, in this process, against an aggregator under test
 * behind a small backend interface.
 *
 * The runner owns a network of its own: every frame a worker sends and
 * every reply the aggregator gives goes through one queue with seeded
 * loss, duplication and reordering.  Frames are bare tally packets (the
 * UDP payload); a backend that needs more (the XDP program wants
 * Ethernet/IPv4/UDP) wraps and unwraps them.  In-process backends run on
 * a virtual clock; a backend that talks to a real aggregator over UDP
 * runs on the real one, and then the faults are injected on the worker
 * side only (the aggregator's own link is the operator's).
 *
 * Every reply the aggregator gives is checked as it leaves, against
 * docs/protocol.md section 13 (rules 3 and 4): header valid for a worker,
 * slot = slot_of(), INT/EXP echoed from the chunk's DATA, no RESULT
 * before all n contributions reached it, and every RESULT of a chunk
 * carries the same sum.
 */
#ifndef TALLY_TESTS_CONFORMANCE_CONF_H
#define TALLY_TESTS_CONFORMANCE_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/engine/worker.h"

#define CF_GROUP 0xffffu	/* a reply for every worker (multicast) */
/* the largest K a job may have (TALLY_CONFORMANCE_K is checked) */
#define CF_K_MAX TLY_K_MAX
#define CF_PKT_MAX (TLY_HDR_LEN + 4 * CF_K_MAX + 64)

struct cf_job {
	uint16_t job;
	uint32_t cookie;
	uint16_t k;
	uint16_t n;		/* workers */
	uint32_t slots;		/* the aggregator's pool */
	uint8_t profile;	/* enum tly_profile */
};

struct cf_run;

/* the aggregator under test */
struct cf_backend {
	const char *name;
	int realtime;		/* runs on the real clock */
	/* a tally packet from worker @rank to the aggregator */
	void (*rx)(struct cf_backend *be, uint16_t rank, const uint8_t *pkt,
		   size_t len, uint64_t now);
	/* timers; a realtime backend also receives here, waiting at most
	 * @wait_ns for something to arrive */
	void (*poll)(struct cf_backend *be, uint64_t now, uint64_t wait_ns);
	void (*destroy)(struct cf_backend *be);
	/* set by the runner: where replies go (rank or CF_GROUP) */
	void (*reply)(struct cf_run *r, uint16_t rank, const uint8_t *pkt,
		      size_t len);
	struct cf_run *run;
};

/* backends; NULL when unavailable (the reason is printed) */
struct cf_backend *cf_be_sw(const struct cf_job *j);
struct cf_backend *cf_be_xdp(const struct cf_job *j);
/* "ip:port" */
struct cf_backend *cf_be_udp(const struct cf_job *j, const char *addr);
/* the one the test binary was asked for: argv/env (conf_main.c) */
struct cf_backend *cf_be_open(const struct cf_job *j);
/* the job a backend is fixed to (the address backend: from env) */
void cf_job_defaults(struct cf_job *j, uint16_t n, uint8_t profile);
int cf_be_fixed_job(void);	/* 1: the job comes from outside */

struct cf_faults {
	uint64_t seed;
	double loss, dup;
	uint64_t reorder_ns;	/* extra uniform delay */
	/* drop the first confirm_drop CONFIRMs of rank confirm_rank - 1 */
	uint16_t confirm_rank;
	uint32_t confirm_drop;
};

enum cf_op { CF_SUM, CF_AVG };

struct cf_case {
	struct cf_job job;
	enum tly_dtype dtype;
	enum cf_op op;
	uint32_t n_tensors;	/* at most 4 */
	size_t count;		/* elements per tensor */
	uint32_t window;
	uint32_t max_tensors;	/* per worker at once (0: n_tensors) */
	int orders;		/* each worker submits and sends in its own
				 * order */
	struct cf_faults f;
	uint64_t max_ns;	/* give up after (virtual or real) */
	/* the run must have seen BUSY / re-sent RESULTs (the case's
	 * pressure was reached) */
	uint8_t expect_busy, expect_retx;
};

/* a whole all-reduce; checks results and replies; fails the test */
void cf_allreduce(const struct cf_case *c);

/* --- raw packets, for the obligations one can only probe by hand --- */
struct cf_reply {
	uint16_t rank;
	struct tly_hdr h;
	int32_t lanes[CF_K_MAX];
};

struct cf_run *cf_raw_open(const struct cf_job *j);
void cf_raw_close(struct cf_run *r);
/* send a DATA or CONFIRM from @h->rank (job/cookie filled when 0) */
void cf_raw_send(struct cf_run *r, const struct tly_hdr *h,
		 const int32_t *lanes, size_t n_lanes);
/* let the aggregator answer for @wait_ns (x20, at least 250 ms, on the
 * real clock);
 * returns the replies (up to @max) */
unsigned int cf_raw_collect(struct cf_run *r, struct cf_reply *out,
			    unsigned int max, uint64_t wait_ns);

#endif /* TALLY_TESTS_CONFORMANCE_CONF_H */
