#include "server/request_builder.h"

#include <string>
#include <variant>

namespace hearth::server {

api::ApiError BadRequest(std::string message, std::string param) {
  return {400, "invalid_request_error", std::move(message), std::move(param)};
}

namespace {

engine::ChatMessage ToEngine(const api::Message& m) {
  engine::ChatMessage out;
  out.role = m.role;
  out.content = m.content;
  out.reasoning_content = m.reasoning_content;
  out.tool_call_id = m.tool_call_id;
  out.tool_name = m.tool_name;
  for (const auto& c : m.tool_calls) out.tool_calls.push_back({c.id, c.name, c.arguments});
  return out;
}

engine::SamplingParams ToEngine(const api::Sampling& s) {
  engine::SamplingParams p;
  if (s.temperature) p.temperature = *s.temperature;
  if (s.top_p) p.top_p = *s.top_p;
  if (s.top_k) p.top_k = *s.top_k;
  if (s.min_p) p.min_p = *s.min_p;
  if (s.seed) p.seed = *s.seed;
  if (s.presence_penalty) p.presence_penalty = *s.presence_penalty;
  if (s.frequency_penalty) p.frequency_penalty = *s.frequency_penalty;
  if (s.repetition_penalty) p.repetition_penalty = *s.repetition_penalty;
  return p;
}

}  // namespace

std::variant<BuildResult, api::ApiError> RequestBuilder::Render(const api::GenerationRequest& request) const {
  BuildResult out;
  if (request.prompt) {
    out.prompt_text = *request.prompt;
    out.task.prompt = model_.Tokenize(out.prompt_text, /*add_bos=*/true, /*parse_special=*/false);
    return out;
  }
  std::vector<engine::ChatMessage> messages;
  for (const auto& m : request.messages) messages.push_back(ToEngine(m));
  engine::RenderOptions ro;
  if (request.enable_thinking) ro.enable_thinking = *request.enable_thinking;
  for (const auto& t : request.tools) ro.tools.push_back({t.name, t.description, t.parameters});
  if (!request.tools.empty()) {
    ro.tool_choice = request.tool_choice;
    // A named function is not something the template can force; offer the tools.
    if (ro.tool_choice != "auto" && ro.tool_choice != "none" && ro.tool_choice != "required") ro.tool_choice = "required";
  }
  ro.parallel_tool_calls = request.parallel_tool_calls;
  ro.template_kwargs = request.template_kwargs;
  auto rendered = template_.Render(messages, ro);
  if (!rendered.ok()) return BadRequest(rendered.status().message(), "messages");
  out.prompt_text = rendered->prompt;
  // The rendered prompt carries its own control tokens (and BOS where the template wants it).
  out.task.prompt = model_.Tokenize(out.prompt_text, /*add_bos=*/false, /*parse_special=*/true);
  out.task.output_format = rendered->output_format;
  out.task.stop = rendered->additional_stops;
  return out;
}

std::variant<BuildResult, api::ApiError> RequestBuilder::Build(const api::GenerationRequest& request) const {
  auto rendered = Render(request);
  if (auto* err = std::get_if<api::ApiError>(&rendered)) return *err;
  BuildResult out = std::move(std::get<BuildResult>(rendered));
  const int n_prompt = static_cast<int>(out.task.prompt.size());
  if (n_prompt == 0) return BadRequest("the prompt is empty", "prompt");
  if (n_prompt >= n_ctx_) {
    return BadRequest("the prompt has " + std::to_string(n_prompt) + " tokens but the context holds " +
                          std::to_string(n_ctx_) + "; shorten the conversation or start the server with a larger --ctx-size",
                      "messages");
  }
  const int room = n_ctx_ - n_prompt;
  if (request.max_tokens) {
    if (*request.max_tokens > room) {
      return BadRequest("max_tokens is " + std::to_string(*request.max_tokens) + " but the prompt has " +
                            std::to_string(n_prompt) + " tokens and the context holds " + std::to_string(n_ctx_) +
                            ", leaving room for " + std::to_string(room),
                        "max_tokens");
    }
    out.task.max_tokens = *request.max_tokens;
  } else {
    out.task.max_tokens = room;
  }
  out.task.sampling = ToEngine(request.sampling);
  if (Status s = out.task.sampling.Validate(); !s.ok()) return BadRequest(s.message());
  for (const auto& s : request.stop) out.task.stop.push_back(s);
  return out;
}

}  // namespace hearth::server
