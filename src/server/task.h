// GenerationTask: what the HTTP side hands the engine loop, already rendered and
// tokenized (rendering happens on the HTTP thread so the loop only ever sees tokens).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "engine/sampler.h"
#include "engine/types.h"

namespace hearth::server {

struct GenerationTask {
  std::vector<engine::Token> prompt;
  engine::SamplingParams sampling;
  int max_tokens = 256;
  std::vector<std::string> stop;
  // Chat requests: parse the output into reasoning / content / tool calls. Unset for raw
  // text completions.
  std::optional<engine::OutputFormat> output_format;
};

}  // namespace hearth::server
