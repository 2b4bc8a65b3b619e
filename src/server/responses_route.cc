// /v1/responses: the Responses API over the same request path as chat (one prefix cache),
// plus the responses kept for previous_response_id, GET and DELETE.
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
  std::shared_ptr<const ResponseStore::Stored> previous;
  if (request.previous_response_id) {
    previous = responses_.Find(ns, *request.previous_response_id);
    if (previous == nullptr) {
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
  const ResponseStore::Conversation& before = previous ? previous->conversation : kNone;
  api::GenerationRequest generation = request.generation;
  generation.messages = api::responses::Conversation(request, before);
  IsolateByKey(req, generation);

  api::responses::ResponseInfo info =
      api::responses::InfoFor(request, api::NewId("resp_"), config_.model_alias, UnixNow());
  ResponsesEndCallback on_end;
  if (request.store) {
    on_end = [this, ns, id = info.id, request, previous](const api::Completion& reply, const std::string& response_json) {
      responses_.Put(ns, id,
                     {.conversation = api::responses::StoredConversation(
                          request, previous ? previous->conversation : kNone, reply),
                      .response_json = response_json});
    };
  }
  HandleGenerate(builder_, engine_, MakeResponsesWriter(std::move(info), std::move(on_end)), generation, req, res,
                 received);
}

void HttpServer::GetStoredResponse(const httplib::Request& req, httplib::Response& res) {
  const std::string& id = req.path_params.at("id");
  auto stored = responses_.Find(ResponsesNamespace(req), id);
  if (stored == nullptr) {
    res.status = 404;
    res.set_content(api::openai::ErrorJson(api::responses::ResponseNotFound(id)), "application/json");
    return;
  }
  res.set_content(stored->response_json, "application/json");
}

void HttpServer::DeleteStoredResponse(const httplib::Request& req, httplib::Response& res) {
  const std::string& id = req.path_params.at("id");
  if (!responses_.Erase(ResponsesNamespace(req), id)) {
    res.status = 404;
    res.set_content(api::openai::ErrorJson(api::responses::ResponseNotFound(id)), "application/json");
    return;
  }
  res.set_content(api::responses::DeletedJson(id), "application/json");
}

}  // namespace hearth::server
