# hearth: the two commands that matter are `make demo` and `make test`.
BUILD     ?= build
JOBS      ?= $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
MODELS    ?= $(BUILD)/models
HEARTH    := $(BUILD)/src/hearth

.PHONY: all deps llama configure build test test-asan fuzz fuzz-build fuzz-smoke demo cluster-demo models clean

all: build

deps:
	@bash scripts/install-deps.sh

# llama.cpp for this machine's backend (HEARTH_BACKEND, HEARTH_RPC: scripts/build-llama.sh).
llama: deps
	@bash scripts/build-llama.sh >/dev/null

# Configures each build folder for that llama.cpp, and again when the backend changed.
configure: llama
	@bash scripts/configure.sh $(BUILD)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

models: build
	@mkdir -p $(MODELS)
	$(HEARTH) mkmodel --arch qwen35 --preset tiny --out $(MODELS)/tiny-qwen35.gguf
	$(HEARTH) mkmodel --arch qwen35 --preset small --out $(MODELS)/small-qwen35.gguf

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# hearth's own code under AddressSanitizer + UndefinedBehaviorSanitizer (llama.cpp is not
# instrumented), in its own build folder. ASAN_TESTS: a ctest -R filter (default: all);
# ASAN_EXCLUDE: a ctest -E filter, by default the render sweeps' templates of families hearth
# makes no model for (Shipped/*: the same hearth code as Families/*, over other templates'
# Jinja, which is llama.cpp's and uninstrumented; under ASan they took ~20 of the pass's
# ~48 test-minutes). `make test` runs them all.
ASAN_BUILD ?= build-asan
ASAN_TESTS ?=
ASAN_EXCLUDE ?= ^Shipped/
test-asan: llama
	@bash scripts/configure.sh $(ASAN_BUILD) -DHEARTH_SANITIZE=address,undefined
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) $(if $(ASAN_TESTS),-R '$(ASAN_TESTS)') $(if $(ASAN_EXCLUDE),-E '$(ASAN_EXCLUDE)')

# libFuzzer targets (tests/fuzz/) under ASan + UBSan, built with clang in their own build
# folder. `make fuzz`: each target for FUZZ_SECONDS, one at a time (FUZZ_TARGETS: a subset);
# `make fuzz-smoke`: the seeds and a fixed few thousand inputs of each, as CI runs them.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= utf8 json_fields openai_request anthropic_request state_file disk_store stabilizer \
                detokenizer output_parser request_builder
fuzz-build: llama
	@CC=clang CXX=clang++ bash scripts/configure.sh $(FUZZ_BUILD) -DHEARTH_FUZZ=ON -DHEARTH_BUILD_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target hearth_fuzz

fuzz: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/fuzz-logs
	@for t in $(FUZZ_TARGETS); do echo "== fuzz $$t, $(FUZZ_SECONDS) s (log: $(FUZZ_BUILD)/fuzz-logs/$$t.log)"; \
	  if FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh $(FUZZ_BUILD) $$t > $(FUZZ_BUILD)/fuzz-logs/$$t.log 2>&1; then \
	    grep -E '^stat::number_of_executed_units' $(FUZZ_BUILD)/fuzz-logs/$$t.log; \
	  else tail -40 $(FUZZ_BUILD)/fuzz-logs/$$t.log; exit 1; fi; done

fuzz-smoke: fuzz-build
	cd $(FUZZ_BUILD) && ctest --output-on-failure -L fuzz -j $(JOBS)

# Small model (made once); the same agent session against hearth and llama-server (or hearth
# --no-cache), side by side: a per-turn table and a log-log plot of time to first token.
demo: build
	@bash scripts/demo.sh $(HEARTH) $(MODELS) $(BUILD)/demo-results

# Three replicas sharing one cache through Redis, behind HAProxy (deploy/haproxy/): `hearth
# bench` through it with round-robin, then affinity routing (scripts/cluster.sh).
cluster-demo: build
	@bash scripts/cluster.sh $(HEARTH) $(MODELS) $(BUILD)/cluster-results

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
