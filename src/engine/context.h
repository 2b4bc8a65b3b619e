// Context: one llama.cpp context holding several sequences in a unified KV cache, with
// batched decode, logits for chosen positions, and per-sequence memory operations
// (copy, trim, save and restore state).
//
// Thread safety: none. A Context is owned by exactly one thread (the engine loop) and
// every call, const ones included, must come from it.
//
// Invariants:
//  1. Every sequence's tokens occupy positions [0, SeqLength(seq)) with no gaps: Decode
//     only accepts a sequence's tokens at consecutive positions starting at SeqLength(seq).
//  2. A recurrent layer's state describes exactly the positions [0, SeqLength(seq)); it
//     cannot be moved back except by restoring a state saved at the target length.
//  3. A sliding-window layer holds the KV of the last n_swa positions or more (llama.cpp
//     drops older ones as their cells are needed); trimming back past what it still holds
//     is refused like a recurrent trim.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/cell_ledger.h"
#include "engine/model.h"
#include "engine/types.h"

struct llama_context;

namespace hearth::engine {

struct LlamaContextDeleter {
  void operator()(llama_context* ctx) const;
};

// Flash attention, as llama-server's -fa: kAuto lets llama.cpp use it where every
// attention layer's device supports it (on a CPU it does).
enum class FlashAttn { kAuto, kOn, kOff };

// Whether llama.cpp was built with a backend that offloads layers (CUDA, Metal, Vulkan, ...).
bool GpuOffloadBuilt();
// "auto", "on", "off" (also "1"/"0", "true"/"false"). Errors: kInvalidArgument.
StatusOr<FlashAttn> ParseFlashAttn(std::string_view text);
const char* FlashAttnName(FlashAttn mode);

// The KV cache element types llama-server's -ctk / -ctv accept.
const std::vector<std::string>& KvCacheTypes();

struct ContextOptions {
  int n_ctx = 4096;      // KV cells shared by all sequences (unified cache)
  int n_batch = 512;     // most tokens one Decode may carry
  int n_ubatch = 512;    // physical micro-batch
  int n_seq_max = 4;     // sequence slots, ids [0, n_seq_max)
  int n_threads = 0;     // 0: as llama-server, the cores useful for math (performance cores)
  FlashAttn flash_attn = FlashAttn::kAuto;
  std::string type_k = "f16";  // KV cache element types, one of KvCacheTypes()
  std::string type_v = "f16";  // a quantized V needs flash attention (kAuto turns it on)

  // Errors: kInvalidArgument naming the bad field (or the flag that set it).
  Status Validate() const;
};

// Tokens for one Decode call. Reusable: Clear() keeps the allocation.
class Batch {
 public:
  void Clear();
  // Appends one token; returns its index in the batch (the key for Context::Logits).
  int Add(Token token, Pos pos, SeqId seq, bool want_logits);
  int size() const { return static_cast<int>(tokens_.size()); }
  bool empty() const { return tokens_.empty(); }

 private:
  friend class Context;
  std::vector<Token> tokens_;
  std::vector<Pos> pos_;
  std::vector<SeqId> seq_;
  std::vector<int8_t> logits_;
};

// What a saved sequence state covers.
enum class StatePart {
  kAll,          // every layer: attention KV and recurrent state
  kPartialOnly,  // only the parts that cannot be trimmed (recurrent, sliding window)
};

class Context {
 public:
  // Errors: kInvalidArgument for bad options, kResourceExhausted when the backend cannot
  // allocate the context.
  static StatusOr<std::unique_ptr<Context>> Create(const Model& model, const ContextOptions& options);

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const ContextOptions& options() const { return options_; }
  const Model& model() const { return model_; }
  // Whether attention runs as flash attention: options().flash_attn with kAuto resolved
  // the way llama.cpp resolved it for this model's devices.
  bool flash_attn() const { return flash_attn_; }
  // The fewest tokens a multi-token decode needs for its tokens to cost what a long
  // prefill's cost: kCpuFlashAttnTile with flash attention on a build without GPU
  // offload (ggml-cpu tiles flash attention over 64 query rows, GGML_FA_TILE_Q, and runs
  // 2-63 rows one by one: at depth 2,400, 32 tokens ran at 329 tokens/s and 64 at 4,469
  // with llama-bench on the tiny qwen3 model), else 1. A GPU build whose layers stay on
  // the CPU (-ngl 0) still says 1.
  static constexpr int kCpuFlashAttnTile = 64;
  int efficient_batch_floor() const { return flash_attn_ && !GpuOffloadBuilt() ? kCpuFlashAttnTile : 1; }
  // What a saved state's bytes depend on besides the model: the KV element types and
  // the V layout (transposed unless flash attention), e.g. "kv-f16-f16-fa". States saved
  // under one layout cannot be restored under another.
  std::string StateLayout() const;

  // Runs the model over `batch`.
  // Errors, and the state each leaves:
  //   kInvalidArgument: bad token id, sequence id, position, or batch size; memory untouched.
  //   kResourceExhausted: no room in the KV cache; memory untouched.
  //   kCancelled: the abort check returned true; finished micro-batches remain (see SeqLength).
  //   kInternal: backend failure; finished micro-batches remain.
  Status Decode(const Batch& batch);

  // n_vocab logits of the token at `batch_index` of the last Decode, which must have been
  // added with want_logits. Empty when it was not. Valid until the next Decode.
  std::span<const float> Logits(int batch_index) const;

  // Feeds `tokens` to `seq` from SeqLength(seq) on, in Decode calls of at most `chunk`
  // tokens (0: n_batch). When `want_last_logits`, Logits(LastPrefillIndex()) afterwards
  // holds the logits of the last token. On error the finished chunks remain.
  Status Prefill(SeqId seq, std::span<const Token> tokens, int chunk, bool want_last_logits);
  int LastPrefillIndex() const { return last_prefill_index_; }

  // Number of positions held for `seq` (next position to decode).
  Pos SeqLength(SeqId seq) const;
  // Attention KV cells in use by all sequences together: a copy's shared cells count
  // once (engine/cell_ledger.h; for sliding-window models, the full-attention cells).
  int64_t UsedCells() const { return cells_.n_used(); }
  // Forgets `seq` entirely. Never fails.
  void ClearSeq(SeqId seq);
  // Removes positions [length, SeqLength(seq)). Errors: kUnimplemented when a recurrent
  // layer's state lies beyond `length`, or when a sliding-window layer no longer holds
  // the window that ends at `length` (restore a state saved at `length` instead); the
  // memory is then unchanged.
  Status TruncateSeq(SeqId seq, Pos length);
  // Makes `dst` a copy of `src` (dst is cleared first). In a unified cache attention cells
  // are shared, not duplicated; recurrent state is copied. With `length`, only attention
  // positions [0, length) are copied (the recurrent state is still src's, at its end:
  // restore a partial state saved at `length` to match).
  void CopySeq(SeqId src, SeqId dst, std::optional<Pos> length = std::nullopt);

  // Bytes SaveState would return.
  size_t StateSize(SeqId seq, StatePart part) const;
  // Serializes the state of `seq` into host memory; into the spare buffer when one of the
  // right size is ready (see PrepareSpareState).
  StatusOr<std::vector<uint8_t>> SaveState(SeqId seq, StatePart part) const;
  // Makes spare buffers the size of the last recurrent-only state saved, touched ahead of
  // need: a fresh buffer's first touch costs a page fault per page (a 20 MB state took
  // 63 ms to save in a VM, 1.5 ms into touched memory), so a copy on the way to a first
  // token should not pay it. Up to as many as the most recurrent-only saves seen between
  // two calls (a follow-up keeps one at a message end and one at its generation start),
  // at most kMaxSpareStates; one more per call. Call where a delay costs nothing. No-op
  // when they are ready.
  void PrepareSpareState();
  static constexpr size_t kMaxSpareStates = 4;
  // Spare buffers ready now (for tests).
  size_t n_spare_states() const { return spare_states_.size(); }
  // Loads a state from SaveState into `seq`. kAll replaces the sequence; kPartialOnly
  // replaces only the recurrent / sliding-window part (trim the attention part to the same
  // length with TruncateSeq). Errors, the sequence then cleared: kResourceExhausted when
  // no free KV cells are left for the state's positions (other sequences hold them);
  // kDataLoss when the bytes do not fit this model and context.
  Status RestoreState(SeqId seq, std::span<const uint8_t> bytes, StatePart part);

  // A sequence's state without the attention KV of its first `from` positions, for a
  // sequence whose prefix another one holds too (so moving it off the device need not copy
  // that prefix, nor restoring it duplicate its cells). SaveSuffix serializes it and
  // clears `seq` (it is for an eviction); RestoreSuffix makes `seq` hold the whole
  // sequence again: the suffix's cells, the first `from` positions of `prefix_src` (which
  // must hold the same tokens there) shared, and the recurrent state from `partial` (a
  // kPartialOnly save of the same sequence; sharing the prefix copies prefix_src's
  // recurrent state, which `partial` replaces). Only for models without sliding-window
  // layers (kUnimplemented otherwise). Errors as RestoreState's, plus kInvalidArgument
  // when prefix_src holds fewer than `from` positions; on error `seq` is cleared (and
  // SaveSuffix's `seq` too).
  StatusOr<std::vector<uint8_t>> SaveSuffix(SeqId seq, Pos from);
  Status RestoreSuffix(SeqId seq, std::span<const uint8_t> suffix, std::span<const uint8_t> partial,
                       SeqId prefix_src, Pos from);

  // Called between micro-batches during Decode; returning true aborts it (kCancelled).
  void SetAbortCheck(std::function<bool()> check);

  // For src/engine only.
  llama_context* raw() const { return ctx_.get(); }

 private:
  Context(const Model& model, llama_context* ctx, const ContextOptions& options, bool flash_attn);
  Status ValidateBatch(const Batch& batch) const;
  // llama_state_seq_set_data_ext into `seq` as it is; clears `seq` on failure.
  Status SetStateData(SeqId seq, std::span<const uint8_t> bytes, StatePart part);

  const Model& model_;
  std::unique_ptr<llama_context, LlamaContextDeleter> ctx_;
  ContextOptions options_;
  bool flash_attn_ = false;
  int last_prefill_index_ = -1;
  std::function<bool()> abort_check_;
  Batch prefill_batch_;
  mutable std::vector<std::vector<uint8_t>> spare_states_;  // touched; moved out by SaveState
  mutable size_t partial_state_size_ = 0;                   // of the last kPartialOnly save
  mutable size_t partial_saves_since_prepare_ = 0;
  size_t spares_wanted_ = 1;
  CellLedger cells_;  // mirrors every memory operation above
};

}  // namespace hearth::engine
