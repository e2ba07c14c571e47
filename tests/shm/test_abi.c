// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_abi.c - the versioned symbols libtally.so exports
 * (shm/libtally.map): each call under the node it was added in, and the
 * internal calls hidden.  argv[1] is the built library.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dlfcn.h>
#include <stdio.h>
#include <cmocka.h>

static const char *lib_path;

static const struct {
	const char *name, *version;
} exported[] = {
	{ "tally_connect", "TALLY_1" },
	{ "tally_disconnect", "TALLY_1" },
	{ "tally_rank", "TALLY_1" },
	{ "tally_size", "TALLY_1" },
	{ "tally_alloc", "TALLY_1" },
	{ "tally_free", "TALLY_1" },
	{ "tally_allreduce", "TALLY_1" },
	{ "tally_test", "TALLY_1" },
	{ "tally_wait", "TALLY_1" },
	{ "tally_strerror", "TALLY_1" },
	{ "tally_dtype_size", "TALLY_1" },
	{ "tally_last_error", "TALLY_1.1" },
	{ "tally_wait_ready", "TALLY_1.2" },
	{ "tally_connect_opts", "TALLY_1.3" },
	{ "tally_ef_reset", "TALLY_1.4" },
	{ "tally_ef_reset_all", "TALLY_1.4" },
	{ "tally_job_compression", "TALLY_1.5" },
};

static void test_versioned_symbols(void **state)
{
	void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);

	(void)state;
	if (!h)
		print_error("dlopen %s: %s\n", lib_path, dlerror());
	assert_non_null(h);
	for (size_t i = 0; i < sizeof(exported) / sizeof(*exported); i++) {
		if (!dlvsym(h, exported[i].name, exported[i].version))
			print_error("%s@%s is not exported\n",
				    exported[i].name, exported[i].version);
		assert_non_null(dlvsym(h, exported[i].name,
				       exported[i].version));
	}
	/* a call belongs to one node only */
	assert_null(dlvsym(h, "tally_connect_opts", "TALLY_1.2"));
	assert_null(dlvsym(h, "tally_connect_opts", "TALLY_1"));
	/* the library's internals stay inside */
	assert_null(dlsym(h, "job_resolve"));
	assert_null(dlsym(h, "msg_send"));
	assert_null(dlsym(h, "client_translate"));
	assert_null(dlsym(h, "tly_ef_get"));	/* ef_store.c, embedded */
	dlclose(h);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versioned_symbols),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s LIBTALLY.so\n", argv[0]);
		return 2;
	}
	lib_path = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
