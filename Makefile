# tally - front door.  `make demo` and `make test` work on a fresh Debian 12.
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
SOAK_SECONDS ?= 600
MESON_OPTS ?=
# meson finds nvcc (libtally-cuda) through CUDACXX
ifneq ($(wildcard /usr/local/cuda/bin/nvcc),)
export CUDACXX ?= /usr/local/cuda/bin/nvcc
endif
# Under TSan: the tests where tallyd (with two reduction threads) and
# several client processes run together, and the unit tests that start
# threads (the reduction pool, the UDP transport's wake-up), and libtally-cuda's
# pipeline and progress thread over the emulated CUDA runtime.  Cluster,
# DPDK and RDMA tests are left out: docs/fuzzing.md says why.
TSAN_TESTS ?= test_local_allreduce test_local_faults test_local_peer_loss \
	test_local_fast shm_client_fast \
	dataplane_reduce transport_udp test_wait_ready test_service \
	test_pipeline_emu dataplane_dp_ring dataplane_dp_thread

.PHONY: all deps build test test-asan test-tsan fuzz fuzz-build fuzz-coverage \
	bench soak demo clean conformance

all: build

deps:
	@tools/install-deps

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# suite 'gpu' needs a GPU: tests/gpu/run-device.sh runs it
test: build
	@tests/run-suite.py $(BUILD) --no-suite gpu

# The sanitizer and fuzz builds leave CUDA out: libtally-cuda's code runs
# only on a GPU machine; gpu/'s plain C (references, planning, NUMA) and
# its tests stay in.
$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Dbuildtype=debug -Db_sanitize=address,undefined \
		-Db_lundef=false -Dcuda=disabled $(MESON_OPTS)

# ASan+UBSan over the unit tests and the one-host integration tests (suite
# 'sanitize'; the whole integration suite runs in `make test`).
test-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	@tests/run-suite.py $(ASAN_BUILD) --suite unit --suite sanitize

$(TSAN_BUILD)/build.ninja:
	meson setup $(TSAN_BUILD) -Dbuildtype=debug -Db_sanitize=thread \
		-Db_lundef=false -Ddpdk=disabled -Drdma=disabled \
		-Dcuda=disabled $(MESON_OPTS)

# ThreadSanitizer over the daemon and the client library in the
# multi-process integration tests; any report fails it.
test-tsan: deps $(TSAN_BUILD)/build.ninja
	ninja -C $(TSAN_BUILD)
	@tests/run-tsan $(TSAN_BUILD) $(TSAN_TESTS)

$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dtests=disabled \
		-Dbuildtype=debugoptimized -Dcuda=disabled $(MESON_OPTS)

fuzz-build: deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD)

# Each libFuzzer target runs for FUZZ_SECONDS on its seed corpus
# (docs/fuzzing.md: `make fuzz FUZZ_SECONDS=3600` for a campaign).
fuzz: fuzz-build
	@tests/fuzz/run-fuzzers $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Source coverage the corpora of the last `make fuzz` reach.
fuzz-coverage:
	@tests/fuzz/coverage $(FUZZ_BUILD)/tests/fuzz/corpus

bench: build
	@tools/bench-all $(BUILD)

# Chaos soak (not in CI): 4 hosts under faults for SOAK_SECONDS (docs/soak.md).
soak: build
	@tools/soak $(BUILD) --seconds $(SOAK_SECONDS)

demo: build
	@tools/demo $(BUILD)

# The aggregator conformance suite (docs/conformance.md) against your own
# aggregator: make conformance AGG=ip:port [JOB=0x2a17 COOKIE=0x5eed1234
# N=2 K=64 SLOTS=256 PROFILE=software|switch CASE=name-part].  Without AGG
# it runs tally's own backends (sw, sw-switch, udp-self; xdp as root).
AGG ?=
CASE ?=
conformance: $(BUILD)/build.ninja
	ninja -C $(BUILD) tests/conformance/test_conformance
ifneq ($(AGG),)
	TALLY_CONFORMANCE_AGG=$(AGG) $(if $(JOB),TALLY_CONFORMANCE_JOB=$(JOB)) \
	$(if $(COOKIE),TALLY_CONFORMANCE_COOKIE=$(COOKIE)) \
	$(if $(N),TALLY_CONFORMANCE_N=$(N)) $(if $(K),TALLY_CONFORMANCE_K=$(K)) \
	$(if $(SLOTS),TALLY_CONFORMANCE_SLOTS=$(SLOTS)) \
	$(if $(PROFILE),TALLY_CONFORMANCE_PROFILE=$(PROFILE)) \
	$(BUILD)/tests/conformance/test_conformance addr $(CASE)
else
	for b in sw sw-switch udp-self $$([ $$(id -u) = 0 ] && echo xdp); do \
		$(BUILD)/tests/conformance/test_conformance $$b $(CASE) || exit 1; \
	done
endif

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) \
		build-fuzz-cov .bench
