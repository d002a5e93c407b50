// Batch encoding (truncation, padding) shared by every tokenizer, and load_tokenizer(): the file
// choice and tokenizer_config.json (special tokens, chat_template, add_bos_token/add_eos_token).
#include "data/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "data/hf_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "util/error.h"

namespace ds::data {

std::optional<int32_t> Tokenizer::special_id(const std::string& token) const {
  if (token.empty()) return std::nullopt;
  return token_to_id(token);
}

BatchEncoding Tokenizer::encode_batch(std::span<const std::string> texts, const BatchOptions& options) const {
  const size_t specials = options.add_special_tokens ? num_special_tokens_to_add() : 0;
  if ((options.truncation || options.padding == Padding::kMaxLength) && options.max_length == 0)
    throw ConfigError("max_length", "truncation and max_length padding need max_length > 0 (set it to the model's context length)");
  BatchEncoding out;
  for (const std::string& text : texts) {
    std::vector<int32_t> ids = encode(text, {.add_special_tokens = false});
    if (options.truncation && ids.size() + specials > options.max_length) {
      const size_t keep = options.max_length > specials ? options.max_length - specials : 0;
      if (options.truncation_side == Side::kRight) {
        ids.resize(keep);
      } else {
        ids.erase(ids.begin(), ids.end() - ptrdiff_t(keep));
      }
    }
    if (options.add_special_tokens) ids = add_special_tokens(std::move(ids));
    if (options.truncation && ids.size() > options.max_length) ids.resize(options.max_length);  // specials alone too long
    out.attention_mask.emplace_back(ids.size(), 1);
    out.input_ids.push_back(std::move(ids));
  }
  if (options.padding == Padding::kNone) return out;
  size_t target = options.max_length;
  if (options.padding == Padding::kLongest) {
    target = 0;
    for (const auto& ids : out.input_ids) target = std::max(target, ids.size());
  }
  std::optional<int32_t> pad = options.pad_id;
  if (!pad) pad = special_id(special_tokens().pad);
  if (!pad) pad = special_id(special_tokens().eos);
  if (!pad)
    throw ConfigError("pad_id", "padding needs a pad token: this tokenizer has no pad_token or eos_token (pass pad_id)");
  for (size_t r = 0; r < out.input_ids.size(); ++r) {
    auto& ids = out.input_ids[r];
    auto& mask = out.attention_mask[r];
    if (ids.size() >= target) continue;
    const size_t n = target - ids.size();
    if (options.padding_side == Side::kRight) {
      ids.insert(ids.end(), n, *pad);
      mask.insert(mask.end(), n, 0);
    } else {
      ids.insert(ids.begin(), n, *pad);
      mask.insert(mask.begin(), n, 0);
    }
  }
  return out;
}

namespace {

using Json = nlohmann::json;

// A special token in tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::string token_text(const Json& config, const char* key) {
  if (!config.contains(key)) return "";
  const Json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// chat_template: a string, or a list of {"name", "template"} (the "default" one is used).
std::string chat_template_text(const Json& config) {
  if (!config.contains("chat_template")) return "";
  const Json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const auto& entry : t)
      if (entry.value("name", "") == "default" && entry.contains("template")) return entry["template"].get<std::string>();
  return "";
}

Json read_config(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) return Json::object();
  std::ifstream in(file);
  DS_CHECK(in, IoError, file.string() + ": cannot open (check its permissions)");
  try {
    Json j = Json::parse(in);
    if (!j.is_object()) throw ConfigError(file.string(), "must be a JSON object");
    return j;
  } catch (const Json::exception& e) {
    throw ConfigError(file.string(), std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  fs::path file = path;
  if (fs::is_directory(path)) {
    file = path / "tokenizer.json";
    if (!fs::exists(file)) file = path / "tokenizer.model";
    DS_CHECK(fs::exists(file), IoError,
             path.string() + ": no tokenizer.json or tokenizer.model in this directory (copy the model's tokenizer files there)");
  }
  DS_CHECK(fs::exists(file), IoError, file.string() + ": no such tokenizer file");
  const Json config = read_config(file.parent_path() / "tokenizer_config.json");
  std::unique_ptr<Tokenizer> tok;
  if (file.extension() == ".json") {
    tok = HfTokenizer::from_file(file);
  } else {
    SentencePieceOptions sp;
    sp.add_bos = config.value("add_bos_token", true);
    sp.add_eos = config.value("add_eos_token", false);
    tok = std::make_unique<SentencePieceTokenizer>(file, sp);
  }
  SpecialTokens special = tok->special_tokens();
  for (auto [key, field] : {std::pair{"bos_token", &special.bos}, {"eos_token", &special.eos},
                            {"pad_token", &special.pad}, {"unk_token", &special.unk}}) {
    if (std::string t = token_text(config, key); !t.empty()) *field = t;
  }
  tok->set_special_tokens(special);
  tok->set_chat_template(chat_template_text(config));
  return tok;
}

}  // namespace ds::data
