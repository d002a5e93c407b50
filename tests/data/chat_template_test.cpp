// Chat templates against a Jinja implementation (@lenml/tokenizers' apply_chat_template): Llama-3's
// template as its tokenizer_config.json ships it, ChatML and Qwen2's ChatML; an unknown template
// (Qwen3's real one, with tools) is refused by name.
#include <fstream>

#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "data_test_util.h"
#include "util/error.h"

namespace ds::data::test {
namespace {

using Json = nlohmann::json;

const char* kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char* kQwen2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are "
    "a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
// Meta-Llama-3-Instruct's later template: the assistant header only with add_generation_prompt.
const char* kLlama3Conditional =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% "
    "set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

std::vector<std::pair<std::vector<ChatMessage>, bool>> conversations() {
  return {
      {{{"user", "Hi"}}, true},
      {{{"system", "  Be brief. \n"}, {"user", "What is 2+2?\n"}, {"assistant", " 4 "}}, false},
      {{{"user", "naïve 😀\ttab"}, {"assistant", "ok"}, {"user", "  again  "}}, true},
      {{{"system", "S"}, {"user", ""}}, true},
  };
}

// Renders every conversation with ours and the reference and compares. The reference takes
// bos_token from the model folder's tokenizer_config.json (GPT-2's loads fastest).
void compare(const std::string& jinja, ChatTemplateKind expected_kind, const std::string& model = "gpt2",
             const std::string& bos = "<|endoftext|>") {
  require_npm_packages();
  if (::testing::Test::HasFatalFailure()) return;
  const ChatTemplate ours = ChatTemplate::recognise(jinja);
  EXPECT_EQ(ours.kind(), expected_kind);
  const fs::path tmp = temp_dir("chat");
  std::ofstream(tmp / "template.jinja") << jinja;
  std::vector<Json> rows;
  for (const auto& [messages, gen] : conversations()) {
    Json m = Json::array();
    for (const auto& msg : messages) m.push_back({{"role", msg.role}, {"content", msg.content}});
    rows.push_back({{"messages", m}, {"add_generation_prompt", gen}});
  }
  write_jsonl(tmp / "chats.jsonl", rows);
  run_reference("chat '" + lenml_model_dir(model).string() + "' '" + (tmp / "chats.jsonl").string() + "' '" +
                (tmp / "ref.jsonl").string() + "' '" + (tmp / "template.jinja").string() + "'");
  const auto ref = read_jsonl(tmp / "ref.jsonl");
  ASSERT_EQ(ref.size(), rows.size());
  size_t i = 0;
  for (const auto& [messages, gen] : conversations())
    EXPECT_EQ(ours.render(messages, gen, bos), ref[i++].get<std::string>()) << ours.name() << " #" << i;
  fs::remove_all(tmp);
}

TEST(ChatTemplate, Llama3AsShippedMatchesJinja) {
  require_npm_packages();
  if (::testing::Test::HasFatalFailure()) return;
  const auto tok = load_tokenizer(lenml_model_dir("llama3"));
  ASSERT_FALSE(tok->chat_template().empty());
  EXPECT_EQ(tok->special_tokens().bos, "<|begin_of_text|>");
  compare(tok->chat_template(), ChatTemplateKind::kLlama3AlwaysPrompt, "llama3", tok->special_tokens().bos);
}
TEST(ChatTemplate, Llama3MatchesJinja) { compare(kLlama3Conditional, ChatTemplateKind::kLlama3); }
TEST(ChatTemplate, ChatMLMatchesJinja) { compare(kChatML, ChatTemplateKind::kChatML); }
TEST(ChatTemplate, Qwen2MatchesJinja) { compare(kQwen2, ChatTemplateKind::kChatMLQwen2); }

TEST(ChatTemplate, UnknownTemplateIsNamed) {
  require_npm_packages();
  if (::testing::Test::HasFatalFailure()) return;
  const auto tok = load_tokenizer(lenml_model_dir("qwen3"));
  try {
    ChatTemplate::recognise(tok->chat_template());
    FAIL() << "Qwen3's template (tools, thinking) is not one we run";
  } catch (const NotSupported& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("chat_template \"{%- if tools %}"), std::string::npos) << what;
    EXPECT_NE(what.find("apply_chat_template"), std::string::npos) << what;
  }
  EXPECT_THROW(ChatTemplate::recognise("{{ messages[0]['content'] }}"), NotSupported);
}

}  // namespace
}  // namespace ds::data::test
