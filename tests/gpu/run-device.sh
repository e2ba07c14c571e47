#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run-device.sh - the suite-'gpu' tests and gpu-bench on a machine with a
# GPU.  Run from anywhere in the repository: `bash tests/gpu/run-device.sh`.
#
# Uses the bundle .device/ that tests/gpu/prepare-device.sh made on a build
# host; without one, builds build-gpu here (meson, ninja and the build
# dependencies needed).  Each test binary runs under a timeout and prints
#   gpu-test NAME: PASS|FAIL
# then gpu-bench runs (its figure lines are repeated at the end), and the
# last line is "N passed, N failed" (gpu-bench counted as one); any
# WARNING lines of the logs are repeated before it.  Logs and the summary
# are written straight into $OUT/gpu/ when $OUT is set (so a run cut short
# still leaves them).  Exit status 0 only if
# everything passed.
#
# Environment: TEST_TIMEOUT (s, default 180), BENCH_TIMEOUT (s, default
# 240), NO_BENCH=1 to skip gpu-bench, BUNDLED_GLIBC=1 to run the bundle
# under its own glibc even where the host's would do.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
test_timeout=${TEST_TIMEOUT:-180}
bench_timeout=${BENCH_TIMEOUT:-240}
work=$(mktemp -d /tmp/tally-gpu-run.XXXXXX)
if [ -n "${OUT:-}" ]; then
	logs=$OUT/gpu/logs
	summary=$OUT/gpu/summary.txt
else
	logs=$work/logs
	summary=$work/summary.txt
fi
mkdir -p "$logs"
: >"$summary"
passed=0
failed=0

say() {
	echo "$*" | tee -a "$summary"
}

finish() {
	say "$passed passed, $failed failed"
	rm -rf "$work"
	[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
	exit $?
}

# does every binary find its libraries and symbol versions?
all_load() {
	local b out

	command -v ldd >/dev/null || return 0
	for b in "$@"; do
		out=$(ldd "$b" 2>&1)
		if echo "$out" | grep -q 'not found'; then
			echo "$b:" >>"$logs/loader.log"
			echo "$out" | grep 'not found' >>"$logs/loader.log"
			return 1
		fi
	done
	return 0
}

# --- the binaries: the bundle, or a build here ---
tests=()
if [ -d .device/bin ]; then
	bin=$root/.device/bin
	say "gpu: the bundle .device ($(head -n 1 .device/MANIFEST 2>/dev/null))"
	tallyd=$bin/tallyd
	bench=$bin/gpu-bench
	for t in gpu_test_pipeline gpu_test_stream_order gpu_test_cuda_open \
		gpu_test_pipeline_ef test_gpu_kernels test_kernels; do
		if [ -x "$bin/$t" ]; then
			tests+=("$bin/$t")
		fi
	done
	dev=$root/.device
	export LD_LIBRARY_PATH=$dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	if ! all_load "$tallyd" "$bench" "${tests[@]}"; then
		# the host's C++ runtime is missing or older than the build's
		rest=${LD_LIBRARY_PATH#"$dev/lib"}
		LD_LIBRARY_PATH=$dev/lib:$dev/compat$rest
		say "gpu: using the bundled libstdc++/libgcc_s"
	fi
	if [ "${BUNDLED_GLIBC:-0}" = 1 ] ||
		! all_load "$tallyd" "$bench" "${tests[@]}"; then
		# the host's glibc is older: run everything under the
		# bundled loader, through wrappers (tallyd is exec'd by path)
		say "gpu: using the bundled glibc and loader"
		mkdir -p "$work/wrap"
		for b in "$tallyd" "$bench" "${tests[@]}"; do
			w=$work/wrap/$(basename "$b")
			# shellcheck disable=SC2016 # "$@" is the wrapper's
			printf '#!/bin/sh\nexec "%s" --library-path "%s" "%s" %s\n' \
				"$dev/glibc/ld-linux-x86-64.so.2" \
				"$LD_LIBRARY_PATH:$dev/glibc" "$b" '"$@"' >"$w"
			chmod +x "$w"
		done
		tallyd=$work/wrap/tallyd
		bench=$work/wrap/gpu-bench
		for i in "${!tests[@]}"; do
			tests[i]=$work/wrap/$(basename "${tests[i]}")
		done
	fi
	export LD_LIBRARY_PATH
else
	build="build-gpu"
	say "gpu: no .device bundle: building $build here"
	export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
	if ! { [ -f "$build/build.ninja" ] ||
		meson setup "$build" -Ddpdk=disabled -Drdma=disabled \
			-Dcuda=enabled; } >"$logs/build.log" 2>&1 ||
		! ninja -C "$build" >>"$logs/build.log" 2>&1; then
		tail -n 30 "$logs/build.log"
		say "gpu: cannot build $build (see build.log)"
		failed=$((failed + 1))
		finish
	fi
	tallyd=$root/$build/ctrl/tallyd
	bench=$root/$build/tools/gpu-bench
	for t in tests/gpu/gpu_test_pipeline tests/gpu/gpu_test_stream_order \
		tests/gpu/gpu_test_cuda_open tests/gpu/gpu_test_pipeline_ef \
		tests/gpu/kernels/test_gpu_kernels; do
		if [ -x "$build/$t" ]; then
			tests+=("$root/$build/$t")
		fi
	done
fi
export TALLYD=$tallyd
export CMOCKA_MESSAGE_OUTPUT=stdout
export TALLY_SHM_NO_HUGE=1

{
	uname -a
	command -v nvidia-smi >/dev/null && nvidia-smi
	echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
	for b in "$tallyd" "$bench" "${tests[@]}"; do
		echo "== $b"
		ldd "$b" 2>&1
	done
} >"$logs/environment.log" 2>&1

# two processes share GPU 0: an exclusive compute mode refuses the second
if command -v nvidia-smi >/dev/null; then
	say "gpu: $(nvidia-smi --query-gpu=name,driver_version,compute_mode \
		--format=csv,noheader -i 0 2>&1)"
fi

# --- the tests ---
for t in "${tests[@]}"; do
	name=$(basename "$t")
	start=$(date +%s)
	timeout -k 10 "$test_timeout" "$t" >"$logs/$name.log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		say "gpu-test $name: PASS (${secs} s)"
	else
		failed=$((failed + 1))
		if [ "$rc" -eq 124 ]; then
			echo "(timed out after $test_timeout s)" \
				>>"$logs/$name.log"
		fi
		tail -n 40 "$logs/$name.log"
		say "gpu-test $name: FAIL (exit $rc, ${secs} s)"
	fi
done

# --- the benchmark ---
if [ "${NO_BENCH:-0}" != 1 ]; then
	timeout -k 10 "$bench_timeout" "$bench" --tallyd "$tallyd" \
		>"$logs/gpu-bench.log" 2>&1
	rc=$?
	cat "$logs/gpu-bench.log"
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		say "gpu-bench: PASS"
	else
		failed=$((failed + 1))
		say "gpu-bench: FAIL (exit $rc)"
	fi
	grep '^figure ' "$logs/gpu-bench.log" >>"$summary"
fi
# what passed with a workaround (e.g. no NUMA placement) says so
if grep -h 'WARNING' "$logs"/*.log >"$work/warnings" 2>/dev/null; then
	say "gpu: warnings:"
	sed 's/^/  /' "$work/warnings" | tee -a "$summary"
fi
finish
