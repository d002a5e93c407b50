#include "data/chat_template.h"

#include "data/unicode.h"
#include "util/error.h"

namespace ds::data {
namespace {

struct Known {
  ChatTemplateKind kind;
  const char* name;
  const char* jinja;
};

// The templates as their models' tokenizer_config.json files spell them.
constexpr Known kKnown[] = {
    {ChatTemplateKind::kLlama3, "llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
     "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
     "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    {ChatTemplateKind::kLlama3AlwaysPrompt, "llama3 (assistant header always appended)",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
     "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
     "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ "
     "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"},
    {ChatTemplateKind::kChatML, "chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
     "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {ChatTemplateKind::kChatMLQwen2, "chatml (qwen2, default system prompt)",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
     "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|im_start|>assistant\\n' }}{% endif %}"},
};

// The template without whitespace outside string literals, with escapes inside them resolved: two
// spellings of one template compare equal, two different templates do not.
std::string canonical(std::string_view t) {
  std::string out;
  char quote = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (quote) {
      if (c == '\\' && i + 1 < t.size()) {
        const char e = t[++i];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        continue;
      }
      if (c == quote) quote = 0;
      out += c == '"' ? '\'' : c;  // 'x' and "x" are the same literal
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += '\'';
    } else if (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
      out += c;
    }
  }
  return out;
}

// Python's str.strip() (what Jinja's trim filter calls).
std::string trim(std::string_view s) {
  auto py_space = [](char32_t cp) { return is_space(cp) || (cp >= 0x1C && cp <= 0x1F); };
  size_t b = 0, e = s.size();
  while (b < e) {
    const CodePoint c = decode_utf8(s, b);
    if (!py_space(c.cp)) break;
    b += c.len;
  }
  while (e > b) {
    size_t i = e - 1;
    while (i > b && (uint8_t(s[i]) & 0xC0) == 0x80) --i;
    if (!py_space(decode_utf8(s, i).cp)) break;
    e = i;
  }
  return std::string(s.substr(b, e - b));
}

}  // namespace

ChatTemplate ChatTemplate::recognise(std::string_view jinja) {
  const std::string mine = canonical(jinja);
  for (const Known& k : kKnown)
    if (canonical(k.jinja) == mine) return ChatTemplate(k.kind);
  std::string head(jinja.substr(0, 120));
  for (char& c : head)
    if (c == '\n') c = ' ';
  throw NotSupported("chat_template \"" + head + (jinja.size() > 120 ? "..." : "") +
                     "\" is not one this build can run (no Jinja engine; recognised: Llama-3, ChatML, Qwen2's "
                     "ChatML): render the prompts with transformers' apply_chat_template and train on the text");
}

std::string_view ChatTemplate::name() const {
  for (const Known& k : kKnown)
    if (k.kind == kind_) return k.name;
  return "?";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const std::string& bos_token) const {
  std::string out;
  switch (kind_) {
    case ChatTemplateKind::kLlama3:
    case ChatTemplateKind::kLlama3AlwaysPrompt:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0) out += bos_token;
        out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + trim(messages[i].content) + "<|eot_id|>";
      }
      if (add_generation_prompt || kind_ == ChatTemplateKind::kLlama3AlwaysPrompt)
        out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatTemplateKind::kChatML:
    case ChatTemplateKind::kChatMLQwen2:
      if (kind_ == ChatTemplateKind::kChatMLQwen2 && !messages.empty() && messages[0].role != "system")
        out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
  }
  return out;
}

}  // namespace ds::data
