// Request rendering (src/server/request_builder.h) over hostile requests, on the tiny
// Qwen3.5 model with its real template and a --stabilize rule: OpenAI or Anthropic bodies
// through their parsers, or requests built field by field that no parser would let
// through (odd roles, invalid UTF-8, broken tool-call arguments and schemas, nested
// content). What must hold: Build never crashes or throws; a refusal is a 400; a task's
// prompt fits the context with room for its max_tokens, and its snapshot positions are
// ascending prompt positions holding generation_start and moved_spans_start.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "api/anthropic.h"
#include "api/openai.h"
#include "chat/stabilizer.h"
#include "fuzz_env.h"
#include "server/request_builder.h"

namespace {

namespace api = hearth::api;
using hearth::fuzz::Check;

constexpr int kCtx = 4096;

const hearth::server::RequestBuilder& Builder() {
  static const hearth::server::RequestBuilder* builder = [] {
    auto stabilizer = hearth::chat::Stabilizer::Parse({"uuid", "timestamp"}, hearth::chat::StabilizeMode::kMoveToEnd);
    Check(stabilizer.ok(), "the presets parse");
    return new hearth::server::RequestBuilder(hearth::fuzz::TinyModel(), hearth::fuzz::TinyTemplate(), kCtx, "fuzz",
                                              std::move(*stabilizer));
  }();
  return *builder;
}

std::string PickRole(FuzzedDataProvider& in) {
  static const char* kRoles[] = {"system", "user", "assistant", "tool", "developer", "", "function", "ipython"};
  const size_t i = in.ConsumeIntegralInRange<size_t>(0, 8);
  return i < 8 ? kRoles[i] : in.ConsumeRandomLengthString(16);
}

// A JSON-ish text: well-formed, cut off, or raw bytes.
std::string JsonText(FuzzedDataProvider& in) {
  static const char* kShapes[] = {R"({"path":"a.txt"})", R"({"path":)", "[1,2,3]", "\"str\"", "null", "{}",
                                  R"({"a":{"b":{"c":[{"d":1}]}}})", R"({"type":"object","properties":{"x":{}}})"};
  const size_t i = in.ConsumeIntegralInRange<size_t>(0, 8);
  return i < 8 ? kShapes[i] : in.ConsumeRandomLengthString(256);
}

api::GenerationRequest HostileRequest(FuzzedDataProvider& in) {
  api::GenerationRequest r;
  r.flavor = in.ConsumeBool() ? api::Flavor::kAnthropic : api::Flavor::kOpenAIChat;
  const size_t n_messages = in.ConsumeIntegralInRange<size_t>(0, 8);
  for (size_t i = 0; i < n_messages; ++i) {
    api::Message m;
    m.role = PickRole(in);
    m.content = in.ConsumeRandomLengthString(2048);
    if (in.ConsumeBool()) m.reasoning_content = in.ConsumeRandomLengthString(256);
    const size_t n_calls = in.ConsumeIntegralInRange<size_t>(0, 2);
    for (size_t c = 0; c < n_calls; ++c) {
      m.tool_calls.push_back({in.ConsumeRandomLengthString(16), in.ConsumeRandomLengthString(16), JsonText(in)});
    }
    if (in.ConsumeBool()) m.tool_call_id = in.ConsumeRandomLengthString(16);
    if (in.ConsumeBool()) m.tool_name = in.ConsumeRandomLengthString(16);
    r.messages.push_back(std::move(m));
  }
  const size_t n_tools = in.ConsumeIntegralInRange<size_t>(0, 2);
  for (size_t t = 0; t < n_tools; ++t) {
    r.tools.push_back({in.ConsumeRandomLengthString(16), in.ConsumeRandomLengthString(64), JsonText(in)});
  }
  static const char* kChoices[] = {"auto", "none", "required", "read_file"};
  r.tool_choice = kChoices[in.ConsumeIntegralInRange<size_t>(0, 3)];
  r.parallel_tool_calls = in.ConsumeBool();
  if (in.ConsumeBool()) r.enable_thinking = in.ConsumeBool();
  if (in.ConsumeBool()) r.template_kwargs[in.ConsumeRandomLengthString(16)] = JsonText(in);
  if (in.ConsumeBool()) r.max_tokens = in.ConsumeIntegralInRange<int>(1, 2 * kCtx);
  if (in.ConsumeBool()) r.stop.push_back(in.ConsumeRandomLengthString(8));
  r.cache_salt = in.ConsumeRandomLengthString(8);
  return r;
}

void CheckTask(const api::GenerationRequest& request, const hearth::server::BuildResult& built) {
  const auto& task = built.task;
  const auto n = static_cast<int32_t>(task.prompt.size());
  Check(n > 0 && n < kCtx, "the prompt fits the context");
  Check(task.max_tokens >= 1 && task.max_tokens <= kCtx - n, "max_tokens fits beside the prompt");
  for (auto t : task.prompt) Check(hearth::fuzz::TinyModel().IsValidToken(t), "the prompt holds vocabulary tokens");
  const auto& snaps = task.snapshot_positions;
  Check(!snaps.empty() && snaps.back() == n, "the prompt's end is a snapshot position");
  Check(std::adjacent_find(snaps.begin(), snaps.end(), [](int32_t a, int32_t b) { return a >= b; }) == snaps.end(),
        "snapshot positions ascend");
  Check(snaps.front() >= 1, "snapshot positions lie inside the prompt");
  if (request.prompt) return;
  Check(std::binary_search(snaps.begin(), snaps.end(), task.generation_start), "generation_start is a snapshot position");
  if (task.moved_spans_start >= 0) {
    Check(std::binary_search(snaps.begin(), snaps.end(), task.moved_spans_start),
          "moved_spans_start is a snapshot position");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  api::GenerationRequest request;
  switch (data[0] % 3) {
    case 0: {
      auto parsed = api::openai::ParseChatCompletionRequest(body);
      if (!parsed.ok()) return 0;
      request = std::move(*parsed);
      break;
    }
    case 1: {
      auto parsed = api::anthropic::ParseMessagesRequest(body);
      if (!parsed.ok()) return 0;
      request = std::move(*parsed);
      break;
    }
    default: {
      FuzzedDataProvider in(data + 1, size - 1);
      request = HostileRequest(in);
    }
  }
  auto built = Builder().Build(request);
  if (const auto* error = std::get_if<api::ApiError>(&built)) {
    Check(error->http_status == 400 && !error->message.empty(), "a refused request is a 400 saying why");
    return 0;
  }
  CheckTask(request, std::get<hearth::server::BuildResult>(built));
  Builder().RenderText(request);
  return 0;
}
