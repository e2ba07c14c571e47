# tally - front door.  `make demo` and `make test` work on a fresh Debian 12.
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
SOAK_SECONDS ?= 600
MESON_OPTS ?=

.PHONY: all deps build test test-asan fuzz bench soak demo clean

all: build

deps:
	@tools/install-deps

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

test: build
	@tests/run-suite.py $(BUILD)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Dbuildtype=debug -Db_sanitize=address,undefined \
		-Db_lundef=false $(MESON_OPTS)

# ASan+UBSan over the unit tests (the integration suite runs in `make test`).
test-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	@tests/run-suite.py $(ASAN_BUILD) --suite unit

$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dtests=disabled \
		-Dbuildtype=debugoptimized $(MESON_OPTS)

# Each libFuzzer target runs for FUZZ_SECONDS on its seed corpus.
fuzz: deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD)
	@tests/fuzz/run-fuzzers $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: build
	@tools/bench-all $(BUILD)

# Chaos soak (not in CI): 4 hosts under faults for SOAK_SECONDS (docs/soak.md).
soak: build
	@tools/soak $(BUILD) --seconds $(SOAK_SECONDS)

demo: build
	@tools/demo $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) .bench
