// tokenizer_config.json's chat_template, for the templates fine-tuning data uses most: Llama-3's and
// ChatML's (plain, and Qwen2's with its default system prompt). There is no Jinja engine here: a
// template is recognised by its text (whitespace outside string literals and the spelling of
// escapes do not matter) and rendered by a hand-written equivalent; any other template is refused
// with NotSupported naming it, so nothing is ever rendered differently from transformers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds::data {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatTemplateKind {
  kLlama3,                  // Meta-Llama-3-Instruct: header/eot tokens, content trimmed, bos first
  kLlama3AlwaysPrompt,      // its first release: the assistant header is always appended
  kChatML,                  // <|im_start|>role\ncontent<|im_end|>\n
  kChatMLQwen2,             // ChatML with "You are a helpful assistant." when no system message leads
};

class ChatTemplate {
 public:
  // Throws NotSupported naming the template (its start) when it is none of the known ones.
  static ChatTemplate recognise(std::string_view jinja);
  explicit ChatTemplate(ChatTemplateKind kind) : kind_(kind) {}

  ChatTemplateKind kind() const { return kind_; }
  std::string_view name() const;
  // The prompt text, as transformers' apply_chat_template(messages, tokenize=False) returns it.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     const std::string& bos_token = "") const;

 private:
  ChatTemplateKind kind_;
};

}  // namespace ds::data
