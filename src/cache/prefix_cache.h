// PrefixCache: decides where a request's prompt can resume from, and keeps the states
// that make resuming possible, across three tiers: device (idle context sequences),
// host RAM (serialized states, bounded), and disk (see disk_store.h, optional); and, below
// them, a shared tier that other processes read and write (shared_store.h, optional).
//
// How a hybrid model resumes at position d: the recurrent layers need a state taken at
// exactly d (a partial snapshot, a full state, or a device sequence ending at d); the
// attention layers need KV for [0, d) from any device sequence or full state whose
// tokens pass through d, trimmed back to d. Attention-only models need only the latter
// and can resume anywhere on a matching path.
//
// Snapshots are taken only where later requests can arrive: the caller passes the
// positions (message boundaries, the start of generation, the end of a stream). Every
// state is a node of the PrefixTree, so nothing unmatchable is ever stored.
//
// Thread safety: none. Owned by the engine loop thread, like the context it drives.
//
// Invariants:
//  1. Each managed sequence is exactly one of: free, lent to a request (Acquire ..
//     Adopt/Release), or cached (a kDevice state in the tree).
//  2. bytes in RAM <= ram_budget after every public call (states are moved to disk or
//     dropped, lowest value first: see eviction_order.h).
//  3. Every public call runs inside one PrefixTree::PruneScope, so no tree node it holds
//     is freed before it returns (a failed restore or an eviction halfway through frees
//     nothing under its feet). No Node* is kept across calls but pinned ones (lent_,
//     holds_).
//  4. Held RAM bytes (the RAM states on held nodes) <= pin_budget after every public
//     call, and no hold outlives its time: past the budget the least recently held
//     node loses its hold first (see Hold).
#pragma once

#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cache/prefix_tree.h"
#include "cache/sequence_store.h"
#include "cache/state_index.h"

namespace hearth::cache {

class DiskStore;
class SharedStore;

struct CacheConfig {
  bool needs_partial = true;           // the model has recurrent or sliding-window layers
  // The model has recurrent and attention layers, none with a sliding window: a cached
  // sequence that shares most of its path with another on the device leaves its suffix
  // when evicted (see EvictDevice), not its whole history.
  bool suffix_states = false;
  std::vector<int32_t> sequences;      // context sequence ids the cache hands out
  size_t ram_budget_bytes = 1u << 30;  // --cache-ram
  size_t pin_budget_bytes = 1u << 29;  // --cache-pin-budget: held RAM states at most
  // The time holds expire by; null: std::chrono::steady_clock::now. Tests inject one.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

// A hold keeps the states at one position in RAM past the eviction order (they go only
// after every state that is not held) for a while, within CacheConfig::pin_budget_bytes.
struct HoldSpec {
  std::chrono::seconds duration{0};  // held until the cache's clock passes now + duration
  // The newest state of a conversation: releases the holds on older turns of it, that is
  // newest holds above it on its path and, with a `conversation` key, that key's other
  // newest holds in the namespace.
  bool newest = false;
  std::string conversation;  // an opaque key grouping one conversation's holds; empty: none
};

// What a lookup in the shared tier found (PrefixCache::ImportShared).
struct SharedImport {
  int32_t depth = 0;   // the position of the state read into RAM; 0: none read
  int asked = 0;       // candidate positions asked about; 0: the store was not asked
  double ms = 0;       // asking and reading
  size_t bytes = 0;    // read from the store
  std::string why;     // a miss's cause other than "not there" (store down, chunk evicted)
};

// Where a resume came from, and where reuse stopped.
struct ResumeReport {
  int32_t n_reused = 0;
  Tier tier = Tier::kDevice;     // where the attention part came from
  double restore_ms = 0;
  size_t restored_bytes = 0;     // serialized state read back (RAM or disk) for this resume
  int32_t n_matched = 0;         // tokens the tree knew, whether usable or not
  std::string stopped_because;   // empty when everything reusable was reused
  // A deeper restore failed for want of KV cells although every idle cached sequence
  // gave its cells up: only work outside the cache (requests, shadows) holds them.
  bool no_room = false;
  SharedImport shared;  // what the shared tier was asked before this resume (the engine's)
};

// What a caller allows a resume to use (PrefixCache::PlanResume).
struct ResumeConstraints {
  // Where states of the tokens were kept (a request's snapshot positions), ascending.
  std::span<const int32_t> kept_at;
  // Resume no deeper than this (warm-ahead of a cut reply; a shadow's divergence; 0 with
  // reuse off).
  int32_t max_depth = INT32_MAX;
  // The last token is computed again, never resumed: its logits sample the first token.
  bool recompute_last = true;
};

// What a prompt can resume from (PrefixCache::PlanResume): read-only, nothing is lent.
struct ResumePlan {
  int32_t max_reuse = 0;      // the deepest position a resume may reach (Acquire's max_reuse)
  int32_t depth = 0;          // the deepest this cache resumes at now, <= max_reuse; 0: none
  Tier tier = Tier::kDevice;  // where that resume's attention part lies (depth > 0)
  // Where the shared tier may hold a state deeper than `depth`, deepest first
  // (SnapshotPolicy::SharedCandidates; for ImportShared).
  std::vector<int32_t> shared_candidates;
  // kept_at in (0, max_reuse], deepest first: where a Reseed can start the tokens over
  // from a state kept there.
  std::vector<int32_t> kept_positions;
};

struct CacheStats {
  int64_t hits_device = 0, hits_ram = 0, hits_disk = 0, hits_shared = 0, misses = 0;
  int64_t shared_imports = 0, shared_puts = 0;  // states read from / queued for the shared tier
  int64_t snapshots_taken = 0, snapshots_evicted = 0;
  int64_t snapshots_quarantined = 0;  // disk files set aside since the store opened (DiskStore::quarantined)
  int64_t tokens_reused = 0;
  int64_t disk_read_errors = 0, disk_write_errors = 0;  // I/O errors (files at start-up included)
  size_t bytes_ram = 0, bytes_disk = 0;
  size_t bytes_held = 0;  // RAM states on held nodes
  size_t n_holds = 0;
  int64_t holds_released = 0;  // for the pin budget (expiries and newer turns not counted)
  int device_cached = 0;
  size_t n_nodes = 0, n_states = 0;
};

class PrefixCache {
 public:
  // `store` (and `disk`, when given) must outlive the cache.
  PrefixCache(CacheConfig config, SequenceStore& store, DiskStore* disk);
  ~PrefixCache();

  struct Lease {
    int32_t seq = 0;      // lent to the caller until Adopt or Release
    ResumeReport report;  // seq holds tokens[0, report.n_reused)
  };
  // Lends a sequence for a request whose prompt is `tokens` and loads into it the deepest
  // usable prefix of tokens[0, max_reuse) in namespace `ns`. The sequence is a cached
  // device sequence on the prompt's path when that is the best source (taken over, no
  // copy), else a free one, else an evicted cached one (see EvictIdleDevice). nullopt
  // when every sequence is lent out. A failed restore leaves the
  // sequence empty (n_reused 0) and the report says why. A whole state that lacks KV
  // cells gets them from idle cached sequences (moved to RAM) before it is given up
  // (report.no_room: it was given up even so); a state that failed for room stays.
  // Hits, misses and reused tokens count only kRequest lookups: a request's own prompt,
  // not the engine's internal ones (a shadow starting over, a paused request resuming).
  enum class Lookup { kRequest, kInternal };
  std::optional<Lease> Acquire(const std::string& ns, std::span<const Token> tokens, int32_t max_reuse,
                               Lookup lookup = Lookup::kRequest);
  // Counts a kInternal lookup as the request's own after all (a caller that retried a
  // lookup after making room counts only the one it kept).
  void CountRequestLookup(const ResumeReport& report);

  // Whether a request for exactly `tokens` could resume with all of them: a state at
  // that position (or, for attention-only models, anywhere past it on its path).
  bool Holds(const std::string& ns, std::span<const Token> tokens);

  // The deepest position d <= tokens.size() at which a request for tokens[0, d) could
  // resume with all of them (as Holds); 0 when none.
  int32_t ResumableDepth(const std::string& ns, std::span<const Token> tokens);

  // What a lookup for `tokens` in `ns` under `constraints` can resume (see ResumePlan):
  // the one place admission (Acquire, ImportShared) and shadows starting over (Reseed)
  // take their depths from. Changes nothing.
  ResumePlan PlanResume(const std::string& ns, std::span<const Token> tokens, const ResumeConstraints& constraints);

  // `seq` holds exactly `tokens`: keep its recurrent / sliding-window state here
  // (a message boundary or the start of generation). No-op for attention-only models or
  // when a state at this position already exists.
  void SnapshotPartial(const std::string& ns, int32_t seq, std::span<const Token> tokens);

  // The request using `seq` is done and `seq` holds exactly `tokens`: keep it as a cached
  // device sequence. Device sequences made redundant by it (ending on its path) are
  // freed, leaving a partial snapshot where SnapshotPolicy::KeepsPartialOfRedundant says.
  // `tail_start` (> 0: SnapshotPolicy::AdoptedTailStart): where the part of `tokens` not
  // worth a copy of its own begins. Evicted while another sequence on the device (cached,
  // or taken over by a request) shares its path up to there, it is dropped rather than
  // serialized whole, with the RAM states on its own tail that only it gave attention KV.
  void Adopt(const std::string& ns, int32_t seq, std::span<const Token> tokens, int32_t tail_start = 0);
  // Gives `seq` back empty.
  void Release(int32_t seq);

  // Holds the states at the deepest position of `tokens`' path that has any, at most
  // tokens.size() (a breakpoint between snapshots holds the one before it), for
  // `spec.duration` from now. A second hold on the same position extends it and makes it
  // the most recently held. Returns the position held; nullopt when no state lies on the
  // path. Past the pin budget the least recently held positions lose their holds (at once,
  // and whenever held bytes grow). A hold pins its tree node until it ends.
  std::optional<int32_t> Hold(const std::string& ns, std::span<const Token> tokens, const HoldSpec& spec);

  // Lends a second sequence holding what lent sequence `seq` holds now (a cheap copy in
  // a unified KV cache), for work that branches off a request (shadow prefill). Returned
  // with Adopt or Release like any lease. nullopt when no sequence is free or evictable.
  std::optional<int32_t> Fork(int32_t seq);
  // Lends an empty sequence (a free one, else an evicted cached one), to Reseed. nullopt
  // when every sequence is lent out.
  std::optional<int32_t> Lend();
  // Makes lent sequence `seq` hold exactly `tokens`: attention KV copied from lent
  // sequence `kv_source` (whose tokens begin with `tokens`), the recurrent part restored
  // from a state at exactly that position. Errors: kNotFound when no such state exists;
  // restore errors. On error `seq` is left empty.
  Status Reseed(const std::string& ns, std::span<const Token> tokens, int32_t seq, int32_t kv_source);

  // Frees the KV cells of an idle device sequence: one whose tail another sequence has
  // taken over (dropped, see Adopt), else the least recently used (its full state moves
  // to RAM first). False when no idle device sequence is left.
  bool EvictIdleDevice();
  // Keeps a sequence free for the next Acquire or Fork, so that it need not move a state
  // to RAM on its way: when none is free and two or more cached device sequences are
  // idle, one is evicted now (as EvictIdleDevice; the last idle one always stays). For
  // idle time. True when it evicted one.
  bool SpareASequence();

  // With a disk tier, for idle time: writes states a restart would lose (cached device
  // sequences and RAM states with no copy on disk), the most recently used first, until
  // `should_stop` returns true (checked before each) or none is left. Each stays where it
  // is; its disk copy is its twin, which the RAM tier's eviction then need not write.
  // Returns how many it wrote. Cheap when nothing changed since the last full pass.
  int WriteBehind(const std::function<bool()>& should_stop);
  // Whether WriteBehind may have something to write.
  bool HasUnwritten() const { return disk_ != nullptr && unwritten_; }

  // The shared tier (must outlive the cache; null: none). Whole states it holds are found
  // by position, not through the tree (see ImportShared); states kept here are written to
  // it behind (ShareBehind).
  void AttachShared(SharedStore* shared) { shared_ = shared; }
  bool has_shared() const { return shared_ != nullptr; }
  // With a shared tier: when one of `depths` (message boundaries, the start of generation;
  // those past `max_reuse` are ignored) lies deeper than this cache can resume `tokens`
  // (ResumableDepth), asks the shared tier for a whole state at the deepest of them, and
  // reads the one it has into RAM, so that the next Acquire resumes from it. Blocks for
  // the read (a miss costs one round trip).
  SharedImport ImportShared(const std::string& ns, std::span<const Token> tokens, std::span<const int32_t> depths,
                            int32_t max_reuse);
  // With a shared tier, for idle time: queues for it the whole states other processes
  // could resume from (cached device sequences, serialized; whole RAM states) that it was
  // not given yet, the most recently used first, until `should_stop` returns true.
  // Tails another sequence took over are not shared (as WriteBehind). Then the positions
  // ShareWhenIdle marked, made whole in a free sequence (none free: at a later pass; this
  // never evicts for it). Returns how many.
  int ShareBehind(const std::function<bool()>& should_stop);
  // With a shared tier and a model with partial states: the partial state at exactly
  // `tokens` (a request's generation start, where a client that sends back another reply
  // than the generated one leaves it) is to go to the shared tier whole, built over the KV
  // of a device sequence that passes through it, at the next ShareBehind. At most the 32
  // newest wait; one whose state or sequences are gone by then is skipped.
  void ShareWhenIdle(const std::string& ns, std::span<const Token> tokens);
  bool HasUnshared() const { return shared_ != nullptr && unshared_; }

  // The tokens of an earlier sequence that shares the longest prefix with `tokens` and
  // goes on past where `tokens` leaves the tree; empty when there is none. For
  // explaining divergences (see volatile_span.h).
  std::vector<Token> EarlierContinuation(const std::string& ns, std::span<const Token> tokens);

  CacheStats stats() const;
  // Read-only views for summaries (cache_summary.h). The reference is valid while the
  // cache lives; it changes with every call that changes the cache (same thread only).
  const PrefixTree& tree() const { return tree_; }
  size_t ram_budget() const { return config_.ram_budget_bytes; }
  size_t disk_budget() const;  // 0 without a disk tier
  size_t n_sequences() const { return config_.sequences.size(); }  // the device tier's room
  // Empty string when the tree's invariants hold and the index agrees with it.
  std::string CheckInvariants() const;

 private:
  struct Source;
  bool IsFree(int32_t seq) const;
  std::optional<int32_t> TakeFreeSequence();  // never evicts: nullopt when all are in use
  std::optional<int32_t> TakeSequence();      // a free one, else evicts the least recent idle
  // Gives the states `wanted` selects to `keep` (another tier), most recently used first,
  // each with its serialized bytes: a device sequence serialized now, a RAM state's bytes
  // as they are. Tails another sequence took over are never given (see Adopt), nor
  // kSuffix states. Stops when `should_stop` says so; `finished` is whether every
  // selected state was visited.
  struct Kept {
    int n = 0;  // states `keep` accepted
    bool finished = false;
  };
  using KeepFn = std::function<bool(PrefixTree::Node*, const State&, std::span<const uint8_t>)>;
  Kept KeepElsewhere(const std::function<bool(const PrefixTree::Node*, const State&)>& wanted,
                     const std::function<bool()>& should_stop, const KeepFn& keep);
  ResumeReport Resume(const std::string& ns, int32_t seq, std::span<const Token> tokens, int32_t max_reuse);
  struct Candidate {  // a depth a resume may stop at, and its node
    PrefixTree::Node* node;
    int32_t depth;
  };
  std::vector<Candidate> ResumeCandidates(const PrefixTree::Match& m) const;
  bool TryResumeAt(int32_t seq, const Candidate& c, std::vector<uint64_t>& failed, ResumeReport& report);
  // ResumableDepth, with the tier of the attention part there.
  std::pair<int32_t, Tier> Resumable(const std::string& ns, std::span<const Token> tokens);
  std::optional<Source> FindSource(PrefixTree::Node* node, bool need_exact, int32_t depth);
  // Whether kSuffix state `s` at `at` can serve as the attention source for `depth`, with
  // the recurrent part from RAM state `partial` (or, none given, from a RAM partial at
  // `at`): sets the source's partial and link.
  bool SuffixSource(const PrefixTree::Node* at, const State& s, std::optional<uint64_t> partial, int32_t depth,
                    Source* out);
  Status Execute(int32_t seq, const Source& src, int32_t depth);
  Status RestoreSuffix(int32_t seq, const Source& src);
  Status RestoreSerialized(uint64_t id, int32_t seq, bool partial);
  std::optional<uint64_t> LeastRecentIdleDevice();
  void EnforceRamBudget();
  int ShareMarkedPositions(const std::function<bool()>& should_stop);
  using TimePoint = std::chrono::steady_clock::time_point;
  TimePoint Now() const { return config_.clock ? config_.clock() : std::chrono::steady_clock::now(); }
  // Ends expired holds, then the least recently held ones while held bytes exceed the
  // pin budget.
  void EnforceHolds();
  void Unhold(PrefixTree::Node* node);
  // The least recently held node's hold ends; false when none is left.
  bool UnholdLeastRecent();
  static size_t RamBytesAt(const PrefixTree::Node* node);
  // Removes a state from the tree (and its bytes from RAM), counted as evicted.
  void Forget(uint64_t id);
  void ForgetDiskKeys(const std::vector<uint64_t>& keys);
  // Moves cached device state `state_id` off the device (see prefix_cache_tiers.cc).
  void EvictDevice(uint64_t state_id);
  void KeepSuffix(PrefixTree::Node* node, int32_t seq, int shared);
  // How many tokens of the path to `node` another sequence on the device holds: a cached
  // one other than `seq`, or one a request took over at a node.
  int SharedWithDevice(const PrefixTree::Node* node, int32_t seq);
  // A cached device sequence whose path shares at least `depth` tokens with the path to
  // `node` (the attention KV a kSuffix state there is restored over), with its state.
  std::optional<std::pair<int32_t, uint64_t>> SequenceThrough(const PrefixTree::Node* node, int32_t depth);
  // For a device state with a tail (State::tail_start): the depth its path shares with
  // another sequence on the device (cached, or taken over by a request), when that
  // reaches tail_start; else nullopt.
  std::optional<int> DroppableAt(const PrefixTree::Node* node, const State& s);
  void DropSuperseded(uint64_t state_id, int shared);
  void Unlend(int32_t seq);
  std::span<const uint8_t> Bytes(const State& s);
  // Stores a serialized state in RAM when it fits the budget, else on disk, else drops it.
  void Keep(PrefixTree::Node* node, StateKind kind, std::vector<uint8_t> bytes);
  uint64_t AddRamState(PrefixTree::Node* node, StateKind kind, std::vector<uint8_t> bytes);
  // Writes `bytes` to the disk tier as a `kind` state at `node` and adds it to the tree
  // (last_used 0: now). False when the disk refused it.
  bool AddDiskState(PrefixTree::Node* node, StateKind kind, std::span<const uint8_t> bytes, int64_t last_used);
  // Whether `node` holds a disk state that a state of `kind` serializes to.
  static bool HasDiskTwin(const PrefixTree::Node* node, StateKind kind);

  CacheConfig config_;
  SequenceStore& store_;
  DiskStore* disk_;
  StateIndex index_;  // follows tree_ (its observer), so outlives it
  PrefixTree tree_;
  std::unordered_map<int32_t, uint64_t> device_state_of_seq_;  // cached sequences
  // Sequences lent to requests, with the node a cached sequence was taken over at
  // (pinned while lent; nullptr for other leases).
  std::unordered_map<int32_t, PrefixTree::Node*> lent_;
  struct HoldEntry {
    TimePoint until;
    int64_t since = 0;  // when last held (a count): the least recent loses its hold first
    bool newest = false;
    std::string conversation;
  };
  std::unordered_map<PrefixTree::Node*, HoldEntry> holds_;  // held (and pinned) nodes
  int64_t holds_released_ = 0;
  int64_t hold_clock_ = 0;
  std::unordered_map<uint64_t, std::vector<uint8_t>> ram_;     // RAM state bytes by id
  size_t ram_bytes_ = 0;
  size_t restored_bytes_ = 0;  // by RestoreSerialized since the current Resume began
  bool unwritten_ = false;     // a state may lack its disk copy (see WriteBehind)
  SharedStore* shared_ = nullptr;
  bool unshared_ = false;      // a whole state may lack its shared copy (see ShareBehind)
  // StateKey of the whole states given to (or read from) the shared tier: not given twice.
  std::unordered_set<uint64_t> shared_keys_;
  std::unordered_set<uint64_t> shared_ids_;  // states known to be in the shared store
  struct ShareWhole {
    std::string ns;
    std::vector<Token> tokens;
  };
  std::vector<ShareWhole> share_whole_;  // ShareWhenIdle's, oldest first
  CacheStats stats_;
};

}  // namespace hearth::cache
