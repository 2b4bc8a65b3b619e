// mkmodel: writes GGUF files with random weights in real llama.cpp architectures.
//
// The files load in libllama exactly like converted checkpoints of the same family (same
// hparam keys, tensor names, shapes and types), so tests and benchmarks can exercise the
// real code paths (hybrid recurrent + attention caches, MoE routing) without downloading
// a model. The weights are random, so the text they generate is noise; only its shape and
// cost are realistic.
//
// Thread safety: free functions with no shared state; concurrent calls must use different
// out paths.
//
// Invariants:
//   1. Deterministic: the same Options (seed included) give a byte-identical file; a
//      different seed gives different weights.
//   2. Atomic: the file appears at out_path complete or not at all (temp file + rename).
//   3. Numerically sane: every forward pass gives finite logits that are not all equal.
//
// Usage:
//   mkmodel::Options o;
//   o.arch = mkmodel::Arch::kQwen35;
//   o.vocab_path = ".../models/ggml-vocab-qwen35.gguf";
//   o.template_path = ".../models/templates/Qwen3.5-4B.jinja";
//   o.out_path = "/tmp/tiny-qwen35.gguf";
//   Status s = mkmodel::WriteModel(o);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hearth::mkmodel {

// qwen35: Qwen3.5 hybrid, Gated DeltaNet layers with a gated full-attention layer every
//         fourth layer, dense FFNs.
// qwen35moe: the same trunk with MoE FFNs (routed experts + a gated shared expert).
// qwen3: Qwen3, attention only.
// qwen3next: Qwen3-Next, the other Gated DeltaNet hybrid: the same 3:1 layer pattern as
//            qwen35 with MoE FFNs, plain NeoX RoPE and the Qwen2/Qwen3 tokenizer.
// gemma4: Gemma 4, dense: sliding-window attention layers interleaved with global ones.
// granitehybrid: Granite 4.0-H, dense: Mamba-2 layers with an attention layer (no RoPE)
//                among them, Granite's muP multipliers.
// gpt-oss: OpenAI's gpt-oss: sliding-window and full attention layers alternating,
//          attention sinks, MoE FFNs with biases, untied LM head.
enum class Arch { kQwen35, kQwen35Moe, kQwen3, kQwen3Next, kGemma4, kGraniteHybrid, kGptOss };

// Every Arch, in the order ParseArch lists them.
inline constexpr Arch kAllArchs[] = {Arch::kQwen35, Arch::kQwen35Moe, Arch::kQwen3, Arch::kQwen3Next,
                                     Arch::kGemma4, Arch::kGraniteHybrid, Arch::kGptOss};

// tiny: 4 layers, width 128, ~40-50 MB; for tests (loads in ~0.3 s, most of it the
//       tokenizer; decodes ~600 tokens/s on one core).
// small: for benchmarks, ~1-2 GB: the shape of Qwen3.5-0.8B (Qwen3-0.6B for qwen3); for
//        families with no model that small, a scaled-down shape the arch's file says.
enum class Preset { kTiny, kSmall };

// ArchName of any Arch; anything else is InvalidArgument.
StatusOr<Arch> ParseArch(std::string_view name);
// "tiny", "small"; anything else is InvalidArgument.
StatusOr<Preset> ParsePreset(std::string_view name);
// The names ParseArch / ParsePreset accept; the architecture name is also the value of
// general.architecture in the file.
std::string_view ArchName(Arch arch);
std::string_view PresetName(Preset preset);

// The tokenizer and chat template a family's real checkpoints carry, as files of
// llama.cpp's source models/ directory ("ggml-vocab-qwen35.gguf",
// "templates/Qwen3.5-4B.jinja"). Where no shipped vocab is the family's own, `vocab` is
// one of the same pre-tokenizer family, and WriteModel adds the special tokens the
// template emits (granitehybrid: llama 3's BPE with Granite's role markers; gpt-oss: the
// same BPE with harmony's).
struct FamilyFiles {
  std::string_view vocab;
  std::string_view chat_template;
};
FamilyFiles DefaultFiles(Arch arch);

struct Options {
  Arch arch = Arch::kQwen35;
  Preset preset = Preset::kTiny;
  uint64_t seed = 1;
  std::string vocab_path;     // GGUF holding the tokenizer to copy (e.g. <llama src>/models/ggml-vocab-qwen35.gguf)
  std::string template_path;  // Jinja chat template file to embed as tokenizer.chat_template
  std::string out_path;
};

// What WriteModelWithSummary wrote.
struct WriteSummary {
  uint64_t n_params = 0;   // elements over all tensors (tied embeddings counted once)
  uint64_t n_bytes = 0;    // size of the file
  int64_t n_tensors = 0;
};

// Writes the model atomically (temp file + rename). Errors: unreadable vocab/template,
// unwritable out. On failure nothing is left at out_path or beside it, and a file that
// was already at out_path is untouched.
Status WriteModel(const Options& options);
// Same as WriteModel, and says what it wrote.
StatusOr<WriteSummary> WriteModelWithSummary(const Options& options);

}  // namespace hearth::mkmodel
