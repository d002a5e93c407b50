#include "data/hf_tokenizer.h"

#include <fstream>
#include <sstream>

#include "data/byte_level.h"
#include "data/unicode.h"
#include "util/error.h"

namespace ds::data {

HfTokenizer::HfTokenizer(HfTokenizerParts parts) : parts_(std::move(parts)) {}

std::unique_ptr<HfTokenizer> HfTokenizer::from_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  DS_CHECK(in, IoError, file.string() + ": cannot open the tokenizer file (check the path and its permissions)");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return std::make_unique<HfTokenizer>(parse_tokenizer_json(text.str()));
  } catch (const NotSupported& e) {
    throw NotSupported(file.string() + ": " + e.what());
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    const size_t skip = e.path().empty() ? 0 : e.path().size() + 2;  // what() is "path: message"
    throw ConfigError(file.string() + (e.path().empty() ? "" : ": " + e.path()), what.substr(skip));
  }
}

void HfTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& ids) const {
  const ByteLevelPreTokenizer& pre = parts_.pre_tokenizer;
  std::string normalized;
  if (parts_.normalizer == Normalizer::kNfc) text = normalized = nfc(text);
  if (pre.add_prefix_space && !pre.prefix_each_piece && !text.empty() && text[0] != ' ') {
    std::string with_space(1, ' ');
    with_space.append(text.data(), text.size());
    normalized = std::move(with_space);
    text = normalized;
  }
  thread_local std::vector<std::pair<size_t, size_t>> pieces;
  thread_local std::string word, prefixed;
  pieces.clear();
  if (pre.split) {
    split_with_pattern(*pre.split, text, pieces);
  } else if (!text.empty()) {
    pieces.emplace_back(0, text.size());
  }
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  for (const auto& [begin, end] : pieces) {
    std::string_view piece = text.substr(begin, end - begin);
    if (pre.add_prefix_space && pre.prefix_each_piece && piece[0] != ' ') {
      prefixed.assign(1, ' ');
      prefixed.append(piece.data(), piece.size());
      piece = prefixed;
    }
    word.clear();
    for (unsigned char b : piece) word += alphabet.encoded(b);
    parts_.model->encode_word(word, ids);
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  thread_local std::vector<AddedTokens::Segment> segments;
  segments.clear();
  parts_.added.split(text, segments);
  for (const auto& seg : segments) {
    if (seg.token) {
      ids.push_back(seg.token->id);
    } else {
      encode_plain(seg.text, ids);
    }
  }
  return options.add_special_tokens ? add_special_tokens(std::move(ids)) : ids;
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  // ByteLevel decoder: each token's characters back to bytes; a token with a character outside the
  // alphabet (an added token like "<|im_start|>" is inside it; "你好" is not) contributes its own
  // UTF-8. Ids in neither vocabulary are skipped, as Hugging Face does.
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  std::string bytes;
  for (int32_t id : ids) {
    const std::string* token = nullptr;
    if (const AddedToken* added = parts_.added.by_id(id)) {
      if (added->special && options.skip_special_tokens) continue;
      token = &added->content;
    } else {
      token = parts_.model->token(id);
    }
    if (token && !alphabet.decode(*token, bytes)) bytes += *token;
  }
  return utf8_lossy(bytes);
}

size_t HfTokenizer::vocab_size() const {
  size_t n = parts_.model->vocab_size();
  for (const auto& t : parts_.added.all())
    if (!parts_.model->id(t.content)) ++n;
  return n;
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* added = parts_.added.by_content(token)) return added->id;
  return parts_.model->id(token);
}

std::optional<std::string> HfTokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* added = parts_.added.by_id(id)) return added->content;
  if (const std::string* t = parts_.model->token(id)) return *t;
  return std::nullopt;
}

size_t HfTokenizer::num_special_tokens_to_add() const { return parts_.post.prefix.size() + parts_.post.suffix.size(); }

std::vector<int32_t> HfTokenizer::add_special_tokens(std::vector<int32_t> ids) const {
  if (num_special_tokens_to_add() == 0) return ids;
  std::vector<int32_t> out(parts_.post.prefix);
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), parts_.post.suffix.begin(), parts_.post.suffix.end());
  return out;
}

}  // namespace ds::data
