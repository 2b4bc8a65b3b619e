// A SequenceStore without a model, for the cache's tests. Each sequence is its list of
// tokens (standing for attention KV) plus the position its recurrent state describes.
// It enforces what the real engine enforces: recurrent state cannot be trimmed back, and
// a suffix state restores only over another sequence's prefix.
#pragma once

#include <algorithm>
#include <map>
#include <string>

#include "cache/sequence_store.h"

namespace hearth::cache {

class FakeSequenceStore : public SequenceStore {
 public:
  explicit FakeSequenceStore(bool recurrent) : recurrent_(recurrent) {}

  struct Seq {
    std::vector<int32_t> kv;
    int32_t rec = 0;  // positions the recurrent state has consumed
  };

  // Simulates prefill / decode.
  void Extend(int32_t seq, const std::vector<int32_t>& tokens) {
    auto& s = seqs_[seq];
    s.kv.insert(s.kv.end(), tokens.begin(), tokens.end());
    s.rec = static_cast<int32_t>(s.kv.size());
  }
  const Seq& Get(int32_t seq) { return seqs_[seq]; }

  void Copy(int32_t src, int32_t dst, int32_t length) override {
    Seq copy = seqs_[src];
    copy.kv.resize(std::min<size_t>(copy.kv.size(), static_cast<size_t>(length)));
    seqs_[dst] = copy;
    ++n_copies;
  }
  void Clear(int32_t seq) override { seqs_[seq] = Seq{}; }
  Status Truncate(int32_t seq, int32_t length) override {
    auto& s = seqs_[seq];
    if (recurrent_ && s.rec > length) return Unimplemented("recurrent state beyond " + std::to_string(length));
    if (s.kv.size() > static_cast<size_t>(length)) s.kv.resize(static_cast<size_t>(length));
    return Status::Ok();
  }
  StatusOr<std::vector<uint8_t>> Save(int32_t seq, bool partial) override {
    const auto& s = seqs_[seq];
    std::vector<uint8_t> out;
    auto put = [&](int32_t v) {
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>((v >> (8 * i)) & 0xFF));
    };
    out.push_back(partial ? 'P' : 'F');
    put(s.rec);
    if (!partial) {
      for (int32_t t : s.kv) put(t);
    }
    out.resize(out.size() + padding, 0);  // makes sizes realistic relative to each other
    ++n_saves;
    return out;
  }
  Status Restore(int32_t seq, std::span<const uint8_t> bytes, bool partial) override {
    if (bytes.empty() || bytes[0] != (partial ? 'P' : 'F')) return DataLoss("wrong state kind");
    auto get = [&](size_t at) {
      int32_t v = 0;
      for (int i = 0; i < 4; ++i) v |= static_cast<int32_t>(bytes[at + static_cast<size_t>(i)]) << (8 * i);
      return v;
    };
    auto& s = seqs_[seq];
    s.rec = get(1);
    if (!partial) {
      s.kv.clear();
      for (size_t at = 5; at + 4 <= bytes.size() - padding; at += 4) s.kv.push_back(get(at));
      restored_cells += s.kv.size();
      if (cells > 0 && UsedCells() > cells) {
        s = Seq{};
        return ResourceExhausted("no free KV cells");
      }
    }
    ++n_restores;
    return Status::Ok();
  }
  StatusOr<std::vector<uint8_t>> SaveSuffix(int32_t seq, int32_t from) override {
    Seq& s = seqs_[seq];
    if (from <= 0 || from >= static_cast<int32_t>(s.kv.size())) {
      s = Seq{};
      return InvalidArgument("suffix from " + std::to_string(from));
    }
    Seq suffix{Tokens(s.kv.begin() + from, s.kv.end()), s.rec};
    s = Seq{};
    std::vector<uint8_t> out{'S'};
    WriteInt(out, suffix.rec);
    WriteInt(out, from);
    for (int32_t t : suffix.kv) WriteInt(out, t);
    out.resize(out.size() + padding, 0);
    ++n_saves;
    return out;
  }
  Status RestoreSuffix(int32_t seq, std::span<const uint8_t> suffix, std::span<const uint8_t> partial,
                       int32_t prefix_src, int32_t from) override {
    const Seq src = seqs_[prefix_src];
    if (prefix_src == seq || from <= 0 || static_cast<int32_t>(src.kv.size()) < from) {
      seqs_[seq] = Seq{};
      return InvalidArgument("no prefix of " + std::to_string(from) + " in sequence " + std::to_string(prefix_src));
    }
    if (suffix.size() < 9 + padding || suffix[0] != 'S' || ReadInt(suffix, 5) != from) {
      seqs_[seq] = Seq{};
      return DataLoss("not a suffix from " + std::to_string(from));
    }
    Seq s{Tokens(src.kv.begin(), src.kv.begin() + from), src.rec};  // sharing copies src's recurrent state
    for (size_t at = 9; at + 4 <= suffix.size() - padding; at += 4) s.kv.push_back(ReadInt(suffix, at));
    seqs_[seq] = s;
    restored_cells += s.kv.size() - static_cast<size_t>(from);
    if (cells > 0 && UsedCells() > cells) {
      seqs_[seq] = Seq{};
      return ResourceExhausted("no free KV cells");
    }
    return Restore(seq, partial, /*partial=*/true);
  }

  int32_t Length(int32_t seq) const override {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return 0;
    const auto n = static_cast<int32_t>(it->second.kv.size());
    return recurrent_ ? std::min(n, it->second.rec) : n;
  }

  // Cells in use, counting every sequence's positions (the real cache shares copied
  // prefixes; this is the worst case).
  size_t UsedCells() const {
    size_t n = 0;
    for (const auto& [id, s] : seqs_) n += s.kv.size();
    return n;
  }

  size_t padding = 0;
  size_t cells = 0;  // > 0: whole-state restores fail beyond this many cells in use
  int n_copies = 0, n_saves = 0, n_restores = 0;
  size_t restored_cells = 0;  // KV positions restores wrote (a suffix's: its own only)

 private:
  using Tokens = std::vector<int32_t>;
  static void WriteInt(std::vector<uint8_t>& out, int32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>((v >> (8 * i)) & 0xFF));
  }
  static int32_t ReadInt(std::span<const uint8_t> bytes, size_t at) {
    int32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<int32_t>(bytes[at + static_cast<size_t>(i)]) << (8 * i);
    return v;
  }

  bool recurrent_;
  std::map<int32_t, Seq> seqs_;
};

}  // namespace hearth::cache
