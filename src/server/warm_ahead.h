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
// While a reply is generated, the same worker renders shadow targets (see shadow.h):
// the next request's tokens up to the last point more generated text cannot change.
//
// Threads: OnFinished and OnProgress may be called from any thread (the engine loop
// calls them); one worker thread renders, submits and publishes.
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
#include "server/shadow.h"

namespace hearth::server {

// The background task for the request that follows `request` answered by `reply`, or
// nullopt when there is nothing to prepare (raw completions, render errors).
std::optional<GenerationTask> PlanWarmAhead(const RequestBuilder& builder, const api::GenerationRequest& request,
                                            const api::Completion& reply);

// The next request's tokens as far as `partial` (a reply still being generated) fixes
// them: the growing field (content, or reasoning while no content came yet) is cut at
// its last whitespace, and the tokens end one before the first that a character
// appended there would change. nullopt when nothing can be said (raw completions,
// render errors).
std::optional<ShadowTarget> PlanShadow(const RequestBuilder& builder, const api::GenerationRequest& request,
                                       const api::Completion& partial);

class WarmAhead {
 public:
  // `builder` and `engine` must outlive this object.
  WarmAhead(const RequestBuilder& builder, EngineLoop& engine);
  ~WarmAhead();

  void OnFinished(const GenerationTask& task, const api::Completion& reply);
  // `partial` is the reply so far; the target goes to `mailbox` (Publish or Skip).
  void OnProgress(const GenerationTask& task, const api::Completion& partial, std::shared_ptr<ShadowMailbox> mailbox);

 private:
  struct Job {
    std::shared_ptr<const api::GenerationRequest> request;
    api::Completion reply;
    std::shared_ptr<ShadowMailbox> mailbox;  // set for progress jobs
  };
  void Push(Job job);
  void Run();

  const RequestBuilder& builder_;
  EngineLoop& engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;   // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace hearth::server
