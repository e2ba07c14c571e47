// SPDX-License-Identifier: BSD-3-Clause
/*
 * gen_vectors.c - writes tests/dataplane/vectors/protocol.txt from the
 * implementation: every derivation and hash of docs/protocol.md
 * (section 11) on chosen and pseudo-random inputs, header and envelope
 * encodings, a worker's CONFIRM, and the control messages.
 *
 *   build/tests/dataplane/gen_protocol_vectors > protocol.txt
 *
 * The file is checked in; test_vectors.c checks the code against it and
 * check_protocol.py computes every output again from the spec alone.
 */
#include <stdio.h>
#include <string.h>

#include "ctrl/auth.h"
#include "ctrl/bootstrap.h"
#include "dataplane/compress/sign_ef.h"
#include "dataplane/engine/wire.h"
#include "vec.h"

static uint64_t lcg = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return lcg ^ (lcg >> 29);
}

static void hex(const uint8_t *p, size_t n)
{
	char s[2 * 4200 + 1];

	vec_tohex(p, n, s);
	fputs(s, stdout);
}

static const char *const secrets[] = {
	"tally test secret 0123456789",
	"aaaaaaaaaaaaaaaa",
	"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
	"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f",
};
static const size_t secret_len[] = { 28, 16, 32 };

static void keys(void)
{
	static const uint32_t ck[][2] = {
		{ 0, 1 }, { 0x12345678, 1 }, { 0xffffffff, 7 }, { 42, 1000 },
	};
	char err[128];

	for (size_t s = 0; s < 3; s++) {
		struct auth_keys k;

		auth_keys_from_secret(&k, secrets[s], secret_len[s], err,
				      sizeof(err));
		printf("kdf secret=");
		hex((const uint8_t *)secrets[s], secret_len[s]);
		printf(" ctrl=");
		hex(k.ctrl, 32);
		printf(" data=");
		hex(k.data, 32);
		printf("\n");
		for (size_t i = 0; i < 4; i++) {
			printf("cookie secret=");
			hex((const uint8_t *)secrets[s], secret_len[s]);
			printf(" job_key=%u epoch=%u cookie=0x%08x\n",
			       ck[i][0], ck[i][1],
			       auth_cookie(&k, ck[i][0], ck[i][1]));
		}
	}
}

/* the tag of a control message (its bytes without the tag) */
static void macs(void)
{
	struct boot_msg hb = { .type = BOOT_HEARTBEAT, .epoch = 3,
			       .peer.rank = 2 };
	uint8_t msg[BOOT_MAX_MSG], nc[16], nm[16];
	char err[128];
	int len = boot_encode(&hb, msg, sizeof(msg));

	for (int i = 0; i < 16; i++) {
		nc[i] = (uint8_t)(0xa0 + i);
		nm[i] = (uint8_t)(0x10 * i + 1);
	}
	for (int d = AUTH_C2M; d <= AUTH_M2C; d++)
		for (uint64_t seq = 0; seq < 6; seq += 5) {
			struct auth_keys k;
			struct auth_stream st;

			auth_keys_from_secret(&k, secrets[0], secret_len[0],
					      err, sizeof(err));
			auth_stream_init(&st, &k, (enum auth_dir)d, nc, nm);
			st.seq = seq;
			auth_seal(&st, msg, (size_t)len);
			printf("mac secret=");
			hex((const uint8_t *)secrets[0], secret_len[0]);
			printf(" dir=%d nonce_c=", d);
			hex(nc, 16);
			printf(" nonce_m=");
			hex(nm, 16);
			printf(" seq=%llu msg=", (unsigned long long)seq);
			hex(msg, (size_t)len - AUTH_TAG_LEN);
			printf(" tag=");
			hex(msg + len - AUTH_TAG_LEN, AUTH_TAG_LEN);
			printf("\n");
		}
}

static void ids(void)
{
	static const uint32_t wj[][2] = {
		{ 0, 0 }, { 0, 1 }, { 1, 1 }, { 0x12345678, 3 },
		{ 0xffffffff, 0xffffffff }, { 42, 1000 },
	};
	static const uint64_t tk[][3] = {
		{ 0, 0, 0 }, { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 },
		{ 0xdeadbeefcafef00dull, 12, 3 },
		{ 0xffffffffffffffffull, 0xffffffff, 0xffffffff },
	};
	int i;

	for (i = 0; i < 10; i++) {
		uint32_t k = i < 6 ? wj[i][0] : (uint32_t)rnd();
		uint32_t e = i < 6 ? wj[i][1] : (uint32_t)rnd() % 100;

		printf("wire_job job_key=%u epoch=%u wire_job=0x%04x\n", k, e,
		       tly_wire_job(k, e));
	}
	for (i = 0; i < 12; i++) {
		uint64_t k = i < 6 ? tk[i][0] : rnd();
		uint32_t it = i < 6 ? (uint32_t)tk[i][1] : (uint32_t)rnd();
		uint32_t p = i < 6 ? (uint32_t)tk[i][2] : (uint32_t)rnd() % 8;

		printf("tensor_id key=0x%016llx iteration=%u partition=%u "
		       "id=0x%08x\n", (unsigned long long)k, it, p,
		       tly_tensor_id(k, it, p));
	}
}

/* chunks: fixed corners, then pseudo-random ones */
static void chunk(int i, uint32_t *t, uint16_t *c, uint8_t *e)
{
	static const uint32_t ft[] = { 0, 0, 1, 0xffffffff, 0x8a3f0c21 };
	static const uint16_t fc[] = { 0, 1, 0, 65535, 10499 };

	if (i < 5) {
		*t = ft[i];
		*c = fc[i];
		*e = (uint8_t)(i == 1);
		return;
	}
	*t = (uint32_t)rnd();
	*c = (uint16_t)rnd();
	*e = (uint8_t)(rnd() & 1);
}

static void hashes(void)
{
	static const uint32_t slots[] = { 1, 7, 4096, 65536 };
	static const uint32_t fbs[] = { 1, 5, 64, 1088 };
	static const uint32_t shards[] = { 1, 2, 3, 4, 5, 8 };
	static const uint32_t threads[] = { 1, 2, 3, 16 };
	uint32_t t;
	uint16_t c;
	uint8_t e;
	int i;

	for (i = 0; i < 12; i++) {
		chunk(i, &t, &c, &e);
		printf("chunk_hash tensor=0x%08x chunk=%u exp=%u key=0x%016llx "
		       "hash=0x%016llx\n", t, c, e,
		       (unsigned long long)tly_chunk_key(t, c, e),
		       (unsigned long long)tly_chunk_hash(t, c, e));
	}
	for (i = 0; i < 12; i++) {
		uint32_t n = slots[i % 4];

		chunk(i, &t, &c, &e);
		printf("slot tensor=0x%08x chunk=%u exp=%u n_slots=%u "
		       "slot=%u\n", t, c, e, n, tly_slot_of(t, c, e, n));
	}
	for (i = 0; i < 12; i++) {
		uint32_t n = fbs[i % 4];

		chunk(i, &t, &c, &e);
		printf("fallback tensor=0x%08x chunk=%u exp=%u n_fallback=%u "
		       "start=%u\n", t, c, e, n, tly_fallback_of(t, c, e, n));
	}
	for (i = 0; i < 18; i++) {
		uint32_t n = shards[i % 6];

		chunk(i, &t, &c, &e);
		printf("shard tensor=0x%08x chunk=%u exp=%u n_shards=%u "
		       "shard=%u\n", t, c, e, n, tly_shard_of(t, c, e, n));
	}
	for (i = 0; i < 8; i++) {
		uint32_t n = threads[i % 4];

		chunk(i, &t, &c, &e);
		printf("thread id=0x%08x n_threads=%u thread=%u\n", t, n,
		       tly_thread_shard(t, n));
	}
	/* the sign vote's coins of 64 elements from @first, MSB first */
	for (i = 0; i < 6; i++) {
		uint32_t first = (uint32_t)i * 1013;
		uint64_t bits = 0;
		int j;

		chunk(i, &t, &c, &e);
		for (j = 0; j < 64; j++)
			bits = bits << 1 |
			       tly_sign_tie(tly_sign_tie_seed(t, c), first + j);
		printf("sign_coin tensor=0x%08x chunk=%u first=%u "
		       "bits=0x%016llx\n", t, c, first,
		       (unsigned long long)bits);
	}
}

static void header(const struct tly_hdr *h)
{
	uint8_t b[TLY_HDR_LEN];

	tly_hdr_write(b, h);
	printf("header type=%u flags=0x%02x job=0x%04x rank=%u slot=%u "
	       "tensor=0x%08x chunk=%u shift=%d aux=%u cookie=0x%08x bytes=",
	       h->type, h->flags, h->job, h->rank, h->slot, h->tensor,
	       h->chunk, h->shift, h->aux, h->cookie);
	hex(b, sizeof(b));
	printf("\n");
}

static void headers(void)
{
	uint32_t t = tly_tensor_id(7, 1, 0);
	struct tly_hdr h = {
		.type = TLY_T_DATA, .flags = TLY_F_RETX | TLY_F_ACK_REQ,
		.job = tly_wire_job(0x12345678, 3), .rank = 2, .tensor = t,
		.chunk = 300, .shift = 21, .cookie = 0xc001d00d,
	};
	static const struct tly_addr src = {
		{ 0x02, 0, 0, 0, 0, 0x01 }, 0x0a000001, 7000 };
	static const struct tly_addr dst = {
		{ 0x02, 0, 0, 0, 0, 0x02 }, 0x0a000002, 7001 };
	uint8_t f[TLY_L2L4_LEN];

	h.slot = (uint16_t)tly_slot_of(t, 300, 0, 4096);
	header(&h);				/* a retransmitted DATA */
	h.type = TLY_T_RESULT;
	h.flags = TLY_F_RETX | TLY_F_FALLBACK;
	header(&h);				/* a re-sent RESULT */
	h.flags = TLY_F_EXP;
	h.shift = 0;
	h.chunk = 4;
	h.slot = (uint16_t)tly_slot_of(t, 4, 1, 4096);
	header(&h);				/* an exponent RESULT */
	h.type = TLY_T_BUSY;
	h.flags = TLY_F_INT;
	h.chunk = 9;
	h.slot = (uint16_t)tly_slot_of(t, 9, 0, 4096);
	header(&h);				/* BUSY of an int32 chunk */
	h.type = TLY_T_DATA;
	h.flags = 0;
	h.shift = -126;
	header(&h);				/* a negative shift */
	h = (struct tly_hdr){ .type = TLY_T_CONFIRM, .job = 0xbeef,
			      .rank = 63, .aux = 2, .cookie = 0xffffffff };
	header(&h);
	h = (struct tly_hdr){ .type = TLY_T_RING_ACK, .flags = TLY_F_REFUSE,
			      .job = 1, .rank = 1, .slot = 3, .tensor = t,
			      .chunk = 65530, .aux = 5, .cookie = 1 };
	header(&h);
	for (int d = 0; d < 2; d++) {
		uint8_t dscp = d ? 4 << 3 : 5 << 3;	/* prio 1, prio 0 */
		size_t tl = d ? TLY_HDR_LEN + 4 * 256 : TLY_HDR_LEN;

		tly_l2l4_write(f, &src, &dst, dscp, tl);
		printf("envelope src_mac=020000000001 src_ip=0x%08x "
		       "src_port=%u dst_mac=020000000002 dst_ip=0x%08x "
		       "dst_port=%u dscp=%u tally_len=%zu bytes=", src.ip,
		       src.port, dst.ip, dst.port, dscp, tl);
		hex(f, sizeof(f));
		printf("\n");
	}
}

static void confirms_switch(void)
{
	static const struct {
		uint16_t rank;
		uint32_t n_chunks;
		uint16_t chunks[16];
		unsigned int n;
	} v[] = {
		{ 1, 20, { 7 }, 1 },
		{ 2, 20, { 3, 0, 7, 19, 5 }, 5 },
		{ 0, 40, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 39 }, 11 },
	};
	uint32_t t = tly_tensor_id(99, 5, 1);

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint8_t out[VEC_CONFIRM_MAX];
		size_t len = vec_confirm_switch(v[i].rank, t, v[i].n_chunks,
						v[i].chunks, v[i].n, out);

		printf("confirm_switch rank=%u tensor=0x%08x n_chunks=%u "
		       "chunks=", v[i].rank, t, v[i].n_chunks);
		for (unsigned int j = 0; j < v[i].n; j++)
			printf("%s%u", j ? "," : "", v[i].chunks[j]);
		printf(" bytes=");
		hex(out, len);
		printf("\n");
	}
}

static void confirms(void)
{
	static const struct {
		uint16_t rank, n_aggs, to;
		uint32_t n_chunks;
		uint16_t chunks[16];
		unsigned int n;
		uint16_t chunks2[8];
		uint8_t exps2[8];
		unsigned int n2;
	} v[] = {
		{ 1, 1, 0, 20, { 0, 1, 2, 5, 7, 8, 3 }, 7,
		  { 0, 1, 2, 2, 300 }, { 1, 1, 1, 0, 0 }, 5 },
		{ 0, 1, 0, 64, { 63, 62, 0 }, 3, { 0 }, { 0 }, 0 },
		{ 2, 3, 0, 12, { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, 12,
		  { 0 }, { 0 }, 0 },
		{ 2, 3, 1, 12, { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, 12,
		  { 4, 5, 6, 7, 8, 9 }, { 1, 1, 1, 1, 1, 1 }, 6 },
		{ 3, 4, 3, 30, { 29, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 28 }, 12,
		  { 0 }, { 0 }, 0 },
	};
	uint32_t t = tly_tensor_id(99, 5, 1), t2 = tly_tensor_id(99, 4, 1);

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct vec_foreign fo = { t2, v[i].chunks2, v[i].exps2,
					  v[i].n2 };
		uint8_t out[VEC_CONFIRM_MAX];
		size_t len = vec_confirm(v[i].rank, v[i].n_aggs, v[i].to, t,
					 v[i].n_chunks, v[i].chunks, v[i].n,
					 &fo, out);

		printf("confirm rank=%u n_aggs=%u to=%u tensor=0x%08x "
		       "n_chunks=%u chunks=", v[i].rank, v[i].n_aggs,
		       v[i].to, t, v[i].n_chunks);
		for (unsigned int j = 0; j < v[i].n; j++)
			printf("%s%u", j ? "," : "", v[i].chunks[j]);
		printf(" tensor2=0x%08x chunks2=", t2);
		for (unsigned int j = 0; j < v[i].n2; j++)
			printf("%s%u", j ? "," : "", v[i].chunks2[j]);
		printf(" exps2=");
		for (unsigned int j = 0; j < v[i].n2; j++)
			printf("%s%u", j ? "," : "", v[i].exps2[j]);
		printf(" bytes=");
		hex(out, len);
		printf("\n");
	}
}

/* rank/role/local/mac/ip/port[/the MACs of threads 1 .. @threads-1,
 * joined by +] */
static void member(const struct boot_member *e, unsigned int threads)
{
	printf("%u/%u/%u/", e->rank, e->role, e->local_size);
	hex(e->mac, 6);
	printf("/0x%08x/%u", e->ip, e->port);
	for (unsigned int t = 0; t + 1 < threads; t++) {
		putchar(t ? '+' : '/');
		hex(e->thread_mac[t], 6);
	}
}

static void boot_line(const struct boot_msg *m)
{
	uint8_t b[BOOT_MAX_MSG];
	int len = boot_encode(m, b, sizeof(b));

	printf(" bytes=");
	hex(b, (size_t)len);
	printf("\n");
}

static void boot(void)
{
	struct boot_member e[3] = {
		{ .rank = 0, .role = ROLE_WORKER, .local_size = 4,
		  .mac = { 2, 0, 0, 0, 0, 1 }, .ip = 0x0a000001,
		  .port = 7000 },
		{ .rank = 1, .role = ROLE_COLOCATED, .local_size = 1,
		  .mac = { 2, 0, 0, 0, 0, 2 }, .ip = 0x0a000002,
		  .port = 7000 },
		{ .rank = 2, .role = ROLE_AGGREGATOR, .ip = 0xc0a80003,
		  .port = 65535 },
	};
	struct boot_msg m = { .type = BOOT_REGISTER, .epoch = 0 };

	m.reg.self = e[1];
	m.reg.job_key = 0x12345678;
	m.reg.world = 3;
	m.reg.algorithm = ALGO_AGGREGATE;
	m.reg.threads = 2;
	for (int i = 0; i < 16; i++)
		m.reg.nonce[i] = (uint8_t)(0x10 * i + 1);
	printf("boot type=%u epoch=%u self=", m.type, m.epoch);
	member(&m.reg.self, 1);
	printf(" job_key=%u world=%u algorithm=%u threads=%u nonce=",
	       m.reg.job_key, m.reg.world, m.reg.algorithm, m.reg.threads);
	hex(m.reg.nonce, 16);
	boot_line(&m);

	/* the same with 3 threads that have a MAC each (rdma's queue pairs:
	 * 02:LL:LL:QQ:QQ:QQ) */
	m.reg.threads = 3;
	memcpy(m.reg.self.thread_mac[0], "\x02\x00\x00\x00\x01\x12", 6);
	memcpy(m.reg.self.thread_mac[1], "\x02\x00\x00\x00\x01\x13", 6);
	printf("boot type=%u epoch=%u self=", m.type, m.epoch);
	member(&m.reg.self, m.reg.threads);
	printf(" job_key=%u world=%u algorithm=%u threads=%u nonce=",
	       m.reg.job_key, m.reg.world, m.reg.algorithm, m.reg.threads);
	hex(m.reg.nonce, 16);
	boot_line(&m);

	memset(&m, 0, sizeof(m));
	m.type = BOOT_ROSTER;
	m.epoch = 4;
	m.roster.job_key = 0x12345678;
	m.roster.k = 256;
	m.roster.pool_slots = 4096;
	m.roster.algorithm = ALGO_AGGREGATE;
	m.roster.n = 3;
	memcpy(m.roster.m, e, sizeof(e));
	printf("boot type=%u epoch=%u job_key=%u k=%u pool_slots=%u "
	       "algorithm=%u members=", m.type, m.epoch, m.roster.job_key,
	       m.roster.k, m.roster.pool_slots, m.roster.algorithm);
	for (int i = 0; i < 3; i++) {
		if (i)
			putchar(',');
		member(&e[i], 1);
	}
	boot_line(&m);

	/* with a table of 2 threads: one MAC each (all zero: a member
	 * without one) */
	m.roster.threads = 2;
	for (int i = 0; i < 2; i++) {
		memcpy(m.roster.m[i].thread_mac[0], e[i].mac, 6);
		m.roster.m[i].thread_mac[0][5] |= 0x40;
	}
	printf("boot type=%u epoch=%u job_key=%u k=%u pool_slots=%u "
	       "algorithm=%u threads=%u members=", m.type, m.epoch,
	       m.roster.job_key, m.roster.k, m.roster.pool_slots,
	       m.roster.algorithm, m.roster.threads);
	for (int i = 0; i < 3; i++) {
		if (i)
			putchar(',');
		member(&m.roster.m[i], m.roster.threads);
	}
	boot_line(&m);

	for (int t = BOOT_HEARTBEAT; t <= BOOT_ABORT; t++) {
		memset(&m, 0, sizeof(m));
		m.type = (uint16_t)t;
		m.epoch = 4;
		if (t == BOOT_REFUSE) {
			m.refuse.reason = REFUSE_CONFIG;
			printf("boot type=%d epoch=4 reason=%u", t,
			       m.refuse.reason);
		} else {
			m.peer.rank = 2;
			printf("boot type=%d epoch=4 rank=2", t);
		}
		boot_line(&m);
	}
	memset(&m, 0, sizeof(m));
	m.type = BOOT_CHALLENGE;
	m.epoch = 4;
	for (int i = 0; i < 16; i++)
		m.challenge.nonce[i] = (uint8_t)(0xa0 + i);
	printf("boot type=%u epoch=4 nonce=", m.type);
	hex(m.challenge.nonce, 16);
	boot_line(&m);
}

int main(void)
{
	char err[128];
	struct auth_keys k;

	if (auth_init() || auth_keys_from_secret(&k, secrets[0],
						 secret_len[0], err,
						 sizeof(err)))
		return 1;
	printf("# tally protocol test vectors: docs/protocol.md section 11.\n"
	       "# Generated from the implementation by "
	       "tests/dataplane/vectors/gen_vectors.c;\n"
	       "# checked against the code by test_vectors.c and against "
	       "the spec by check_protocol.py.\n"
	       "# A kind, then NAME=VALUE: integers decimal or 0x hex, "
	       "bytes as hex, lists with commas.\n");
	keys();
	macs();
	ids();
	hashes();
	headers();
	confirms();
	confirms_switch();
	boot();
	return 0;
}
