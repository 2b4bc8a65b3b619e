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

demo: build
	@mkdir -p $(MODELS)
	$(HEARTH) mkmodel --arch qwen35 --preset small --out $(MODELS)/small-qwen35.gguf
	$(HEARTH) generate -m $(MODELS)/small-qwen35.gguf -n 64 \
	  --message "Explain why a recurrent state cannot be trimmed like a KV cache."

clean:
	rm -rf $(BUILD)
