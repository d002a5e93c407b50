// tokenizer.json → HfTokenizerParts. Each component is checked against what hf_tokenizer.cpp runs;
// anything else is refused by its JSON path and type name, so a model whose tokenizer we would get
// wrong fails at load rather than producing different ids.
#include <nlohmann/json.hpp>

#include "data/hf_tokenizer.h"
#include "util/error.h"

namespace ds::data {
namespace {

using Json = nlohmann::json;

std::string type_of(const Json& j) { return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : ""; }

[[noreturn]] void unsupported(const std::string& path, const std::string& what, const std::string& supported) {
  throw NotSupported(path + ": " + what + " is not supported (supported: " + supported + ")");
}

const Json& need(const Json& j, const std::string& key, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) throw ConfigError(path.empty() ? key : path + "." + key, "missing");
  return j[key];
}

bool flag(const Json& j, const char* key, bool fallback = false) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

Normalizer parse_normalizer(const Json& j) {
  if (j.is_null()) return Normalizer::kNone;
  const std::string t = type_of(j);
  if (t == "NFC") return Normalizer::kNfc;
  if (t == "Sequence" && j.contains("normalizers") && j["normalizers"].is_array()) {
    Normalizer n = Normalizer::kNone;
    for (const auto& sub : j["normalizers"]) {
      if (parse_normalizer(sub) == Normalizer::kNfc) n = Normalizer::kNfc;
    }
    return n;
  }
  unsupported("normalizer", "type \"" + t + "\"", "none, NFC");
}

// The pre-tokenizers of byte-level BPE models: ByteLevel (use_regex: GPT-2's split), or
// Sequence[Split(regex, Isolated), ByteLevel(use_regex false)].
ByteLevelPreTokenizer parse_pre_tokenizer(const Json& j) {
  const char* kSupported = "ByteLevel, or Sequence of Split (GPT-2/Llama-3/Qwen2 regex, Isolated) and ByteLevel";
  ByteLevelPreTokenizer pre;
  std::vector<Json> steps;
  const std::string t = type_of(j);
  if (t == "Sequence" && j.contains("pretokenizers") && j["pretokenizers"].is_array()) {
    for (const auto& s : j["pretokenizers"]) steps.push_back(s);
  } else if (!j.is_null()) {
    steps.push_back(j);
  }
  bool byte_level = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Json& s = steps[i];
    const std::string st = type_of(s);
    const std::string path = "pre_tokenizer" + (steps.size() > 1 ? ".pretokenizers[" + std::to_string(i) + "]" : std::string());
    if (st == "ByteLevel" && !byte_level) {
      byte_level = true;
      pre.add_prefix_space = flag(s, "add_prefix_space");
      pre.prefix_each_piece = pre.split.has_value();
      if (flag(s, "use_regex", true)) {
        if (pre.split) unsupported(path, "ByteLevel with use_regex after a Split", kSupported);
        pre.split = SplitPattern::kGpt2;
      }
    } else if (st == "Split" && !byte_level && !pre.split) {
      const Json& pattern = need(s, "pattern", path);
      if (!pattern.contains("Regex") || !pattern["Regex"].is_string())
        unsupported(path + ".pattern", "a non-regex pattern", kSupported);
      const std::string regex = pattern["Regex"].get<std::string>();
      pre.split = recognise_split_regex(regex);
      if (!pre.split) unsupported(path + ".pattern.Regex", "the regex \"" + regex + "\"", kSupported);
      const std::string behavior = s.value("behavior", "Isolated");
      if (behavior != "Isolated" || flag(s, "invert"))
        unsupported(path, "Split behavior \"" + behavior + "\"" + (flag(s, "invert") ? " inverted" : ""), kSupported);
    } else {
      unsupported(path, "type \"" + st + "\"" + (st.empty() ? " (null)" : ""), kSupported);
    }
  }
  if (!byte_level)
    throw NotSupported(
        "pre_tokenizer: no ByteLevel step: only byte-level BPE tokenizer.json files are supported (GPT-2, OPT, "
        "Llama-3, Qwen2); for a SentencePiece model (Llama-2, Mistral) load its tokenizer.model instead");
  return pre;
}

std::unique_ptr<BpeModel> parse_model(const Json& m) {
  const std::string t = type_of(m);
  if (t != "BPE" && !(t.empty() && m.contains("merges")))
    unsupported("model.type", "model \"" + (t.empty() ? std::string("(none)") : t) + "\"", "BPE");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty())
      unsupported(std::string("model.") + key, "\"" + m[key].get<std::string>() + "\"", "null or \"\"");
  if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() > 0)
    unsupported("model.dropout", "BPE dropout (a training-time option)", "null or 0");
  std::unordered_map<std::string, int32_t> vocab;
  const Json& v = need(m, "vocab", "model");
  if (!v.is_object()) throw ConfigError("model.vocab", "must be an object of token → id");
  vocab.reserve(v.size());
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_number_integer()) throw ConfigError("model.vocab." + it.key(), "id must be an integer");
    vocab.emplace(it.key(), it.value().get<int32_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const Json& ms = need(m, "merges", "model");
  if (!ms.is_array()) throw ConfigError("model.merges", "must be an array");
  merges.reserve(ms.size());
  for (size_t i = 0; i < ms.size(); ++i) {
    const Json& e = ms[i];
    if (e.is_string()) {  // "a b" (older files)
      const std::string s = e.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) throw ConfigError("model.merges[" + std::to_string(i) + "]", "\"" + s + "\" is not \"a b\"");
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      throw ConfigError("model.merges[" + std::to_string(i) + "]", "must be \"a b\" or [\"a\", \"b\"]");
    }
  }
  BpeOptions options;
  options.ignore_merges = flag(m, "ignore_merges");
  options.byte_fallback = flag(m, "byte_fallback");
  options.fuse_unk = flag(m, "fuse_unk");
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    const auto it = vocab.find(m["unk_token"].get<std::string>());
    if (it == vocab.end()) throw ConfigError("model.unk_token", "\"" + m["unk_token"].get<std::string>() + "\" is not in model.vocab");
    options.unk_id = it->second;
  }
  return std::make_unique<BpeModel>(std::move(vocab), merges, options);
}

AddedTokens parse_added_tokens(const Json& j) {
  std::vector<AddedToken> tokens;
  if (j.is_null()) return AddedTokens(tokens);
  if (!j.is_array()) throw ConfigError("added_tokens", "must be an array");
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    AddedToken t;
    const Json& id = need(j[i], "id", path);
    const Json& content = need(j[i], "content", path);
    if (!id.is_number_integer() || !content.is_string()) throw ConfigError(path, "needs an integer id and a string content");
    t.id = id.get<int32_t>();
    t.content = content.get<std::string>();
    t.single_word = flag(j[i], "single_word");
    t.lstrip = flag(j[i], "lstrip");
    t.rstrip = flag(j[i], "rstrip");
    t.normalized = flag(j[i], "normalized");
    t.special = flag(j[i], "special");
    tokens.push_back(std::move(t));
  }
  return AddedTokens(std::move(tokens));
}

int32_t id_of(const std::string& token, const AddedTokens& added, const BpeModel& model, const std::string& path) {
  if (const AddedToken* t = added.by_content(token)) return t->id;
  if (auto id = model.id(token)) return *id;
  throw ConfigError(path, "special token \"" + token + "\" is neither an added token nor in model.vocab");
}

// TemplateProcessing's "single", RobertaProcessing / BertProcessing (cls A sep), ByteLevel (no ids),
// and Sequences of them: all reduce to ids before and after the text.
void parse_post_processor(const Json& j, const std::string& path, const AddedTokens& added, const BpeModel& model,
                          PostProcessor& post) {
  if (j.is_null()) return;
  const std::string t = type_of(j);
  if (t == "ByteLevel") return;
  if (t == "Sequence") {
    const Json& list = need(j, "processors", path);
    for (size_t i = 0; i < list.size(); ++i)
      parse_post_processor(list[i], path + ".processors[" + std::to_string(i) + "]", added, model, post);
    return;
  }
  if (t == "RobertaProcessing" || t == "BertProcessing") {
    const Json& cls = need(j, "cls", path);
    const Json& sep = need(j, "sep", path);
    post.prefix.insert(post.prefix.begin(), cls.at(1).get<int32_t>());
    post.suffix.push_back(sep.at(1).get<int32_t>());
    return;
  }
  if (t == "TemplateProcessing") {
    const Json& single = need(j, "single", path);
    std::vector<int32_t> before, after;
    bool seen_sequence = false;
    for (const auto& item : single) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
      } else if (item.contains("SpecialToken")) {
        const std::string name = item["SpecialToken"].value("id", "");
        std::vector<int32_t> ids;
        const Json& specials = j.contains("special_tokens") ? j["special_tokens"] : Json::object();
        if (specials.contains(name) && specials[name].contains("ids")) {
          ids = specials[name]["ids"].get<std::vector<int32_t>>();
        } else {
          ids.push_back(id_of(name, added, model, path + ".single"));
        }
        (seen_sequence ? after : before).insert((seen_sequence ? after : before).end(), ids.begin(), ids.end());
      }
    }
    post.prefix.insert(post.prefix.begin(), before.begin(), before.end());
    post.suffix.insert(post.suffix.end(), after.begin(), after.end());
    return;
  }
  unsupported(path, "type \"" + t + "\"", "TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence");
}

}  // namespace

HfTokenizerParts parse_tokenizer_json(std::string_view json_text) {
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const Json::exception& e) {
    throw ConfigError("", std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ConfigError("", "a tokenizer.json is a JSON object");
  HfTokenizerParts parts;
  parts.model = parse_model(need(j, "model", ""));  // the model kind first: the most common refusal
  parts.normalizer = parse_normalizer(j.value("normalizer", Json()));
  parts.pre_tokenizer = parse_pre_tokenizer(j.value("pre_tokenizer", Json()));
  const Json decoder = j.value("decoder", Json());
  if (type_of(decoder) != "ByteLevel") unsupported("decoder", "type \"" + type_of(decoder) + "\"", "ByteLevel");
  parts.added = parse_added_tokens(j.value("added_tokens", Json()));
  parse_post_processor(j.value("post_processor", Json()), "post_processor", parts.added, *parts.model, parts.post);
  return parts;
}

}  // namespace ds::data
