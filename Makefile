# hearth: the two commands that matter are `make demo` and `make test`.
BUILD     ?= build
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
MODELS    ?= $(BUILD)/models
HEARTH    := $(BUILD)/src/hearth

.PHONY: all deps llama configure build test demo models clean

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

# Small model (made once), hearth serve, a short multi-turn `hearth bench` session.
demo: build
	@bash scripts/demo.sh $(HEARTH) $(MODELS) $(BUILD)/demo-results

clean:
	rm -rf $(BUILD)
