#include "data/sft_example.h"

#include <algorithm>

#include "util/error.h"

namespace ds::data {
namespace {

void append(SftExample& ex, const std::vector<int32_t>& ids, bool trained) {
  ex.ids.insert(ex.ids.end(), ids.begin(), ids.end());
  if (trained) ex.labels.insert(ex.labels.end(), ids.begin(), ids.end());
  else ex.labels.insert(ex.labels.end(), ids.size(), kIgnoreLabel);
}

// The special tokens add_special_tokens puts around `content` (BOS / EOS per the post-processor),
// as (prefix, suffix) counts: the wrapped sequence is prefix + content + suffix.
std::pair<size_t, size_t> special_wrap(const Tokenizer& tok, const std::vector<int32_t>& content) {
  auto wrapped = tok.add_special_tokens(content);
  const size_t extra = wrapped.size() - content.size();
  for (size_t p = 0; p <= extra; ++p)
    if (std::equal(content.begin(), content.end(), wrapped.begin() + static_cast<std::ptrdiff_t>(p)))
      return {p, extra - p};
  throw Error("the tokenizer's post-processor does not keep the text ids together; use {\"text\": ...} records");
}

SftExample wrapped_example(const Tokenizer& tok, const std::vector<int32_t>& prompt, const std::vector<int32_t>& rest) {
  std::vector<int32_t> content = prompt;
  content.insert(content.end(), rest.begin(), rest.end());
  auto [pre, post] = special_wrap(tok, content);
  auto wrapped = tok.add_special_tokens(content);
  SftExample ex;
  ex.ids = wrapped;
  ex.labels = wrapped;
  std::fill(ex.labels.begin(), ex.labels.begin() + static_cast<std::ptrdiff_t>(pre + prompt.size()), kIgnoreLabel);
  (void)post;  // a suffix (EOS) after the completion is trained
  return ex;
}

}  // namespace

SftExample tokenize_sft_record(const SftRecord& r, const Tokenizer& tok, const ChatTemplate* chat,
                               const std::string& where) {
  const EncodeOptions plain{.add_special_tokens = false};
  const auto eos = tok.special_id(tok.special_tokens().eos);
  SftExample ex;
  bool eos_present = false;
  switch (r.kind) {
    case SftRecord::Kind::kText:
      ex = wrapped_example(tok, {}, tok.encode(r.text, plain));
      break;
    case SftRecord::Kind::kPromptCompletion:
      ex = wrapped_example(tok, tok.encode(r.prompt, plain), tok.encode(r.completion, plain));
      break;
    case SftRecord::Kind::kChat: {
      if (chat == nullptr)
        throw ConfigError(where, "a \"messages\" record needs a chat_template in the model's tokenizer_config.json "
                                 "(or use text / prompt+completion records)");
      const std::string& bos = tok.special_tokens().bos;
      std::string done;  // the rendered text tokenized so far
      std::vector<ChatMessage> turns;
      for (size_t i = 0; i < r.messages.size(); ++i) {
        if (r.messages[i].role != "assistant") {
          turns.push_back(r.messages[i]);
          continue;
        }
        const std::string before = chat->render(turns, /*add_generation_prompt=*/true, bos);
        turns.push_back(r.messages[i]);
        const std::string after = chat->render(turns, /*add_generation_prompt=*/false, bos);
        DS_CHECK(before.starts_with(done) && after.starts_with(before), Error,
                 where + ": the chat template's text for messages[" + std::to_string(i) +
                     "] does not extend the earlier turns' text, so the assistant span cannot be found");
        append(ex, tok.encode(std::string_view(before).substr(done.size()), plain), false);
        auto reply = tok.encode(std::string_view(after).substr(before.size()), plain);
        eos_present = eos && std::find(reply.begin(), reply.end(), *eos) != reply.end();
        append(ex, reply, true);
        done = after;
      }
      const std::string all = chat->render(turns, false, bos);  // turns after the last reply: context only
      if (all.size() > done.size()) {
        append(ex, tok.encode(std::string_view(all).substr(done.size()), plain), false);
        eos_present = false;
      }
      break;
    }
  }
  if (eos && !eos_present && (ex.ids.empty() || ex.ids.back() != *eos)) append(ex, {*eos}, true);
  if (ex.ids.size() < 2) throw ConfigError(where, "tokenizes to fewer than 2 tokens (nothing to predict)");
  if (std::all_of(ex.labels.begin() + 1, ex.labels.end(), [](int32_t l) { return l == kIgnoreLabel; }))
    throw ConfigError(where, "has no token to train on (every label is -100)");
  return ex;
}

}  // namespace ds::data
