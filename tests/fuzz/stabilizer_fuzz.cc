// --stabilize (src/chat/stabilizer.h) over arbitrary rules and messages: a pattern RE2
// refuses is an error, never a crash; Apply keeps the conversation's shape, only takes
// text out of the messages before the last, and (kMoveToEnd) only appends to the last.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "api/types.h"
#include "chat/stabilizer.h"
#include "check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hearth::fuzz::Check;
  namespace chat = hearth::chat;
  FuzzedDataProvider in(data, size);
  const auto mode = in.ConsumeBool() ? chat::StabilizeMode::kDrop : chat::StabilizeMode::kMoveToEnd;
  std::vector<std::string> specs;
  const uint8_t presets = in.ConsumeIntegral<uint8_t>();
  const char* names[] = {"uuid", "ulid", "timestamp", "claude-billing"};
  for (int i = 0; i < 4; ++i) {
    if (presets & (1 << i)) specs.push_back(names[i]);
  }
  if (presets & 0x10) specs.push_back("re:" + in.ConsumeRandomLengthString(64));
  auto parsed = chat::Stabilizer::Parse(specs, mode);
  if (!parsed.ok()) {
    Check(parsed.status().code() == hearth::StatusCode::kInvalidArgument, "a bad rule is an invalid argument");
    return 0;
  }

  std::vector<hearth::api::Message> messages;
  const size_t n = in.ConsumeIntegralInRange<size_t>(0, 6);
  for (size_t i = 0; i < n; ++i) {
    hearth::api::Message m;
    m.role = in.ConsumeBool() ? "user" : "assistant";
    m.content = i + 1 == n ? in.ConsumeRemainingBytesAsString() : in.ConsumeRandomLengthString(4096);
    messages.push_back(std::move(m));
  }
  const std::vector<hearth::api::Message> before = messages;
  const int moved = parsed->Apply(messages);

  Check(moved >= 0, "Apply counts what it moved");
  Check(messages.size() == before.size(), "Apply keeps every message");
  size_t removed = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    Check(messages[i].role == before[i].role, "Apply keeps roles");
    if (i + 1 < messages.size()) {
      Check(messages[i].content.size() <= before[i].content.size(), "Apply only takes text out of early messages");
      removed += before[i].content.size() - messages[i].content.size();
    }
  }
  Check((moved == 0) == (removed == 0), "Apply reports a move exactly when it moved text");
  if (!messages.empty()) {
    const std::string& tail = messages.back().content;
    const std::string& old_tail = before.back().content;
    if (mode == chat::StabilizeMode::kDrop || moved == 0) {
      Check(tail == old_tail, "the last message is left alone");
    } else {
      Check(tail.starts_with(old_tail) && tail.size() >= old_tail.size() + removed,
            "moved text goes to the end of the last message");
    }
  }
  return 0;
}
