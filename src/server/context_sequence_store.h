// The prefix cache's view of the engine's context (cache::SequenceStore over
// engine::Context). Loop thread only, like the Context.
#pragma once

#include "cache/sequence_store.h"
#include "engine/context.h"

namespace hearth::server {

class ContextSequenceStore : public cache::SequenceStore {
 public:
  // `ctx` must outlive the store.
  explicit ContextSequenceStore(engine::Context& ctx) : ctx_(ctx) {}

  void Copy(int32_t src, int32_t dst, int32_t length) override { ctx_.CopySeq(src, dst, length); }
  void Clear(int32_t seq) override { ctx_.ClearSeq(seq); }
  Status Truncate(int32_t seq, int32_t length) override { return ctx_.TruncateSeq(seq, length); }
  StatusOr<std::vector<uint8_t>> Save(int32_t seq, bool partial) override {
    return ctx_.SaveState(seq, partial ? engine::StatePart::kPartialOnly : engine::StatePart::kAll);
  }
  Status Restore(int32_t seq, std::span<const uint8_t> bytes, bool partial) override {
    return ctx_.RestoreState(seq, bytes, partial ? engine::StatePart::kPartialOnly : engine::StatePart::kAll);
  }
  int32_t Length(int32_t seq) const override { return ctx_.SeqLength(seq); }
  StatusOr<std::vector<uint8_t>> SaveSuffix(int32_t seq, int32_t from) override { return ctx_.SaveSuffix(seq, from); }
  Status RestoreSuffix(int32_t seq, std::span<const uint8_t> suffix, std::span<const uint8_t> partial,
                       int32_t prefix_src, int32_t from) override {
    return ctx_.RestoreSuffix(seq, suffix, partial, prefix_src, from);
  }

 private:
  engine::Context& ctx_;
};

}  // namespace hearth::server
