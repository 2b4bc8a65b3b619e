// The tiny model the model-needing fuzz targets in tests/fuzz/ run against.
//
// The model is $HEARTH_FUZZ_MODEL when set, else <build>/testdata/tiny-qwen35.gguf, which
// is written with mkmodel on first use (atomic, so targets started at once may race to
// write it). It is loaded once per process and never freed.
//
// Thread safety: a fuzz target runs its inputs on one thread; the first call loads.
#pragma once

#include "check.h"
#include "engine/chat_template.h"
#include "engine/model.h"

namespace hearth::fuzz {

// The tiny Qwen3.5 model and its own (the real Qwen3.5) chat template. Abort the process
// with a message when either cannot be made: a fuzz run without its model is no run.
const engine::Model& TinyModel();
const engine::ChatTemplate& TinyTemplate();

}  // namespace hearth::fuzz
