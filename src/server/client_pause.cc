#include "server/client_pause.h"

#include <xxhash.h>

#include <algorithm>

namespace hearth::server {
namespace {

uint64_t HashTokens(std::span<const engine::Token> tokens) { return XXH3_64bits(tokens.data(), tokens.size_bytes()); }

}  // namespace

void ClientPause::ReplyEnded(const std::string& ns, std::span<const engine::Token> prompt, size_t fork,
                             Clock::time_point at) {
  if (fork == 0 || fork > prompt.size()) return;
  const uint64_t hash = HashTokens(prompt.first(fork));
  std::lock_guard<std::mutex> lock(mu_);
  // The conversation's earlier reply, not yet followed, is superseded by this one.
  std::erase_if(replies_, [&](const Reply& r) { return r.ns == ns && r.fork == fork && r.hash == hash; });
  replies_.push_back({ns, fork, hash, at});
  if (replies_.size() > kRepliesKept) replies_.pop_front();
}

void ClientPause::RequestArrived(const std::string& ns, std::span<const engine::Token> prompt,
                                 bool adds_user_message, Clock::time_point at) {
  std::lock_guard<std::mutex> lock(mu_);
  // The newest reply this prompt continues: an older one of the same conversation has
  // been followed already, or was left for this one.
  for (auto it = replies_.rbegin(); it != replies_.rend(); ++it) {
    if (it->ns != ns || it->fork > prompt.size() || HashTokens(prompt.first(it->fork)) != it->hash) continue;
    const Clock::duration pause = at - it->at;
    replies_.erase(std::next(it).base());
    if (!adds_user_message || pause < Clock::duration::zero()) return;
    if (!pauses_.contains(ns) && pauses_.size() >= kNamespacesKept) pauses_.erase(pauses_.begin());
    auto& kept = pauses_[ns];
    kept.push_back(pause);
    if (kept.size() > kPausesKept) kept.pop_front();
    return;
  }
}

void ClientPause::PrefillStep(int n_tokens, Clock::duration took) {
  if (n_tokens <= 0) return;
  const double ms = std::chrono::duration<double, std::milli>(took).count() / n_tokens;
  std::lock_guard<std::mutex> lock(mu_);
  ms_per_token_.push_back(ms);
  if (ms_per_token_.size() > kSpeedsKept) ms_per_token_.pop_front();
}

bool ClientPause::HoldsPrefill(const std::string& ns, int n_tokens) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pauses_.find(ns);
  if (it == pauses_.end() || it->second.size() < kPausesKept || ms_per_token_.empty()) return false;
  const Clock::duration shortest = *std::min_element(it->second.begin(), it->second.end());
  // The slowest recent step: the machine may be busier than at its fastest.
  const double ms_per_token = *std::max_element(ms_per_token_.begin(), ms_per_token_.end());
  const auto need = std::chrono::duration<double, std::milli>(kMargin * ms_per_token * std::max(n_tokens, 0)) + kSlack;
  return shortest > need;
}

}  // namespace hearth::server
