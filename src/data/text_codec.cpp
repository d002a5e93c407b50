#include "data/text_codec.h"

#include "data/unicode.h"
#include "util/error.h"

namespace ds::data {

namespace fs = std::filesystem;

TextCodec TextCodec::bytes() {
  TextCodec c;
  c.chat_ = ChatTemplate(ChatTemplateKind::kChatML);
  return c;
}

TextCodec TextCodec::from_model_dir(const fs::path& dir) {
  if (!fs::exists(dir / "tokenizer.json") && !fs::exists(dir / "tokenizer.model")) return bytes();
  TextCodec c;
  c.tokenizer_ = load_tokenizer(dir);
  if (c.tokenizer_->chat_template().empty()) {
    c.chat_error_ = "the model folder's tokenizer_config.json has no chat_template";
  } else {
    try {
      c.chat_ = ChatTemplate::recognise(c.tokenizer_->chat_template());
    } catch (const std::exception& e) {
      c.chat_error_ = e.what();
    }
  }
  return c;
}

std::string TextCodec::describe() const {
  if (is_bytes()) return "bytes as tokens (no tokenizer in the model folder), chat in ChatML";
  std::string s = "tokenizer with " + std::to_string(tokenizer_->vocab_size()) + " tokens, chat template ";
  return s + (chat_ ? std::string(chat_->name()) : "none (" + chat_error_ + ")");
}

std::vector<int64_t> TextCodec::encode(const std::string& text, bool add_special_tokens) const {
  if (is_bytes()) {
    std::vector<int64_t> ids;
    for (unsigned char b : text) ids.push_back(b);
    return ids;
  }
  const auto ids = tokenizer_->encode(text, {.add_special_tokens = add_special_tokens});
  return {ids.begin(), ids.end()};
}

std::string TextCodec::decode(const std::vector<int64_t>& ids) const {
  if (is_bytes()) {
    std::string bytes;
    for (int64_t t : ids)
      if (t >= 0 && t < 256) bytes += static_cast<char>(t);  // ids above 255 have no text
    return utf8_lossy(bytes);
  }
  std::vector<int32_t> ids32;
  for (int64_t t : ids)
    if (t >= 0 && t < static_cast<int64_t>(tokenizer_->vocab_size())) ids32.push_back(static_cast<int32_t>(t));
  return tokenizer_->decode(ids32, {.skip_special_tokens = true});
}

std::string TextCodec::token_bytes(int64_t id) const {
  if (is_bytes()) return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : std::string();
  return decode({id});
}

std::vector<int64_t> TextCodec::encode_chat(const std::vector<ChatMessage>& messages) const {
  DS_CHECK(chat_.has_value(), NotSupported, "this model has no chat template that can be rendered (" + chat_error_ + ")");
  const std::string bos = is_bytes() ? "" : tokenizer_->special_tokens().bos;
  return encode(chat_->render(messages, /*add_generation_prompt=*/true, bos), /*add_special_tokens=*/false);
}

std::vector<int64_t> TextCodec::chat_stop_ids() const {
  std::vector<int64_t> ids;
  if (is_bytes()) return ids;
  for (const std::string& t : {tokenizer_->special_tokens().eos, std::string("<|eot_id|>"), std::string("<|im_end|>")})
    if (!t.empty())
      if (auto id = tokenizer_->token_to_id(t)) ids.push_back(*id);
  return ids;
}

std::string StreamDecoder::push(const std::vector<int64_t>& ids) {
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  const std::string text = codec_.decode(ids_);
  // U+FFFD at the end: probably a character cut between tokens; wait for the rest.
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return "";
  if (text.size() <= emitted_) return "";
  std::string piece = text.substr(emitted_);
  emitted_ = text.size();
  return piece;
}

std::string StreamDecoder::finish() {
  const std::string text = codec_.decode(ids_);
  if (text.size() <= emitted_) return "";
  std::string piece = text.substr(emitted_);
  emitted_ = text.size();
  return piece;
}

}  // namespace ds::data
