// Hostile request bodies, derived from one valid request per route: each field at each
// depth gets each JSON type its schema does not accept, each number an unrepresentable or
// out-of-range value, each string invalid UTF-8, each key a duplicate. A small schema per
// route says which fields are required, which accept more than one type and which are
// opaque (JSON schemas, tool inputs: any content is valid there).
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "testing/hostile_requests.h"
#include "testing/raw_http.h"

namespace hearth::testing {
namespace {

using Json = nlohmann::ordered_json;

enum Kind : unsigned { kNull = 1, kBool = 2, kInt = 4, kFloat = 8, kString = 16, kArray = 32, kObject = 64 };

unsigned KindOf(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_number_integer()) return kInt;
  if (v.is_number()) return kFloat;
  if (v.is_string()) return kString;
  if (v.is_array()) return kArray;
  return kObject;
}

struct Schema {
  std::set<std::string> required;        // JSON pointers whose null is an error
  std::map<std::string, unsigned> also;  // kinds accepted besides the valid value's own
  std::set<std::string> opaque;          // fields whose content is the client's business
};

struct Route {
  Surface surface;
  std::string path;
  Json body;
  Schema schema;
};

// Stands for a value that JSON values cannot hold (NaN, 1e309, invalid UTF-8): the
// mutated body is dumped, then the marker's text replaced.
const std::string kMarker = "@@hostile@@";

// Values of every kind, several of some, each tried where its kind is not accepted.
const std::vector<Json>& Palette() {
  static const std::vector<Json> p = {nullptr, true, false, 0, 7, 1.5, "", "s", Json::array(), {1}, Json::object(),
                                      Json{{"a", 1}}};
  return p;
}

// Numbers no numeric field accepts, as JSON text (some of it not valid JSON).
const std::vector<std::string> kBadNumbers = {
    "1e308",   "-1e308", "1e309", "-1e309", "NaN", "Infinity", "-Infinity", R"("NaN")", R"("Infinity")", R"("2")",
    "9223372036854775808", "18446744073709551616", "-9223372036854775809", "0x10", "1.", ".5", "+1", "01"};

// Strings that are not valid UTF-8 (raw bytes), and escapes that are not valid text.
const std::vector<std::string> kBadUtf8 = {
    "\xFF", "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\x80", "\xF8\x88\x80\x80\x80", "\\ud800",
    "\\udc00x", "\\u12", "\\x41", "\x01"};

// Every field of a route's valid body, depth first.
struct Field {
  std::string pointer;  // "/messages/0/role"
  std::string name;     // "messages[0].role"
  std::string key;      // its key in its object ("" for array elements and the root)
  const Json* value;
};

void Collect(const Json& v, const std::string& pointer, const std::string& name, const std::string& key,
             const Schema& schema, std::vector<Field>* out) {
  out->push_back({pointer, name.empty() ? "(body)" : name, key, &v});
  if (schema.opaque.count(pointer)) return;
  if (v.is_object()) {
    for (const auto& [k, child] : v.items()) {
      Collect(child, pointer + "/" + k, name.empty() ? k : name + "." + k, k, schema, out);
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      Collect(v[i], pointer + "/" + std::to_string(i), name + "[" + std::to_string(i) + "]", "", schema, out);
    }
  }
}

// The body with the field at `pointer` replaced by `value`, dumped.
std::string With(const Json& body, const std::string& pointer, const Json& value) {
  Json copy = body;
  if (pointer.empty()) {
    copy = value;
  } else {
    copy[Json::json_pointer(pointer)] = value;
  }
  return copy.dump();
}

// `text` with the quoted marker replaced by `raw`.
std::string Splice(std::string text, const std::string& quoted_marker, const std::string& raw) {
  const size_t at = text.find(quoted_marker);
  if (at != std::string::npos) text.replace(at, quoted_marker.size(), raw);
  return text;
}

class Generator {
 public:
  Generator(const Route& route, std::vector<HostileCase>* out) : route_(route), out_(out) {}

  void Add(const std::string& group, const std::string& what, const std::string& body) {
    out_->push_back({route_.surface, group, what, route_.path, MakeRequest("POST", route_.path, body)});
  }

  void WrongTypes(const Field& f) {
    unsigned accepted = KindOf(*f.value);
    auto also = route_.schema.also.find(f.pointer);
    if (also != route_.schema.also.end()) accepted |= also->second;
    // null means "absent" for an optional field; never for the body or an array element.
    if (!f.key.empty() && !route_.schema.required.count(f.pointer)) accepted |= kNull;
    for (const Json& v : Palette()) {
      if (KindOf(v) & accepted) continue;
      Add("wrong type", f.name + " = " + v.dump(), With(route_.body, f.pointer, v));
    }
  }

  void BadNumbers(const Field& f) {
    if (!f.value->is_number() || f.pointer.empty()) return;
    const std::string text = With(route_.body, f.pointer, kMarker);
    for (const std::string& n : kBadNumbers) Add("bad number", f.name + " = " + n, Splice(text, "\"" + kMarker + "\"", n));
  }

  void BadUtf8(const Field& f) {
    if (!f.value->is_string()) return;
    const std::string text = With(route_.body, f.pointer, kMarker);
    for (const std::string& bad : kBadUtf8) {
      Add("invalid UTF-8", f.name + " holds bytes " + Json(bad).dump(-1, ' ', true, Json::error_handler_t::replace),
          Splice(text, kMarker, f.value->get<std::string>() + bad));
    }
  }

  // The field's key twice in its object, with the same value, then with a wrong one.
  void DuplicateKey(const Field& f) {
    if (f.key.empty()) return;
    const std::string quoted_key = Json(f.key).dump();
    const std::string value = f.value->dump();
    const std::string text = With(route_.body, f.pointer, kMarker);
    const std::string pair = quoted_key + ":\"" + kMarker + "\"";
    Add("duplicate key", f.name + " twice", Splice(text, pair, quoted_key + ":" + value + "," + quoted_key + ":" + value));
    Add("duplicate key", f.name + " twice, second null",
        Splice(text, pair, quoted_key + ":" + value + "," + quoted_key + ":null"));
  }

  // A key that is not valid UTF-8 in every object.
  void BadKey(const Field& f) {
    if (!f.value->is_object() || route_.schema.opaque.count(f.pointer)) return;
    Json copy = route_.body;
    Json& obj = f.pointer.empty() ? copy : copy[Json::json_pointer(f.pointer)];
    obj[kMarker] = 1;
    Add("invalid UTF-8", f.name + " has a key with byte 0xFF", Splice(copy.dump(), kMarker, "k\xFF"));
  }

  // 10,000 levels of nesting in place of the field (and just past hearth's limit).
  void DeepNesting(const Field& f) {
    if (!(f.value->is_object() || f.value->is_array()) || f.pointer.empty()) return;
    const std::string text = With(route_.body, f.pointer, kMarker);
    const std::string q = "\"" + kMarker + "\"";
    for (int depth : {129, 10000}) {
      std::string arrays = std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']');
      std::string objects;
      for (int i = 0; i < depth; ++i) objects += "{\"a\":";
      objects += "1" + std::string(static_cast<size_t>(depth), '}');
      Add("deep nesting", f.name + " nested " + std::to_string(depth) + " arrays deep", Splice(text, q, arrays));
      Add("deep nesting", f.name + " nested " + std::to_string(depth) + " objects deep", Splice(text, q, objects));
    }
  }

  void All() {
    std::vector<Field> fields;
    Collect(route_.body, "", "", "", route_.schema, &fields);
    for (const Field& f : fields) {
      WrongTypes(f);
      BadNumbers(f);
      BadUtf8(f);
      DuplicateKey(f);
      BadKey(f);
      DeepNesting(f);
    }
  }

 private:
  const Route& route_;
  std::vector<HostileCase>* out_;
};

// The JSON schema of the tool both APIs' valid requests declare.
Json ToolSchema() { return {{"type", "object"}, {"properties", {{"q", {{"type", "integer"}}}}}}; }

// A valid /v1/chat/completions body with every field hearth reads; ChatSchema says which
// are required, which take other types too and which are opaque.
Json ChatBody() {
  return {
      {"model", "m"},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}},
        {{"role", "assistant"},
         {"content", "ok"},
         {"reasoning_content", "hm"},
         {"tool_calls",
          {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "get"}, {"arguments", "{\"q\":1}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"name", "get"}, {"content", "1"}},
        {{"role", "user"}, {"content", "again"}}}},
      {"max_tokens", 2},
      {"temperature", 0.5},
      {"top_p", 0.9},
      {"top_k", 5},
      {"min_p", 0.1},
      {"presence_penalty", 0.5},
      {"frequency_penalty", 0.5},
      {"repetition_penalty", 1.1},
      {"seed", 1},
      {"stop", {"zz"}},
      {"stream", false},
      {"stream_options", {{"include_usage", true}}},
      {"n", 1},
      {"cache_salt", "s"},
      {"user", "u"},
      {"tools", {{{"type", "function"}, {"function", {{"name", "get"}, {"description", "d"}, {"parameters", ToolSchema()}}}}}},
      {"tool_choice", "auto"},
      {"parallel_tool_calls", true},
      {"reasoning_effort", "none"},
      {"chat_template_kwargs", {{"enable_thinking", false}}},
      {"response_format", {{"type", "text"}}},
      {"logprobs", false}};
}

Schema ChatSchema() {
  Schema schema;
  schema.required = {"/messages", "/messages/0/role", "/messages/0/content", "/messages/1/role",
                     "/messages/1/content", "/messages/1/content/0/type", "/messages/1/content/0/text",
                     "/messages/2/role", "/messages/2/tool_calls/0/function",
                     "/messages/2/tool_calls/0/function/name", "/messages/3/role", "/messages/3/content",
                     "/messages/4/role", "/messages/4/content", "/tools/0/function", "/tools/0/function/name"};
  schema.also = {{"/messages/0/content", kArray}, {"/messages/1/content", kString},
                 {"/messages/2/content", kArray}, {"/messages/3/content", kArray},
                 {"/messages/4/content", kArray}, {"/messages/2/tool_calls/0/function/arguments", kObject},
                 {"/stop", kString},          {"/tool_choice", kObject},
                 {"/temperature", kInt},      {"/top_p", kInt},
                 {"/min_p", kInt},            {"/presence_penalty", kInt},
                 {"/frequency_penalty", kInt}, {"/repetition_penalty", kInt},
                 {"/logprobs", kInt | kFloat}};
  schema.opaque = {"/tools/0/function/parameters"};
  return schema;
}

// A valid /v1/completions body with every field hearth reads, and its schema.
Route CompletionRoute() {
  Json completion = {{"model", "m"},        {"prompt", "Once"},   {"max_tokens", 2},     {"temperature", 0.5},
                     {"top_p", 0.9},        {"top_k", 5},         {"min_p", 0.1},        {"presence_penalty", 0.5},
                     {"frequency_penalty", 0.5}, {"repeat_penalty", 1.1}, {"seed", 1},   {"stop", "zz"},
                     {"stream", false},     {"stream_options", {{"include_usage", false}}}, {"n", 1},
                     {"echo", false},       {"suffix", ""},       {"best_of", 1},        {"logprobs", 0},
                     {"cache_salt", "s"},   {"user", "u"},        {"response_format", {{"type", "text"}}}};
  Schema schema;
  schema.required = {"/prompt"};
  schema.also = {{"/prompt", kArray},  {"/stop", kArray},          {"/temperature", kInt},
                 {"/top_p", kInt},     {"/min_p", kInt},           {"/presence_penalty", kInt},
                 {"/frequency_penalty", kInt}, {"/repeat_penalty", kInt}, {"/logprobs", kBool}};
  return {Surface::kCompletions, "/v1/completions", completion, schema};
}

// A valid /v1/messages body with every field hearth reads, and (MessagesSchema) its schema.
Json MessagesBody() {
  return {
      {"model", "m"},
      {"max_tokens", 2},
      {"system", {{{"type", "text"}, {"text", "Be brief."}}}},
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"},
         {"content",
          {{{"type", "thinking"}, {"thinking", "hm"}},
           {{"type", "text"}, {"text", "ok"}},
           {{"type", "tool_use"}, {"id", "t1"}, {"name", "get"}, {"input", {{"q", 1}}}}}}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "1"}, {"is_error", false}},
           {{"type", "text"}, {"text", "again"}}}}}}},
      {"stop_sequences", {"zz"}},
      {"stream", false},
      {"temperature", 0.5},
      {"top_p", 0.9},
      {"top_k", 5},
      {"tools", {{{"name", "get"}, {"description", "d"}, {"input_schema", ToolSchema()}}}},
      {"tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", false}}},
      {"thinking", {{"type", "disabled"}}}};
}

Schema MessagesSchema() {
  Schema schema;
  schema.required = {"/max_tokens", "/messages", "/messages/0/role", "/messages/0/content",
                     "/messages/1/role", "/messages/1/content", "/messages/1/content/0/type",
                     "/messages/1/content/0/thinking", "/messages/1/content/1/type",
                     "/messages/1/content/1/text", "/messages/1/content/2/type",
                     "/messages/1/content/2/id", "/messages/1/content/2/name", "/messages/2/role",
                     "/messages/2/content", "/messages/2/content/0/type",
                     "/messages/2/content/0/tool_use_id", "/messages/2/content/1/type",
                     "/messages/2/content/1/text", "/system/0/type", "/system/0/text",
                     "/tools/0/name", "/tool_choice/type", "/thinking/type"};
  schema.also = {{"/system", kString},           {"/messages/0/content", kArray},
                 {"/messages/1/content", kString}, {"/messages/2/content", kString},
                 {"/messages/2/content/0/content", kArray}, {"/stop_sequences", kString},
                 {"/temperature", kInt},          {"/top_p", kInt}};
  schema.opaque = {"/tools/0/input_schema", "/messages/1/content/2/input"};
  return schema;
}

// The valid requests the mutations start from, with their schemas.
std::vector<Route> Routes() {
  std::vector<Route> routes;
  const Json chat = ChatBody();
  routes.push_back({Surface::kChat, "/v1/chat/completions", chat, ChatSchema()});
  Json apply = chat;
  apply["add_generation_prompt"] = true;
  routes.push_back({Surface::kUtility, "/apply-template", apply, ChatSchema()});
  routes.push_back(CompletionRoute());
  const Json messages = MessagesBody();
  routes.push_back({Surface::kMessages, "/v1/messages", messages, MessagesSchema()});
  Schema count_schema = MessagesSchema();
  count_schema.required.erase("/max_tokens");
  routes.push_back({Surface::kCountTokens, "/v1/messages/count_tokens", messages, count_schema});
  Schema tokenize_schema;
  tokenize_schema.required = {"/content"};
  routes.push_back({Surface::kUtility, "/tokenize",
                    {{"content", "hi"}, {"add_special", false}, {"parse_special", true}}, tokenize_schema});
  Schema detokenize_schema;
  detokenize_schema.required = {"/tokens"};
  routes.push_back({Surface::kUtility, "/detokenize", {{"tokens", {1, 2, 3}}}, detokenize_schema});
  return routes;
}

// Bodies that are no JSON object at all, and conversations with nothing valid in them.
void AppendShapeless(Generator& g, Surface surface) {
  for (const std::string& body : std::vector<std::string>{std::string(""), std::string(" "), std::string("null"), std::string("0"), std::string("\"s\""),
        std::string("[]"), std::string("[{}]"), std::string("{"), std::string("}"), std::string("{\"messages\":"),
        std::string("garbage"), std::string("{'a': 1}"), std::string("{\"a\": 1,}"), std::string("{}{}"),
        std::string("{} x"), std::string("/* c */ {}"), std::string("{\"a\" 1}"), std::string("messages=hi&max_tokens=2"),
        std::string("\x00\x01\x02", 3), std::string("\xFF\xFE{\x00}\x00", 6)}) {
    g.Add("not a JSON object", "body " + Json(body).dump(-1, ' ', true, Json::error_handler_t::replace), body);
  }
  if (surface == Surface::kChat || surface == Surface::kMessages || surface == Surface::kCountTokens) {
    const bool anthropic = surface != Surface::kChat;
    const std::string tail = anthropic ? R"(, "max_tokens": 2})" : "}";
    for (const std::string& messages : std::vector<std::string>{"[]", "[{}]", "[[]]", R"([{"role": "user"}])", R"([{"content": "hi"}])",
                                       R"([{"role": "user", "content": "hi"}, {}])", R"([null])"}) {
      g.Add("empty messages", "messages " + messages, R"({"messages": )" + messages + tail);
    }
    g.Add("empty messages", "no messages", anthropic ? R"({"max_tokens": 2})" : R"({"model": "m"})");
    std::vector<std::string> roles = {"wizard", "", "USER", "User", "function", "user ", " user", "bot", "human",
                                      "model", "0", "user\\u0000", "assistant\\n", "ToOl"};
    if (anthropic) roles.insert(roles.end(), {"tool", "developer"});
    for (const std::string& role : roles) {
      for (int at = 0; at < 2; ++at) {
        std::string m = R"({"role": ")" + role + R"(", "content": "hi"})";
        std::string list = at == 0 ? "[" + m + "]" : R"([{"role": "user", "content": "hi"}, )" + m + "]";
        g.Add("unknown role", "role \"" + role + "\" at " + std::to_string(at), R"({"messages": )" + list + tail);
      }
    }
  }
}

// Tools declared wrongly and tool calls that cannot be what they claim.
void AppendTools(Generator& g, Surface surface) {
  const std::string user = R"([{"role": "user", "content": "hi"}])";
  if (surface == Surface::kChat) {
    const std::string fn = R"({"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}})";
    for (const std::string& tools : std::vector<std::string>{R"([{"type": "function"}])", R"([{"type": "function", "function": {}}])",
          R"([{"type": "function", "function": {"name": ""}}])", R"([{"type": "retrieval", "function": {"name": "a"}}])",
          R"([{"function": {"name": "a", "parameters": "{\"type\": \"object\"}"}}])",
          R"([{"function": {"name": "a", "parameters": [1]}}])", "[" + fn + ", " + fn + "]"}) {
      g.Add("broken tools", "tools " + tools, R"({"messages": )" + user + R"(, "tools": )" + tools + "}");
    }
    for (const std::string& choice : std::vector<std::string>{R"("always")", R"({"type": "function", "function": {"name": "nope"}})",
                                     R"({"type": "function"})", R"({"type": "tool", "function": {"name": "get"}})",
                                     R"("required")"}) {
      const std::string tools = choice == R"("required")" ? "[]" : "[" + fn + "]";
      g.Add("broken tools", "tool_choice " + choice,
            R"({"messages": )" + user + R"(, "tools": )" + tools + R"(, "tool_choice": )" + choice + "}");
    }
    for (const std::string& call : std::vector<std::string>{R"({"id": "c", "type": "function", "function": {"name": "get", "arguments": 7}})",
          R"({"id": "c", "type": "function", "function": {"name": "get", "arguments": [1, 2]}})",
          R"({"id": "c", "type": "function", "function": {"name": "get", "arguments": true}})",
          R"({"id": "c", "type": "function", "function": {"arguments": "{}"}})",
          R"({"id": "c", "type": "function"})", R"({"id": "c", "type": "code", "function": {"name": "get"}})",
          R"x("get({})")x"}) {
      g.Add("broken tool call", "tool call " + call,
            R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [)" + call +
                R"(]}, {"role": "tool", "tool_call_id": "c", "content": "1"}]})");
    }
    return;
  }
  if (surface != Surface::kMessages && surface != Surface::kCountTokens) return;
  const std::string tool = R"({"name": "get", "input_schema": {"type": "object"}})";
  for (const std::string& tools : std::vector<std::string>{R"([{"input_schema": {}}])", R"([{"name": "get", "input_schema": "object"}])",
                                  R"([{"name": 5}])", "[" + tool + ", " + tool + "]"}) {
    g.Add("broken tools", "tools " + tools, R"({"max_tokens": 2, "messages": )" + user + R"(, "tools": )" + tools + "}");
  }
  for (const std::string& choice : std::vector<std::string>{R"({"type": "tool", "name": "nope"})", R"({"type": "any"})", R"({"type": "always"})",
                                   R"({"type": "tool"})", R"("auto")"}) {
    const std::string tools = choice == R"({"type": "any"})" ? "[]" : "[" + tool + "]";
    g.Add("broken tools", "tool_choice " + choice,
          R"({"max_tokens": 2, "messages": )" + user + R"(, "tools": )" + tools + R"(, "tool_choice": )" + choice + "}");
  }
  for (const std::string& use : std::vector<std::string>{R"({"type": "tool_use", "id": "t", "name": "get", "input": "{}"})",
                                R"({"type": "tool_use", "id": "t", "name": "get", "input": [1]})",
                                R"({"type": "tool_use", "name": "get", "input": {}})",
                                R"({"type": "tool_use", "id": "t", "input": {}})",
                                R"({"type": "tool_result", "tool_use_id": "t", "content": "x"})"}) {
    g.Add("broken tool call", "assistant block " + use,
          R"({"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [)" +
              use + R"(]}]})");
  }
  for (const std::string& result : std::vector<std::string>{R"({"type": "tool_result", "content": "x"})",
                                   R"({"type": "tool_result", "tool_use_id": 5})",
                                   R"({"type": "tool_result", "tool_use_id": "t", "content": 5})",
                                   R"({"type": "tool_result", "tool_use_id": "t", "content": [{"type": "tool_use"}]})",
                                   R"({"type": "tool_result", "tool_use_id": "t", "is_error": "no"})"}) {
    g.Add("broken tool call", "user block " + result,
          R"({"max_tokens": 2, "messages": [{"role": "user", "content": [)" + result + R"(]}]})");
  }
}

}  // namespace

void AppendBodyCases(std::vector<HostileCase>* out) {
  for (const Route& route : Routes()) {
    Generator g(route, out);
    g.All();
    AppendShapeless(g, route.surface);
    AppendTools(g, route.surface);
  }
}

}  // namespace hearth::testing
