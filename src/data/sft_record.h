// One line of a fine-tuning JSON-lines file, in the three shapes DeepSpeed / Hugging Face users
// bring: {"text": ...} (every token trained), {"prompt": ..., "completion": ...} (loss on the
// completion only) and chat {"messages": [{"role": ..., "content": ...}, ...]} (loss on the
// assistant turns only). Parsing is separate from tokenizing so errors can name file:line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.h"

namespace ds::data {

struct SftRecord {
  enum class Kind { kText, kPromptCompletion, kChat };
  Kind kind = Kind::kText;
  std::string text;                   // kText
  std::string prompt, completion;     // kPromptCompletion
  std::vector<ChatMessage> messages;  // kChat
};

// Parses one JSON line. `where` ("train.jsonl:12") starts every error message; errors are
// ds::ConfigError naming the field ("messages[2].content") and what is wrong: not JSON, not an
// object, none or more than one of the three shapes, a missing field, a wrong type, an unknown role.
SftRecord parse_sft_record(std::string_view line, const std::string& where);

std::string_view sft_kind_name(SftRecord::Kind kind);

}  // namespace ds::data
