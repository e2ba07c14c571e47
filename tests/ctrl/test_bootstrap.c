// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_bootstrap.c - the daemons' control messages: every type round-trips,
 * and every malformed, truncated or foreign message is refused.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ctrl/bootstrap.h"

static uint8_t buf[BOOT_MAX_MSG];

static struct boot_member member(uint16_t rank, uint8_t role)
{
	struct boot_member e = { .rank = rank, .role = role,
		.local_size = 2, .ip = 0x0a4d0001u + rank,
		.port = (uint16_t)(7000 + rank) };

	for (int i = 0; i < 6; i++)
		e.mac[i] = (uint8_t)(0x10 * i + rank);
	return e;
}

static struct boot_msg sample_roster(uint16_t n)
{
	struct boot_msg m = { .type = BOOT_ROSTER, .epoch = 3 };

	m.roster.job_key = 0xabcdef01u;
	m.roster.k = 256;
	m.roster.pool_slots = 4096;
	m.roster.algorithm = ALGO_AGGREGATE;
	m.roster.n = n;
	for (uint16_t i = 0; i < n; i++)
		m.roster.m[i] = member(i, i + 1 == n ? ROLE_AGGREGATOR :
						       ROLE_WORKER);
	return m;
}

static void test_register_round_trip(void **state)
{
	struct boot_msg in = { .type = BOOT_REGISTER, .epoch = 0 }, out;
	int len;

	(void)state;
	in.reg.self = member(3, ROLE_COLOCATED);
	in.reg.job_key = 42;
	in.reg.world = 4;
	in.reg.algorithm = ALGO_RING;
	in.reg.threads = 3;
	for (int i = 0; i < AUTH_NONCE_LEN; i++)
		in.reg.nonce[i] = (uint8_t)(0xa0 + i);
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(len, BOOT_HDR_LEN + 40 + BOOT_TAG_LEN);
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.type, BOOT_REGISTER);
	assert_memory_equal(&out.reg.self, &in.reg.self,
			    sizeof(in.reg.self));
	assert_int_equal(out.reg.job_key, 42);
	assert_int_equal(out.reg.world, 4);
	assert_int_equal(out.reg.algorithm, ALGO_RING);
	assert_int_equal(out.reg.threads, 3);
	assert_memory_equal(out.reg.nonce, in.reg.nonce, AUTH_NONCE_LEN);
	/* a registration without the field (0) means one thread */
	in.reg.threads = 0;
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.reg.threads, 1);
	assert_int_equal(out.reg.profile, 0);
	/* the switch profile rides in the same byte: both come back */
	in.reg.threads = 16;
	in.reg.profile = 1;
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.reg.threads, 16);
	assert_int_equal(out.reg.profile, 1);
	in.reg.threads = 1;
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.reg.threads, 1);
	assert_int_equal(out.reg.profile, 1);
	assert_int_equal(out.reg.compression, 0);
	/* [compression] method rides beside the algorithm */
	in.reg.compression = 2;
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.reg.compression, 2);
	assert_int_equal(out.reg.algorithm, ALGO_RING);
	assert_int_equal(out.reg.profile, 1);
	/* sign_ef (3) in bits 4-6: the byte as an older daemon wrote 0..2 */
	in.reg.compression = 3;
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(buf[BOOT_HDR_LEN + 22], 0x30 | ALGO_RING);
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.reg.compression, 3);
	assert_int_equal(out.reg.algorithm, ALGO_RING);
}

static void test_challenge_round_trip(void **state)
{
	struct boot_msg in = { .type = BOOT_CHALLENGE, .epoch = 7 }, out;
	int len;

	(void)state;
	for (int i = 0; i < AUTH_NONCE_LEN; i++)
		in.challenge.nonce[i] = (uint8_t)(3 * i + 1);
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(len, BOOT_HDR_LEN + AUTH_NONCE_LEN + BOOT_TAG_LEN);
	/* the tag is left zero for the sender to seal */
	for (int i = 0; i < BOOT_TAG_LEN; i++)
		assert_int_equal(buf[len - BOOT_TAG_LEN + i], 0);
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.type, BOOT_CHALLENGE);
	assert_int_equal(out.epoch, 7);
	assert_memory_equal(out.challenge.nonce, in.challenge.nonce,
			    AUTH_NONCE_LEN);
	/* without its tag a message is not whole yet */
	assert_int_equal(boot_decode(buf, (size_t)len - 1, &out), 0);
}

static void test_roster_round_trip(void **state)
{
	struct boot_msg in = sample_roster(5), out;
	int len;

	(void)state;
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(len, BOOT_HDR_LEN + BOOT_ROSTER_FIXED +
				  5 * BOOT_ENTRY_LEN + BOOT_TAG_LEN);
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.epoch, 3);
	assert_int_equal(out.roster.n, 5);
	assert_int_equal(out.roster.job_key, 0xabcdef01u);
	assert_int_equal(out.roster.k, 256);
	assert_int_equal(out.roster.pool_slots, 4096);
	for (int i = 0; i < 5; i++)
		assert_memory_equal(&out.roster.m[i], &in.roster.m[i],
				    sizeof(in.roster.m[i]));
}

static void test_small_messages_round_trip(void **state)
{
	static const uint16_t types[] = { BOOT_HEARTBEAT, BOOT_PEER_DOWN,
					  BOOT_ABORT, BOOT_REFUSE };
	struct boot_msg in, out;

	(void)state;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		int len;

		memset(&in, 0, sizeof(in));
		in.type = types[i];
		in.epoch = 9;
		if (types[i] == BOOT_REFUSE)
			in.refuse.reason = REFUSE_JOB_KEY;
		else
			in.peer.rank = 17;
		len = boot_encode(&in, buf, sizeof(buf));
		assert_int_equal(len, BOOT_HDR_LEN + 4 + BOOT_TAG_LEN);
		assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
		assert_int_equal(out.type, types[i]);
		assert_int_equal(out.epoch, 9);
		if (types[i] == BOOT_REFUSE)
			assert_int_equal(out.refuse.reason, REFUSE_JOB_KEY);
		else
			assert_int_equal(out.peer.rank, 17);
	}
}

/* A stream delivers messages in pieces: every prefix asks for more. */
static void test_truncated_waits_for_more(void **state)
{
	struct boot_msg in = sample_roster(3), out;
	int len = boot_encode(&in, buf, sizeof(buf));

	(void)state;
	for (int cut = 0; cut < len; cut++)
		assert_int_equal(boot_decode(buf, (size_t)cut, &out), 0);
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
}

static void test_two_messages_back_to_back(void **state)
{
	struct boot_msg a = { .type = BOOT_HEARTBEAT }, b = sample_roster(2);
	struct boot_msg out;
	int la = boot_encode(&a, buf, sizeof(buf));
	int lb = boot_encode(&b, buf + la, sizeof(buf) - (size_t)la);

	(void)state;
	assert_int_equal(boot_decode(buf, (size_t)(la + lb), &out), la);
	assert_int_equal(out.type, BOOT_HEARTBEAT);
	assert_int_equal(boot_decode(buf + la, (size_t)lb, &out), lb);
	assert_int_equal(out.type, BOOT_ROSTER);
}

static int encode_then(struct boot_msg *m, size_t at, uint8_t byte)
{
	struct boot_msg out;
	int len = boot_encode(m, buf, sizeof(buf));

	buf[at] = byte;
	return boot_decode(buf, (size_t)len, &out);
}

/* rdma's queue pair per dataplane thread: a MAC for each thread past the
 * first rides after REGISTER's fixed part and after ROSTER's entries */
static void test_thread_macs_round_trip(void **state)
{
	struct boot_msg in = { .type = BOOT_REGISTER }, out;
	struct boot_msg ros = sample_roster(3);
	size_t table;
	int len;

	(void)state;
	in.reg.self = member(1, ROLE_WORKER);
	in.reg.world = 2;
	in.reg.algorithm = ALGO_AGGREGATE;
	in.reg.threads = 3;
	in.reg.self.thread_mac[0][5] = 0x21;
	in.reg.self.thread_mac[1][0] = 0x02;
	/* past threads - 1: not the member's, not sent */
	in.reg.self.thread_mac[2][0] = 0x77;
	len = boot_encode(&in, buf, sizeof(buf));
	assert_int_equal(len, BOOT_HDR_LEN + 40 + 2 * 6 + BOOT_TAG_LEN);
	assert_int_equal(buf[BOOT_HDR_LEN + 40 + 5], 0x21);
	assert_int_equal(buf[BOOT_HDR_LEN + 46], 0x02);
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_memory_equal(out.reg.self.thread_mac, in.reg.self.thread_mac,
			    2 * 6);
	assert_int_equal(out.reg.self.thread_mac[2][0], 0);
	/* the table's width must be the threads': 2 threads, 2 MACs */
	assert_int_equal(encode_then(&in, BOOT_HDR_LEN + 23, 2),
			 BOOT_E_LENGTH);
	assert_int_equal(encode_then(&in, BOOT_HDR_LEN + 23, 17),
			 BOOT_E_FIELD);
	/* a length that is no table at all */
	len = boot_encode(&in, buf, sizeof(buf));
	buf[11] = 40 + 5;
	assert_int_equal(boot_decode(buf, (size_t)len, &out), BOOT_E_LENGTH);
	/* a table without a MAC (the encoder leaves such a table out) */
	len = boot_encode(&in, buf, sizeof(buf));
	memset(buf + BOOT_HDR_LEN + 40, 0, 2 * 6);
	assert_int_equal(boot_decode(buf, (size_t)len, &out), BOOT_E_FIELD);
	/* all zero: no table, the message of one without it */
	memset(in.reg.self.thread_mac, 0, sizeof(in.reg.self.thread_mac));
	assert_int_equal(boot_encode(&in, buf, sizeof(buf)),
			 BOOT_HDR_LEN + 40 + BOOT_TAG_LEN);

	ros.roster.threads = 2;
	for (int i = 0; i < 3; i++)
		ros.roster.m[i].thread_mac[0][4] = (uint8_t)(0x50 + i);
	len = boot_encode(&ros, buf, sizeof(buf));
	table = BOOT_HDR_LEN + BOOT_ROSTER_FIXED + 3 * BOOT_ENTRY_LEN;
	assert_int_equal(len, (int)table + 3 * 6 + BOOT_TAG_LEN);
	assert_int_equal(buf[BOOT_HDR_LEN + 13], 2);
	assert_int_equal(buf[table + 6 + 4], 0x51);
	assert_int_equal(boot_decode(buf, (size_t)len, &out), len);
	assert_int_equal(out.roster.threads, 2);
	for (int i = 0; i < 3; i++)
		assert_memory_equal(&out.roster.m[i], &ros.roster.m[i],
				    sizeof(ros.roster.m[i]));
	/* a width of 1 (no MAC to carry), beyond 16, or not the length's */
	assert_int_equal(encode_then(&ros, BOOT_HDR_LEN + 13, 1),
			 BOOT_E_FIELD);
	assert_int_equal(encode_then(&ros, BOOT_HDR_LEN + 13, 17),
			 BOOT_E_FIELD);
	assert_int_equal(encode_then(&ros, BOOT_HDR_LEN + 13, 3),
			 BOOT_E_LENGTH);
	assert_int_equal(encode_then(&ros, BOOT_HDR_LEN + 13, 0),
			 BOOT_E_LENGTH);
	/* and the encoder refuses to write them */
	ros.roster.threads = 1;
	assert_int_equal(boot_encode(&ros, buf, sizeof(buf)), -1);
	ros.roster.threads = BOOT_MAX_THREADS + 1;
	assert_int_equal(boot_encode(&ros, buf, sizeof(buf)), -1);
	/* the largest roster fits the largest message */
	ros = sample_roster(BOOT_MAX_MEMBERS);
	ros.roster.threads = BOOT_MAX_THREADS;
	assert_int_equal(boot_encode(&ros, buf, sizeof(buf)), BOOT_MAX_MSG);
	assert_int_equal(boot_decode(buf, BOOT_MAX_MSG, &out), BOOT_MAX_MSG);
}

static void test_malformed_header(void **state)
{
	struct boot_msg m = { .type = BOOT_HEARTBEAT };

	(void)state;
	assert_int_equal(encode_then(&m, 0, 'X'), BOOT_E_MAGIC);
	assert_int_equal(encode_then(&m, 5, 9), BOOT_E_VERSION);
	assert_int_equal(encode_then(&m, 7, 77), BOOT_E_TYPE);
	assert_int_equal(encode_then(&m, 11, 5), BOOT_E_LENGTH);
	/* garbage is refused as soon as the magic is visible */
	assert_int_equal(boot_decode((const uint8_t *)"GET / HTTP/1.1", 14,
				     &m), BOOT_E_MAGIC);
}

static void test_malformed_fields(void **state)
{
	struct boot_msg reg = { .type = BOOT_REGISTER };
	struct boot_msg ros = sample_roster(3);
	size_t entry0 = BOOT_HDR_LEN + BOOT_ROSTER_FIXED;

	(void)state;
	reg.reg.self = member(1, ROLE_WORKER);
	reg.reg.world = 2;
	reg.reg.algorithm = ALGO_AGGREGATE;
	/* role 9 */
	assert_int_equal(encode_then(&reg, BOOT_HDR_LEN + 2, 9), BOOT_E_FIELD);
	/* rank not below world */
	assert_int_equal(encode_then(&reg, BOOT_HDR_LEN + 1, 2), BOOT_E_FIELD);
	/* world 0 */
	assert_int_equal(encode_then(&reg, BOOT_HDR_LEN + 21, 0),
			 BOOT_E_FIELD);
	/* algorithm 0 */
	assert_int_equal(encode_then(&reg, BOOT_HDR_LEN + 22, 0),
			 BOOT_E_FIELD);
	/* block_topk1_ef (5) in bits 4-6; a method after it (6) */
	assert_true(encode_then(&reg, BOOT_HDR_LEN + 22,
				0x50 | ALGO_AGGREGATE) > 0);
	assert_int_equal(encode_then(&reg, BOOT_HDR_LEN + 22,
				     0x60 | ALGO_AGGREGATE), BOOT_E_FIELD);
	/* port 0 */
	reg.reg.self.port = 0;
	assert_int_equal(boot_encode(&reg, buf, sizeof(buf)) > 0, 1);
	assert_int_equal(boot_decode(buf, BOOT_HDR_LEN + 40 + BOOT_TAG_LEN,
				     &reg), BOOT_E_FIELD);

	/* roster: duplicate rank, bad role, bad algorithm, n beyond length */
	assert_int_equal(encode_then(&ros, entry0 + BOOT_ENTRY_LEN + 1, 0),
			 BOOT_E_FIELD);
	assert_int_equal(encode_then(&ros, entry0 + 2, 0), BOOT_E_FIELD);
	assert_int_equal(encode_then(&ros, BOOT_HDR_LEN + 12, 3),
			 BOOT_E_FIELD);
	assert_int_equal(encode_then(&ros, BOOT_HDR_LEN + 11, 4),
			 BOOT_E_LENGTH);
	assert_int_equal(encode_then(&ros, BOOT_HDR_LEN + 11, 0),
			 BOOT_E_LENGTH);
}

static void test_encode_refuses_invalid(void **state)
{
	struct boot_msg m = sample_roster(1);

	(void)state;
	m.roster.n = 0;
	assert_int_equal(boot_encode(&m, buf, sizeof(buf)), -1);
	m.roster.n = BOOT_MAX_MEMBERS + 1;
	assert_int_equal(boot_encode(&m, buf, sizeof(buf)), -1);
	m = sample_roster(4);
	assert_int_equal(boot_encode(&m, buf, 20), -1);	/* too small */
	m.type = 99;
	assert_int_equal(boot_encode(&m, buf, sizeof(buf)), -1);
}

static void test_names(void **state)
{
	(void)state;
	assert_int_equal(boot_role_parse("worker"), ROLE_WORKER);
	assert_int_equal(boot_role_parse("aggregator"), ROLE_AGGREGATOR);
	assert_int_equal(boot_role_parse("worker+aggregator"),
			 ROLE_COLOCATED);
	assert_int_equal(boot_role_parse("switch"), -1);
	assert_string_equal(boot_role_name(ROLE_COLOCATED),
			    "worker+aggregator");
	assert_string_not_equal(boot_error_str(BOOT_E_MAGIC),
				boot_error_str(BOOT_E_FIELD));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_register_round_trip),
		cmocka_unit_test(test_challenge_round_trip),
		cmocka_unit_test(test_roster_round_trip),
		cmocka_unit_test(test_thread_macs_round_trip),
		cmocka_unit_test(test_small_messages_round_trip),
		cmocka_unit_test(test_truncated_waits_for_more),
		cmocka_unit_test(test_two_messages_back_to_back),
		cmocka_unit_test(test_malformed_header),
		cmocka_unit_test(test_malformed_fields),
		cmocka_unit_test(test_encode_refuses_invalid),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
