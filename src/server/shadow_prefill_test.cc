// ShadowPrefill on its own: a real context and prefix cache (the tiny qwen3 model), a slot
// built by hand, targets published straight into the mailbox in place of the warm-ahead
// worker, and the step's decode done by the test where the engine loop would do it.
#include "server/shadow_prefill.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "server/context_sequence_store.h"
#include "testing/test_env.h"

namespace hearth::server {
namespace {

using engine::Token;
using testing::RandomTokens;

constexpr int kPrompt = 40;  // the request's prompt; its reply (and the shadow) forks at its end

class ShadowPrefillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadTestModel("qwen3");
    ASSERT_NE(model_, nullptr);
    engine::ContextOptions o;
    o.n_ctx = 1024;
    o.n_batch = 256;
    o.n_ubatch = 256;
    o.n_seq_max = 4;
    o.n_threads = 1;
    auto c = engine::Context::Create(*model_, o);
    ASSERT_TRUE(c.ok());
    ctx_ = std::move(*c);
    store_ = std::make_unique<ContextSequenceStore>(*ctx_);
    cache::CacheConfig cc;
    cc.needs_partial = false;  // qwen3: attention only
    cc.sequences = {0, 1, 2, 3};
    cc.ram_budget_bytes = 1u << 28;
    cache_ = std::make_unique<cache::PrefixCache>(cc, *store_, nullptr);
    on_progress_ = [this](const GenerationTask&, const api::Completion& partial, std::shared_ptr<ShadowMailbox> m) {
      posted_.push_back(partial.content);
      m->Skip();  // the test publishes targets itself
    };
  }

  std::unique_ptr<ShadowPrefill> Make(ShadowFeed feed) {
    return std::make_unique<ShadowPrefill>(*model_, *ctx_, *cache_,
                                           ShadowPrefill::Options{.feed = feed, .n_batch = 256}, stats_, on_progress_);
  }

  void Decode(const std::vector<Token>& tokens, size_t from, size_t to, int32_t seq) {
    engine::Batch b;
    for (size_t i = from; i < to; ++i) b.Add(tokens[i], static_cast<engine::Pos>(i), seq, false);
    ASSERT_TRUE(ctx_->Decode(b).ok());
  }

  // A chat request whose sequence holds its whole prompt, message ends at 20 and 40, and
  // whose reply streamed `reply` so far.
  std::unique_ptr<Slot> Request(uint32_t seed, const std::string& reply = "Hello there, friend. ") {
    auto slot = std::make_unique<Slot>();
    slot->task.prompt = RandomTokens(kPrompt, seed);
    slot->task.cache_namespace = "ns";
    slot->task.generation_start = kPrompt;
    slot->task.snapshot_positions = {20, kPrompt};
    std::optional<int32_t> seq = cache_->Lend();
    EXPECT_TRUE(seq.has_value());
    if (!seq) return slot;
    slot->lease = cache::SequenceLease(*cache_, *seq);
    Decode(slot->task.prompt, 0, kPrompt, *seq);
    const engine::ChatTemplate* t = testing::LoadTestTemplate("qwen3");
    EXPECT_NE(t, nullptr);
    engine::RenderOptions ro;
    ro.enable_thinking = false;
    auto r = t->Render(std::vector<engine::ChatMessage>{{.role = "user", .content = "hi"}}, ro);
    EXPECT_TRUE(r.ok());
    slot->output = std::make_unique<OutputPipeline>(*model_, std::vector<std::string>{}, r->output_format);
    for (Token tok : model_->Tokenize(reply, false, false)) {
      slot->output->Push(tok);
      slot->generated.push_back(tok);
    }
    return slot;
  }

  // Publishes a target: the prompt's first `keep` tokens, then `n_reply` others.
  static ShadowTarget Target(const Slot& slot, size_t keep, int n_reply, const std::string& basis) {
    ShadowTarget t;
    t.tokens.assign(slot.task.prompt.begin(), slot.task.prompt.begin() + static_cast<std::ptrdiff_t>(keep));
    const std::vector<Token> reply = RandomTokens(n_reply, 99);
    t.tokens.insert(t.tokens.end(), reply.begin(), reply.end());
    t.basis_content = basis;
    return t;
  }

  const engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<ContextSequenceStore> store_;
  std::unique_ptr<cache::PrefixCache> cache_;
  StatsBoard stats_;
  ShadowProgressCallback on_progress_;
  std::vector<std::string> posted_;
};

// With the feed beside the decode: started at the fork, the partial reply posted, the
// target's tokens planned, recorded once decoded, and the shadow kept when the final
// reply begins with what the target was rendered from.
TEST_F(ShadowPrefillTest, FedBesideTheDecodeAndKeptWhenTheFinalReplyAgrees) {
  auto shadows = Make(ShadowFeed::kWithDecode);
  std::vector<std::unique_ptr<Slot>> slots;
  slots.push_back(Request(1));
  Slot& slot = *slots[0];
  shadows->Start(slot);
  ASSERT_TRUE(slot.shadow.has_value());
  EXPECT_EQ(slot.shadow->fork, kPrompt);
  shadows->PostProgress(slot);
  ASSERT_EQ(posted_.size(), 1u);
  EXPECT_EQ(posted_[0], "Hello there, friend. ");
  const ShadowTarget target = Target(slot, kPrompt, 20, "Hello there,");
  slot.shadow->mailbox->Publish(target);

  std::vector<ShadowCandidate> planned = shadows->Poll(slots);
  ASSERT_EQ(planned.size(), 1u);
  EXPECT_EQ(planned[0].n_held, static_cast<size_t>(kPrompt));
  EXPECT_EQ(planned[0].unfed, 20);
  Decode(target.tokens, kPrompt, kPrompt + 20, planned[0].seq);  // the step's decode
  slot.shadow->n_in_batch = 20;
  shadows->RecordFed(slots);
  EXPECT_EQ(slot.shadow->fed.size(), 20u);
  EXPECT_EQ(stats_.Read().shadow_tokens_with_decode, 20);

  const auto kept = shadows->Finish(slot, {.content = "Hello there, friend. Bye."}, false, [](auto) { return std::nullopt; });
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(*kept, target.tokens);
  EXPECT_FALSE(slot.shadow.has_value());
  EXPECT_EQ(stats_.Read().shadows_kept, 1);
  EXPECT_EQ(cache_->ResumableDepth("ns", target.tokens), kPrompt + 20);  // the next turn resumes there
}

// Fed only when the reply ends: nothing beside the decode, the drain decodes what the
// target holds (bounded), and a final reply that left the target's basis drops it.
TEST_F(ShadowPrefillTest, AfterReplyDrainsAtTheEndAndDropsAShadowTheReplyLeft) {
  auto shadows = Make(ShadowFeed::kAfterReply);
  std::vector<std::unique_ptr<Slot>> slots;
  slots.push_back(Request(2));
  shadows->Start(*slots[0]);
  ASSERT_TRUE(slots[0]->shadow.has_value());
  const ShadowTarget target = Target(*slots[0], kPrompt, 30, "Hello there,");
  slots[0]->shadow->mailbox->Publish(target);
  ASSERT_EQ(shadows->Poll(slots).size(), 1u);
  const auto kept = shadows->Finish(*slots[0], {.content = "Hello there, friend."}, false, [](auto) { return std::nullopt; });
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(*kept, target.tokens);
  EXPECT_EQ(stats_.Read().shadow_tokens, 30);
  EXPECT_EQ(stats_.Read().shadow_tokens_with_decode, 0);

  slots[0] = Request(3);
  shadows->Start(*slots[0]);
  ASSERT_TRUE(slots[0]->shadow.has_value());
  const ShadowTarget other = Target(*slots[0], kPrompt, 10, "Hello there,");
  slots[0]->shadow->mailbox->Publish(other);
  std::vector<ShadowCandidate> planned = shadows->Poll(slots);
  ASSERT_EQ(planned.size(), 1u);
  Decode(other.tokens, kPrompt, kPrompt + 10, planned[0].seq);  // as if a whole tile was planned
  slots[0]->shadow->n_in_batch = 10;
  shadows->RecordFed(slots);
  EXPECT_FALSE(shadows->Finish(*slots[0], {.content = "Goodbye."}, false, [](auto) { return std::nullopt; }));
  EXPECT_FALSE(slots[0]->shadow.has_value());
  EXPECT_EQ(stats_.Read().shadows_dropped, 1);
  EXPECT_LT(cache_->ResumableDepth("ns", other.tokens), kPrompt + 10);
}

// The drain is bounded (the reply's final event waits for it) and decodes to each
// message end of the target first; a request waiting in the queue gets the engine after
// the first of those decodes.
TEST_F(ShadowPrefillTest, DrainIsBoundedAndGivesWayToAQueuedRequest) {
  auto shadows = Make(ShadowFeed::kAfterReply);
  for (bool queued : {false, true}) {
    std::vector<std::unique_ptr<Slot>> slots;
    slots.push_back(Request(queued ? 11 : 10));
    shadows->Start(*slots[0]);
    ASSERT_TRUE(slots[0]->shadow.has_value());
    ShadowTarget target = Target(*slots[0], kPrompt, 100, "Hello");
    target.message_ends = {kPrompt + 10};
    slots[0]->shadow->mailbox->Publish(target);
    ASSERT_EQ(shadows->Poll(slots).size(), 1u);
    const QueuedPrefixFn waiting = [&](std::span<const Token>) -> std::optional<size_t> {
      if (!queued) return std::nullopt;
      return kPrompt;  // it shares the prompt only
    };
    const auto kept = shadows->Finish(*slots[0], {.content = "Hello there."}, false, waiting);
    ASSERT_TRUE(kept.has_value()) << queued;
    EXPECT_EQ(kept->size(), static_cast<size_t>(queued ? kPrompt + 10 : kPrompt + 64)) << queued;
  }
}

// A rest only a little past the bound is drained whole: warm-ahead would spend a decode
// of its own on it.
TEST_F(ShadowPrefillTest, DrainTakesARestOnlySlightlyPastItsBound) {
  auto shadows = Make(ShadowFeed::kAfterReply);
  for (int reply : {64 + 16, 64 + 17}) {
    std::vector<std::unique_ptr<Slot>> slots;
    slots.push_back(Request(reply));
    shadows->Start(*slots[0]);
    ASSERT_TRUE(slots[0]->shadow.has_value());
    slots[0]->shadow->mailbox->Publish(Target(*slots[0], kPrompt, reply, "Hello"));
    ASSERT_EQ(shadows->Poll(slots).size(), 1u);
    const auto kept = shadows->Finish(*slots[0], {.content = "Hello there."}, false, [](auto) { return std::nullopt; });
    ASSERT_TRUE(kept.has_value()) << reply;
    EXPECT_EQ(kept->size(), static_cast<size_t>(kPrompt + (reply <= 80 ? reply : 64))) << reply;
  }
}

// A target that leaves what the shadow holds starts it over at the request's last
// message end before the difference, or ends it when there is none.
TEST_F(ShadowPrefillTest, ATargetThatLeavesThePromptStartsOverAtAMessageEndOrEnds) {
  auto shadows = Make(ShadowFeed::kWithDecode);
  std::vector<std::unique_ptr<Slot>> slots;
  slots.push_back(Request(4));
  shadows->Start(*slots[0]);
  ASSERT_TRUE(slots[0]->shadow.has_value());
  slots[0]->shadow->mailbox->Publish(Target(*slots[0], 30, 15, ""));  // re-rendered from position 30
  std::vector<ShadowCandidate> planned = shadows->Poll(slots);
  ASSERT_EQ(planned.size(), 1u);
  EXPECT_EQ(planned[0].n_held, 20u);  // the message end at 20
  EXPECT_EQ(planned[0].unfed, 30 + 15 - 20);
  EXPECT_EQ(slots[0]->shadow->fork, 20);

  slots.push_back(Request(5));
  shadows->Start(*slots[1]);
  ASSERT_TRUE(slots[1]->shadow.has_value());
  slots[1]->shadow->mailbox->Publish(Target(*slots[1], 10, 15, ""));  // before any message end
  planned = shadows->Poll(slots);
  ASSERT_EQ(planned.size(), 1u);
  EXPECT_EQ(planned[0].slot, 0u);
  EXPECT_FALSE(slots[1]->shadow.has_value());
}

TEST_F(ShadowPrefillTest, NoShadowWhenTheFeedIsOffOrNothingRendersTargets) {
  auto off = Make(ShadowFeed::kOff);
  auto slot = Request(6);
  off->Start(*slot);
  EXPECT_FALSE(slot->shadow.has_value());
  on_progress_ = nullptr;
  auto without_renderer = Make(ShadowFeed::kWithDecode);
  without_renderer->Start(*slot);
  EXPECT_FALSE(slot->shadow.has_value());
}

// For room, the youngest request's shadow goes first.
TEST_F(ShadowPrefillTest, DropYoungestReleasesTheYoungestRequestsShadow) {
  auto shadows = Make(ShadowFeed::kWithDecode);
  std::vector<std::unique_ptr<Slot>> slots;
  slots.push_back(Request(7));
  slots.push_back(Request(8));
  slots[0]->t_admitted = std::chrono::steady_clock::now();
  slots[1]->t_admitted = slots[0]->t_admitted - std::chrono::seconds(1);
  for (auto& s : slots) shadows->Start(*s);
  ASSERT_TRUE(slots[0]->shadow && slots[1]->shadow);
  EXPECT_TRUE(shadows->DropYoungest(slots));
  EXPECT_FALSE(slots[0]->shadow.has_value());
  EXPECT_TRUE(slots[1]->shadow.has_value());
  EXPECT_TRUE(shadows->DropYoungest(slots));
  EXPECT_FALSE(shadows->DropYoungest(slots));
}

}  // namespace
}  // namespace hearth::server
