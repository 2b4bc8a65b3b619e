// SequenceStore: the operations the prefix cache needs on the engine's context
// sequences. Implemented over engine::Context by the server; faked in tests, so the
// cache's policy is tested without a model.
//
// Thread safety: called only from the engine loop thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace hearth::cache {

class SequenceStore {
 public:
  virtual ~SequenceStore() = default;
  // dst := the first `length` positions of src (attention KV shared in a unified cache;
  // recurrent state copied as it is at src's end, to be replaced by a restore).
  virtual void Copy(int32_t src, int32_t dst, int32_t length) = 0;
  virtual void Clear(int32_t seq) = 0;
  // Removes positions [length, end). Errors when recurrent state would have to move back.
  virtual Status Truncate(int32_t seq, int32_t length) = 0;
  // `partial`: recurrent / sliding-window part only.
  virtual StatusOr<std::vector<uint8_t>> Save(int32_t seq, bool partial) = 0;
  // Errors: kResourceExhausted when a whole state (not `partial`) needs KV cells that
  // other sequences hold; others when the bytes do not fit. `seq` is then empty.
  virtual Status Restore(int32_t seq, std::span<const uint8_t> bytes, bool partial) = 0;
  virtual int32_t Length(int32_t seq) const = 0;
  // A whole state without the attention part of positions [0, from), which another
  // sequence holds too; `seq` is cleared either way (it is for an eviction).
  virtual StatusOr<std::vector<uint8_t>> SaveSuffix(int32_t seq, int32_t from) = 0;
  // `seq` := the state SaveSuffix saved, over the first `from` positions of `prefix_src`
  // (same tokens), with the recurrent part from `partial` (Save(seq, true) of the same
  // sequence). Errors as Restore's; `seq` is then empty.
  virtual Status RestoreSuffix(int32_t seq, std::span<const uint8_t> suffix, std::span<const uint8_t> partial,
                               int32_t prefix_src, int32_t from) = 0;
};

}  // namespace hearth::cache
