// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_auth.c - the job secret and what comes from it: keys, control
 * message tags (tampering, replay, reordering, reflection, another
 * connection, another secret), data cookies per epoch, and where the
 * secret may come from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctrl/auth.h"
#include "ctrl/bootstrap.h"
#include "ctrl/config.h"

#define SECRET "correct horse battery staple"

static char err[512];

static void keys_of(struct auth_keys *k, const char *secret)
{
	assert_int_equal(auth_keys_from_secret(k, secret, strlen(secret),
					       err, sizeof(err)), 0);
}

static int setup(void **state)
{
	(void)state;
	unsetenv(AUTH_ENV);
	return auth_init();
}

static void test_keys(void **state)
{
	struct auth_keys a, b, c;

	(void)state;
	keys_of(&a, SECRET);
	keys_of(&b, SECRET);
	keys_of(&c, SECRET "!");
	assert_memory_equal(&a, &b, sizeof(a));
	assert_memory_not_equal(a.ctrl, c.ctrl, AUTH_KEY_LEN);
	assert_memory_not_equal(a.data, c.data, AUTH_KEY_LEN);
	assert_memory_not_equal(a.ctrl, a.data, AUTH_KEY_LEN);
	assert_int_equal(auth_keys_from_secret(&a, "short", 5, err,
					       sizeof(err)), -1);
	assert_non_null(strstr(err, "16"));
}

/* a HEARTBEAT as the wire carries it */
static int message(uint8_t *buf, uint32_t epoch, uint16_t rank)
{
	struct boot_msg m = { .type = BOOT_HEARTBEAT, .epoch = epoch };

	m.peer.rank = rank;
	return boot_encode(&m, buf, BOOT_MAX_MSG);
}

static void streams(const struct auth_keys *k, uint8_t nc_seed,
		    uint8_t nm_seed, enum auth_dir dir,
		    struct auth_stream *s)
{
	uint8_t nc[AUTH_NONCE_LEN], nm[AUTH_NONCE_LEN];

	memset(nc, nc_seed, sizeof(nc));
	memset(nm, nm_seed, sizeof(nm));
	auth_stream_init(s, k, dir, nc, nm);
}

static void test_seal_open(void **state)
{
	struct auth_keys k;
	struct auth_stream tx, rx;
	uint8_t m1[BOOT_MAX_MSG], m2[BOOT_MAX_MSG];
	int l1, l2;

	(void)state;
	keys_of(&k, SECRET);
	streams(&k, 1, 2, AUTH_M2C, &tx);
	streams(&k, 1, 2, AUTH_M2C, &rx);
	l1 = message(m1, 5, 3);
	l2 = message(m2, 5, 3);
	auth_seal(&tx, m1, (size_t)l1);
	auth_seal(&tx, m2, (size_t)l2);
	/* the same message twice gets two tags: the sequence is in it */
	assert_memory_not_equal(m1 + l1 - AUTH_TAG_LEN, m2 + l2 - AUTH_TAG_LEN,
				AUTH_TAG_LEN);
	/* out of order fails, in order passes */
	assert_int_equal(auth_open(&rx, m2, (size_t)l2), -1);
	assert_int_equal(auth_open(&rx, m1, (size_t)l1), 0);
	/* replayed fails */
	assert_int_equal(auth_open(&rx, m1, (size_t)l1), -1);
	assert_int_equal(auth_open(&rx, m2, (size_t)l2), 0);
	assert_int_equal(rx.seq, 2);
}

static void test_tampering(void **state)
{
	struct auth_keys k;
	struct auth_stream tx, rx;
	uint8_t m[BOOT_MAX_MSG];
	int len;

	(void)state;
	keys_of(&k, SECRET);
	streams(&k, 1, 2, AUTH_C2M, &tx);
	len = message(m, 5, 3);
	auth_seal(&tx, m, (size_t)len);
	/* every byte, header, payload and tag, is covered */
	for (int i = 0; i < len; i++) {
		streams(&k, 1, 2, AUTH_C2M, &rx);
		m[i] ^= 0x20;
		assert_int_equal(auth_open(&rx, m, (size_t)len), -1);
		m[i] ^= 0x20;
	}
	streams(&k, 1, 2, AUTH_C2M, &rx);
	assert_int_equal(auth_open(&rx, m, (size_t)len), 0);
	/* a message without a tag at all */
	streams(&k, 1, 2, AUTH_C2M, &rx);
	assert_int_equal(auth_open(&rx, m, AUTH_TAG_LEN - 1), -1);
	/* a zero tag (as in a CHALLENGE) is no tag */
	memset(m + len - AUTH_TAG_LEN, 0, AUTH_TAG_LEN);
	assert_int_equal(auth_open(&rx, m, (size_t)len), -1);
}

/* Another direction, connection (nonces) or secret: nothing verifies. */
static void test_keys_are_bound(void **state)
{
	struct auth_keys k, other;
	struct auth_stream tx, rx;
	uint8_t m[BOOT_MAX_MSG];
	int len;

	(void)state;
	keys_of(&k, SECRET);
	keys_of(&other, SECRET " but not quite");
	streams(&k, 1, 2, AUTH_C2M, &tx);
	len = message(m, 5, 0);
	auth_seal(&tx, m, (size_t)len);
	streams(&k, 1, 2, AUTH_M2C, &rx);	/* reflected */
	assert_int_equal(auth_open(&rx, m, (size_t)len), -1);
	streams(&k, 9, 2, AUTH_C2M, &rx);	/* another challenge */
	assert_int_equal(auth_open(&rx, m, (size_t)len), -1);
	streams(&k, 1, 9, AUTH_C2M, &rx);	/* another member nonce */
	assert_int_equal(auth_open(&rx, m, (size_t)len), -1);
	streams(&other, 1, 2, AUTH_C2M, &rx);	/* another secret */
	assert_int_equal(auth_open(&rx, m, (size_t)len), -1);
	streams(&k, 1, 2, AUTH_C2M, &rx);
	assert_int_equal(auth_open(&rx, m, (size_t)len), 0);
}

static void test_cookie(void **state)
{
	struct auth_keys k, other;
	uint32_t c = 0;

	(void)state;
	keys_of(&k, SECRET);
	keys_of(&other, SECRET "2");
	c = auth_cookie(&k, 77, 1);
	assert_int_equal(auth_cookie(&k, 77, 1), c);
	assert_int_not_equal(auth_cookie(&k, 77, 2), c);	/* epoch */
	assert_int_not_equal(auth_cookie(&k, 78, 1), c);	/* job */
	assert_int_not_equal(auth_cookie(&other, 77, 1), c);	/* secret */
	/* every epoch of a long job gets its own */
	for (uint32_t e = 2; e < 200; e++)
		assert_int_not_equal(auth_cookie(&k, 77, e),
				     auth_cookie(&k, 77, e - 1));
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f;

	unlink(path);
	f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_load(void **state)
{
	char dir[] = "/tmp/tally-auth-XXXXXX", path[64];
	struct auth_keys k, want;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/secret", dir);
	keys_of(&want, SECRET);

	/* nothing configured: a clear error naming both ways */
	assert_false(auth_configured(""));
	assert_int_equal(auth_load(&k, "", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret_file"));
	assert_non_null(strstr(err, AUTH_ENV));

	/* a private file; its trailing newline is not part of it */
	write_file(path, SECRET "\n", 0600);
	assert_true(auth_configured(path));
	assert_int_equal(auth_load(&k, path, err, sizeof(err)), 0);
	assert_memory_equal(&k, &want, sizeof(k));
	write_file(path, SECRET, 0400);
	assert_int_equal(auth_load(&k, path, err, sizeof(err)), 0);
	assert_memory_equal(&k, &want, sizeof(k));

	/* readable (or writable) by group or others: refused */
	write_file(path, SECRET "\n", 0640);
	assert_int_equal(auth_load(&k, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "chmod 600"));
	write_file(path, SECRET "\n", 0604);
	assert_int_equal(auth_load(&k, path, err, sizeof(err)), -1);
	write_file(path, SECRET "\n", 0620);
	assert_int_equal(auth_load(&k, path, err, sizeof(err)), -1);

	/* too short */
	write_file(path, "abc\n", 0600);
	assert_int_equal(auth_load(&k, path, err, sizeof(err)), -1);
	/* missing */
	unlink(path);
	assert_int_equal(auth_load(&k, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, path));
	/* a directory */
	assert_int_equal(auth_load(&k, dir, err, sizeof(err)), -1);

	/* the environment, when no file is named */
	setenv(AUTH_ENV, SECRET, 1);
	assert_true(auth_configured(NULL));
	assert_int_equal(auth_load(&k, NULL, err, sizeof(err)), 0);
	assert_memory_equal(&k, &want, sizeof(k));
	/* a named file wins over the environment */
	write_file(path, SECRET "x\n", 0600);
	assert_int_equal(auth_load(&k, path, err, sizeof(err)), 0);
	assert_memory_not_equal(&k, &want, sizeof(k));
	unsetenv(AUTH_ENV);
	unlink(path);
	rmdir(dir);
}

/* Never on a command line or in a configuration file. */
static void test_config_refuses_secret(void **state)
{
	struct tally_config cfg;

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(config_set(&cfg, "cluster", "secret", "hunter2hunter2",
				    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret_file"));
	assert_non_null(strstr(err, AUTH_ENV));
	assert_int_equal(config_set(&cfg, "cluster", "secret_file",
				    "/etc/tally/job.secret", err,
				    sizeof(err)), 0);
	assert_string_equal(cfg.secret_file, "/etc/tally/job.secret");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_seal_open),
		cmocka_unit_test(test_tampering),
		cmocka_unit_test(test_keys_are_bound),
		cmocka_unit_test(test_cookie),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_config_refuses_secret),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
