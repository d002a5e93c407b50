// tokenizer.json loading on small files written here: a byte-level toy model (all 256 byte tokens,
// a few merges, special tokens and a template post-processor), refusals naming what is unsupported,
// added-token options, batch padding and truncation.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data/byte_level.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "data_test_util.h"
#include "util/error.h"

namespace ds::data::test {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

// Byte b has id b; "Ġt" (" t") is 256 and "Ġth" 257; <pad> 300, <s> 301, </s> 302, <sep> 303.
Json toy_tokenizer() {
  Json vocab = Json::object();
  const auto& alphabet = ByteLevelAlphabet::get();
  for (int b = 0; b < 256; ++b) vocab[alphabet.encoded(uint8_t(b))] = b;
  vocab["Ġt"] = 256;
  vocab["Ġth"] = 257;
  Json added = Json::array();
  int id = 300;
  for (const char* t : {"<pad>", "<s>", "</s>"})
    added.push_back({{"id", id++}, {"content", t}, {"special", true}, {"normalized", false}});
  added.push_back({{"id", 303}, {"content", "<sep>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", Json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                    {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
            {"special_tokens", Json::object()}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array({"Ġ t", "Ġt h"})}}}};
}

std::unique_ptr<Tokenizer> load(const Json& tokenizer_json, const Json& config = Json()) {
  const fs::path dir = temp_dir("json");
  std::ofstream(dir / "tokenizer.json") << tokenizer_json.dump();
  if (!config.is_null()) std::ofstream(dir / "tokenizer_config.json") << config.dump();
  auto tok = load_tokenizer(dir);
  fs::remove_all(dir);
  return tok;
}

template <class E>
std::string error_of(const Json& tokenizer_json) {
  try {
    load(tokenizer_json);
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error loading " << tokenizer_json.dump().substr(0, 200);
  return "";
}

TEST(TokenizerJson, ToyByteLevelModel) {
  const auto tok = load(toy_tokenizer());
  EXPECT_EQ(tok->encode("a the", {.add_special_tokens = false}), (Ids{'a', 257, 'e'}));
  EXPECT_EQ(tok->encode("a the"), (Ids{301, 'a', 257, 'e', 302}));
  EXPECT_EQ(tok->encode("x<s>y", {.add_special_tokens = false}), (Ids{'x', 301, 'y'}));
  EXPECT_EQ(tok->decode(Ids{301, 'a', 257, 'e', 302}), "<s>a the</s>");
  EXPECT_EQ(tok->decode(Ids{301, 'a', 257, 'e', 302}, {.skip_special_tokens = true}), "a the");
  EXPECT_EQ(tok->decode(Ids{0xC3}), "\xef\xbf\xbd");  // half a character decodes to U+FFFD
  EXPECT_EQ(tok->vocab_size(), 262u);
  EXPECT_EQ(tok->token_to_id("</s>"), 302);
  EXPECT_EQ(tok->id_to_token(257), "Ġth");
}

TEST(TokenizerJson, AddedTokenStripsWhitespace) {
  const auto tok = load(toy_tokenizer());
  // <sep> has lstrip and rstrip: the spaces around it belong to it.
  EXPECT_EQ(tok->encode("a  <sep>  b", {.add_special_tokens = false}), (Ids{'a', 303, 'b'}));
}

TEST(TokenizerJson, SpecialTokensAndTemplateFromConfig) {
  const auto tok = load(toy_tokenizer(), {{"bos_token", "<s>"}, {"eos_token", {{"content", "</s>"}}}, {"pad_token", "<pad>"},
                                          {"chat_template", "{{ x }}"}});
  EXPECT_EQ(tok->special_tokens().bos, "<s>");
  EXPECT_EQ(tok->special_tokens().eos, "</s>");
  EXPECT_EQ(tok->special_id(tok->special_tokens().pad), 300);
  EXPECT_EQ(tok->chat_template(), "{{ x }}");
}

TEST(TokenizerJson, BatchPaddingAndTruncation) {
  const auto tok = load(toy_tokenizer(), {{"pad_token", "<pad>"}});
  const std::vector<std::string> texts = {"abcdef", "a"};
  auto b = tok->encode_batch(texts, {.padding = Padding::kLongest});
  EXPECT_EQ(b.input_ids, (std::vector<Ids>{{301, 'a', 'b', 'c', 'd', 'e', 'f', 302}, {301, 'a', 302, 300, 300, 300, 300, 300}}));
  EXPECT_EQ(b.attention_mask[1], (Ids{1, 1, 1, 0, 0, 0, 0, 0}));
  b = tok->encode_batch(texts, {.max_length = 5, .truncation = true, .padding = Padding::kMaxLength, .padding_side = Side::kLeft});
  EXPECT_EQ(b.input_ids, (std::vector<Ids>{{301, 'a', 'b', 'c', 302}, {300, 300, 301, 'a', 302}}));
  EXPECT_EQ(b.attention_mask[1], (Ids{0, 0, 1, 1, 1}));
  b = tok->encode_batch(texts, {.add_special_tokens = false, .max_length = 3, .truncation = true,
                                .truncation_side = Side::kLeft});
  EXPECT_EQ(b.input_ids[0], (Ids{'d', 'e', 'f'}));
  EXPECT_EQ(b.input_ids[1], (Ids{'a'}));
  try {
    tok->encode_batch(texts, {.truncation = true});
    FAIL() << "truncation without max_length must be refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "max_length");
  }
  const auto no_pad = load(toy_tokenizer());
  try {
    no_pad->encode_batch(texts, {.padding = Padding::kLongest});
    FAIL() << "padding without a pad token must be refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "pad_id");
  }
  EXPECT_EQ(no_pad->encode_batch(texts, {.padding = Padding::kLongest, .pad_id = 0}).input_ids[1].back(), 0);
}

TEST(TokenizerJson, UnsupportedModelKindsAreNamed) {
  for (const char* kind : {"WordPiece", "Unigram", "WordLevel"}) {
    Json j = toy_tokenizer();
    j["model"]["type"] = kind;
    const std::string what = error_of<NotSupported>(j);
    EXPECT_NE(what.find(std::string("\"") + kind + "\""), std::string::npos) << what;
    EXPECT_NE(what.find("model.type"), std::string::npos) << what;
    EXPECT_NE(what.find("tokenizer.json"), std::string::npos) << what;  // the file is named
  }
}

TEST(TokenizerJson, UnsupportedComponentsAreNamed) {
  Json j = toy_tokenizer();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         Json::array({{{"type", "Split"}, {"pattern", {{"Regex", "\\p{L}+"}}}, {"behavior", "Isolated"}},
                                      {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  std::string what = error_of<NotSupported>(j);
  EXPECT_NE(what.find("\\p{L}+"), std::string::npos) << what;
  j = toy_tokenizer();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  what = error_of<NotSupported>(j);
  EXPECT_NE(what.find("Metaspace"), std::string::npos) << what;
  j["pre_tokenizer"] = nullptr;  // Llama-2's tokenizer.json: SentencePiece-style BPE
  what = error_of<NotSupported>(j);
  EXPECT_NE(what.find("tokenizer.model"), std::string::npos) << what;
  j = toy_tokenizer();
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(error_of<NotSupported>(j).find("Lowercase"), std::string::npos);
  j = toy_tokenizer();
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of<NotSupported>(j).find("decoder"), std::string::npos);
}

TEST(TokenizerJson, MalformedFilesAreConfigErrors) {
  Json j = toy_tokenizer();
  j["model"]["merges"].push_back("Ġth e");  // "Ġthe" is not in the vocabulary
  std::string what = error_of<ConfigError>(j);
  EXPECT_NE(what.find("model.merges"), std::string::npos) << what;
  j = toy_tokenizer();
  j["model"].erase("vocab");
  what = error_of<ConfigError>(j);
  EXPECT_NE(what.find("model.vocab"), std::string::npos) << what;
  const fs::path dir = temp_dir("bad");
  std::ofstream(dir / "tokenizer.json") << "{\"model\": ";
  EXPECT_THROW(load_tokenizer(dir), ConfigError);
  EXPECT_THROW(load_tokenizer(dir / "missing"), IoError);
  fs::remove(dir / "tokenizer.json");
  try {
    load_tokenizer(dir);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json or tokenizer.model"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ds::data::test
