#include "server/generate_handler.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string_view>

#include "server/response_writer.h"

namespace hearth::server {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kPollInterval{50};
constexpr int kKeepAliveEvery = 100;  // polls, i.e. 5 seconds
// Before the stream's first event (while the request waits for a slot) only an SSE
// comment keeps the connection busy: every SSE parser drops it, where an event (an
// Anthropic ping) before message_start would break the event order.
constexpr std::string_view kSseComment = ": waiting for a slot\n\n";

void ReplyError(ResponseWriter& writer, const api::ApiError& error, httplib::Response& res) {
  res.status = error.http_status;
  res.set_content(writer.ErrorBody(error), "application/json");
}

// Streams events to the client until the request is done; cancels it if the client goes.
// The stream begins when the engine admits the request, with what its prompt reuses.
struct StreamState {
  std::shared_ptr<RequestStream> stream;
  std::unique_ptr<ResponseWriter> writer;
  api::Usage usage_unadmitted;  // for a stream that ends before admission: nothing reused
  bool begun = false;
  bool done = false;
  api::Completion delivered;  // what reached the client so far
  int idle_polls = 0;
};

void AddDelivered(api::Completion& c, const api::Delta& d) {
  c.content += d.content;
  c.reasoning += d.reasoning;
  for (const auto& t : d.tool_calls) {
    if (t.index < 0) continue;
    if (static_cast<size_t>(t.index) >= c.tool_calls.size()) c.tool_calls.resize(static_cast<size_t>(t.index) + 1);
    auto& call = c.tool_calls[static_cast<size_t>(t.index)];
    if (!t.id.empty()) call.id = t.id;
    if (!t.name.empty()) call.name = t.name;
    call.arguments += t.arguments;
  }
}

bool ProvideStream(StreamState& st, httplib::DataSink& sink) {
  if (st.done) {
    sink.done();
    return true;
  }
  std::string out;
  auto begin = [&](const api::Usage& usage) {
    if (st.begun) return;
    out += st.writer->Begin(usage);
    st.begun = true;
  };
  StreamEvent ev;
  std::optional<api::Delta> pending_delta;
  if (st.stream->Next(&ev, kPollInterval)) {
    st.idle_polls = 0;
    if (ev.kind != StreamEvent::Kind::kAdmitted) begin(st.usage_unadmitted);
    switch (ev.kind) {
      case StreamEvent::Kind::kAdmitted:
        begin(ev.admitted);
        break;
      case StreamEvent::Kind::kDelta:
        out += st.writer->Delta(ev.delta);
        pending_delta = std::move(ev.delta);
        break;
      case StreamEvent::Kind::kDone:
        out += st.writer->End(ev.completion);
        st.done = true;
        break;
      case StreamEvent::Kind::kError:
        out += st.writer->Fail(ToApiError(ev.error));
        st.done = true;
        break;
    }
  } else if (++st.idle_polls % kKeepAliveEvery == 0) {
    out += st.begun ? st.writer->KeepAlive() : std::string(kSseComment);
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) {
    st.stream->CancelDelivered(st.delivered);
    return false;
  }
  if (pending_delta) AddDelivered(st.delivered, *pending_delta);
  if (!sink.is_writable()) {
    st.stream->CancelDelivered(st.delivered);
    return false;
  }
  if (st.done) sink.done();
  return true;
}

}  // namespace

void HandleGenerate(const RequestBuilder& builder, EngineLoop& engine, const std::string& model_alias,
                    const api::GenerationRequest& request, const httplib::Request& req, httplib::Response& res,
                    std::chrono::steady_clock::time_point received) {
  HandleGenerate(builder, engine, MakeResponseWriter(request.flavor, model_alias, request.include_usage), request, req,
                 res, received);
}

void HandleGenerate(const RequestBuilder& builder, EngineLoop& engine, std::unique_ptr<ResponseWriter> writer,
                    const api::GenerationRequest& request, const httplib::Request& req, httplib::Response& res,
                    std::chrono::steady_clock::time_point received) {
  auto built = builder.Build(request);
  if (auto* err = std::get_if<api::ApiError>(&built)) return ReplyError(*writer, *err, res);
  BuildResult& br = std::get<BuildResult>(built);
  api::Usage usage0;
  usage0.prompt_tokens = static_cast<int>(br.task.prompt.size());

  br.task.request = std::make_shared<const api::GenerationRequest>(request);
  br.task.received = received;
  auto submitted = engine.Submit(std::move(br.task));
  if (!submitted.ok()) return ReplyError(*writer, ToApiError(submitted.status()), res);
  std::shared_ptr<RequestStream> stream = *submitted;

  if (request.stream) {
    auto st = std::make_shared<StreamState>();
    st->stream = stream;
    st->writer = std::move(writer);
    st->usage_unadmitted = usage0;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [st](size_t, httplib::DataSink& sink) { return ProvideStream(*st, sink); },
        [st](bool success) {
          if (!success || !st->done) st->stream->CancelDelivered(st->delivered);
        });
    return;
  }

  // Whole response: wait for the end, cancelling if the client hangs up meanwhile.
  StreamEvent ev;
  while (true) {
    if (!stream->Next(&ev, kPollInterval)) {
      if (req.is_connection_closed()) {
        stream->Cancel();
        res.status = 499;
        return;
      }
      continue;
    }
    if (ev.kind == StreamEvent::Kind::kDone || ev.kind == StreamEvent::Kind::kError) break;
  }
  if (ev.kind == StreamEvent::Kind::kError) return ReplyError(*writer, ToApiError(ev.error), res);
  res.set_content(writer->Whole(ev.completion), "application/json");
}

}  // namespace hearth::server
