#include "server/request_stream.h"

namespace hearth::server {
namespace {

std::atomic<uint64_t> g_next_order{1};

}  // namespace

void RequestStream::Push(StreamEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    const bool terminal = event.kind == StreamEvent::Kind::kDone || event.kind == StreamEvent::Kind::kError;
    if (event.kind == StreamEvent::Kind::kAdmitted && admitted_or_begun_) return;
    if (!terminal) admitted_or_begun_ = true;
    if (terminal) closed_ = true;
    event.order = g_next_order.fetch_add(1, std::memory_order_relaxed);
    events_.push_back(std::move(event));
  }
  cv_.notify_one();
}

void RequestStream::PushAdmitted(api::Usage usage) {
  StreamEvent e;
  e.kind = StreamEvent::Kind::kAdmitted;
  e.admitted = std::move(usage);
  Push(std::move(e));
}

void RequestStream::PushDelta(api::Delta delta) {
  StreamEvent e;
  e.kind = StreamEvent::Kind::kDelta;
  e.delta = std::move(delta);
  Push(std::move(e));
}

void RequestStream::PushDone(api::Completion completion) {
  StreamEvent e;
  e.kind = StreamEvent::Kind::kDone;
  e.completion = std::move(completion);
  Push(std::move(e));
}

void RequestStream::PushError(Status error) {
  StreamEvent e;
  e.kind = StreamEvent::Kind::kError;
  e.error = std::move(error);
  Push(std::move(e));
}

bool RequestStream::Next(StreamEvent* event, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

void RequestStream::CancelDelivered(api::Completion delivered) {
  {
    std::lock_guard<std::mutex> lock(delivered_mu_);
    delivered_ = std::move(delivered);
    delivered_->finish_reason = api::FinishReason::kCancelled;
  }
  Cancel();
}

std::optional<api::Completion> RequestStream::delivered() const {
  std::lock_guard<std::mutex> lock(delivered_mu_);
  return delivered_;
}

}  // namespace hearth::server
