// `hearth generate`: load a model, render one chat turn with its template, generate, and
// report prefill and decode speed. The smallest end-to-end use of the engine.
#include <chrono>
#include <cstdio>
#include <string>

#include "app/commands.h"
#include "engine/chat_template.h"
#include "engine/context.h"
#include "engine/detokenizer.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/stop_strings.h"

namespace hearth::app {
namespace {

struct GenerateFlags {
  std::string model_path;
  std::string message = "Hello! Who are you?";
  std::string system;
  int n_predict = 64;
  int n_ctx = 4096;
  int n_threads = 0;
  bool no_think = false;
  engine::SamplingParams sampling;
};

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int Fail(const Status& s) {
  std::fprintf(stderr, "hearth generate: %s\n", s.ToString().c_str());
  return 1;
}

// The chat turn (system message, user message) as the model's template renders it.
StatusOr<engine::RenderedPrompt> RenderTurn(const engine::Model& model, const GenerateFlags& f) {
  auto tmpl = engine::ChatTemplate::Create(model, "");
  if (!tmpl.ok()) return tmpl.status();
  std::vector<engine::ChatMessage> messages;
  if (!f.system.empty()) messages.push_back({.role = "system", .content = f.system});
  messages.push_back({.role = "user", .content = f.message});
  engine::RenderOptions ro;
  ro.enable_thinking = !f.no_think;
  return (*tmpl)->Render(messages, ro);
}

// Samples and prints the reply to `prompt`, prefilled as `tokens` into sequence 0 of
// `ctx`, until end of generation, a stop string or f.n_predict tokens. Returns how many
// tokens it generated.
StatusOr<int> GenerateReply(const engine::Model& model, engine::Context& ctx, const engine::RenderedPrompt& prompt,
                            const std::vector<engine::Token>& tokens, const GenerateFlags& f) {
  engine::Sampler sampler(model, f.sampling);
  sampler.Accept(tokens);
  engine::Detokenizer detok(model, true);
  engine::StopStrings stops(prompt.additional_stops);
  engine::Batch batch;
  int idx = ctx.LastPrefillIndex();
  int n_generated = 0;
  while (n_generated < f.n_predict) {
    engine::Token t = sampler.Sample(ctx, idx);
    ++n_generated;
    if (model.IsEndOfGeneration(t)) break;
    auto r = stops.Feed(detok.Push(t));
    std::fputs(r.text.c_str(), stdout);
    std::fflush(stdout);
    if (r.stopped) break;
    batch.Clear();
    idx = batch.Add(t, ctx.SeqLength(0), 0, true);
    HEARTH_RETURN_IF_ERROR(ctx.Decode(batch));
  }
  std::fputs(stops.Feed(detok.Flush()).text.c_str(), stdout);
  std::fputs(stops.Flush().c_str(), stdout);
  return n_generated;
}

int RunGenerate(const GenerateFlags& f) {
  using Clock = std::chrono::steady_clock;
  engine::InitBackend(false);
  if (Status s = f.sampling.Validate(); !s.ok()) return Fail(s);
  auto t0 = Clock::now();
  auto model = engine::Model::Load(f.model_path, {});
  if (!model.ok()) return Fail(model.status());
  auto t_load = Clock::now();
  const auto& info = (*model)->info();
  std::printf("model: %s (%s), %d layers, %.1fM params, loaded in %.2fs\n", info.path.c_str(), info.arch.c_str(),
              info.n_layer, static_cast<double>(info.n_params) / 1e6, Seconds(t0, t_load));
  auto prompt = RenderTurn(**model, f);
  if (!prompt.ok()) return Fail(prompt.status());

  engine::ContextOptions co;
  co.n_ctx = f.n_ctx;
  co.n_seq_max = 1;
  co.n_threads = f.n_threads;
  auto ctx = engine::Context::Create(**model, co);
  if (!ctx.ok()) return Fail(ctx.status());
  std::vector<engine::Token> tokens = (*model)->Tokenize(prompt->prompt, true, true);
  if (static_cast<int>(tokens.size()) + f.n_predict > f.n_ctx) {
    return Fail(OutOfRange("prompt of " + std::to_string(tokens.size()) + " tokens plus " +
                           std::to_string(f.n_predict) + " to generate exceeds the context of " +
                           std::to_string(f.n_ctx)));
  }
  auto t_pf0 = Clock::now();
  if (Status s = (*ctx)->Prefill(0, tokens, 0, true); !s.ok()) return Fail(s);
  auto t_pf1 = Clock::now();

  std::printf("--- prompt (%zu tokens) ---\n%s\n--- reply ---\n", tokens.size(), prompt->prompt.c_str());
  auto t_dec0 = Clock::now();
  auto n_generated = GenerateReply(**model, **ctx, *prompt, tokens, f);
  if (!n_generated.ok()) return Fail(n_generated.status());
  auto t_dec1 = Clock::now();
  const double pf = Seconds(t_pf0, t_pf1), dec = Seconds(t_dec0, t_dec1);
  std::printf("\n--- stats ---\nprefill: %zu tokens in %.3fs (%.1f tokens/s)\n", tokens.size(), pf,
              static_cast<double>(tokens.size()) / pf);
  std::printf("decode:  %d tokens in %.3fs (%.1f tokens/s)\n", *n_generated, dec,
              static_cast<double>(*n_generated) / dec);
  return 0;
}

}  // namespace

void RegisterGenerate(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Render one chat turn with the model's template and generate a reply");
  cmd->add_option("-m,--model", flags->model_path, "GGUF model file")->required();
  cmd->add_option("--message", flags->message, "the user message");
  cmd->add_option("--system", flags->system, "optional system message");
  cmd->add_option("-n,--n-predict", flags->n_predict, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-c,--ctx-size", flags->n_ctx, "context size");
  cmd->add_option("-t,--threads", flags->n_threads, "threads (0: as llama.cpp picks: performance cores)");
  cmd->add_flag("--no-think", flags->no_think, "render with thinking disabled");
  cmd->add_option("--temp", flags->sampling.temperature, "temperature (0: greedy)");
  cmd->add_option("--top-k", flags->sampling.top_k, "top-k");
  cmd->add_option("--top-p", flags->sampling.top_p, "top-p");
  cmd->add_option("--min-p", flags->sampling.min_p, "min-p");
  cmd->add_option("--seed", flags->sampling.seed, "sampling seed");
  cmd->callback([flags] {
    if (int rc = RunGenerate(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace hearth::app
