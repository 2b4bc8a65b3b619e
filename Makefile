# hearth: the two commands that matter are `make demo` and `make test`.
BUILD     ?= build
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
MODELS    ?= $(BUILD)/models
HEARTH    := $(BUILD)/src/hearth

.PHONY: all deps llama configure build test test-asan demo models clean

all: build

deps:
	@bash scripts/install-deps.sh

llama: deps
	@bash scripts/build-llama.sh >/dev/null

$(BUILD)/CMakeCache.txt:
	@$(MAKE) --no-print-directory llama
	cmake -S . -B $(BUILD) -DHEARTH_LLAMA_PREFIX="$$(bash scripts/build-llama.sh)" >/dev/null

configure: $(BUILD)/CMakeCache.txt

build: llama configure
	cmake --build $(BUILD) -j $(JOBS)

models: build
	@mkdir -p $(MODELS)
	$(HEARTH) mkmodel --arch qwen35 --preset tiny --out $(MODELS)/tiny-qwen35.gguf
	$(HEARTH) mkmodel --arch qwen35 --preset small --out $(MODELS)/small-qwen35.gguf

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# hearth's own code under AddressSanitizer + UndefinedBehaviorSanitizer (llama.cpp is not
# instrumented), in its own build folder. ASAN_TESTS: a ctest -R filter (default: all).
ASAN_BUILD ?= build-asan
ASAN_TESTS ?=
test-asan: llama
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) -DHEARTH_LLAMA_PREFIX="$$(bash scripts/build-llama.sh)" \
	  -DHEARTH_SANITIZE=address,undefined >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) $(if $(ASAN_TESTS),-R '$(ASAN_TESTS)')

# Small model (made once), hearth serve, a short multi-turn `hearth bench` session.
demo: build
	@bash scripts/demo.sh $(HEARTH) $(MODELS) $(BUILD)/demo-results

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
