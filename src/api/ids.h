// Response and tool-call ids in the shapes clients expect: "chatcmpl-...", "cmpl-...",
// "call_..." for OpenAI; "msg_...", "toolu_..." for Anthropic.
//
// Ids are unique in practice (24 random base-62 characters, about 143 bits), not
// guaranteed; nothing in hearth may depend on their uniqueness for correctness.
//
// Thread safety: safe from any thread (each thread has its own generator).
#pragma once

#include <string>
#include <string_view>

namespace hearth::api {

// `prefix` followed by 24 random characters from [0-9A-Za-z].
std::string NewId(std::string_view prefix);

}  // namespace hearth::api
