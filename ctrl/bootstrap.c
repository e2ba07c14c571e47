// SPDX-License-Identifier: BSD-3-Clause
/*
 * bootstrap.c - encoding and validating decoding of the daemons' control
 * messages (see bootstrap.h for the layout).
 *
 *   header:  0 magic u32 | 4 version u16 | 6 type u16 | 8 payload len u32
 *            | 12 epoch u32
 *   entry:   0 rank u16 | 2 role u8 | 3 local size u8 | 4 mac[6] | 10 port u16
 *            | 12 ip u32
 *   REGISTER (40 [+ 6 (T - 1)]): entry | 16 job key u32 | 20 world u16
 *            | 22 algorithm u8 | 23 threads T u8 | 24 member's nonce[16]
 *            [| 40 the MACs of threads 1 .. T-1, 6 bytes each]
 *   ROSTER (20 + 16n [+ 6n (T - 1)]): 0 job key u32 | 4 pool slots u32
 *            | 8 k u16 | 10 n u16 | 12 algorithm u8 | 13 T u8 (0: no
 *            table) | 14..19 pad | 20 entries [| the MACs of threads
 *            1 .. T-1 of entry 0, then of entry 1, ...]
 *   HEARTBEAT, PEER_DOWN, ABORT (4): rank u16 | pad u16
 *   REFUSE (4): reason u16 | pad u16
 *   CHALLENGE (16): coordinator's nonce[16]
 *   then every message: MAC tag[32] (auth.h)
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "ctrl/bootstrap.h"
#include "dataplane/engine/wire.h"
#include "dataplane/engine/worker.h"	/* enum tly_codec */

#define REGISTER_LEN 40
#define PEER_LEN 4
#define MAC_LEN 6

/* the per-thread MAC table's bytes for one member of @threads threads */
static size_t thread_macs_len(unsigned int threads)
{
	return threads > 1 ? (size_t)(threads - 1) * MAC_LEN : 0;
}

bool boot_has_thread_macs(const struct boot_member *e, unsigned int threads)
{
	for (unsigned int t = 0; t + 1 < threads && t < BOOT_THREAD_MACS; t++)
		for (int b = 0; b < MAC_LEN; b++)
			if (e->thread_mac[t][b])
				return true;
	return false;
}

static unsigned int reg_threads(const struct boot_msg *m)
{
	return m->reg.threads ? m->reg.threads : 1;
}

static size_t reg_table_len(const struct boot_msg *m)
{
	return boot_has_thread_macs(&m->reg.self, reg_threads(m)) ?
	       thread_macs_len(reg_threads(m)) : 0;
}

static int role_ok(int role)
{
	return role >= ROLE_WORKER && role <= ROLE_COLOCATED;
}

static int algo_ok(int a)
{
	return a == ALGO_AGGREGATE || a == ALGO_RING;
}

static void put_entry(uint8_t *p, const struct boot_member *e)
{
	memset(p, 0, BOOT_ENTRY_LEN);
	tly_put16(p, e->rank);
	p[2] = e->role;
	p[3] = e->local_size;
	memcpy(p + 4, e->mac, 6);
	tly_put16(p + 10, e->port);
	tly_put32(p + 12, e->ip);
}

static int get_entry(const uint8_t *p, struct boot_member *e)
{
	e->rank = tly_get16(p);
	e->role = p[2];
	e->local_size = p[3];
	memcpy(e->mac, p + 4, 6);
	e->port = tly_get16(p + 10);
	e->ip = tly_get32(p + 12);
	return role_ok(e->role) && e->port != 0 && e->ip != 0 ? 0 : -1;
}

/* a roster's table: entry 0's threads 1 .. T-1, then entry 1's, ... */
static void put_thread_macs(uint8_t *p, const struct boot_msg *m)
{
	size_t row = thread_macs_len(m->roster.threads);

	for (unsigned int i = 0; row && i < m->roster.n; i++)
		memcpy(p + i * row, m->roster.m[i].thread_mac, row);
}

static size_t payload_len(const struct boot_msg *m)
{
	switch (m->type) {
	case BOOT_REGISTER:
		return REGISTER_LEN + reg_table_len(m);
	case BOOT_ROSTER:
		return BOOT_ROSTER_FIXED + (size_t)m->roster.n *
		       (BOOT_ENTRY_LEN + thread_macs_len(m->roster.threads));
	case BOOT_HEARTBEAT:
	case BOOT_PEER_DOWN:
	case BOOT_REFUSE:
	case BOOT_ABORT:
		return PEER_LEN;
	case BOOT_CHALLENGE:
		return AUTH_NONCE_LEN;
	default:
		return 0;
	}
}

int boot_encode(const struct boot_msg *m, uint8_t *buf, size_t cap)
{
	size_t len = payload_len(m);
	uint8_t *p = buf + BOOT_HDR_LEN;

	if (len == 0 || BOOT_HDR_LEN + len + BOOT_TAG_LEN > cap ||
	    (m->type == BOOT_ROSTER && (m->roster.n == 0 ||
					m->roster.n > BOOT_MAX_MEMBERS ||
					m->roster.threads == 1 ||
					m->roster.threads > BOOT_MAX_THREADS)) ||
	    (m->type == BOOT_REGISTER && reg_threads(m) > BOOT_MAX_THREADS))
		return -1;
	memset(buf, 0, BOOT_HDR_LEN + len + BOOT_TAG_LEN);
	tly_put32(buf, BOOT_MAGIC);
	tly_put16(buf + 4, BOOT_VERSION);
	tly_put16(buf + 6, m->type);
	tly_put32(buf + 8, (uint32_t)len);
	tly_put32(buf + 12, m->epoch);
	switch (m->type) {
	case BOOT_REGISTER:
		put_entry(p, &m->reg.self);
		tly_put32(p + 16, m->reg.job_key);
		tly_put16(p + 20, m->reg.world);
		/* the algorithm in bits 0-3, [compression] method in 4-6
		 * (4-5 before sign_ef: the values 0..2 read alike) */
		p[22] = (uint8_t)((m->reg.algorithm & 0x0f) |
				  (m->reg.compression & 7) << 4);
		/* threads (1 .. 16) in bits 0-6, the switch profile bit 7 */
		p[23] = (uint8_t)(reg_threads(m) |
				  (m->reg.profile ? 0x80 : 0));
		memcpy(p + 24, m->reg.nonce, AUTH_NONCE_LEN);
		memcpy(p + REGISTER_LEN, m->reg.self.thread_mac,
		       reg_table_len(m));
		break;
	case BOOT_ROSTER:
		tly_put32(p, m->roster.job_key);
		tly_put32(p + 4, m->roster.pool_slots);
		tly_put16(p + 8, m->roster.k);
		tly_put16(p + 10, m->roster.n);
		p[12] = m->roster.algorithm;
		p[13] = m->roster.threads;
		for (unsigned int i = 0; i < m->roster.n; i++)
			put_entry(p + BOOT_ROSTER_FIXED + i * BOOT_ENTRY_LEN,
				  &m->roster.m[i]);
		put_thread_macs(p + BOOT_ROSTER_FIXED +
				m->roster.n * BOOT_ENTRY_LEN, m);
		break;
	case BOOT_REFUSE:
		tly_put16(p, m->refuse.reason);
		break;
	case BOOT_CHALLENGE:
		memcpy(p, m->challenge.nonce, AUTH_NONCE_LEN);
		break;
	default:
		tly_put16(p, m->peer.rank);
		break;
	}
	return (int)(BOOT_HDR_LEN + len + BOOT_TAG_LEN);
}

static int decode_roster(const uint8_t *p, uint32_t len, struct boot_msg *m)
{
	uint8_t seen[BOOT_MAX_MEMBERS] = { 0 };
	const uint8_t *table;
	size_t row;

	m->roster.job_key = tly_get32(p);
	m->roster.pool_slots = tly_get32(p + 4);
	m->roster.k = tly_get16(p + 8);
	m->roster.n = tly_get16(p + 10);
	m->roster.algorithm = p[12];
	m->roster.threads = p[13];
	if (m->roster.threads == 1 || m->roster.threads > BOOT_MAX_THREADS)
		return BOOT_E_FIELD;
	row = thread_macs_len(m->roster.threads);
	if (m->roster.n == 0 || m->roster.n > BOOT_MAX_MEMBERS ||
	    len != BOOT_ROSTER_FIXED + (uint32_t)m->roster.n *
				       (BOOT_ENTRY_LEN + row))
		return BOOT_E_LENGTH;
	table = p + BOOT_ROSTER_FIXED + m->roster.n * BOOT_ENTRY_LEN;
	for (unsigned int i = 0; row && i < m->roster.n; i++)
		memcpy(m->roster.m[i].thread_mac, table + i * row, row);
	if (!algo_ok(m->roster.algorithm) || m->roster.k == 0 ||
	    m->roster.pool_slots == 0)
		return BOOT_E_FIELD;
	for (unsigned int i = 0; i < m->roster.n; i++) {
		struct boot_member *e = &m->roster.m[i];

		if (get_entry(p + BOOT_ROSTER_FIXED + i * BOOT_ENTRY_LEN, e) ||
		    e->rank >= BOOT_MAX_MEMBERS || seen[e->rank]++)
			return BOOT_E_FIELD;
	}
	return 0;
}

int boot_decode(const uint8_t *buf, size_t len, struct boot_msg *m)
{
	uint32_t plen;
	const uint8_t *p = buf + BOOT_HDR_LEN;
	int ret = 0;

	if (len >= 4 && tly_get32(buf) != BOOT_MAGIC)
		return BOOT_E_MAGIC;
	if (len < BOOT_HDR_LEN)
		return 0;
	if (tly_get16(buf + 4) != BOOT_VERSION)
		return BOOT_E_VERSION;
	memset(m, 0, sizeof(*m));
	m->type = tly_get16(buf + 6);
	plen = tly_get32(buf + 8);
	m->epoch = tly_get32(buf + 12);
	switch (m->type) {
	case BOOT_REGISTER:
		/* the table's width is checked against threads below */
		if (plen < REGISTER_LEN ||
		    plen > REGISTER_LEN + thread_macs_len(BOOT_MAX_THREADS))
			return BOOT_E_LENGTH;
		break;
	case BOOT_ROSTER:
		if (plen < BOOT_ROSTER_FIXED ||
		    plen > BOOT_MAX_MSG - BOOT_HDR_LEN - BOOT_TAG_LEN)
			return BOOT_E_LENGTH;
		break;
	case BOOT_HEARTBEAT:
	case BOOT_PEER_DOWN:
	case BOOT_REFUSE:
	case BOOT_ABORT:
		if (plen != PEER_LEN)
			return BOOT_E_LENGTH;
		break;
	case BOOT_CHALLENGE:
		if (plen != AUTH_NONCE_LEN)
			return BOOT_E_LENGTH;
		break;
	default:
		return BOOT_E_TYPE;
	}
	if (len < BOOT_HDR_LEN + plen + BOOT_TAG_LEN)
		return 0;		/* wait for the rest */

	switch (m->type) {
	case BOOT_REGISTER:
		if (get_entry(p, &m->reg.self))
			return BOOT_E_FIELD;
		m->reg.job_key = tly_get32(p + 16);
		m->reg.world = tly_get16(p + 20);
		/* 0 in bits 4-7 from a daemon of before the field: none */
		m->reg.algorithm = p[22] & 0x0f;
		m->reg.compression = p[22] >> 4;
		/* 0 from a daemon of before the field: one thread, the
		 * software profile */
		m->reg.threads = p[23] & 0x7f ? p[23] & 0x7f : 1;
		m->reg.profile = p[23] >> 7;
		memcpy(m->reg.nonce, p + 24, AUTH_NONCE_LEN);
		if (m->reg.threads > BOOT_MAX_THREADS)
			return BOOT_E_FIELD;
		if (plen != REGISTER_LEN &&
		    plen != REGISTER_LEN + thread_macs_len(m->reg.threads))
			return BOOT_E_LENGTH;
		memcpy(m->reg.self.thread_mac, p + REGISTER_LEN,
		       plen - REGISTER_LEN);
		/* a table is sent only with a MAC in it */
		if (plen != REGISTER_LEN &&
		    !boot_has_thread_macs(&m->reg.self, m->reg.threads))
			return BOOT_E_FIELD;
		if (m->reg.world == 0 || m->reg.world > BOOT_MAX_MEMBERS ||
		    m->reg.self.rank >= m->reg.world ||
		    !algo_ok(m->reg.algorithm) ||
		    m->reg.compression > TLY_CODEC_TOPK1_EF)
			return BOOT_E_FIELD;
		break;
	case BOOT_ROSTER:
		ret = decode_roster(p, plen, m);
		break;
	case BOOT_REFUSE:
		m->refuse.reason = tly_get16(p);
		break;
	case BOOT_CHALLENGE:
		memcpy(m->challenge.nonce, p, AUTH_NONCE_LEN);
		break;
	default:
		m->peer.rank = tly_get16(p);
		if (m->peer.rank >= BOOT_MAX_MEMBERS)
			return BOOT_E_FIELD;
		break;
	}
	return ret ? ret : (int)(BOOT_HDR_LEN + plen + BOOT_TAG_LEN);
}

const char *boot_error_str(int err)
{
	switch (err) {
	case BOOT_E_MAGIC: return "not a tally control message (magic)";
	case BOOT_E_VERSION: return "unsupported control protocol version";
	case BOOT_E_TYPE: return "unknown control message type";
	case BOOT_E_LENGTH: return "control message length does not match";
	case BOOT_E_FIELD: return "control message field out of range";
	default: return "control message error";
	}
}

const char *boot_role_name(int role)
{
	switch (role) {
	case ROLE_WORKER: return "worker";
	case ROLE_AGGREGATOR: return "aggregator";
	case ROLE_COLOCATED: return "worker+aggregator";
	default: return "?";
	}
}

int boot_role_parse(const char *s)
{
	if (!strcasecmp(s, "worker"))
		return ROLE_WORKER;
	if (!strcasecmp(s, "aggregator"))
		return ROLE_AGGREGATOR;
	if (!strcasecmp(s, "worker+aggregator") || !strcasecmp(s, "colocated"))
		return ROLE_COLOCATED;
	return -1;
}
