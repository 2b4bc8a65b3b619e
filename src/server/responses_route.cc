// POST /v1/responses: the Responses API over the same request path as chat (one prefix
// cache), plus the conversations kept for previous_response_id.
#include <httplib.h>

#include <chrono>
#include <cstdio>

#include "api/ids.h"
#include "api/openai.h"
#include "api/responses.h"
#include "server/generate_handler.h"
#include "server/http_server.h"
#include "server/response_writer.h"

namespace hearth::server {
namespace {

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void HttpServer::HandleResponses(api::responses::ResponsesRequest& request, const httplib::Request& req,
                                 httplib::Response& res, std::chrono::steady_clock::time_point received) {
  const std::string ns = ResponsesNamespace(req);
  std::shared_ptr<const ResponseStore::Conversation> history;
  if (request.previous_response_id) {
    history = responses_.Find(ns, *request.previous_response_id);
    if (history == nullptr) {
      // The same answer for an id never issued, one evicted, and another key's: which of
      // them it is would tell one client about another's responses.
      const api::ApiError e = api::InvalidRequest(
          "previous_response_id", "previous response \"" + *request.previous_response_id +
                                      "\" is not held by this server (unknown, expired, or stored with store: false)");
      std::fprintf(stderr, "hearth: POST /v1/responses -> 400 %s\n", e.message.c_str());
      res.status = e.http_status;
      res.set_content(api::openai::ErrorJson(e), "application/json");
      return;
    }
  }
  static const ResponseStore::Conversation kNone;
  const ResponseStore::Conversation& before = history ? *history : kNone;
  api::GenerationRequest generation = request.generation;
  generation.messages = api::responses::Conversation(request, before);
  IsolateByKey(req, generation);

  api::responses::ResponseInfo info =
      api::responses::InfoFor(request, api::NewId("resp_"), config_.model_alias, UnixNow());
  DoneCallback on_done;
  if (request.store) {
    on_done = [this, ns, id = info.id, request, history](const api::Completion& reply) {
      responses_.Put(ns, id, api::responses::StoredConversation(request, history ? *history : kNone, reply));
    };
  }
  HandleGenerate(builder_, engine_, MakeResponsesWriter(std::move(info)), generation, req, res, received,
                 std::move(on_done));
}

}  // namespace hearth::server
