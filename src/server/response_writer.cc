#include "server/response_writer.h"

#include <chrono>

#include "api/anthropic.h"
#include "api/ids.h"
#include "api/openai.h"
#include "api/responses.h"

namespace hearth::server {
namespace {

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class OpenAIChatWriter : public ResponseWriter {
 public:
  OpenAIChatWriter(std::string model, bool include_usage)
      : model_(std::move(model)), include_usage_(include_usage), id_(api::NewId("chatcmpl-")), created_(UnixNow()) {}

  std::string Begin(const api::Usage&) override {
    return api::openai::SseData(api::openai::ChatChunkJson({}, /*first=*/true, id_, model_, created_));
  }
  std::string Delta(const api::Delta& d) override {
    return api::openai::SseData(api::openai::ChatChunkJson(d, false, id_, model_, created_));
  }
  std::string End(const api::Completion& c) override {
    std::string out = api::openai::SseData(api::openai::ChatFinishChunkJson(c.finish_reason, id_, model_, created_));
    if (include_usage_) out += api::openai::SseData(api::openai::ChatUsageChunkJson(c.usage, id_, model_, created_));
    return out + api::openai::SseDone();
  }
  std::string Fail(const api::ApiError& e) override {
    return api::openai::SseData(api::openai::ErrorJson(e)) + api::openai::SseDone();
  }
  std::string KeepAlive() override { return ": keep-alive\n\n"; }
  std::string Whole(const api::Completion& c) override {
    return api::openai::ChatCompletionJson(c, id_, model_, created_);
  }
  std::string ErrorBody(const api::ApiError& e) override { return api::openai::ErrorJson(e); }

 private:
  std::string model_;
  bool include_usage_;
  std::string id_;
  int64_t created_;
};

class OpenAITextWriter : public ResponseWriter {
 public:
  OpenAITextWriter(std::string model, bool include_usage)
      : model_(std::move(model)), include_usage_(include_usage), id_(api::NewId("cmpl-")), created_(UnixNow()) {}

  std::string Begin(const api::Usage&) override { return ""; }
  std::string Delta(const api::Delta& d) override {
    if (d.content.empty()) return "";
    return api::openai::SseData(api::openai::TextChunkJson(d.content, id_, model_, created_));
  }
  std::string End(const api::Completion& c) override {
    std::string out = api::openai::SseData(api::openai::TextFinishChunkJson(c.finish_reason, id_, model_, created_));
    if (include_usage_) out += api::openai::SseData(api::openai::TextUsageChunkJson(c.usage, id_, model_, created_));
    return out + api::openai::SseDone();
  }
  std::string Fail(const api::ApiError& e) override {
    return api::openai::SseData(api::openai::ErrorJson(e)) + api::openai::SseDone();
  }
  std::string KeepAlive() override { return ": keep-alive\n\n"; }
  std::string Whole(const api::Completion& c) override {
    return api::openai::TextCompletionJson(c, id_, model_, created_);
  }
  std::string ErrorBody(const api::ApiError& e) override { return api::openai::ErrorJson(e); }

 private:
  std::string model_;
  bool include_usage_;
  std::string id_;
  int64_t created_;
};

class AnthropicWriter : public ResponseWriter {
 public:
  explicit AnthropicWriter(std::string model) : model_(std::move(model)), id_(api::NewId("msg_")) {}

  std::string Begin(const api::Usage& usage) override { return encoder_.Start(id_, model_, usage); }
  std::string Delta(const api::Delta& d) override { return encoder_.Push(d); }
  std::string End(const api::Completion& c) override { return encoder_.Finish(c); }
  std::string Fail(const api::ApiError& e) override { return encoder_.Error(e); }
  std::string KeepAlive() override { return encoder_.Ping(); }
  std::string Whole(const api::Completion& c) override { return api::anthropic::MessageJson(c, id_, model_); }
  std::string ErrorBody(const api::ApiError& e) override { return api::anthropic::ErrorJson(e); }

 private:
  std::string model_;
  std::string id_;
  api::anthropic::StreamEncoder encoder_;
};

// The Responses API: events carry their own names; the stream ends with
// response.completed (no [DONE]). Errors use OpenAI's shape.
class ResponsesWriter : public ResponseWriter {
 public:
  ResponsesWriter(api::responses::ResponseInfo info, ResponsesEndCallback on_end)
      : info_(std::move(info)), on_end_(std::move(on_end)) {}

  std::string Begin(const api::Usage&) override { return encoder_.Start(info_); }
  std::string Delta(const api::Delta& d) override { return encoder_.Push(d); }
  std::string End(const api::Completion& c) override {
    std::string out = encoder_.Finish(c);
    if (on_end_) on_end_(c, encoder_.response_json());
    return out;
  }
  std::string Fail(const api::ApiError& e) override { return encoder_.Error(e); }
  std::string KeepAlive() override { return ": keep-alive\n\n"; }
  std::string Whole(const api::Completion& c) override {
    std::string out = api::responses::ResponseJson(info_, c);
    if (on_end_) on_end_(c, out);
    return out;
  }
  std::string ErrorBody(const api::ApiError& e) override { return api::openai::ErrorJson(e); }

 private:
  api::responses::ResponseInfo info_;
  ResponsesEndCallback on_end_;
  api::responses::StreamEncoder encoder_;
};

}  // namespace

std::unique_ptr<ResponseWriter> MakeResponsesWriter(api::responses::ResponseInfo info, ResponsesEndCallback on_end) {
  return std::make_unique<ResponsesWriter>(std::move(info), std::move(on_end));
}

std::unique_ptr<ResponseWriter> MakeResponseWriter(api::Flavor flavor, std::string model, bool include_usage) {
  switch (flavor) {
    case api::Flavor::kOpenAIChat: return std::make_unique<OpenAIChatWriter>(std::move(model), include_usage);
    case api::Flavor::kOpenAICompletion: return std::make_unique<OpenAITextWriter>(std::move(model), include_usage);
    case api::Flavor::kAnthropic: return std::make_unique<AnthropicWriter>(std::move(model));
    case api::Flavor::kOpenAIResponses: {
      api::responses::ResponseInfo info;
      info.id = api::NewId("resp_");
      info.model = std::move(model);
      info.created_at = UnixNow();
      return MakeResponsesWriter(std::move(info));
    }
  }
  return nullptr;
}

api::ApiError ToApiError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return {400, "invalid_request_error", status.message(), ""};
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
      return {503, "overloaded_error", status.message(), ""};
    default:
      return {500, "api_error", status.message(), ""};
  }
}

}  // namespace hearth::server
