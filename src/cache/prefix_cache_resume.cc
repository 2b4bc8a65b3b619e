// PrefixCache, resuming: where a prompt can resume from (FindSource), and restoring it
// into a sequence (Resume, Reseed). See prefix_cache.h.
#include "cache/prefix_cache.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "cache/disk_store.h"
#include "cache/snapshot_policy.h"

namespace hearth::cache {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Cheapest tier first.
int TierCost(Tier t) { return t == Tier::kDevice ? 0 : t == Tier::kRam ? 1 : 2; }

}  // namespace

// What a resume at some depth restores from: one state for the attention part (and the
// recurrent part, when it sits exactly at the depth), plus a partial state when the
// attention source lies deeper.
struct PrefixCache::Source {
  uint64_t attention = 0;           // kDevice, kFull or kSuffix state at or below the depth
  std::optional<uint64_t> partial;  // state at exactly the depth, when attention is deeper
                                    // (a kSuffix's: always, in RAM)
  Tier tier = Tier::kDevice;
  int32_t link = -1;                // a kSuffix's: the device sequence its prefix comes from
  uint64_t link_state = 0;          //   and that sequence's device state
};

// The best state to restore the attention part for depth `depth` from: a device
// sequence or a full state at `node` or below. With `need_exact`, the recurrent part must
// come from a state at exactly `node` too.
std::optional<PrefixCache::Source> PrefixCache::FindSource(PrefixTree::Node* node, bool need_exact, int32_t depth) {
  // Cheapest tier first; among serialized states the smallest (a full state far deeper
  // than `depth` costs its whole length in time and free KV cells to restore).
  std::optional<Source> best;
  size_t best_bytes = 0;
  auto consider = [&](const PrefixTree::Node* at, const State& s, std::optional<uint64_t> partial) {
    if (s.kind == StateKind::kPartial) return;
    Source candidate{s.id, partial, s.tier};
    if (s.kind == StateKind::kSuffix && !SuffixSource(at, s, partial, depth, &candidate)) return;
    Tier& t = candidate.tier;
    if (candidate.partial) {
      const State* p = tree_.FindState(*candidate.partial);
      if (p && TierCost(p->tier) > TierCost(t)) t = p->tier;
    }
    const size_t bytes = s.kind == StateKind::kDevice ? 0 : s.bytes;
    if (!best || TierCost(t) < TierCost(best->tier) || (TierCost(t) == TierCost(best->tier) && bytes < best_bytes)) {
      best = candidate;
      best_bytes = bytes;
    }
  };
  // States exactly here carry both parts.
  const bool at_depth = node->depth == depth;
  if (at_depth) {
    for (const auto& s : node->states) consider(node, s, std::nullopt);
    if (best && best->tier == Tier::kDevice) return best;
  }
  std::optional<uint64_t> partial;
  if (need_exact) {
    if (!at_depth) return best;
    for (const auto& s : node->states) {
      if (s.kind == StateKind::kPartial && (!partial || s.tier == Tier::kRam)) partial = s.id;
    }
    if (!partial) return best;
  }
  // Attention from anything deeper on this path: the node itself when the depth lies
  // inside its edge, and everything below it.
  std::vector<PrefixTree::Node*> stack;
  if (!at_depth) {
    stack.push_back(node);
  } else {
    for (auto& [tok, child] : node->children) stack.push_back(child.get());
  }
  while (!stack.empty()) {
    PrefixTree::Node* n = stack.back();
    stack.pop_back();
    for (const auto& s : n->states) consider(n, s, partial);
    for (auto& [tok, child] : n->children) stack.push_back(child.get());
  }
  return best;
}

bool PrefixCache::SuffixSource(const PrefixTree::Node* at, const State& s, std::optional<uint64_t> partial,
                               int32_t depth, Source* out) {
  if (s.suffix_from >= depth) return false;  // a sequence through suffix_from serves better
  if (!partial) {
    for (const auto& st : at->states) {
      if (st.kind == StateKind::kPartial && st.tier == Tier::kRam) partial = st.id;
    }
  }
  const State* p = partial ? tree_.FindState(*partial) : nullptr;
  if (p == nullptr || p->tier != Tier::kRam) return false;
  const auto link = SequenceThrough(at, s.suffix_from);
  if (!link) return false;
  out->partial = partial;
  std::tie(out->link, out->link_state) = *link;
  return true;
}

// Restores a serialized state (RAM or disk) into `seq`. A disk file that fails its
// checks (corrupt: quarantined by the store; unreadable; or holding another state, whose
// key collided with this one's) is never restored, and its state is forgotten here, as
// is a RAM state the context refused for any reason but room.
Status PrefixCache::RestoreSerialized(uint64_t id, int32_t seq, bool partial) {
  PrefixTree::Node* node = nullptr;
  State* s = tree_.FindState(id, &node);
  if (s == nullptr) return Internal("state vanished");
  if (s->kind == StateKind::kSuffix) return Internal("a suffix state restores only over a sequence's prefix");
  tree_.Touch(id);
  if (s->tier != Tier::kDisk) {
    restored_bytes_ += Bytes(*s).size();
    Status restored = store_.Restore(seq, Bytes(*s), partial);
    // Bytes the context refused once it refuses again: forget them rather than fail
    // every later request on this path. A state that lacked room stays (see Acquire).
    if (!restored.ok() && restored.code() != StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "hearth: a RAM state at position %d failed to restore (%s); dropped\n", node->depth,
                   restored.message().c_str());
      Forget(id);
    }
    return restored;
  }
  auto loaded = disk_->Read(s->disk_key, tree_.NamespaceOf(node), tree_.PathTokens(node), s->kind);
  if (!loaded.ok()) {
    tree_.RemoveState(id);
    return loaded.status();
  }
  restored_bytes_ += loaded->size();
  return store_.Restore(seq, *loaded, partial);
}

// Restores kSuffix source `src` into `seq` over its link's prefix. Bytes the context
// refused for any reason but room are forgotten, as RestoreSerialized does.
Status PrefixCache::RestoreSuffix(int32_t seq, const Source& src) {
  const State* a = tree_.FindState(src.attention);
  const State* p = src.partial ? tree_.FindState(*src.partial) : nullptr;
  const State* link = tree_.FindState(src.link_state);
  if (a == nullptr || p == nullptr || link == nullptr || link->seq != src.link) return Internal("state vanished");
  tree_.Touch(src.attention);
  tree_.Touch(*src.partial);
  tree_.Touch(src.link_state);
  const std::span<const uint8_t> suffix = Bytes(*a), partial = Bytes(*p);
  restored_bytes_ += suffix.size() + partial.size();
  Status restored = store_.RestoreSuffix(seq, suffix, partial, src.link, a->suffix_from);
  if (!restored.ok() && restored.code() != StatusCode::kResourceExhausted) {
    std::fprintf(stderr, "hearth: a suffix state failed to restore (%s); dropped\n", restored.message().c_str());
    Forget(src.attention);
  }
  return restored;
}

Status PrefixCache::Execute(int32_t seq, const Source& src, int32_t depth) {
  State* a = tree_.FindState(src.attention);
  if (a == nullptr) return Internal("state vanished");
  if (a->kind == StateKind::kDevice) {
    tree_.Touch(src.attention);
    store_.Copy(a->seq, seq, depth);
  } else if (a->kind == StateKind::kSuffix) {
    HEARTH_RETURN_IF_ERROR(RestoreSuffix(seq, src));
  } else {
    HEARTH_RETURN_IF_ERROR(RestoreSerialized(src.attention, seq, /*partial=*/false));
  }
  if (src.partial && a->kind != StateKind::kSuffix) {
    HEARTH_RETURN_IF_ERROR(RestoreSerialized(*src.partial, seq, /*partial=*/true));
  }
  HEARTH_RETURN_IF_ERROR(store_.Truncate(seq, depth));
  if (store_.Length(seq) != depth) {
    return Internal("restored sequence holds " + std::to_string(store_.Length(seq)) + " positions, expected " +
                    std::to_string(depth));
  }
  return Status::Ok();
}

// Depths a resume may stop at on `m`'s path, deepest first. Attention-only models can
// stop inside an edge.
std::vector<PrefixCache::Candidate> PrefixCache::ResumeCandidates(const PrefixTree::Match& m) const {
  std::vector<Candidate> candidates;
  if (!config_.needs_partial && m.below) candidates.push_back({m.below, static_cast<int32_t>(m.n_matched)});
  for (auto it = m.path.rbegin(); it != m.path.rend(); ++it) {
    if ((*it)->depth > 0) candidates.push_back({*it, (*it)->depth});
  }
  return candidates;
}

ResumeReport PrefixCache::Resume(const std::string& ns, int32_t seq, std::span<const Token> tokens,
                                 int32_t max_reuse) {
  const auto t0 = std::chrono::steady_clock::now();
  ResumeReport report;
  restored_bytes_ = 0;
  max_reuse = std::min<int32_t>(max_reuse, static_cast<int32_t>(tokens.size()));
  auto m = tree_.MatchPrefix(ns, tokens.subspan(0, static_cast<size_t>(std::max(0, max_reuse))));
  report.n_matched = static_cast<int32_t>(m.n_matched);
  if (m.n_matched == 0) {
    report.stopped_because = "no cached prefix";
    return report;
  }
  std::vector<uint64_t> failed;  // a source that failed once (no room for it) fails again
  for (const Candidate& c : ResumeCandidates(m)) {
    if (!TryResumeAt(seq, c, failed, report)) continue;
    report.no_room = false;
    report.n_reused = c.depth;
    if (!report.stopped_because.empty()) {
      // A deeper restore failed: that is why reuse stopped here, and the caller says so.
      report.stopped_because += "; resumed at " + std::to_string(c.depth);
    } else if (c.depth < static_cast<int32_t>(m.n_matched)) {
      report.stopped_because = "no usable state between position " + std::to_string(c.depth) + " and " +
                               std::to_string(m.n_matched) + " where the prompt leaves the cache";
    }
    break;
  }
  if (report.n_reused == 0 && report.stopped_because.empty()) {
    report.stopped_because = "matched " + std::to_string(m.n_matched) + " tokens but no usable state on the way";
  }
  report.restore_ms = MsSince(t0);
  report.restored_bytes = restored_bytes_;
  EnforceRamBudget();
  return report;
}

// Restores `seq` to candidate `c`; true when it holds it. A whole state needs free KV
// cells: idle cached sequences give theirs up (to RAM) before the restore is given up.
// That may move states between tiers: look again. A failure is added to `failed` and
// said in `report` (stopped_because, no_room); success sets report.tier.
bool PrefixCache::TryResumeAt(int32_t seq, const Candidate& c, std::vector<uint64_t>& failed, ResumeReport& report) {
  auto src = FindSource(c.node, config_.needs_partial, c.depth);
  if (!src || std::find(failed.begin(), failed.end(), src->attention) != failed.end()) return false;
  Status s = Execute(seq, *src, c.depth);
  while (s.code() == StatusCode::kResourceExhausted && EvictIdleDevice()) {
    store_.Clear(seq);
    src = FindSource(c.node, config_.needs_partial, c.depth);
    if (!src) break;
    s = Execute(seq, *src, c.depth);
  }
  if (!s.ok()) {
    store_.Clear(seq);
    if (!src) return false;
    failed.push_back(src->attention);
    report.no_room = s.code() == StatusCode::kResourceExhausted;
    report.stopped_because = "restore at " + std::to_string(c.depth) + " failed: " +
                             (report.no_room ? "no free KV cells for its " + std::to_string(c.depth) +
                                                   " positions while the requests running hold theirs"
                                             : s.message());
    return false;
  }
  report.tier = src->tier;
  return true;
}

bool PrefixCache::Holds(const std::string& ns, std::span<const Token> tokens) {
  PrefixTree::PruneScope scope(tree_);
  if (tokens.empty()) return false;
  auto m = tree_.MatchPrefix(ns, tokens);
  if (m.n_matched != tokens.size()) return false;
  const auto depth = static_cast<int32_t>(tokens.size());
  if (config_.needs_partial) {
    return m.below == nullptr && !m.path.empty() && FindSource(m.path.back(), true, depth).has_value();
  }
  PrefixTree::Node* node = m.below != nullptr ? m.below : m.path.empty() ? nullptr : m.path.back();
  return node != nullptr && FindSource(node, false, depth).has_value();
}

int32_t PrefixCache::ResumableDepth(const std::string& ns, std::span<const Token> tokens) {
  return Resumable(ns, tokens).first;
}

std::pair<int32_t, Tier> PrefixCache::Resumable(const std::string& ns, std::span<const Token> tokens) {
  PrefixTree::PruneScope scope(tree_);
  auto m = tree_.MatchPrefix(ns, tokens);
  if (!config_.needs_partial && m.below != nullptr) {
    if (auto src = FindSource(m.below, false, static_cast<int32_t>(m.n_matched))) {
      return {static_cast<int32_t>(m.n_matched), src->tier};
    }
  }
  for (auto it = m.path.rbegin(); it != m.path.rend() && (*it)->depth > 0; ++it) {
    if (auto src = FindSource(*it, config_.needs_partial, (*it)->depth)) return {(*it)->depth, src->tier};
  }
  return {0, Tier::kDevice};
}

ResumePlan PrefixCache::PlanResume(const std::string& ns, std::span<const Token> tokens,
                                   const ResumeConstraints& constraints) {
  ResumePlan plan;
  const auto n = static_cast<int32_t>(tokens.size());
  plan.max_reuse = std::min(constraints.recompute_last ? n - 1 : n, constraints.max_depth);
  const size_t usable = static_cast<size_t>(std::clamp(plan.max_reuse, 0, n));
  std::tie(plan.depth, plan.tier) = Resumable(ns, tokens.subspan(0, usable));
  plan.shared_candidates = SnapshotPolicy::SharedCandidates(constraints.kept_at, plan.max_reuse);
  for (auto it = constraints.kept_at.rbegin(); it != constraints.kept_at.rend(); ++it) {
    if (*it > 0 && *it <= plan.max_reuse) plan.kept_positions.push_back(*it);
  }
  return plan;
}

Status PrefixCache::Reseed(const std::string& ns, std::span<const Token> tokens, int32_t seq, int32_t kv_source) {
  PrefixTree::PruneScope scope(tree_);
  const auto depth = static_cast<int32_t>(tokens.size());
  store_.Clear(seq);
  store_.Copy(kv_source, seq, depth);
  if (config_.needs_partial) {
    auto m = tree_.MatchPrefix(ns, tokens);
    std::optional<uint64_t> partial, full;
    if (m.n_matched == tokens.size() && m.below == nullptr && !m.path.empty()) {
      for (const auto& st : m.path.back()->states) {
        if (st.kind == StateKind::kDevice) {  // holds exactly `tokens`: both parts
          store_.Clear(seq);
          store_.Copy(st.seq, seq, depth);
          return Status::Ok();
        }
        if (st.kind == StateKind::kSuffix) continue;  // a partial sits beside it
        auto& slot = st.kind == StateKind::kPartial ? partial : full;
        if (!slot || st.tier == Tier::kRam) slot = st.id;
      }
    }
    if (!partial && full) store_.Clear(seq);  // a full state replaces everything
    if (!partial && !full) {
      store_.Clear(seq);
      return NotFound("no state at position " + std::to_string(depth));
    }
    if (Status s = RestoreSerialized(partial ? *partial : *full, seq, /*partial=*/partial.has_value()); !s.ok()) {
      store_.Clear(seq);
      return s;
    }
  }
  if (store_.Length(seq) != depth) {
    store_.Clear(seq);
    return Internal("reseeded sequence holds " + std::to_string(store_.Length(seq)) + " positions, expected " +
                    std::to_string(depth));
  }
  return Status::Ok();
}

}  // namespace hearth::cache
