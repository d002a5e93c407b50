// SentencePiece models through libsentencepiece, against Debian's own spm_encode on models trained
// here with spm_train (Llama-2's settings: BPE, byte fallback, identity normalization; and the
// default unigram model), plus load_tokenizer on a model directory.
#include <fstream>

#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"
#include "data_test_util.h"
#include "util/error.h"

namespace ds::data::test {
namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> lines;
  std::ifstream in(fs::path(DS_SOURCE_DIR) / "data/devils_dictionary.txt");
  for (std::string line; std::getline(in, line) && lines.size() < 3000;)
    if (!line.empty()) lines.push_back(line);
  for (const char* extra : {"naïve café 你好 😀", "  two  spaces\tand tab", "Ω≈ç√∫ 1234567", "ＡＢＣ ﬁ"}) lines.push_back(extra);
  return lines;
}

// Trains a model on the corpus and checks our ids against spm_encode's on every line.
void check_model(const std::string& name, const std::string& train_flags) {
  const fs::path tmp = temp_dir("spm_" + name);
  const auto lines = corpus();
  {
    std::ofstream out(tmp / "corpus.txt");
    for (const auto& l : lines) out << l << '\n';
  }
  const std::string prefix = (tmp / name).string();
  const std::string train = "spm_train --input='" + (tmp / "corpus.txt").string() + "' --model_prefix='" + prefix +
                            "' --vocab_size=1000 --minloglevel=2 " + train_flags + " > '" + prefix + ".log' 2>&1";
  ASSERT_EQ(std::system(train.c_str()), 0) << train << " (Debian package: sentencepiece)";
  const std::string encode = "spm_encode --model='" + prefix + ".model' --output_format=id < '" +
                             (tmp / "corpus.txt").string() + "' > '" + prefix + ".ids'";
  ASSERT_EQ(std::system(encode.c_str()), 0) << encode;

  SentencePieceTokenizer tok(prefix + ".model");
  std::ifstream ids_in(prefix + ".ids");
  size_t i = 0, mismatches = 0;
  for (std::string line; std::getline(ids_in, line) && mismatches < 5; ++i) {
    ASSERT_LT(i, lines.size());
    std::vector<int32_t> want;
    std::istringstream s(line);
    for (int32_t id; s >> id;) want.push_back(id);
    const auto ids = tok.encode(lines[i], {.add_special_tokens = false});
    if (ids != want) ++mismatches;
    EXPECT_EQ(ids, want) << name << " line " << i << ": " << lines[i];
    if (train_flags.find("identity") != std::string::npos) {
      EXPECT_EQ(tok.decode(ids), lines[i]) << name << " line " << i;
    }
  }
  EXPECT_EQ(i, lines.size());
  // BOS by default (LlamaTokenizer's add_bos_token), EOS only when asked.
  EXPECT_EQ(tok.encode("hi").front(), tok.token_to_id("<s>"));
  SentencePieceTokenizer with_eos(prefix + ".model", {.add_bos = false, .add_eos = true});
  EXPECT_EQ(with_eos.encode("hi").back(), tok.token_to_id("</s>"));
  EXPECT_EQ(tok.decode(tok.encode("hi there"), {.skip_special_tokens = true}), "hi there");
  fs::remove_all(tmp);
}

TEST(SentencePiece, Llama2StyleBpeMatchesSpmEncode) {
  check_model("bpe", "--model_type=bpe --byte_fallback=true --normalization_rule_name=identity "
                     "--remove_extra_whitespaces=false --split_digits=true --character_coverage=0.9995");
}

TEST(SentencePiece, UnigramMatchesSpmEncode) { check_model("unigram", "--model_type=unigram"); }

TEST(SentencePiece, LoadFromDirectoryWithConfig) {
  const fs::path tmp = temp_dir("spm_dir");
  {
    std::ofstream out(tmp / "corpus.txt");
    for (const auto& l : corpus()) out << l << '\n';
  }
  const std::string train = "spm_train --input='" + (tmp / "corpus.txt").string() + "' --model_prefix='" +
                            (tmp / "tokenizer").string() + "' --vocab_size=500 --minloglevel=2 > /dev/null 2>&1";
  ASSERT_EQ(std::system(train.c_str()), 0);
  std::ofstream(tmp / "tokenizer_config.json") << R"({"add_bos_token": false, "add_eos_token": true, "eos_token": "</s>"})";
  const auto tok = load_tokenizer(tmp);
  const auto ids = tok->encode("the end");
  EXPECT_NE(ids.front(), tok->token_to_id("<s>"));
  EXPECT_EQ(ids.back(), tok->token_to_id("</s>"));
  EXPECT_EQ(tok->special_tokens().eos, "</s>");
  std::ofstream(tmp / "broken.model") << "not a model";
  EXPECT_THROW(load_tokenizer(tmp / "broken.model"), IoError);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace ds::data::test
