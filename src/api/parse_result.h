// ParseResult<T>: a parsed request, or the ApiError to send back instead.
//
// The wire-format parsers (openai.h, anthropic.h) return these. Unlike hearth::StatusOr,
// the error side is already in API terms: an HTTP status, an error type, and the field
// to blame, so the HTTP layer renders it without a mapping step.
//
// Thread safety: values; no shared state.
//
// Usage:
//   ParseResult<GenerationRequest> r = openai::ParseChatCompletionRequest(body);
//   if (!r.ok()) return Reply(r.error().http_status, openai::ErrorJson(r.error()));
//   Submit(std::move(r).value());
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "api/types.h"

namespace hearth::api {

template <typename T>
class ParseResult {
 public:
  ParseResult(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  ParseResult(ApiError error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !ok().
  const ApiError& error() const { return std::get<ApiError>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

// A 400 invalid_request_error blaming `param` ("" when no single field is to blame).
inline ApiError InvalidRequest(std::string param, std::string message) {
  return ApiError{400, "invalid_request_error", std::move(message), std::move(param)};
}

}  // namespace hearth::api
