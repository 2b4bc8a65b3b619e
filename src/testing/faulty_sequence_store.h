// FaultySequenceStore (tests only): a cache::SequenceStore over another (the engine's
// context or the fake) that fails on command, for the device and RAM tiers'
// fault-injection tests.
//
// Each armed fault fires on the next `times` calls it applies to, then disarms:
//   kSaveError     Save fails (a state cannot be serialized: an eviction to RAM or a
//                  snapshot keeps nothing);
//   kTruncatedSave Save returns only the first half of the bytes (a state damaged on its
//                  way to RAM);
//   kRestoreError  Restore fails and leaves the sequence empty, as the contract says;
//   kNoRoom        Restore fails for want of KV cells (kResourceExhausted), sequence empty;
//   kSlowRestore   Restore takes `slow_restore` more.
// `whole_only`: apply to whole (full) states only, not to partial ones.
//
// Thread safety: like the store it wraps (the engine thread only).
#pragma once

#include <chrono>
#include <map>
#include <thread>

#include "cache/sequence_store.h"

namespace hearth::testing {

enum class StoreFault { kSaveError, kTruncatedSave, kRestoreError, kNoRoom, kSlowRestore };

class FaultySequenceStore : public cache::SequenceStore {
 public:
  // `base` must outlive this.
  explicit FaultySequenceStore(cache::SequenceStore& base) : base_(base) {}

  void Inject(StoreFault fault, int times = 1, bool whole_only = false) { armed_[fault] = {times, whole_only}; }
  void Clear() { armed_.clear(); }
  int fired(StoreFault fault) const {
    auto it = fired_.find(fault);
    return it == fired_.end() ? 0 : it->second;
  }
  std::chrono::milliseconds slow_restore{300};

  void Copy(int32_t src, int32_t dst, int32_t length) override { base_.Copy(src, dst, length); }
  void Clear(int32_t seq) override { base_.Clear(seq); }
  Status Truncate(int32_t seq, int32_t length) override { return base_.Truncate(seq, length); }
  StatusOr<std::vector<uint8_t>> Save(int32_t seq, bool partial) override {
    if (Fire(StoreFault::kSaveError, partial)) return Unavailable("cannot save the state (injected)");
    auto bytes = base_.Save(seq, partial);
    if (bytes.ok() && Fire(StoreFault::kTruncatedSave, partial)) bytes->resize(bytes->size() / 2);
    return bytes;
  }
  Status Restore(int32_t seq, std::span<const uint8_t> bytes, bool partial) override {
    if (Fire(StoreFault::kRestoreError, partial)) {
      base_.Clear(seq);
      return DataLoss("cannot restore the state (injected)");
    }
    if (Fire(StoreFault::kNoRoom, partial)) {
      base_.Clear(seq);
      return ResourceExhausted("no free KV cells (injected)");
    }
    if (Fire(StoreFault::kSlowRestore, partial)) std::this_thread::sleep_for(slow_restore);
    return base_.Restore(seq, bytes, partial);
  }
  int32_t Length(int32_t seq) const override { return base_.Length(seq); }
  // A suffix is a whole state: the faults for whole states apply.
  StatusOr<std::vector<uint8_t>> SaveSuffix(int32_t seq, int32_t from) override {
    if (Fire(StoreFault::kSaveError, false)) {
      base_.Clear(seq);
      return Unavailable("cannot save the state (injected)");
    }
    auto bytes = base_.SaveSuffix(seq, from);
    if (bytes.ok() && Fire(StoreFault::kTruncatedSave, false)) bytes->resize(bytes->size() / 2);
    return bytes;
  }
  Status RestoreSuffix(int32_t seq, std::span<const uint8_t> suffix, std::span<const uint8_t> partial,
                       int32_t prefix_src, int32_t from) override {
    if (Fire(StoreFault::kRestoreError, false)) {
      base_.Clear(seq);
      return DataLoss("cannot restore the state (injected)");
    }
    if (Fire(StoreFault::kNoRoom, false)) {
      base_.Clear(seq);
      return ResourceExhausted("no free KV cells (injected)");
    }
    if (Fire(StoreFault::kSlowRestore, false)) std::this_thread::sleep_for(slow_restore);
    return base_.RestoreSuffix(seq, suffix, partial, prefix_src, from);
  }

 private:
  struct Armed {
    int times = 0;
    bool whole_only = false;
  };
  bool Fire(StoreFault fault, bool partial) {
    auto it = armed_.find(fault);
    if (it == armed_.end() || it->second.times <= 0 || (partial && it->second.whole_only)) return false;
    --it->second.times;
    ++fired_[fault];
    return true;
  }

  cache::SequenceStore& base_;
  std::map<StoreFault, Armed> armed_;
  std::map<StoreFault, int> fired_;
};

}  // namespace hearth::testing
