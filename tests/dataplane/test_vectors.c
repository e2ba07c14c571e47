// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_vectors.c - the implementation against every line of the
 * protocol's test vectors (vectors/protocol.txt, docs/protocol.md
 * section 11): key derivation, cookies, control-message tags, the wire
 * job key, tensor ids, chunk keys and hashes, slots, fallback starts,
 * shards, dataplane threads, header and envelope encodings, a worker's
 * CONFIRM, the control messages (encoded, and decoded back), and the
 * sign vote's coins.
 *
 * The file's path is the first argument (meson passes it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctrl/auth.h"
#include "ctrl/bootstrap.h"
#include "dataplane/compress/sign_ef.h"
#include "dataplane/engine/wire.h"
#include "vectors/vec.h"

static const char *path;

enum kind { V_KDF, V_COOKIE, V_MAC, V_WIRE_JOB, V_TENSOR_ID, V_CHUNK_HASH,
	    V_SLOT, V_FALLBACK, V_SHARD, V_THREAD, V_HEADER, V_ENVELOPE,
	    V_CONFIRM, V_BOOT, V_SIGN_COIN, V_CONFIRM_SWITCH, V_KINDS };

static const char *const kinds[V_KINDS] = {
	"kdf", "cookie", "mac", "wire_job", "tensor_id", "chunk_hash",
	"slot", "fallback", "shard", "thread", "header", "envelope",
	"confirm", "boot", "sign_coin", "confirm_switch",
};

/* the line being checked, for the failure message */
static unsigned int lineno;

#define U(name) vec_u64(l, name, &ok)
#define CHECK(cond) do {						\
	if (!(cond))							\
		fail_msg("%s:%u: %s", path, lineno, #cond);		\
} while (0)

static void keys_of(const struct vec_line *l, struct auth_keys *k)
{
	uint8_t secret[AUTH_SECRET_MAX];
	long n = vec_hex(l, "secret", secret, sizeof(secret));
	char err[128];

	CHECK(n > 0);
	CHECK(auth_keys_from_secret(k, secret, (size_t)n, err,
				    sizeof(err)) == 0);
}

static void check_bytes(const struct vec_line *l, const char *name,
			const uint8_t *got, size_t len)
{
	uint8_t want[4200];
	long n = vec_hex(l, name, want, sizeof(want));

	CHECK(n == (long)len);
	CHECK(memcmp(want, got, len) == 0);
}

static void v_kdf(const struct vec_line *l)
{
	struct auth_keys k;

	keys_of(l, &k);
	check_bytes(l, "ctrl", k.ctrl, 32);
	check_bytes(l, "data", k.data, 32);
}

static void v_cookie(const struct vec_line *l)
{
	struct auth_keys k;
	int ok = 1;

	keys_of(l, &k);
	CHECK(auth_cookie(&k, (uint32_t)U("job_key"), (uint32_t)U("epoch")) ==
	      U("cookie"));
	CHECK(ok);
}

static void v_mac(const struct vec_line *l)
{
	struct auth_keys k;
	struct auth_stream s;
	uint8_t nc[16], nm[16], msg[BOOT_MAX_MSG];
	long n = vec_hex(l, "msg", msg, sizeof(msg) - AUTH_TAG_LEN);
	int ok = 1;

	keys_of(l, &k);
	CHECK(vec_hex(l, "nonce_c", nc, 16) == 16);
	CHECK(vec_hex(l, "nonce_m", nm, 16) == 16);
	CHECK(n > 0);
	auth_stream_init(&s, &k, (enum auth_dir)U("dir"), nc, nm);
	s.seq = U("seq");
	CHECK(ok);
	auth_seal(&s, msg, (size_t)n + AUTH_TAG_LEN);
	check_bytes(l, "tag", msg + n, AUTH_TAG_LEN);
	/* and the receiver's side: the tag opens at that sequence number */
	s.seq = U("seq");
	CHECK(auth_open(&s, msg, (size_t)n + AUTH_TAG_LEN) == 0);
	msg[0] ^= 1;
	s.seq = U("seq");
	CHECK(auth_open(&s, msg, (size_t)n + AUTH_TAG_LEN) == -1);
}

static void v_ids(const struct vec_line *l, enum kind kd)
{
	uint32_t t = 0;
	uint16_t c = 0;
	uint8_t e = 0;
	int ok = 1;

	if (kd >= V_CHUNK_HASH && kd <= V_SHARD) {
		t = (uint32_t)U("tensor");
		c = (uint16_t)U("chunk");
		e = (uint8_t)U("exp");
		CHECK(e <= 1 && U("chunk") <= 0xffff);
	}
	switch (kd) {
	case V_WIRE_JOB:
		CHECK(tly_wire_job((uint32_t)U("job_key"),
				   (uint32_t)U("epoch")) == U("wire_job"));
		break;
	case V_TENSOR_ID:
		CHECK(tly_tensor_id(U("key"), (uint32_t)U("iteration"),
				    (uint32_t)U("partition")) == U("id"));
		break;
	case V_CHUNK_HASH:
		CHECK(tly_chunk_key(t, c, e) == U("key"));
		CHECK(tly_chunk_hash(t, c, e) == U("hash"));
		break;
	case V_SLOT:
		CHECK(tly_slot_of(t, c, e, (uint32_t)U("n_slots")) ==
		      U("slot"));
		break;
	case V_FALLBACK:
		CHECK(tly_fallback_of(t, c, e, (uint32_t)U("n_fallback")) ==
		      U("start"));
		break;
	case V_SHARD:
		CHECK(tly_shard_of(t, c, e, (uint32_t)U("n_shards")) ==
		      U("shard"));
		break;
	default:
		CHECK(tly_thread_shard((uint32_t)U("id"),
				       (uint32_t)U("n_threads")) ==
		      U("thread"));
		break;
	}
	CHECK(ok);
}

/* 64 coins of the sign vote from element @first, MSB first */
static void v_sign_coin(const struct vec_line *l)
{
	uint64_t seed, bits = 0;
	int ok = 1, j;

	CHECK(U("chunk") <= 0xffff);
	seed = tly_sign_tie_seed((uint32_t)U("tensor"), (uint16_t)U("chunk"));
	for (j = 0; j < 64; j++)
		bits = bits << 1 | tly_sign_tie(seed, U("first") + j);
	CHECK(bits == U("bits"));
	CHECK(ok);
}

static void v_header(const struct vec_line *l)
{
	struct tly_hdr h = { 0 }, back;
	uint8_t b[TLY_HDR_LEN];
	int ok = 1;

	h.type = (uint8_t)U("type");
	h.flags = (uint8_t)U("flags");
	h.job = (uint16_t)U("job");
	h.rank = (uint16_t)U("rank");
	h.slot = (uint16_t)U("slot");
	h.tensor = (uint32_t)U("tensor");
	h.chunk = (uint16_t)U("chunk");
	h.shift = (int8_t)strtol(vec_str(l, "shift"), NULL, 0);
	h.aux = (uint8_t)U("aux");
	h.cookie = (uint32_t)U("cookie");
	CHECK(ok);
	tly_hdr_write(b, &h);
	check_bytes(l, "bytes", b, sizeof(b));
	/* read back: every field where the spec puts it */
	back.type = b[0] & 0x0f;
	CHECK(b[0] >> 4 == TLY_VERSION);
	CHECK(back.type == h.type && b[1] == h.flags);
	CHECK(tly_get16(b + 2) == h.job && tly_get16(b + 4) == h.rank);
	CHECK(tly_get16(b + 6) == h.slot && tly_get32(b + 8) == h.tensor);
	CHECK(tly_get16(b + 12) == h.chunk && (int8_t)b[14] == h.shift);
	CHECK(b[15] == h.aux && tly_get32(b + 16) == h.cookie);
}

static void mac_of(const char *s, uint8_t *mac)
{
	for (int i = 0; i < 6; i++) {
		unsigned int b;

		sscanf(s + 2 * i, "%2x", &b);
		mac[i] = (uint8_t)b;
	}
}

static void v_envelope(const struct vec_line *l)
{
	struct tly_addr src = { 0 }, dst = { 0 };
	uint8_t f[TLY_L2L4_LEN + TLY_HDR_LEN + 4 * 1024] = { 0 };
	size_t tl, got;
	int ok = 1;

	mac_of(vec_str(l, "src_mac"), src.mac);
	mac_of(vec_str(l, "dst_mac"), dst.mac);
	src.ip = (uint32_t)U("src_ip");
	src.port = (uint16_t)U("src_port");
	dst.ip = (uint32_t)U("dst_ip");
	dst.port = (uint16_t)U("dst_port");
	tl = U("tally_len");
	CHECK(ok && tl <= sizeof(f) - TLY_L2L4_LEN);
	tly_l2l4_write(f, &src, &dst, (uint8_t)U("dscp"), tl);
	check_bytes(l, "bytes", f, TLY_L2L4_LEN);
	/* the parser takes it, on the destination's port only */
	CHECK(tly_l2l4_parse(f, TLY_L2L4_LEN + tl, dst.port, &got) == TLY_OK);
	CHECK(got == tl);
	CHECK(tly_l2l4_parse(f, TLY_L2L4_LEN + tl, src.port, &got) ==
	      TLY_E_L4);
}

static void v_confirm(const struct vec_line *l)
{
	uint64_t list[VEC_MAX_CHUNKS], list2[VEC_MAX_CHUNKS];
	uint64_t elist[VEC_MAX_CHUNKS];
	uint16_t chunks[VEC_MAX_CHUNKS], chunks2[VEC_MAX_CHUNKS];
	uint8_t exps2[VEC_MAX_CHUNKS], out[VEC_CONFIRM_MAX];
	long n = vec_list(l, "chunks", list, VEC_MAX_CHUNKS);
	long n2 = vec_list(l, "chunks2", list2, VEC_MAX_CHUNKS);
	struct vec_foreign fo;
	size_t len;
	int ok = 1;

	CHECK(n > 0 && n2 >= 0);
	CHECK(vec_list(l, "exps2", elist, VEC_MAX_CHUNKS) == n2);
	for (long i = 0; i < n; i++)
		chunks[i] = (uint16_t)list[i];
	for (long i = 0; i < n2; i++) {
		chunks2[i] = (uint16_t)list2[i];
		exps2[i] = (uint8_t)elist[i];
	}
	fo = (struct vec_foreign){ (uint32_t)U("tensor2"), chunks2, exps2,
				   (unsigned int)n2 };
	len = vec_confirm((uint16_t)U("rank"), (uint16_t)U("n_aggs"),
			  (uint16_t)U("to"), (uint32_t)U("tensor"),
			  (uint32_t)U("n_chunks"), chunks, (unsigned int)n,
			  &fo, out);
	CHECK(ok && len > 0);
	check_bytes(l, "bytes", out, len);
}

static void v_confirm_switch(const struct vec_line *l)
{
	uint64_t list[VEC_MAX_CHUNKS];
	uint16_t chunks[VEC_MAX_CHUNKS];
	uint8_t out[VEC_CONFIRM_MAX];
	long n = vec_list(l, "chunks", list, VEC_MAX_CHUNKS);
	size_t len;
	int ok = 1;

	CHECK(n > 0);
	for (long i = 0; i < n; i++)
		chunks[i] = (uint16_t)list[i];
	len = vec_confirm_switch((uint16_t)U("rank"), (uint32_t)U("tensor"),
				 (uint32_t)U("n_chunks"), chunks,
				 (unsigned int)n, out);
	CHECK(ok && len > 0);
	check_bytes(l, "bytes", out, len);
}

/* rank/role/local/mac/ip/port[/mac1+mac2...: threads 1 .. T-1] */
static void member_of(const char *s, struct boot_member *e)
{
	unsigned int rank, role, local, port, t = 0;
	char mac[13], tmac[13];
	unsigned long ip;
	int used = 0;

	memset(e, 0, sizeof(*e));
	if (sscanf(s, "%u/%u/%u/%12[0-9a-f]/%lx/%u%n", &rank, &role, &local,
		   mac, &ip, &port, &used) != 6)
		fail_msg("%s:%u: bad member %s", path, lineno, s);
	for (s += used; *s == (t ? '+' : '/'); s += 13, t++) {
		if (t >= BOOT_THREAD_MACS ||
		    sscanf(s + 1, "%12[0-9a-f]", tmac) != 1 ||
		    strlen(tmac) != 12)
			fail_msg("%s:%u: bad thread MAC %s", path, lineno, s);
		mac_of(tmac, e->thread_mac[t]);
	}
	if (*s)
		fail_msg("%s:%u: bad member %s", path, lineno, s);
	e->rank = (uint16_t)rank;
	e->role = (uint8_t)role;
	e->local_size = (uint8_t)local;
	mac_of(mac, e->mac);
	e->ip = (uint32_t)ip;
	e->port = (uint16_t)port;
}

static void v_boot(const struct vec_line *l)
{
	struct boot_msg m = { 0 }, back;
	uint8_t b[BOOT_MAX_MSG];
	int ok = 1, len;

	m.type = (uint16_t)U("type");
	m.epoch = (uint32_t)U("epoch");
	switch (m.type) {
	case BOOT_REGISTER:
		member_of(vec_str(l, "self"), &m.reg.self);
		m.reg.job_key = (uint32_t)U("job_key");
		m.reg.world = (uint16_t)U("world");
		m.reg.algorithm = (uint8_t)U("algorithm");
		m.reg.threads = (uint8_t)U("threads");
		CHECK(vec_hex(l, "nonce", m.reg.nonce, 16) == 16);
		break;
	case BOOT_ROSTER: {
		char list[4096], *tok, *save = NULL;

		m.roster.job_key = (uint32_t)U("job_key");
		m.roster.k = (uint16_t)U("k");
		m.roster.pool_slots = (uint32_t)U("pool_slots");
		m.roster.algorithm = (uint8_t)U("algorithm");
		/* optional: the width of the thread MAC table */
		if (vec_str(l, "threads"))
			m.roster.threads = (uint8_t)U("threads");
		snprintf(list, sizeof(list), "%s", vec_str(l, "members"));
		for (tok = strtok_r(list, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save))
			member_of(tok, &m.roster.m[m.roster.n++]);
		break;
	}
	case BOOT_REFUSE:
		m.refuse.reason = (uint16_t)U("reason");
		break;
	case BOOT_CHALLENGE:
		CHECK(vec_hex(l, "nonce", m.challenge.nonce, 16) == 16);
		break;
	default:
		m.peer.rank = (uint16_t)U("rank");
		break;
	}
	CHECK(ok);
	len = boot_encode(&m, b, sizeof(b));
	CHECK(len > 0);
	check_bytes(l, "bytes", b, (size_t)len);
	CHECK(boot_decode(b, (size_t)len, &back) == len);
	CHECK(back.type == m.type && back.epoch == m.epoch);
	if (m.type == BOOT_ROSTER)
		CHECK(back.roster.n == m.roster.n &&
		      back.roster.threads == m.roster.threads &&
		      !memcmp(back.roster.m, m.roster.m,
			      m.roster.n * sizeof(m.roster.m[0])));
	if (m.type == BOOT_REGISTER)
		CHECK(back.reg.threads == m.reg.threads &&
		      back.reg.job_key == m.reg.job_key &&
		      !memcmp(&back.reg.self, &m.reg.self,
			      sizeof(m.reg.self)));
}

static void test_every_vector(void **state)
{
	unsigned int count[V_KINDS] = { 0 };
	static struct vec_line l;
	char text[4096];
	FILE *f = fopen(path, "r");
	int k;

	(void)state;
	if (!f)
		fail_msg("cannot open %s", path);
	assert_int_equal(auth_init(), 0);
	lineno = 0;
	while (fgets(text, sizeof(text), f)) {
		int r = vec_parse(text, &l);

		lineno++;
		if (r == 1)
			continue;
		CHECK(r == 0);
		for (k = 0; k < V_KINDS; k++)
			if (!strcmp(l.kind, kinds[k]))
				break;
		if (k == V_KINDS) {
			fail_msg("%s:%u: unknown kind %s", path, lineno,
				 l.kind);
			break;
		}
		count[k]++;
		switch (k) {
		case V_KDF: v_kdf(&l); break;
		case V_COOKIE: v_cookie(&l); break;
		case V_MAC: v_mac(&l); break;
		case V_HEADER: v_header(&l); break;
		case V_ENVELOPE: v_envelope(&l); break;
		case V_CONFIRM: v_confirm(&l); break;
		case V_CONFIRM_SWITCH: v_confirm_switch(&l); break;
		case V_BOOT: v_boot(&l); break;
		case V_SIGN_COIN: v_sign_coin(&l); break;
		default: v_ids(&l, (enum kind)k); break;
		}
	}
	fclose(f);
	/* every kind is there: an empty or cut file must not pass */
	for (k = 0; k < V_KINDS; k++) {
		if (!count[k])
			fail_msg("%s: no %s vector", path, kinds[k]);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_vector),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s vectors/protocol.txt\n", argv[0]);
		return 2;
	}
	path = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
