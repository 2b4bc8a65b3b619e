#include "server/metrics.h"

#include <cstdint>

namespace hearth::server {
namespace {

void Add(std::string* out, const char* name, const char* type, const char* help, int64_t value) {
  *out += std::string("# HELP hearth_") + name + " " + help + "\n";
  *out += std::string("# TYPE hearth_") + name + " " + type + "\n";
  *out += std::string("hearth_") + name + " " + std::to_string(value) + "\n";
}

}  // namespace

std::string FormatPrometheus(const EngineStats& s) {
  std::string out;
  Add(&out, "requests_finished_total", "counter", "Requests that ended normally or were cancelled.", s.requests_finished);
  Add(&out, "requests_cancelled_total", "counter", "Requests cancelled by their client.", s.requests_cancelled);
  Add(&out, "requests_failed_total", "counter", "Requests that ended with an error.", s.requests_failed);
  Add(&out, "prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", s.prompt_tokens);
  Add(&out, "prompt_tokens_cached_total", "counter", "Prompt tokens reused from the cache.", s.prompt_tokens_cached);
  Add(&out, "prompt_tokens_prefilled_total", "counter", "Prompt tokens computed at request time.",
      s.prompt_tokens_prefilled);
  Add(&out, "generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  Add(&out, "decode_calls_total", "counter", "Batches decoded.", s.decode_calls);
  Add(&out, "slots_busy", "gauge", "Sequences generating or prefilling now.", s.slots_busy);
  Add(&out, "requests_queued", "gauge", "Requests waiting for a free sequence.", s.queued);
  return out;
}

}  // namespace hearth::server
