// Status and StatusOr<T>: errors as values across module boundaries.
//
// Every fallible operation that crosses a module line returns one of these instead of
// throwing. A Status is either ok or carries a code and a message written for the person
// who will read it in a log or an API error ("prompt has 9000 tokens but the context holds
// 8192; start the server with a larger --ctx-size").
//
// Thread safety: values; no shared state.
//
// Usage:
//   StatusOr<Model> m = Model::Load(path);
//   if (!m.ok()) return m.status();
//   Use(*m);
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace hearth {

enum class StatusCode {
  kOk,
  kInvalidArgument,    // the caller's input is wrong; retrying the same input fails again
  kNotFound,
  kOutOfRange,         // e.g. prompt longer than the context
  kResourceExhausted,  // queue full, no free sequence, budget exceeded
  kUnavailable,        // try again later
  kCancelled,
  kDataLoss,           // corrupt or truncated data
  kUnimplemented,      // the model or build cannot do this
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Holds a T or a non-ok Status.
// REQUIRES: a StatusOr is never built from an ok Status.
template <typename T>
class StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok());
  }
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  // Ok() when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace hearth

// Returns the status of `expr` from the enclosing function when it is not ok.
#define HEARTH_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::hearth::Status hearth_status_ = (expr);   \
    if (!hearth_status_.ok()) return hearth_status_; \
  } while (0)
