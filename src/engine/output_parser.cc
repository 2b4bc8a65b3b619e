// OutputParser (declared in chat_template.h).
//
// llama.cpp's chat parser (a PEG parser) has no incremental mode: every call parses the
// whole reply. Parsing at every token made a reply of n tokens cost O(n^2) on the engine
// thread, which every other stream in the batch waits on (docs/architecture.md has the
// numbers). So a full parse runs only when the new text could change more than the end of
// the reply:
//
//   1. After a full parse of text T, a second parse of T + probe (a letter between
//      whitespace) shows whether T ends inside an open run of content or reasoning: the
//      probe shows up appended to that field and nothing else changes, and the field's
//      last bytes are T's last bytes (the run is under way, not about to start after
//      optional markup).
//   2. While a run is open, a piece that is valid UTF-8 and in which none of the run's
//      delimiters starts (not even one cut off by the piece's end) extends that run and
//      nothing else: the Until parser under the run's tag reads on through it. It is
//      appended to the field and streamed without parsing.
//   3. Any other piece, and the end of the reply, gets a full parse, and the diff against
//      what was sent gives the deltas.
//
// Plain prose costs no parse at all; each piece that may start a delimiter ("<" against
// "<tool_call>") costs a parse or two. The deltas are the same as parsing at every push
// (ParseMode::kParseEveryPush); output_parser_test.cc checks that for every template
// llama.cpp ships.
#include <algorithm>
#include <array>
#include <exception>
#include <functional>
#include <stdexcept>
#include <variant>

#include "base/utf8.h"
#include "chat-peg-parser.h"
#include "chat.h"
#include "engine/chat_template.h"
#include "peg-parser.h"

namespace hearth::engine {

enum class OpenRun { kNone, kContent, kReasoning };

struct OutputParser::Impl {
  common_chat_parser_params params;
  ParseMode mode = ParseMode::kIncremental;
  common_chat_msg last;
  std::string text;
  std::vector<std::string> tool_call_ids;
  int next_id = 0;
  std::vector<std::string> delimiters;  // where a run of content or reasoning can end
  std::array<bool, 256> marker_byte{};  // first bytes of the delimiters
  std::string probe;                    // text without marker bytes; empty when there is none
  OpenRun open = OpenRun::kNone;        // where text without marker bytes goes

  // Push's two shortcuts, updating `output`: text that only extends the open run, and
  // the rest of the reply as plain content once it is not in the format.
  std::vector<ParsedDelta> AppendToOpenRun(const std::string& piece, ParsedOutput& output);
  std::vector<ParsedDelta> FallBack(ParsedOutput& output);
};

namespace {

ParsedOutput FromCommon(const common_chat_msg& m) {
  ParsedOutput out;
  out.content = m.content;
  out.reasoning = m.reasoning_content;
  for (const auto& c : m.tool_calls) out.tool_calls.push_back({c.id, c.name, c.arguments});
  return out;
}

// The delimiters at which a run of content or reasoning can end: those of the Until (or
// Aho-Corasick) parsers under the format's content and reasoning tags. When a tag holds
// anything else (a literal, a character class), every delimiter in the format counts, to
// stay on the safe side. Literals elsewhere, such as JSON's "true" in a tool call, only
// matter once a run has ended.
std::vector<std::string> CollectRunDelimiters(const common_peg_arena& arena) {
  std::vector<std::string> runs, all;
  auto add = [](std::vector<std::string>& to, const std::string& d) {
    if (!d.empty() && std::find(to.begin(), to.end(), d) == to.end()) to.push_back(d);
  };
  bool only_untils = true;
  std::vector<bool> seen(arena.size());
  std::function<void(common_peg_parser_id)> walk = [&](common_peg_parser_id id) {
    if (id >= arena.size() || seen[id]) return;
    seen[id] = true;
    const auto& p = arena.get(id);
    if (const auto* u = std::get_if<common_peg_until_parser>(&p)) {
      for (const auto& d : u->delimiters) add(runs, d);
    } else if (const auto* ac = std::get_if<common_peg_ac_parser>(&p)) {
      for (const auto& d : ac->delimiters) add(runs, d);
      walk(ac->child);
    } else if (const auto* rule = std::get_if<common_peg_rule_parser>(&p)) {
      walk(rule->child);
    } else if (const auto* ref = std::get_if<common_peg_ref_parser>(&p)) {
      if (arena.has_rule(ref->name)) walk(arena.get_rule(ref->name));
    } else if (const auto* atomic = std::get_if<common_peg_atomic_parser>(&p)) {
      walk(atomic->child);
    } else if (const auto* tag = std::get_if<common_peg_tag_parser>(&p)) {
      walk(tag->child);
    } else {
      only_untils = false;
    }
  };
  for (size_t id = 0; id < arena.size(); ++id) {
    const auto& p = arena.get(id);
    if (const auto* until = std::get_if<common_peg_until_parser>(&p)) {
      for (const auto& d : until->delimiters) add(all, d);
    }
    if (const auto* ac = std::get_if<common_peg_ac_parser>(&p)) {
      for (const auto& d : ac->delimiters) add(all, d);
    }
    const auto* tag = std::get_if<common_peg_tag_parser>(&p);
    if (tag && (tag->tag == common_chat_peg_builder::CONTENT || tag->tag == common_chat_peg_builder::REASONING)) {
      walk(tag->child);
    }
  }
  return only_untils ? runs : all;
}

// True when the end of `text` is the end of `field`'s last kCheck bytes: the field's run
// reaches the end of the text, not just the field's earlier part.
bool EndsWithFieldEnd(const std::string& text, const std::string& field) {
  constexpr size_t kCheck = 16;
  if (field.empty()) return false;
  const size_t n = std::min(kCheck, field.size());
  return text.ends_with(std::string_view(field).substr(field.size() - n));
}

bool SameToolCalls(const common_chat_msg& a, const common_chat_msg& b) {
  if (a.tool_calls.size() != b.tool_calls.size()) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    if (a.tool_calls[i].name != b.tool_calls[i].name ||
        a.tool_calls[i].arguments != b.tool_calls[i].arguments) {
      return false;
    }
  }
  return true;
}

// llama.cpp's parse is lenient, and its grammars end with optional parts: a reply whose
// tail does not fit the format (a call to an unknown tool, arguments that are not JSON,
// text after the calls) parses as what came before that tail, and the tail is lost. So
// the end of a reply is parsed once more to see where the parse stopped: short of the
// text (but for trailing whitespace), the reply is not in the format.
bool ParsesToItsEnd(const common_chat_parser_params& params, const std::string& text) {
  if (params.parser.empty()) return true;
  const std::string input = params.generation_prompt + text;
  common_peg_parse_context ctx(input, COMMON_PEG_PARSE_FLAG_LENIENT);
  const auto result = params.parser.parse(ctx);
  if (result.fail()) return false;
  const size_t end = input.find_last_not_of(" \t\r\n");
  return end == std::string::npos || result.end > end;
}

// Where what was streamed ends in the reply's text: after its reasoning, then its content,
// found in that order; 0 where they are not found as they are (the rest of the reply is
// then sent again in full: repeated text rather than lost text).
size_t StreamedEnd(const std::string& text, const ParsedOutput& sent) {
  size_t at = 0;
  for (const std::string* field : {&sent.reasoning, &sent.content}) {
    if (field->empty()) continue;
    const size_t found = text.find(*field, at);
    if (found == std::string::npos) return 0;
    at = found + field->size();
  }
  return at;
}

// Tool call ids stable across partial parses: each call keeps the id it was first given
// (the model's own, else call_N).
void KeepToolCallIds(common_chat_msg& msg, std::vector<std::string>& ids, int& next_id) {
  for (size_t i = 0; i < msg.tool_calls.size(); ++i) {
    if (ids.size() <= i) {
      std::string id = msg.tool_calls[i].id;
      if (id.empty()) id = "call_" + std::to_string(next_id++);
      ids.push_back(id);
    }
    msg.tool_calls[i].id = ids[i];
  }
}

std::vector<ParsedDelta> ToDeltas(std::vector<common_chat_msg_diff> diffs) {
  std::vector<ParsedDelta> deltas;
  for (auto& d : diffs) {
    ParsedDelta pd;
    pd.content = std::move(d.content_delta);
    pd.reasoning = std::move(d.reasoning_content_delta);
    if (d.tool_call_index != std::string::npos) {
      pd.tool_call_index = static_cast<int>(d.tool_call_index);
      pd.tool_call_id = d.tool_call_delta.id;
      pd.tool_call_name = d.tool_call_delta.name;
      pd.tool_call_arguments = d.tool_call_delta.arguments;
    }
    deltas.push_back(std::move(pd));
  }
  return deltas;
}

}  // namespace

OutputParser::OutputParser(const OutputFormat& format, ParseMode mode) : impl_(std::make_unique<Impl>()) {
  impl_->mode = mode;
  impl_->params.format = static_cast<common_chat_format>(format.format);
  impl_->params.reasoning_format = static_cast<common_reasoning_format>(format.reasoning_format);
  impl_->params.generation_prompt = format.generation_prompt;
  impl_->params.parse_tool_calls = true;
  if (!format.parser.empty()) {
    try {
      impl_->params.parser.load(format.parser);
    } catch (const std::exception&) {
      fell_back_ = true;
    }
  }
  impl_->delimiters = CollectRunDelimiters(impl_->params.parser);
  for (const auto& d : impl_->delimiters) impl_->marker_byte[static_cast<unsigned char>(d[0])] = true;
  // The probe: a letter between the whitespace a format may skip or trim around text.
  auto usable = [&](char c) { return !impl_->marker_byte[static_cast<unsigned char>(c)]; };
  for (char c : std::string_view("xqz")) {
    if (usable(c)) {
      impl_->probe = std::string(usable(' ') ? " " : "") + c + (usable('\n') ? "\n" : "");
      break;
    }
  }
}

OutputParser::~OutputParser() = default;

// New text extends the open run when no delimiter starts inside it, not even one cut off
// by its end (the parser would hold that back).
bool OutputParser::ExtendsOpenRun(const std::string& text) const {
  if (impl_->open == OpenRun::kNone || text.empty() || !IsValidUtf8(text)) return false;
  for (size_t at = 0; at < text.size(); ++at) {
    if (!impl_->marker_byte[static_cast<unsigned char>(text[at])]) continue;
    for (const auto& d : impl_->delimiters) {
      const size_t n = std::min(d.size(), text.size() - at);
      if (text.compare(at, n, d, 0, n) == 0) return false;
    }
  }
  return true;
}

// Probes whether the text parsed last ends inside an open run (see the top of the file).
void OutputParser::FindOpenRun() {
  impl_->open = OpenRun::kNone;
  if (impl_->mode != ParseMode::kIncremental || impl_->probe.empty()) return;
  // Text ending in what may become a delimiter is held back: no run is open; no probe.
  // No probe after a tool call: the reply is not plain text any more.
  if (!impl_->last.tool_calls.empty()) return;
  const std::string& text = impl_->text;
  for (const auto& d : impl_->delimiters) {
    for (size_t n = std::min(d.size() - 1, text.size()); n > 0; --n) {
      if (text.compare(text.size() - n, n, d, 0, n) == 0) return;
    }
  }
  common_chat_msg probed;
  try {
    ++n_parses_;
    probed = common_chat_parse(impl_->text + impl_->probe, /*is_partial=*/true, impl_->params);
  } catch (const std::exception&) {
    return;
  }
  const common_chat_msg& m = impl_->last;
  if (!SameToolCalls(m, probed)) return;
  const std::string& probe = impl_->probe;
  if (probed.reasoning_content == m.reasoning_content && probed.content == m.content + probe &&
      EndsWithFieldEnd(impl_->text, m.content)) {
    impl_->open = OpenRun::kContent;
  } else if (probed.content == m.content && probed.reasoning_content == m.reasoning_content + probe &&
             EndsWithFieldEnd(impl_->text, m.reasoning_content)) {
    impl_->open = OpenRun::kReasoning;
  }
}

std::vector<ParsedDelta> OutputParser::Impl::AppendToOpenRun(const std::string& piece, ParsedOutput& output) {
  if (open == OpenRun::kContent) {
    last.content += piece;
    output.content += piece;
    return {ParsedDelta{.content = piece}};
  }
  last.reasoning_content += piece;
  output.reasoning += piece;
  return {ParsedDelta{.reasoning = piece}};
}

// Not in the expected format: from here on everything is plain content. What was already
// streamed as content stays; reasoning or tool calls sent so far stay sent.
std::vector<ParsedDelta> OutputParser::Impl::FallBack(ParsedOutput& output) {
  std::string unsent = text.substr(StreamedEnd(text, output));
  output.content += unsent;
  if (unsent.empty()) return {};
  return {ParsedDelta{.content = std::move(unsent)}};
}

std::vector<ParsedDelta> OutputParser::Push(const std::string& text, bool is_final) {
  impl_->text += text;
  if (fell_back_) {
    output_.content += text;
    if (text.empty()) return {};
    return {ParsedDelta{.content = text}};
  }
  if (!is_final && ExtendsOpenRun(text)) return impl_->AppendToOpenRun(text, output_);
  impl_->open = OpenRun::kNone;
  common_chat_msg next;
  std::vector<common_chat_msg_diff> diffs;
  try {
    ++n_parses_;
    next = common_chat_parse(impl_->text, /*is_partial=*/!is_final, impl_->params);
    if (next.empty() && !is_final) return {};
    if (is_final && !ParsesToItsEnd(impl_->params, impl_->text)) throw std::runtime_error("not in the format");
    KeepToolCallIds(next, impl_->tool_call_ids, impl_->next_id);
    // Throws too, when the new parse does not extend the last one.
    diffs = common_chat_msg_diff::compute_diffs(impl_->last, next);
  } catch (const std::exception&) {
    fell_back_ = true;
    return impl_->FallBack(output_);
  }
  std::vector<ParsedDelta> deltas = ToDeltas(std::move(diffs));
  impl_->last = std::move(next);
  output_ = FromCommon(impl_->last);
  if (!is_final) FindOpenRun();
  return deltas;
}

}  // namespace hearth::engine
