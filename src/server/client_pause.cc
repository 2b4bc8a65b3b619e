#include "server/client_pause.h"

#include <xxhash.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

namespace hearth::server {
namespace {

uint64_t HashTokens(std::span<const engine::Token> tokens) { return XXH3_64bits(tokens.data(), tokens.size_bytes()); }

// The hash of tokens[0, n) for each n of `lengths` (ascending, each <= tokens.size()), in
// one pass over the tokens.
std::map<size_t, uint64_t> PrefixHashes(std::span<const engine::Token> tokens, const std::vector<size_t>& lengths) {
  std::map<size_t, uint64_t> out;
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) return out;
  size_t done = 0;
  for (size_t n : lengths) {
    const auto more = tokens.subspan(done, n - done);
    if (XXH3_64bits_update(state.get(), more.data(), more.size_bytes()) != XXH_OK) return out;
    done = n;
    out[n] = XXH3_64bits_digest(state.get());
  }
  return out;
}

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
  // The prompt is hashed outside the lock, once for all the replies it may continue.
  std::vector<size_t> forks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Reply& r : replies_) {
      if (r.ns == ns && r.fork <= prompt.size()) forks.push_back(r.fork);
    }
  }
  if (forks.empty()) return;
  std::sort(forks.begin(), forks.end());
  forks.erase(std::unique(forks.begin(), forks.end()), forks.end());
  const std::map<size_t, uint64_t> hashes = PrefixHashes(prompt, forks);
  std::lock_guard<std::mutex> lock(mu_);
  // The newest reply this prompt continues: an older one of the same conversation has
  // been followed already, or was left for this one.
  for (auto it = replies_.rbegin(); it != replies_.rend(); ++it) {
    if (it->ns != ns) continue;
    auto hash = hashes.find(it->fork);
    if (hash == hashes.end() || hash->second != it->hash) continue;
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
