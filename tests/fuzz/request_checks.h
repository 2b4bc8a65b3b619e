// Checks shared by the request-parser fuzz targets: what every parsed request and every
// refusal must satisfy, whatever bytes the client sent.
#pragma once

#include <cstdio>
#include <string>

#include "api/json_fields.h"
#include "api/types.h"
#include "base/utf8.h"
#include "check.h"

namespace hearth::fuzz {

// Every text a parsed request carries is valid UTF-8 (the JSON parser guarantees it for
// strings; arguments and schemas re-serialized from objects must keep it).
inline void CheckRequestText(const api::GenerationRequest& r) {
  auto valid = [](const std::string& s) { return IsValidUtf8(s); };
  Check(valid(r.model) && valid(r.tool_choice) && valid(r.cache_salt), "request fields are valid UTF-8");
  if (r.prompt) Check(valid(*r.prompt), "prompt is valid UTF-8");
  for (const auto& m : r.messages) {
    Check(valid(m.role) && valid(m.content) && valid(m.reasoning_content) && valid(m.tool_call_id) &&
              valid(m.tool_name),
          "message fields are valid UTF-8");
    for (const auto& c : m.tool_calls) {
      Check(valid(c.id) && valid(c.name) && valid(c.arguments), "tool call fields are valid UTF-8");
    }
  }
  for (const auto& t : r.tools) {
    Check(valid(t.name) && valid(t.description) && valid(t.parameters), "tool fields are valid UTF-8");
  }
  for (const auto& s : r.stop) Check(!s.empty() && valid(s), "stop strings are non-empty valid UTF-8");
  for (const auto& [k, v] : r.template_kwargs) Check(valid(k) && valid(v), "template kwargs are valid UTF-8");
}

// A refusal is a 400 that names what is wrong: a 500 means an exception escaped a parser
// (a check missing), which ParseObjectWith caught.
inline void CheckRefusal(const api::ApiError& e) {
  if (e.http_status != 400) std::fprintf(stderr, "hearth fuzz: refused with %d: %s\n", e.http_status, e.message.c_str());
  Check(e.http_status == 400, "a malformed request is a 400, not an escaped exception");
  Check(e.type == "invalid_request_error" && !e.message.empty(), "a refusal says what is wrong");
}

// The error body sent for a refusal: valid UTF-8 JSON, whatever bytes the message quotes
// from the request (the JSON parser's message quotes the bytes it stopped at).
inline void CheckErrorBody(const std::string& body) {
  Check(IsValidUtf8(body) && api::ParseJson(body).ok(), "the error body is valid UTF-8 JSON");
}

}  // namespace hearth::fuzz
