#include "bench/usage.h"

namespace hearth::bench {
namespace {

std::optional<int> IntField(const Json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return static_cast<int>(it->get<double>());
}

std::optional<double> NumberField(const Json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

void Set(std::optional<int>* dst, std::optional<int> v) {
  if (v) *dst = v;
}

std::string ErrorText(const Json& err) {
  if (err.is_string()) return err.get<std::string>();
  if (err.is_object()) {
    if (auto it = err.find("message"); it != err.end() && it->is_string()) return it->get<std::string>();
    if (auto it = err.find("error"); it != err.end()) return ErrorText(*it);
  }
  return err.dump();
}

}  // namespace

void UsageCollector::Add(const Json& j) {
  if (!j.is_object()) return;
  if (auto t = j.find("timings"); t != j.end() && t->is_object()) {
    Set(&timings_cache_n_, IntField(*t, "cache_n"));
    Set(&timings_prompt_n_, IntField(*t, "prompt_n"));
    if (auto ms = NumberField(*t, "prompt_ms")) timings_prompt_ms_ = ms;
  }
  // Anthropic streams carry usage inside message_start's message.
  if (auto m = j.find("message"); m != j.end() && m->is_object()) Add(*m);
  auto u = j.find("usage");
  if (u == j.end() || !u->is_object()) return;
  Set(&oa_prompt_, IntField(*u, "prompt_tokens"));
  Set(&oa_completion_, IntField(*u, "completion_tokens"));
  if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object()) {
    Set(&oa_cached_, IntField(*d, "cached_tokens"));
  }
  Set(&oa_cached_, IntField(*u, "prompt_cache_hit_tokens"));
  Set(&an_input_, IntField(*u, "input_tokens"));
  Set(&an_cache_read_, IntField(*u, "cache_read_input_tokens"));
  Set(&an_cache_creation_, IntField(*u, "cache_creation_input_tokens"));
  Set(&an_output_, IntField(*u, "output_tokens"));
  if (auto h = u->find("hearth_cache"); h != u->end() && h->is_object()) {
    // A later report (the final usage) replaces an earlier one (message_start's).
    auto tier = h->find("tier");
    cache_tier_ = tier != h->end() && tier->is_string() ? tier->get<std::string>() : "";
    auto why = h->find("stopped_because");
    stopped_because_ = why != h->end() && why->is_string() ? why->get<std::string>() : "";
  }
}

Usage UsageCollector::Result() const {
  Usage r;
  r.source = "none";
  r.prefill_ms = timings_prompt_ms_;
  r.cache_tier = cache_tier_;
  r.stopped_because = stopped_because_;
  std::optional<int> an_prompt;
  if (an_input_) an_prompt = *an_input_ + an_cache_read_.value_or(0) + an_cache_creation_.value_or(0);
  r.prompt_tokens = oa_prompt_ ? oa_prompt_ : an_prompt;
  r.completion_tokens = oa_completion_ ? oa_completion_ : an_output_;
  if (timings_cache_n_ && timings_prompt_n_) {
    r.reused_tokens = timings_cache_n_;
    if (!r.prompt_tokens) r.prompt_tokens = *timings_cache_n_ + *timings_prompt_n_;
    r.source = "timings";
  } else if (oa_cached_) {
    r.reused_tokens = oa_cached_;
    r.source = "openai";
  } else if (an_cache_read_ && an_input_) {
    r.reused_tokens = an_cache_read_;
    r.source = "anthropic";
  }
  return r;
}

int StreamReader::Feed(std::string_view bytes) {
  buffer_.append(bytes.data(), bytes.size());
  int n = 0;
  while (true) {
    // Events end with a blank line; servers use "\n\n" (or "\r\n\r\n").
    size_t end = buffer_.find("\n\n");
    size_t sep = 2;
    const size_t crlf = buffer_.find("\r\n\r\n");
    if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
      end = crlf;
      sep = 4;
    }
    if (end == std::string::npos) break;
    const std::string event = buffer_.substr(0, end);
    buffer_.erase(0, end + sep);
    std::string name, data;
    size_t pos = 0;
    while (pos <= event.size()) {
      size_t eol = event.find('\n', pos);
      if (eol == std::string::npos) eol = event.size();
      std::string_view line(event.data() + pos, eol - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.starts_with("event:")) {
        name = std::string(line.substr(6));
        if (!name.empty() && name[0] == ' ') name.erase(0, 1);
      } else if (line.starts_with("data:")) {
        std::string_view d = line.substr(5);
        if (!d.empty() && d[0] == ' ') d.remove_prefix(1);
        if (!data.empty()) data += '\n';
        data += d;
      } else if (line.starts_with("error:")) {  // some servers write raw "error: {...}"
        data = std::string(line.substr(6));
        name = "error";
      }
      pos = eol + 1;
    }
    if (!data.empty()) n += HandleEvent(name, data);
  }
  n_pieces_ += n;
  return n;
}

int StreamReader::HandleEvent(std::string_view name, std::string_view data) {
  if (data == "[DONE]") {
    done_ = true;
    return 0;
  }
  Json j = Json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  usage_.Add(j);
  if (name == "error" || j.contains("error")) {
    if (!error_) error_ = ErrorText(j.contains("error") ? j["error"] : j);
    return 0;
  }
  return flavor_ == Flavor::kOpenAI ? HandleOpenAI(j) : HandleAnthropic(j);
}

int StreamReader::HandleOpenAI(const Json& j) {
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty()) return 0;
  const Json& choice = (*choices)[0];
  if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) done_ = true;
  const Json* delta = choice.contains("delta") ? &choice["delta"] : nullptr;
  if (delta == nullptr || !delta->is_object()) return 0;
  int n = 0;
  auto take = [&](const char* key, std::string* dst) {
    auto it = delta->find(key);
    if (it != delta->end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
      *dst += it->get_ref<const std::string&>();
      ++n;
    }
  };
  take("content", &content_);
  take("reasoning_content", &reasoning_);
  take("reasoning", &reasoning_);
  if (auto tc = delta->find("tool_calls"); tc != delta->end() && tc->is_array() && !tc->empty()) ++n;
  return n;
}

int StreamReader::HandleAnthropic(const Json& j) {
  const std::string type = j.value("type", "");
  if (type == "message_stop") done_ = true;
  if (type != "content_block_delta" || !j.contains("delta")) return 0;
  const Json& d = j["delta"];
  const std::string dt = d.value("type", "");
  if (dt == "text_delta") {
    content_ += d.value("text", "");
    return 1;
  }
  if (dt == "thinking_delta") {
    reasoning_ += d.value("thinking", "");
    return 1;
  }
  return dt == "input_json_delta" ? 1 : 0;
}

std::string ErrorMessage(std::string_view body) {
  Json j = Json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) return ErrorText(j["error"]);
  return std::string(body.substr(0, 300));
}

}  // namespace hearth::bench
