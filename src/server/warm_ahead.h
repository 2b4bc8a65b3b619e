// WarmAhead: after a reply ends (finished or cut off), prepares the cache for the
// conversation's next request before it arrives.
//
// Chat templates re-render earlier turns differently from what was generated (Qwen3.5
// drops the <think> scaffold and earlier reasoning; tool arguments are re-serialized), so
// a next prompt leaves the cached tokens right at the previous reply. WarmAhead renders
// the conversation the way the next request will carry it (this reply as a past turn,
// followed by a placeholder user message, or by the tool results when the reply called
// tools) and submits a background task that prefills it up to where the next message's
// own content starts. The engine runs it only while idle, and a real request preempts it.
//
// Threads: OnFinished may be called from any thread (the engine loop calls it); one
// worker thread renders and submits.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "api/types.h"
#include "server/engine_loop.h"
#include "server/request_builder.h"

namespace hearth::server {

// The background task for the request that follows `request` answered by `reply`, or
// nullopt when there is nothing to prepare (raw completions, render errors).
std::optional<GenerationTask> PlanWarmAhead(const RequestBuilder& builder, const api::GenerationRequest& request,
                                            const api::Completion& reply);

class WarmAhead {
 public:
  // `builder` and `engine` must outlive this object.
  WarmAhead(const RequestBuilder& builder, EngineLoop& engine);
  ~WarmAhead();

  void OnFinished(const GenerationTask& task, const api::Completion& reply);

 private:
  void Run();

  const RequestBuilder& builder_;
  EngineLoop& engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<const api::GenerationRequest>, api::Completion>> jobs_;  // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace hearth::server
