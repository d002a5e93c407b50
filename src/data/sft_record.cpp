#include "data/sft_record.h"

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace ds::data {
namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& field, const std::string& what) {
  throw ConfigError(where + (field.empty() ? "" : ": field '" + field + "'"), what);
}

const std::string& string_field(const Json& obj, const std::string& key, const std::string& name,
                                const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) bad(where, name, "missing (each line needs it for this record shape)");
  if (!it->is_string()) bad(where, name, std::string("must be a string, not ") + it->type_name());
  return it->get_ref<const std::string&>();
}

}  // namespace

std::string_view sft_kind_name(SftRecord::Kind kind) {
  switch (kind) {
    case SftRecord::Kind::kText: return "text";
    case SftRecord::Kind::kPromptCompletion: return "prompt/completion";
    case SftRecord::Kind::kChat: return "messages";
  }
  return "?";
}

SftRecord parse_sft_record(std::string_view line, const std::string& where) {
  Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad(where, "", "not valid JSON (each line must be one JSON object)");
  if (!j.is_object()) bad(where, "", std::string("must be a JSON object, not ") + j.type_name());
  const bool text = j.contains("text"), chat = j.contains("messages");
  const bool pc = j.contains("prompt") || j.contains("completion");
  if (int(text) + int(chat) + int(pc) != 1)
    bad(where, "", "needs exactly one of \"text\", \"prompt\"+\"completion\" or \"messages\"");
  SftRecord r;
  if (text) {
    r.kind = SftRecord::Kind::kText;
    r.text = string_field(j, "text", "text", where);
  } else if (pc) {
    r.kind = SftRecord::Kind::kPromptCompletion;
    r.prompt = string_field(j, "prompt", "prompt", where);
    r.completion = string_field(j, "completion", "completion", where);
  } else {
    r.kind = SftRecord::Kind::kChat;
    const Json& m = j["messages"];
    if (!m.is_array()) bad(where, "messages", std::string("must be an array, not ") + m.type_name());
    if (m.empty()) bad(where, "messages", "is empty");
    bool has_assistant = false;
    for (size_t i = 0; i < m.size(); ++i) {
      const std::string name = "messages[" + std::to_string(i) + "]";
      if (!m[i].is_object()) bad(where, name, std::string("must be an object, not ") + m[i].type_name());
      ChatMessage msg{string_field(m[i], "role", name + ".role", where),
                      string_field(m[i], "content", name + ".content", where)};
      if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
        bad(where, name + ".role", "'" + msg.role + "' is not one of system, user, assistant");
      has_assistant |= msg.role == "assistant";
      r.messages.push_back(std::move(msg));
    }
    if (!has_assistant) bad(where, "messages", "has no assistant turn (nothing to train on)");
  }
  return r;
}

}  // namespace ds::data
