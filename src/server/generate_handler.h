// The generation routes' common path: build the task, submit it, and write the engine's
// events back as a streaming or a whole response in the request's API shape.
// `received`: when the route had the whole request, before parsing it.
//
// Thread safety: called on an HTTP worker thread; touches the engine only through
// EngineLoop::Submit and the returned RequestStream.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "api/types.h"
#include "server/engine_loop.h"
#include "server/request_builder.h"
#include "server/response_writer.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace hearth::server {

void HandleGenerate(const RequestBuilder& builder, EngineLoop& engine, const std::string& model_alias,
                    const api::GenerationRequest& request, const httplib::Request& req, httplib::Response& res,
                    std::chrono::steady_clock::time_point received);

// The same with the caller's writer (which sees the end before its bytes are sent; see
// MakeResponsesWriter).
void HandleGenerate(const RequestBuilder& builder, EngineLoop& engine, std::unique_ptr<ResponseWriter> writer,
                    const api::GenerationRequest& request, const httplib::Request& req, httplib::Response& res,
                    std::chrono::steady_clock::time_point received);

}  // namespace hearth::server
