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

#include <chrono>
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

// The conversation as the next request will carry it: `request`'s messages, `reply` as
// an assistant turn (with its reasoning when this client sends reasoning back), then a
// user message, or one tool result per call, whose content is `placeholder`.
api::GenerationRequest NextRequest(const api::GenerationRequest& request, const api::Completion& reply,
                                   const std::string& placeholder);

// The background task for the request that follows `request` answered by `reply`, or
// nullopt when there is nothing to prepare (raw completions, render errors).
std::optional<WarmAheadTask> PlanWarmAhead(const RequestBuilder& builder, const api::GenerationRequest& request,
                                            const api::Completion& reply);

// The next request's tokens as far as `partial` (a reply still being generated) fixes
// them: the growing field (content, or reasoning while no content came yet) is cut to
// its stable part (StableTextLength), and the tokens end before the first that a
// character appended there would change (one more after punctuation). nullopt when
// nothing can be said (raw completions, render errors).
std::optional<ShadowTarget> PlanShadow(const RequestBuilder& builder, const api::GenerationRequest& request,
                                       const api::Completion& partial);

// Plans shadow targets for one request. Rendering the whole conversation for every word
// costs time linear in its length, yet the reply's rendering depends only on the
// conversation's tail: once a first plan has shown that the tail (the system prompt and
// everything from the last user message on) renders the reply exactly as the whole
// conversation does, later plans render only the tail. Worker thread only.
class ShadowPlanner {
 public:
  // `prompt`: the request's own prompt tokens.
  ShadowPlanner(const RequestBuilder& builder, std::shared_ptr<const api::GenerationRequest> request,
                std::vector<engine::Token> prompt);
  std::optional<ShadowTarget> Plan(const api::Completion& partial);
  // Whether plans now render only the tail.
  bool uses_tail() const { return use_tail_; }

 private:
  const RequestBuilder& builder_;
  std::shared_ptr<const api::GenerationRequest> request_;
  std::vector<engine::Token> prompt_;
  api::GenerationRequest tail_;
  bool tail_differs_ = false;
  bool tail_checked_ = false;
  bool first_planned_ = false;
  bool use_tail_ = false;
  std::vector<engine::Token> history_;       // the whole conversation's tokens before the reply
  std::vector<engine::Token> tail_history_;  // the tail's
};

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
    std::vector<engine::Token> prompt;       // the request's prompt: a mailbox's first job, a reply's end
    std::chrono::steady_clock::time_point ended{};  // a reply's end: when it ended
  };
  void Push(Job job);
  void Run();
  void RunJob(Job& job);

  const RequestBuilder& builder_;
  EngineLoop& engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;   // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace hearth::server
