/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * auth.h - the job secret and what is derived from it (libsodium):
 *
 *   master = BLAKE2b-256(secret)            any length of secret text
 *   ctrl   = crypto_kdf(master, 1, "tallyjob")   control-message MACs
 *   data   = crypto_kdf(master, 2, "tallyjob")   data-packet cookies
 *
 * Control messages (bootstrap.h) end in a 32-byte HMAC-SHA512/256 tag over
 * an implicit sequence number and the message, as SSH does: TCP delivers
 * in order, so each direction of a connection counts its messages and a
 * recorded message cannot be replayed, reordered or dropped without the
 * next tag failing.  Each connection has its own keys, one per direction,
 * from the coordinator's and the member's fresh nonces:
 *
 *   key(dir) = BLAKE2b-256(key = ctrl, dir || nonce_c || nonce_m)
 *
 * so nothing recorded on one connection (or in an earlier epoch, which
 * ran over an earlier connection or earlier sequence numbers) verifies on
 * another, and a message cannot be reflected back to its sender.
 *
 * The cookie of a data packet is the first 32 bits of
 * BLAKE2b(key = data, "cookie" || job key || epoch): a packet of a guessed
 * job key, or of an earlier epoch, is dropped by the receiver's first
 * check (docs/protocol.md section 1).
 *
 * The secret comes from the file [cluster] secret_file (mode 0600 or
 * stricter: no group or other bits) or, without one, from the environment
 * variable TALLY_JOB_SECRET; never from the command line, where every
 * user of the host can read it.
 */
#ifndef TALLY_CTRL_AUTH_H
#define TALLY_CTRL_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_ENV "TALLY_JOB_SECRET"
#define AUTH_KEY_LEN 32
#define AUTH_TAG_LEN 32		/* crypto_auth_hmacsha512256_BYTES */
#define AUTH_NONCE_LEN 16
#define AUTH_SECRET_MIN 16	/* bytes of secret text, at least */
#define AUTH_SECRET_MAX 4096

enum auth_dir {
	AUTH_C2M = 1,		/* coordinator -> member */
	AUTH_M2C = 2,		/* member -> coordinator */
};

struct auth_keys {
	uint8_t ctrl[AUTH_KEY_LEN];
	uint8_t data[AUTH_KEY_LEN];
};

/* one direction of one control connection */
struct auth_stream {
	uint8_t key[AUTH_KEY_LEN];
	uint64_t seq;		/* messages sealed or opened so far */
};

/* libsodium's start-up; 0 or -1. */
int auth_init(void);

/* Derive the keys from secret text of @len bytes.  0, or -1 with @err
 * set when the secret is too short or too long. */
int auth_keys_from_secret(struct auth_keys *k, const void *secret,
			  size_t len, char *err, int errlen);

/*
 * Load the job's secret: from @file when it is not empty (a regular file
 * without group or other permission bits; trailing newlines are not part
 * of the secret), else from $TALLY_JOB_SECRET.  0, or -1 with a message
 * in @err naming what is wrong and how to fix it.
 */
int auth_load(struct auth_keys *k, const char *file, char *err, int errlen);

/* Is a secret available at all (file named or the variable set)? */
bool auth_configured(const char *file);

/* Keys of one direction of a connection. */
void auth_stream_init(struct auth_stream *s, const struct auth_keys *k,
		      enum auth_dir dir, const uint8_t *nonce_c,
		      const uint8_t *nonce_m);

/* Fill the last AUTH_TAG_LEN bytes of the @len-byte message @msg. */
void auth_seal(struct auth_stream *s, uint8_t *msg, size_t len);
/* Check them; 0 (and the sequence advances) or -1. */
int auth_open(struct auth_stream *s, const uint8_t *msg, size_t len);

/* A fresh random nonce. */
void auth_nonce(uint8_t *nonce);

/* The data packets' cookie for (@job_key, @epoch). */
uint32_t auth_cookie(const struct auth_keys *k, uint32_t job_key,
		     uint32_t epoch);

#endif /* TALLY_CTRL_AUTH_H */
