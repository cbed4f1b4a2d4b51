# tenso: a thin front door (STYLE.md 4.4). Every target only runs the machine set-up script,
# CMake and CTest; the build itself (targets, options, tests, install rules) lives in CMake.
#
#   make, make all       configure build/ (Ninja, RelWithDebInfo, warnings as errors), build
#   make test            build, then run every CTest test in build/ (but the dist ones)
#   make demo            build and run the demo program (capi/examples/demo.c)
#   make lib             the library alone in build-release/: libtenso, headers, pkg-config
#                        file, CMake package, the tenso CLI, the CUDA plugin where a toolkit is
#                        here (CUDA=ON fetches one, CUDA=OFF never); no tests, nothing fetched
#   make install         PREFIX=/usr/local [DESTDIR=] [CUDA=]: make lib for that prefix, install
#                        it stripped (debug information in .debug/), run ldconfig for a system
#                        prefix
#   make dist            every release artifact into dist/ (tests/dist/make-dist.sh)
#   make distcheck       make dist, then the tests that use each artifact outside the tree
#   make asan            clang ASan+UBSan build in build-asan/, run the tests and the demo
#   make tsan            clang ThreadSanitizer build in build-tsan/, run the tests
#   make fuzz            clang libFuzzer build in build-fuzz/, fuzz each target FUZZ_SECONDS
#   make bench           build and run the benchmarks (build/bench/tenso_bench)
#   make bench-js        the JavaScript SDK's benchmark (bench/js: libtenso vs apache-arrow, JSON)
#   make check-abi       the ABI tests only (headers, exports, install + consumers)
#   make check-aarch64   cross-build for aarch64 in build-aarch64/, run the C/C++ suites under
#                        qemu-user (tests/cross/check-aarch64.sh)
#   make check-aarch64-sdks  then the Rust and Go SDKs, cross-built and tested under qemu-user
#   make lint            type and lint gates: formatting, ruff, mypy, stubtest, clippy, go vet, clang-tidy
#   make format          apply the formatters (clang-format, ruff format, rustfmt, gofmt)
#   make docs            API reference of C/C++, Python, Rust and Go in build/docs/ (warnings fail)
#   make bench-report    C + Python peer benchmarks on a quiet machine -> README table and chart
#   make bootstrap       install missing Debian packages (also done by every building target)
#   make upstream        also create the upstream tenso virtualenv (needs PyPI)
#   make clean           clean build/ (keeps its cache and venv), remove the other build trees
#   make distclean       remove build/, every other build tree, build-dist/ and dist/ entirely

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := all
# Targets share build trees and the package manager: run them one after another; CMake and
# CTest parallelise inside.
.NOTPARALLEL:

JOBS ?= 2
PREFIX ?= /usr/local
DESTDIR ?=
FUZZ_SECONDS ?= 30
FUZZ_TARGETS ?= loads stream decoder roundtrip archive safetensors bintensors mutate pool gpu net
CMAKE ?= cmake
CTEST ?= ctest
CLANG_CC ?= clang
CLANG_CXX ?= clang++
ASAN_OPTIONS ?= detect_leaks=1
UBSAN_OPTIONS ?= print_stacktrace=1

BUILD := build
RELEASE_BUILD := build-release
CUDA ?= AUTO
ASAN_BUILD := build-asan
TSAN_BUILD := build-tsan
FUZZ_BUILD := build-fuzz
BOOTSTRAP := bash tests/tools/bootstrap.sh

# Ninja for a new build tree; an existing one keeps the generator it was made with.
generator = $(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja)

# The development tree builds the CUDA plugin, fetching nvcc when needed: CI tests it.
CONFIGURE = $(CMAKE) -S . -B $(BUILD) $(call generator,$(BUILD)) \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSO_WERROR=ON -DTENSO_CUDA_FETCH=ON

# The release tree: -O2 -g, debug information split off at install; CUDA=ON builds the plugin,
# fetching nvcc if need be; AUTO builds it only with a toolkit already here.
RELEASE_CONFIGURE = $(CMAKE) -S . -B $(RELEASE_BUILD) $(call generator,$(RELEASE_BUILD)) \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSO_BUILD_TESTS=OFF -DTENSO_BUILD_TOOLS=OFF \
	-DTENSO_JS=OFF -DTENSO_CUDA=$(CUDA) -DTENSO_CUDA_FETCH=OFF -DTENSO_SPLIT_DEBUG=ON \
	-DCMAKE_INSTALL_PREFIX=$(PREFIX)

.PHONY: all build test demo lib install dist distcheck asan tsan fuzz bench bench-js check-abi \
	check-aarch64 check-aarch64-sdks bootstrap upstream clean distclean help lint format docs \
	bench-report

all: build

build: bootstrap
	$(CONFIGURE)
	$(CMAKE) --build $(BUILD) -j $(JOBS)

test: build
	$(CTEST) --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE '^dist$$'

demo: build
	./$(BUILD)/capi/examples/tenso_demo

# The prefix is configured (tenso.pc and the install rules use it), then installed.
lib:
	@$(BOOTSTRAP) --lib
	$(RELEASE_CONFIGURE)
	$(CMAKE) --build $(RELEASE_BUILD) -j $(JOBS)

install: lib
	DESTDIR=$(DESTDIR) $(CMAKE) --install $(RELEASE_BUILD)

dist:
	@$(BOOTSTRAP) --dist
	CUDA=$(CUDA) bash tests/dist/make-dist.sh

# The dist tests are registered in build/ (label dist); they read dist/.
distcheck: dist build
	$(CTEST) --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L '^dist$$'

asan: bootstrap
	$(CMAKE) -S . -B $(ASAN_BUILD) $(call generator,$(ASAN_BUILD)) \
		-DCMAKE_C_COMPILER=$(CLANG_CC) -DCMAKE_CXX_COMPILER=$(CLANG_CXX) \
		-DCMAKE_BUILD_TYPE=Debug -DTENSO_WERROR=ON -DTENSO_SANITIZE=address,undefined
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=$(ASAN_OPTIONS) UBSAN_OPTIONS=$(UBSAN_OPTIONS) \
		$(CTEST) --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)
	ASAN_OPTIONS=$(ASAN_OPTIONS) UBSAN_OPTIONS=$(UBSAN_OPTIONS) \
		./$(ASAN_BUILD)/capi/examples/tenso_demo

# Threads share cache handles and archive readers; processes share the cache's robust mutex.
tsan: bootstrap
	$(CMAKE) -S . -B $(TSAN_BUILD) $(call generator,$(TSAN_BUILD)) \
		-DCMAKE_C_COMPILER=$(CLANG_CC) -DCMAKE_CXX_COMPILER=$(CLANG_CXX) \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSO_WERROR=ON -DTENSO_SANITIZE=thread
	$(CMAKE) --build $(TSAN_BUILD) -j $(JOBS)
	# Every suite runs, CapiHostileTest and CapiDecodeRaceTest included: their hundreds of
	# thousands of refused decodes once overflowed TSan's per-thread shadow stack (see scan_whole
	# in impl/format/codec.cpp), a SEGV in the runtime's FuncEntry and a slowdown before it.
	TSAN_OPTIONS=halt_on_error=1 $(CTEST) --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS)

# Each target fuzzes a scratch copy of its corpus (new inputs stay in build-fuzz/, never in
# the repository); crash reproducers land in build-fuzz/artifacts/. All targets run, then the
# target fails if any of them found something.
fuzz: bootstrap
	$(CMAKE) -S . -B $(FUZZ_BUILD) $(call generator,$(FUZZ_BUILD)) \
		-DCMAKE_C_COMPILER=$(CLANG_CC) -DCMAKE_CXX_COMPILER=$(CLANG_CXX) \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSO_WERROR=ON \
		-DTENSO_BUILD_FUZZERS=ON -DTENSO_SANITIZE=address,undefined
	$(CMAKE) --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@failed=""; \
	for t in $(FUZZ_TARGETS); do \
		corpus=$(FUZZ_BUILD)/corpus/$$t; artifacts=$(FUZZ_BUILD)/artifacts/$$t; \
		rm -rf "$$corpus" "$$artifacts"; mkdir -p "$$corpus" "$$artifacts"; \
		if [[ -d tests/fuzz/corpus/$$t ]]; then cp -R tests/fuzz/corpus/$$t/. "$$corpus"/; fi; \
		echo "== fuzz_$$t: $(FUZZ_SECONDS) s over $$(ls -A "$$corpus" | wc -l) seed inputs"; \
		if ASAN_OPTIONS=$(ASAN_OPTIONS) UBSAN_OPTIONS=$(UBSAN_OPTIONS) \
			./$(FUZZ_BUILD)/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
			-print_final_stats=1 -artifact_prefix="$$artifacts/" "$$corpus"; then \
			echo "== fuzz_$$t: ok, corpus now $$(ls -A "$$corpus" | wc -l) inputs"; \
		else \
			echo "== fuzz_$$t: FAILED, reproducers in $$artifacts/"; failed="$$failed $$t"; \
		fi; \
	done; \
	if [[ -n "$$failed" ]]; then echo "fuzz: failures in:$$failed"; exit 1; fi

bench: bootstrap
	$(CONFIGURE) -DTENSO_BUILD_BENCH=ON
	$(CMAKE) --build $(BUILD) -j $(JOBS) --target tenso_bench
	./$(BUILD)/bench/tenso_bench

bench-js: build
	bash bench/js/run.sh

check-abi: build
	$(CTEST) --test-dir $(BUILD) --output-on-failure -j $(JOBS) -R '^abi\.'

# The cross toolchain, qemu-user and the arm64 -dev packages are only installed for these.
check-aarch64:
	@$(BOOTSTRAP) --aarch64
	JOBS=$(JOBS) bash tests/cross/check-aarch64.sh

check-aarch64-sdks: check-aarch64
	JOBS=$(JOBS) bash tests/cross/check-aarch64-sdks.sh

# The scripts hold the logic (tests/tools/lint.sh, format.sh, docs.sh, bench/report.sh).
lint:
	@$(BOOTSTRAP) --lint
	bash tests/tools/lint.sh

format:
	@$(BOOTSTRAP) --lint
	bash tests/tools/format.sh --fix

docs:
	@$(BOOTSTRAP) --docs
	bash tests/tools/docs.sh

# BENCH_FORCE=1 runs even when the load average is above 1 (the figures are then marked).
bench-report: bootstrap
	bash bench/report.sh $(if $(BENCH_FORCE),--force)

bootstrap:
	@$(BOOTSTRAP)

upstream:
	@$(BOOTSTRAP) --upstream

clean:
	if [[ -f $(BUILD)/CMakeCache.txt ]]; then $(CMAKE) --build $(BUILD) --target clean; fi
	rm -rf $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) build-aarch64 build-aarch64-host

distclean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) build-aarch64 build-aarch64-host \
		$(RELEASE_BUILD) build-dist dist

help:
	@sed -n '1,/^$$/s/^#   //p' Makefile
