#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# prepare-device.sh - build the GPU tests here and bundle them for a device
# machine that lacks the build dependencies (tests/gpu/run-device.sh runs
# the bundle there).
#
# Configures and builds build-gpu (CUDA on, DPDK and RDMA off), then fills
# .device/ in the repository root (the caller keeps it out of git):
#   bin/     tallyd, the suite-'gpu' test binaries, gpu-bench
#   lib/     every shared library they need that glibc does not provide
#            (libtally, libtally-cuda, libcudart, libcmocka, libinih,
#            libnuma, libsodium, libmicrohttpd, libsystemd and theirs)
#   compat/  libstdc++ and libgcc_s: used there only if the host's are
#            missing or too old (a newer system copy is better for the
#            driver)
#   glibc/   this host's glibc and its loader: used there only if the
#            host's glibc is older than the one these binaries need
#   run-device.sh, MANIFEST (commit, build host, files)
#
# usage: tests/gpu/prepare-device.sh   (from anywhere; CUDACXX optional)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build="build-gpu"
bundle=.device
max_mib=40
export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}

if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" -Ddpdk=disabled -Drdma=disabled -Dcuda=enabled
fi
ninja -C "$build"

# name in the bundle = file in the build; the first four must exist
required="ctrl/tallyd tools/gpu-bench tests/gpu/gpu_test_pipeline
tests/gpu/gpu_test_stream_order"
optional="tests/gpu/kernels/test_gpu_kernels tests/gpu/kernels/test_kernels
tests/gpu/gpu_test_cuda_open tests/gpu/gpu_test_pipeline_ef"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/compat" "$bundle/glibc"
bins=()
for f in $required; do
	if [ ! -x "$build/$f" ]; then
		echo "prepare-device: $build/$f was not built" >&2
		exit 1
	fi
	bins+=("$build/$f")
done
for f in $optional; do
	if [ -x "$build/$f" ]; then
		bins+=("$build/$f")
	fi
done

# where each library goes: glibc's own, the C++ runtime, or lib/
lib_dir() {
	case "$1" in
	linux-vdso.so.*) echo "" ;;
	ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | \
		libdl.so.* | librt.so.* | libresolv.so.* | libutil.so.* | \
		libmvec.so.*)
		echo glibc ;;
	libstdc++.so.* | libgcc_s.so.*) echo compat ;;
	# the driver belongs to the device machine, never to the bundle
	libcuda.so.* | libnvidia-*.so.*) echo "" ;;
	*) echo lib ;;
	esac
}

for b in "${bins[@]}"; do
	cp -L "$b" "$bundle/bin/"
	missing=$(ldd "$b" | grep 'not found' || true)
	if [ -n "$missing" ]; then
		echo "prepare-device: $b: $missing" >&2
		exit 1
	fi
	# "soname => path (addr)" and the loader's "path (addr)"
	ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }
		$1 ~ /^\/.*ld-linux/ { n = split($1, p, "/"); print p[n], $1 }' |
	while read -r soname path; do
		dir=$(lib_dir "$soname")
		if [ -n "$dir" ] && [ ! -e "$bundle/$dir/$soname" ]; then
			cp -L "$path" "$bundle/$dir/$soname"
		fi
	done
done
cp tests/gpu/run-device.sh "$bundle/"

{
	echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
	echo "glibc $(ldd --version | head -n 1)"
	echo "nvcc $("$CUDACXX" --version | tail -n 1)"
	(cd "$bundle" && find . -type f ! -name MANIFEST | sort |
		xargs sha256sum)
} >"$bundle/MANIFEST"

kib=$(du -sk "$bundle" | cut -f1)
files=$(find "$bundle" -type f | wc -l)
echo "prepare-device: $bundle: $((kib / 1024)) MiB, $files files"
find "$bundle" -type f | sort | sed 's/^/  /'
if [ "$kib" -gt $((max_mib * 1024)) ]; then
	echo "prepare-device: $bundle is over $max_mib MiB" >&2
	exit 1
fi
