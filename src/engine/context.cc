#include "engine/context.h"

#include <algorithm>
#include <string>
#include <thread>
#include <unordered_map>

#include "base/host_memory.h"
#include "engine/llama_params.h"
#include "engine/log_capture.h"
#include "llama.h"

namespace hearth::engine {
namespace {

bool AbortTrampoline(void* data) {
  auto* check = static_cast<std::function<bool()>*>(data);
  return *check && (*check)();
}

llama_state_seq_flags FlagsFor(StatePart part) {
  return part == StatePart::kPartialOnly ? LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY : LLAMA_STATE_SEQ_FLAGS_NONE;
}

}  // namespace

void Batch::Clear() {
  tokens_.clear();
  pos_.clear();
  seq_.clear();
  logits_.clear();
}

int Batch::Add(Token token, Pos pos, SeqId seq, bool want_logits) {
  tokens_.push_back(token);
  pos_.push_back(pos);
  seq_.push_back(seq);
  logits_.push_back(want_logits ? 1 : 0);
  return size() - 1;
}

StatusOr<std::unique_ptr<Context>> Context::Create(const Model& model, const ContextOptions& options) {
  HEARTH_RETURN_IF_ERROR(options.Validate());
  const llama_context_params p = LlamaContextParams(options);
  ScopedLogCapture log;  // how llama.cpp resolved flash attention "auto" it says only there
  llama_context* ctx = llama_init_from_model(model.raw(), p);
  if (ctx == nullptr) {
    return ResourceExhausted("could not create a context with n_ctx=" + std::to_string(options.n_ctx) +
                             " and n_seq_max=" + std::to_string(options.n_seq_max) +
                             "; try a smaller --ctx-size or fewer --parallel sequences");
  }
  bool flash_attn = options.flash_attn == FlashAttn::kOn;
  if (options.flash_attn == FlashAttn::kAuto) {
    // llama.cpp probes the attention layers' devices and logs the outcome; a quantized V
    // cache turns it on before any probe.
    flash_attn = log.text().find("Flash Attention not supported") == std::string::npos &&
                 (log.text().find("Flash Attention enabled") != std::string::npos ||
                  log.text().find("required for quantized V cache") != std::string::npos);
  }
  return std::unique_ptr<Context>(new Context(model, ctx, options, flash_attn));
}

bool GpuOffloadBuilt() { return llama_supports_gpu_offload(); }

Context::Context(const Model& model, llama_context* ctx, const ContextOptions& options, bool flash_attn)
    : model_(model), ctx_(ctx), options_(options), flash_attn_(flash_attn) {
  llama_set_abort_callback(ctx_.get(), AbortTrampoline, &abort_check_);
}

std::string Context::StateLayout() const {
  return "kv-" + options_.type_k + "-" + options_.type_v + (flash_attn_ ? "-fa" : "");
}

void LlamaContextDeleter::operator()(llama_context* ctx) const { llama_free(ctx); }

void Context::SetAbortCheck(std::function<bool()> check) { abort_check_ = std::move(check); }

Status Context::ValidateBatch(const Batch& batch) const {
  if (batch.empty()) return InvalidArgument("empty batch");
  if (batch.size() > options_.n_batch) {
    return InvalidArgument("batch of " + std::to_string(batch.size()) + " tokens exceeds n_batch " +
                           std::to_string(options_.n_batch));
  }
  std::unordered_map<SeqId, Pos> next;  // next expected position per sequence
  for (int i = 0; i < batch.size(); ++i) {
    const Token t = batch.tokens_[static_cast<size_t>(i)];
    const SeqId s = batch.seq_[static_cast<size_t>(i)];
    const Pos p = batch.pos_[static_cast<size_t>(i)];
    if (!model_.IsValidToken(t)) {
      return InvalidArgument("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                             std::to_string(model_.info().n_vocab) + ")");
    }
    if (s < 0 || s >= options_.n_seq_max) {
      return InvalidArgument("sequence id " + std::to_string(s) + " is outside [0, " +
                             std::to_string(options_.n_seq_max) + ")");
    }
    auto it = next.find(s);
    const Pos expected = it == next.end() ? SeqLength(s) : it->second;
    if (p != expected) {
      return InvalidArgument("sequence " + std::to_string(s) + " expects position " + std::to_string(expected) +
                             ", got " + std::to_string(p));
    }
    if (p >= options_.n_ctx) {
      return OutOfRange("position " + std::to_string(p) + " is beyond the context size " +
                        std::to_string(options_.n_ctx));
    }
    next[s] = p + 1;
  }
  return Status::Ok();
}

Status Context::Decode(const Batch& batch) {
  HEARTH_RETURN_IF_ERROR(ValidateBatch(batch));
  const auto n = static_cast<size_t>(batch.size());
  std::vector<int32_t> n_seq_id(n, 1);
  std::vector<llama_seq_id*> seq_ids(n);
  std::vector<llama_seq_id> seq_storage(batch.seq_);
  for (size_t i = 0; i < n; ++i) seq_ids[i] = &seq_storage[i];
  llama_batch b{};
  b.n_tokens = batch.size();
  b.token = const_cast<llama_token*>(batch.tokens_.data());
  b.pos = const_cast<llama_pos*>(batch.pos_.data());
  b.n_seq_id = n_seq_id.data();
  b.seq_id = seq_ids.data();
  b.logits = const_cast<int8_t*>(batch.logits_.data());
  const int32_t rc = llama_decode(ctx_.get(), b);
  // Success places every token; an abort or a backend failure leaves the finished
  // micro-batches (their positions below the sequence's length now); "no room" and a
  // rejected batch leave the memory untouched.
  for (size_t i = 0; i < n; ++i) {
    if (rc == 0 || ((rc == 2 || rc < -1) && batch.pos_[i] < SeqLength(batch.seq_[i]))) {
      cells_.Append(batch.seq_[i], batch.pos_[i]);
    }
  }
  switch (rc) {
    case 0: return Status::Ok();
    case 1:
      return ResourceExhausted("no room in the KV cache for " + std::to_string(batch.size()) +
                               " more tokens; free sequences or raise --ctx-size");
    case 2: return Cancelled("decode aborted");
    case -1: return InvalidArgument("llama.cpp rejected the batch");
    default: return Internal("llama_decode failed with code " + std::to_string(rc));
  }
}

std::span<const float> Context::Logits(int batch_index) const {
  const float* logits = llama_get_logits_ith(ctx_.get(), batch_index);
  if (logits == nullptr) return {};
  return {logits, static_cast<size_t>(model_.info().n_vocab)};
}

Status Context::Prefill(SeqId seq, std::span<const Token> tokens, int chunk, bool want_last_logits) {
  if (chunk <= 0 || chunk > options_.n_batch) chunk = options_.n_batch;
  last_prefill_index_ = -1;
  size_t done = 0;
  while (done < tokens.size()) {
    const size_t n = std::min(tokens.size() - done, static_cast<size_t>(chunk));
    const bool last_chunk = done + n == tokens.size();
    const Pos pos0 = SeqLength(seq);
    prefill_batch_.Clear();
    for (size_t i = 0; i < n; ++i) {
      const bool logits = want_last_logits && last_chunk && i + 1 == n;
      int idx = prefill_batch_.Add(tokens[done + i], pos0 + static_cast<Pos>(i), seq, logits);
      if (logits) last_prefill_index_ = idx;
    }
    HEARTH_RETURN_IF_ERROR(Decode(prefill_batch_));
    done += n;
  }
  return Status::Ok();
}

Pos Context::SeqLength(SeqId seq) const {
  return llama_memory_seq_pos_max(llama_get_memory(ctx_.get()), seq) + 1;
}

void Context::ClearSeq(SeqId seq) {
  llama_memory_seq_rm(llama_get_memory(ctx_.get()), seq, -1, -1);
  cells_.Remove(seq, 0, -1);
}

Status Context::TruncateSeq(SeqId seq, Pos length) {
  // No early return when length >= SeqLength(seq): after a partial restore the attention
  // part may hold positions beyond the recurrent state, and those must go too.
  const Pos have = SeqLength(seq);
  if (length < 0) return InvalidArgument("negative length");
  if (length == 0) {
    ClearSeq(seq);
    return Status::Ok();
  }
  llama_memory_t mem = llama_get_memory(ctx_.get());
  // A sliding-window layer keeps only the last n_swa positions: trimmed back past what it
  // still holds, it would attend over a window with a hole in it, and llama.cpp removes
  // the positions all the same. The next position, `length`, attends to
  // [length - n_swa + 1, length); llama_memory_seq_pos_min is the oldest one held.
  const int n_swa = model_.info().n_swa;
  const Pos oldest = llama_memory_seq_pos_min(mem, seq);
  if (n_swa > 0 && length < have && oldest > std::max<Pos>(0, length - n_swa + 1)) {
    return Unimplemented("sequence " + std::to_string(seq) + " holds its sliding window from position " +
                         std::to_string(oldest) + " on, so it cannot be trimmed to " + std::to_string(length) +
                         " (window " + std::to_string(n_swa) + "); restore a state saved at that length");
  }
  if (!llama_memory_seq_rm(mem, seq, length, -1)) {
    return Unimplemented("sequence " + std::to_string(seq) + " holds recurrent state at length " +
                         std::to_string(have) + " that cannot be trimmed to " + std::to_string(length) +
                         "; restore a state saved at that length");
  }
  cells_.Remove(seq, length, -1);
  return Status::Ok();
}

void Context::CopySeq(SeqId src, SeqId dst, std::optional<Pos> length) {
  if (src == dst) return;
  llama_memory_t mem = llama_get_memory(ctx_.get());
  llama_memory_seq_rm(mem, dst, -1, -1);
  llama_memory_seq_cp(mem, src, dst, 0, length ? *length : -1);
  cells_.Remove(dst, 0, -1);
  cells_.Copy(src, dst, 0, length ? *length : -1);
}

size_t Context::StateSize(SeqId seq, StatePart part) const {
  return llama_state_seq_get_size_ext(ctx_.get(), seq, FlagsFor(part));
}

StatusOr<std::vector<uint8_t>> Context::SaveState(SeqId seq, StatePart part) const {
  const size_t size = StateSize(seq, part);
  if (part == StatePart::kPartialOnly) {
    partial_state_size_ = size;
    ++partial_saves_since_prepare_;
  }
  std::vector<uint8_t> out;
  if (!spare_states_.empty() && spare_states_.back().size() == size) {
    out = std::move(spare_states_.back());
    spare_states_.pop_back();
  } else {
    out = NewHostBuffer(size);
  }
  const size_t n = llama_state_seq_get_data_ext(ctx_.get(), out.data(), out.size(), seq, FlagsFor(part));
  if (n == 0 && !out.empty()) return Internal("could not save the state of sequence " + std::to_string(seq));
  out.resize(n);
  return out;
}

void Context::PrepareSpareState() {
  spares_wanted_ = std::min(kMaxSpareStates, std::max(spares_wanted_, partial_saves_since_prepare_));
  partial_saves_since_prepare_ = 0;
  if (partial_state_size_ == 0) return;
  std::erase_if(spare_states_, [&](const std::vector<uint8_t>& b) { return b.size() != partial_state_size_; });
  // One per call: the engine calls this between steps, and a request that arrives meanwhile
  // waits for at most one buffer's first touch.
  if (spare_states_.size() < spares_wanted_) spare_states_.push_back(NewHostBuffer(partial_state_size_));
}

Status Context::RestoreState(SeqId seq, std::span<const uint8_t> bytes, StatePart part) {
  if (part == StatePart::kAll) ClearSeq(seq);
  HEARTH_RETURN_IF_ERROR(SetStateData(seq, bytes, part));
  // A whole sequence's state holds its positions from 0 (a suffix's is RestoreSuffix's).
  // A model with attention layers only has no partial state: llama.cpp reads a
  // kPartialOnly one whole, into new cells.
  if (part == StatePart::kAll || !model_.info().NeedsPartialStates()) {
    cells_.Remove(seq, 0, -1);
    for (Pos p = 0, n = SeqLength(seq); p < n; ++p) cells_.Append(seq, p);
  }
  return Status::Ok();
}

Status Context::SetStateData(SeqId seq, std::span<const uint8_t> bytes, StatePart part) {
  // llama.cpp says why only in its log; held, since the caller reports the failure (and
  // makes room and retries when cells were short).
  ScopedLogCapture log(ScopedLogCapture::Mode::kHold);
  const size_t n = llama_state_seq_set_data_ext(ctx_.get(), bytes.data(), bytes.size(), seq, FlagsFor(part));
  if (n == 0) {
    ClearSeq(seq);
    if (log.text().find("available cells") != std::string::npos) {
      return ResourceExhausted("no free KV cells for the saved state (" + std::to_string(bytes.size()) +
                               " bytes); sequence cleared");
    }
    std::string why = log.text();
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (const size_t at = why.rfind('\n'); at != std::string::npos) why = why.substr(at + 1);
    return DataLoss("saved state (" + std::to_string(bytes.size()) + " bytes) does not fit this model and context" +
                    (why.empty() ? std::string() : " (llama.cpp: " + why + ")") + "; sequence cleared");
  }
  return Status::Ok();
}

StatusOr<std::vector<uint8_t>> Context::SaveSuffix(SeqId seq, Pos from) {
  if (model_.info().n_swa > 0) {
    ClearSeq(seq);
    return Unimplemented("a suffix state needs a model without sliding-window layers");
  }
  if (from <= 0 || from >= SeqLength(seq)) {
    ClearSeq(seq);
    return InvalidArgument("suffix from " + std::to_string(from) + " of a sequence of " +
                           std::to_string(SeqLength(seq)) + " positions");
  }
  // Positions before the recurrent state's own: llama.cpp drops only attention cells
  // there (the recurrent cell sits at the sequence's last position).
  if (!llama_memory_seq_rm(llama_get_memory(ctx_.get()), seq, 0, from)) {
    ClearSeq(seq);
    return Internal("llama.cpp refused to drop the first " + std::to_string(from) + " positions");
  }
  cells_.Remove(seq, 0, from);
  StatusOr<std::vector<uint8_t>> bytes = SaveState(seq, StatePart::kAll);
  ClearSeq(seq);
  return bytes;
}

Status Context::RestoreSuffix(SeqId seq, std::span<const uint8_t> suffix, std::span<const uint8_t> partial,
                              SeqId prefix_src, Pos from) {
  if (model_.info().n_swa > 0) {
    ClearSeq(seq);
    return Unimplemented("a suffix state needs a model without sliding-window layers");
  }
  if (prefix_src == seq || from <= 0 || SeqLength(prefix_src) < from) {
    ClearSeq(seq);
    return InvalidArgument("sequence " + std::to_string(prefix_src) + " holds " +
                           std::to_string(SeqLength(prefix_src)) + " positions, not the " + std::to_string(from) +
                           " a suffix state needs");
  }
  ClearSeq(seq);
  HEARTH_RETURN_IF_ERROR(SetStateData(seq, suffix, StatePart::kAll));
  for (Pos p = from, n = SeqLength(seq); p < n; ++p) cells_.Append(seq, p);
  llama_memory_seq_cp(llama_get_memory(ctx_.get()), prefix_src, seq, 0, from);
  cells_.Copy(prefix_src, seq, 0, from);
  return RestoreState(seq, partial, StatePart::kPartialOnly);
}

}  // namespace hearth::engine
