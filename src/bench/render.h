// Counting the tokens that are new in a request, through a server's own chat template
// and tokenizer (POST /apply-template and POST /tokenize), so "new" is computed, not
// guessed, and is the same number whichever server is being measured.
//
// Definition. For turn t of a session, with messages_t the request's messages and k the
// number of them carried over (the previous request's messages plus the previous reply as
// the client sent it back):
//
//   new_t = n_tokens(render(messages_t, add_generation_prompt=true))
//         - n_tokens(the part of that rendering that holds messages_t[0:k])
//
// and new_0 = the whole prompt. It counts the added messages (a user message, tool
// results) with their template glue and the generation prompt. A reply the server did
// not generate (the agent workload's scripted tool calls, a replayed log's recorded
// replies) is not carried over: k then stops before it, and it counts as new. The part
// holding messages_t[0:k] is render(messages_t[0:k], add_generation_prompt=false) when
// that is a prefix of the request's rendering. When a template renders a carried message
// differently once more messages follow (Qwen3.5 drops the think block of assistant
// turns before the last user message, and re-renders a finished tool loop), it ends
// where the last bytes of that standalone rendering appear in the request (CarriedEnd):
// the difference is *not* new, a server that re-prefills it is doing work the ideal
// server avoids, and the added messages are counted whole.
//
// Thread safety: a Renderer belongs to one thread (it caches).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/workload.h"

namespace hearth::bench {

class ServerClient;

// Where renders and token counts come from: a server, or a fake in tests.
class RenderBackend {
 public:
  virtual ~RenderBackend() = default;
  // Returns the rendered prompt text for an /apply-template body.
  virtual StatusOr<std::string> ApplyTemplate(const Json& body) = 0;
  // Returns the number of tokens of `text` (special tokens parsed, no BOS added).
  virtual StatusOr<int> CountTokens(const std::string& text) = 0;
};

// The backend over HTTP. `client` must outlive it.
class HttpRenderBackend : public RenderBackend {
 public:
  explicit HttpRenderBackend(const ServerClient* client) : client_(client) {}
  StatusOr<std::string> ApplyTemplate(const Json& body) override;
  StatusOr<int> CountTokens(const std::string& text) override;

 private:
  const ServerClient* client_;
};

struct TurnTokens {
  int n_prompt = 0;   // the whole request, rendered with the generation prompt
  int n_carried = 0;  // messages_t[0:k] as the request renders them (see above)
  int n_new = 0;      // n_prompt - n_carried (never negative)
  std::string prompt_text;  // the rendered request, for diffs
};

// The arithmetic of the definition above. n_carried is 0 on a first turn.
int NewTokens(int n_prompt, int n_carried);

// Where `carried` (messages rendered on their own, without a generation prompt) ends
// inside `prompt` (the same messages and more): its size when it is a prefix; else just
// after the longest of its last 12-64 bytes, taken from past where the two first differ,
// that `prompt` holds ending past that point. nullopt when none is found.
std::optional<size_t> CarriedEnd(const std::string& prompt, const std::string& carried);

class NewTokenCounter {
 public:
  // `backend` must outlive the counter.
  explicit NewTokenCounter(RenderBackend* backend) : backend_(backend) {}

  // Checks the renderer once: whether it honours add_generation_prompt=false. When it
  // does not (hearth's /apply-template before it read that field), carried counts
  // include the generation prompt, so `new` comes out a few tokens low; the caller is
  // told, and the results say so.
  // Also whether it continues a final assistant message instead of closing it
  // (llama-server's /apply-template: the closing tokens then count as new, and a final
  // assistant message with tool calls cannot be rendered at all).
  Status Probe();
  bool honours_add_generation_prompt() const { return honours_agp_; }
  bool continues_final_assistant() const { return continues_final_; }

  // Counts turn t. REQUIRES: 0 <= n_carried < messages.size().
  StatusOr<TurnTokens> Count(const std::vector<Json>& messages, const Json& tools, std::optional<bool> thinking,
                             int n_carried);

 private:
  StatusOr<int> Tokens(const std::string& text);

  RenderBackend* backend_;
  bool honours_agp_ = true;
  bool continues_final_ = false;
  std::map<std::string, int> token_cache_;
};

// Where two rendered prompts first differ, for "what broke reuse" reports.
struct PromptDiff {
  size_t offset = 0;          // first differing byte
  bool prev_is_prefix = false;  // the earlier prompt is a prefix of the later one
  std::string context;        // up to 60 bytes before the difference
  std::string prev_text;      // up to 60 bytes of the earlier prompt from there
  std::string next_text;      // up to 60 bytes of the later prompt from there
};
PromptDiff DiffPrompts(const std::string& prev, const std::string& next);
// `text` with newlines and control characters escaped, for one-line reports.
std::string EscapeForLine(const std::string& text);

}  // namespace hearth::bench
