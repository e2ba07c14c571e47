// SPDX-License-Identifier: BSD-3-Clause
/*
 * auth.c - job secret, control-message MACs and data cookies (see auth.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrl/auth.h"
#include "dataplane/engine/wire.h"

#define KDF_CONTEXT "tallyjob"	/* crypto_kdf_CONTEXTBYTES characters */
#define KDF_ID_CTRL 1
#define KDF_ID_DATA 2

int auth_init(void)
{
	return sodium_init() < 0 ? -1 : 0;
}

int auth_keys_from_secret(struct auth_keys *k, const void *secret,
			  size_t len, char *err, int errlen)
{
	uint8_t master[crypto_kdf_KEYBYTES];

	if (len < AUTH_SECRET_MIN || len > AUTH_SECRET_MAX) {
		snprintf(err, (size_t)errlen, "the job secret must have %d to "
			 "%d bytes, it has %zu", AUTH_SECRET_MIN,
			 AUTH_SECRET_MAX, len);
		return -1;
	}
	crypto_generichash(master, sizeof(master), secret, len, NULL, 0);
	crypto_kdf_derive_from_key(k->ctrl, sizeof(k->ctrl), KDF_ID_CTRL,
				   KDF_CONTEXT, master);
	crypto_kdf_derive_from_key(k->data, sizeof(k->data), KDF_ID_DATA,
				   KDF_CONTEXT, master);
	sodium_memzero(master, sizeof(master));
	return 0;
}

static size_t strip_newlines(const char *s, size_t len)
{
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	return len;
}

static int load_file(struct auth_keys *k, const char *file, char *err,
		     int errlen)
{
	char buf[AUTH_SECRET_MAX + 2];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	int fd, ret = -1;

	fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(err, (size_t)errlen, "secret file %s: %s", file,
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &st)) {
		snprintf(err, (size_t)errlen, "secret file %s: %s", file,
			 strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, (size_t)errlen, "secret file %s is not a "
			 "regular file", file);
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(err, (size_t)errlen, "secret file %s is accessible "
			 "by group or others (mode %04o): chmod 600 it",
			 file, (unsigned int)(st.st_mode & 07777));
		goto out;
	}
	while (len < sizeof(buf) &&
	       (n = read(fd, buf + len, sizeof(buf) - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, (size_t)errlen, "secret file %s: %s",
				 file, strerror(errno));
			goto out;
		}
		len += (size_t)n;
	}
	ret = auth_keys_from_secret(k, buf, strip_newlines(buf, len), err,
				    errlen);
out:
	sodium_memzero(buf, sizeof(buf));
	close(fd);
	return ret;
}

int auth_load(struct auth_keys *k, const char *file, char *err, int errlen)
{
	const char *env;

	if (file && file[0])
		return load_file(k, file, err, errlen);
	env = getenv(AUTH_ENV);
	if (!env || !env[0]) {
		snprintf(err, (size_t)errlen, "a multi-host job needs a job "
			 "secret: [cluster] secret_file = PATH (mode 0600) "
			 "or the environment variable %s", AUTH_ENV);
		return -1;
	}
	return auth_keys_from_secret(k, env, strlen(env), err, errlen);
}

bool auth_configured(const char *file)
{
	const char *env = getenv(AUTH_ENV);

	return (file && file[0]) || (env && env[0]);
}

void auth_stream_init(struct auth_stream *s, const struct auth_keys *k,
		      enum auth_dir dir, const uint8_t *nonce_c,
		      const uint8_t *nonce_m)
{
	uint8_t in[1 + 2 * AUTH_NONCE_LEN];

	in[0] = (uint8_t)dir;
	memcpy(in + 1, nonce_c, AUTH_NONCE_LEN);
	memcpy(in + 1 + AUTH_NONCE_LEN, nonce_m, AUTH_NONCE_LEN);
	crypto_generichash(s->key, sizeof(s->key), in, sizeof(in), k->ctrl,
			   sizeof(k->ctrl));
	s->seq = 0;
}

static void tag_of(const struct auth_stream *s, const uint8_t *msg,
		   size_t len, uint8_t *tag)
{
	crypto_auth_hmacsha512256_state st;
	uint8_t seq[8];

	for (int i = 0; i < 8; i++)
		seq[i] = (uint8_t)(s->seq >> (56 - 8 * i));
	crypto_auth_hmacsha512256_init(&st, s->key, sizeof(s->key));
	crypto_auth_hmacsha512256_update(&st, seq, sizeof(seq));
	crypto_auth_hmacsha512256_update(&st, msg, len);
	crypto_auth_hmacsha512256_final(&st, tag);
}

void auth_seal(struct auth_stream *s, uint8_t *msg, size_t len)
{
	tag_of(s, msg, len - AUTH_TAG_LEN, msg + len - AUTH_TAG_LEN);
	s->seq++;
}

int auth_open(struct auth_stream *s, const uint8_t *msg, size_t len)
{
	uint8_t tag[AUTH_TAG_LEN];

	if (len < AUTH_TAG_LEN)
		return -1;
	tag_of(s, msg, len - AUTH_TAG_LEN, tag);
	if (sodium_memcmp(tag, msg + len - AUTH_TAG_LEN, AUTH_TAG_LEN))
		return -1;
	s->seq++;
	return 0;
}

void auth_nonce(uint8_t *nonce)
{
	randombytes_buf(nonce, AUTH_NONCE_LEN);
}

uint32_t auth_cookie(const struct auth_keys *k, uint32_t job_key,
		     uint32_t epoch)
{
	uint8_t in[14] = "cookie", out[crypto_generichash_BYTES_MIN];

	for (int i = 0; i < 4; i++) {
		in[6 + i] = (uint8_t)(job_key >> (24 - 8 * i));
		in[10 + i] = (uint8_t)(epoch >> (24 - 8 * i));
	}
	crypto_generichash(out, sizeof(out), in, sizeof(in), k->data,
			   sizeof(k->data));
	return tly_get32(out);
}
