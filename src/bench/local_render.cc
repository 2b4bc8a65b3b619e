#include "bench/local_render.h"

#include "engine/chat_template.h"
#include "engine/model.h"

namespace hearth::bench {
namespace {

std::string TextOf(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const Json& part : content) {
      if (part.is_object() && part.value("type", "") == "text") out += part.value("text", "");
    }
  }
  return out;
}

engine::ChatMessage ToEngine(const Json& m) {
  engine::ChatMessage out;
  out.role = m.value("role", "user");
  out.content = TextOf(m.value("content", Json("")));
  out.reasoning_content = m.value("reasoning_content", "");
  out.tool_call_id = m.value("tool_call_id", "");
  out.tool_name = m.value("name", "");
  for (const Json& c : m.value("tool_calls", Json::array())) {
    const Json fn = c.value("function", Json::object());
    const Json args = fn.value("arguments", Json("{}"));
    out.tool_calls.push_back({c.value("id", ""), fn.value("name", ""), args.is_string() ? args.get<std::string>() : args.dump()});
  }
  return out;
}

}  // namespace

struct LocalRenderBackend::Impl {
  std::unique_ptr<engine::Model> model;
  std::unique_ptr<engine::ChatTemplate> chat_template;
};

LocalRenderBackend::LocalRenderBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LocalRenderBackend::~LocalRenderBackend() = default;

StatusOr<std::unique_ptr<LocalRenderBackend>> LocalRenderBackend::Open(const std::string& model_path) {
  engine::InitBackend(false);
  auto impl = std::make_unique<Impl>();
  engine::ModelOptions options;
  options.n_gpu_layers = 0;  // only the vocabulary and the template are used
  auto model = engine::Model::Load(model_path, options);
  if (!model.ok()) return model.status();
  impl->model = std::move(*model);
  auto tmpl = engine::ChatTemplate::Create(*impl->model, "");
  if (!tmpl.ok()) return tmpl.status();
  impl->chat_template = std::move(*tmpl);
  return std::unique_ptr<LocalRenderBackend>(new LocalRenderBackend(std::move(impl)));
}

StatusOr<std::string> LocalRenderBackend::ApplyTemplate(const Json& body) {
  try {
    std::vector<engine::ChatMessage> messages;
    for (const Json& m : body.value("messages", Json::array())) messages.push_back(ToEngine(m));
    engine::RenderOptions ro;
    ro.add_generation_prompt = body.value("add_generation_prompt", true);
    const Json kwargs = body.value("chat_template_kwargs", Json::object());
    if (kwargs.is_object() && kwargs.contains("enable_thinking") && kwargs["enable_thinking"].is_boolean()) {
      ro.enable_thinking = kwargs["enable_thinking"].get<bool>();
    }
    for (const Json& t : body.value("tools", Json::array())) {
      const Json fn = t.value("function", Json::object());
      ro.tools.push_back({fn.value("name", ""), fn.value("description", ""), fn.value("parameters", Json::object()).dump()});
    }
    ro.parallel_tool_calls = !ro.tools.empty();
    auto r = impl_->chat_template->Render(messages, ro);
    if (!r.ok()) return r.status();
    return r->prompt;
  } catch (const std::exception& e) {  // JSON type errors in a hand-written body
    return InvalidArgument(std::string("cannot render: ") + e.what());
  }
}

StatusOr<int> LocalRenderBackend::CountTokens(const std::string& text) {
  return static_cast<int>(impl_->model->Tokenize(text, /*add_bos=*/false, /*parse_special=*/true).size());
}

}  // namespace hearth::bench
