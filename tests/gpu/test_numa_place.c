// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_numa_place.c - NUMA placement of staging memory (gpu/numa_place.c):
 * the GPU's node as sysfs gives it (a made-up sysfs tree for the cases
 * this host lacks, and every PCI device of this host), and a shared
 * segment bound to a node, read back from the kernel.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <numa.h>
#include <numaif.h>

#include "gpu/numa_place.h"

static char root[64];

static void fake_device(const char *id, const char *content)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/bus", root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/bus/pci", root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/bus/pci/devices", root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", root, id);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node", root,
		 id);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static int setup_root(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/tally-test-sysfs.XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown_root(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_pci_node_made_up(void **state)
{
	(void)state;
	fake_device("0000:3b:00.0", "1\n");
	fake_device("0000:5e:00.0", "-1\n");
	fake_device("0000:af:00.0", "x\n");
	fake_device("0000:d8:00.0", "");
	fake_device("0000:86:00.0", "0 1\n");
	/* cudaDeviceGetPCIBusId writes upper case; sysfs has lower */
	assert_int_equal(tcu_pci_numa_node(root, "0000:3B:00.0"), 1);
	assert_int_equal(tcu_pci_numa_node(root, "0000:3b:00.0"), 1);
	assert_int_equal(tcu_pci_numa_node(root, "0000:5e:00.0"), -1);
	assert_int_equal(tcu_pci_numa_node(root, "0000:af:00.0"), -EINVAL);
	assert_int_equal(tcu_pci_numa_node(root, "0000:d8:00.0"), -EINVAL);
	assert_int_equal(tcu_pci_numa_node(root, "0000:86:00.0"), -EINVAL);
	assert_int_equal(tcu_pci_numa_node(root, "0000:01:00.0"), -ENOENT);
	/* what is not a bus id never becomes a path */
	assert_int_equal(tcu_pci_numa_node(root, "../../etc/passwd"),
			 -EINVAL);
	assert_int_equal(tcu_pci_numa_node(root, ""), -EINVAL);
	assert_int_equal(tcu_pci_numa_node(root, "0000:3b:00.0/"), -EINVAL);
	assert_int_equal(tcu_pci_numa_node(
		root, "0000:3b:00.00000000000000000000000000000000"), -EINVAL);
}

/* every PCI device of this host, against the file read independently */
static void test_pci_node_this_host(void **state)
{
	const char *dir = "/sys/bus/pci/devices";
	struct dirent *de;
	int seen = 0;
	DIR *d;

	(void)state;
	d = opendir(dir);
	if (!d)
		skip();		/* no PCI bus (a container without /sys) */
	while ((de = readdir(d))) {
		char path[PATH_MAX], upper[64];
		int want, i;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/numa_node", dir,
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		assert_int_equal(fscanf(f, "%d", &want), 1);
		fclose(f);
		for (i = 0; de->d_name[i] && i < 63; i++)
			upper[i] = (char)toupper((unsigned char)de->d_name[i]);
		upper[i] = '\0';
		assert_int_equal(tcu_pci_numa_node("/sys", upper), want);
		seen++;
	}
	closedir(d);
	assert_true(seen > 0);
}

/* a shared segment as libtally makes one: memfd, MAP_SHARED, touched */
static void *segment(size_t len, int *fd)
{
	void *p;

	*fd = memfd_create("tally-test-numa", MFD_CLOEXEC);
	assert_true(*fd >= 0);
	assert_int_equal(ftruncate(*fd, (off_t)len), 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 1, len);
	return p;
}

static void test_bind_reads_back(void **state)
{
	const size_t len = 1u << 20;
	unsigned long mask[16] = { 0 };
	int fd, mode = -1, node;
	char *p;

	(void)state;
	assert_true(numa_available() >= 0);
	p = segment(len, &fd);
	node = numa_max_node();		/* the highest node this host has */
	/* an address inside the first page: the whole pages are bound */
	assert_int_equal(tcu_bind_to_node(p + 100, len - 200, node), 0);
	assert_int_equal(get_mempolicy(&mode, mask, sizeof(mask) * 8, p,
				       MPOL_F_ADDR), 0);
	assert_int_equal(mode, MPOL_BIND);
	assert_true(mask[node / 64] == 1ul << (node % 64));
	assert_int_equal(get_mempolicy(&mode, mask, sizeof(mask) * 8,
				       p + len - 1, MPOL_F_ADDR), 0);
	assert_int_equal(mode, MPOL_BIND);
	/* the pages are on the node (moved if they were elsewhere) */
	assert_int_equal(tcu_node_of_page(p), node);
	assert_int_equal(tcu_node_of_page(p + len - 1), node);
	/* the policy belongs to the segment: another mapping sees it */
	{
		void *q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
			       fd, 0);

		assert_true(q != MAP_FAILED);
		assert_int_equal(get_mempolicy(&mode, mask, sizeof(mask) * 8,
					       q, MPOL_F_ADDR), 0);
		assert_int_equal(mode, MPOL_BIND);
		munmap(q, len);
	}
	munmap(p, len);
	close(fd);
}

static void test_bind_refuses_bad_nodes(void **state)
{
	const size_t len = 1u << 16;
	unsigned long mask[16] = { 0 };
	int fd, mode = -1;
	void *p;

	(void)state;
	p = segment(len, &fd);
	assert_int_equal(tcu_bind_to_node(p, len, -1), -EINVAL);
	assert_int_equal(tcu_bind_to_node(p, len, numa_max_node() + 1),
			 -EINVAL);
	assert_int_equal(tcu_bind_to_node(p, len, 1 << 20), -EINVAL);
	/* nothing was bound */
	assert_int_equal(get_mempolicy(&mode, mask, sizeof(mask) * 8, p,
				       MPOL_F_ADDR), 0);
	assert_int_equal(mode, MPOL_DEFAULT);
	munmap(p, len);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pci_node_made_up,
						setup_root, teardown_root),
		cmocka_unit_test(test_pci_node_this_host),
		cmocka_unit_test(test_bind_reads_back),
		cmocka_unit_test(test_bind_refuses_bad_nodes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
