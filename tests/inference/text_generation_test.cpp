// Text-level generation: StopMatcher (stop strings on decoded text, held back while undecided),
// StreamDecoder and TextStream over a real tokenizer (a stop string ending inside a token),
// Pipeline::generate_text (the folder's tokenizer; a stop string spanning two tokens ends the
// request in the engine at once), and ds-generate with a tokenizer folder and --stop.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <optional>

#include "data/text_codec.h"
#include "inference/pipeline.h"
#include "inference/stop_matcher.h"
#include "inference/text_stream.h"
#include "inference_test_util.h"
#include "serve_process.h"
#include "text_model_util.h"

namespace ds::inference::testing {
namespace {

namespace fs = std::filesystem;
using data::TextCodec;

// Feeds `chunks` through a matcher; returns what came out, piece by piece.
std::vector<std::string> stop_pieces(std::vector<std::string> stops, const std::vector<std::string>& chunks,
                                     bool finish = true) {
  StopMatcher m(std::move(stops));
  std::vector<std::string> out;
  for (const auto& c : chunks) out.push_back(m.push(c));
  if (finish) out.push_back(m.finish());
  return out;
}

TEST(StopMatcher, MatchesOnTextAcrossPiecesAndHoldsBackPossibleStarts) {
  using V = std::vector<std::string>;
  // A stop string spread over three pieces: "a<" goes out only once "<" is settled.
  StopMatcher m({"<end>"});
  EXPECT_EQ(m.push("ab<"), "ab");
  EXPECT_EQ(m.held(), 1u);
  EXPECT_EQ(m.push("en"), "");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("d>tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.emitted(), 2u);
  EXPECT_EQ(m.push("more"), "") << "text after the stop string";
  EXPECT_EQ(m.finish(), "");
  // A held start that turns out not to be one is sent with what follows.
  EXPECT_EQ(stop_pieces({"<end>"}, {"x<e", "nx"}), (V{"x", "<enx", ""}));
  // Held text at the end of generation is sent by finish().
  EXPECT_EQ(stop_pieces({"<end>"}, {"x<en"}), (V{"x", "<en"}));
  // The earliest of several stop strings wins; a stop inside one piece cuts it.
  EXPECT_EQ(stop_pieces({"cd", "b"}, {"abcd"}), (V{"a", ""}));
  EXPECT_EQ(stop_pieces({"zz", "cd"}, {"abcdzz"}), (V{"ab", ""}));
  // A suffix that is a prefix of a longer stop is held even when a shorter stop could still come.
  EXPECT_EQ(stop_pieces({"aab"}, {"xa", "a", "b"}), (V{"x", "", "", ""}));
  EXPECT_EQ(stop_pieces({"aab"}, {"xa", "a", "ab"}), (V{"x", "", "a", ""})) << "'aaab' holds 'aab' after one 'a'";
  // No stop strings: everything goes out at once.
  EXPECT_EQ(stop_pieces({}, {"ab", "c"}), (V{"ab", "c", ""}));
  // Multi-byte stop strings: never half a character out.
  EXPECT_EQ(stop_pieces({"\xc3\xa9!"}, {"caf\xc3\xa9", "!x"}), (V{"caf", "", ""}));
}

TEST(TextCodec, StreamDecoderNeverSplitsACharacter) {
  const auto codec = TextCodec::bytes();
  data::StreamDecoder d(codec);
  std::string streamed;
  for (unsigned char b : std::string("h\xc3\xa9\xe2\x82\xac!")) {
    const std::string piece = d.push({b});
    EXPECT_EQ(piece.find("\xef\xbf\xbd"), std::string::npos) << "half a character went out";
    streamed += piece;
  }
  streamed += d.finish();
  EXPECT_EQ(streamed, "h\xc3\xa9\xe2\x82\xac!");
  data::StreamDecoder cut(codec);
  EXPECT_EQ(cut.push({'a', 0xe2, 0x82}), "");
  EXPECT_EQ(cut.finish(), "a\xef\xbf\xbd");  // a cut character at the end becomes U+FFFD
}

// One folder (random GPT-2 + the toy tokenizer with letter merges) for the whole suite.
class TextGeneration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    parent_ = fs::temp_directory_path() / ("ds_text_generation_" + std::to_string(::getpid()));
    dir_ = write_text_model_dir(parent_);
  }
  static void TearDownTestSuite() { fs::remove_all(parent_); }
  static inline fs::path parent_;
  static inline std::string dir_;
};

TEST_F(TextGeneration, TextStreamCutsAStopStringEndingInsideAToken) {
  const auto codec = TextCodec::from_model_dir(dir_);
  ASSERT_FALSE(codec.is_bytes());
  // "in the end": "in" "Ġ" "the" "Ġ" "en" "d" with the merges; "e e" ends inside "en".
  const auto ids = codec.encode("in the end", false);
  ASSERT_EQ(ids.size(), 6u);
  ASSERT_EQ(codec.token_bytes(ids[4]), "en");
  TextStream s(codec, {"e e"});
  std::string text;
  for (int64_t id : ids) text += s.push(id);
  text += s.finish();
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(text, "in th");
  EXPECT_EQ(s.num_tokens(), 5) << "tokens through the one completing the stop string";
  // Without the stop string the same tokens give the whole text.
  TextStream all(codec, {"zzz"});
  text.clear();
  for (int64_t id : ids) text += all.push(id);
  EXPECT_EQ(text + all.finish(), "in the end");
}

// A stop string made of the last character of output token j-1 and the first of token j, a token of
// two or more characters (so it spans two tokens and ends inside one), where the output's text first
// holds it at token j. `text` is what comes before it; `tokens` how many tokens it takes to complete.
struct StopPick {
  std::string stop, text;
  size_t tokens = 0;
};
std::optional<StopPick> stop_inside_a_token(const TextCodec& codec, const std::vector<int64_t>& out) {
  for (size_t j = 1; j < out.size(); ++j) {
    const std::string prev = codec.token_bytes(out[j - 1]), cur = codec.token_bytes(out[j]);
    if (prev.empty() || cur.size() < 2 || !std::isalnum(static_cast<unsigned char>(prev.back())) ||
        !std::isalnum(static_cast<unsigned char>(cur[0])))
      continue;
    StopPick p;
    p.stop = std::string(1, prev.back()) + cur[0];
    for (size_t m = 1; m <= out.size() && p.tokens == 0; ++m) {
      const std::string t = codec.decode({out.begin(), out.begin() + static_cast<std::ptrdiff_t>(m)});
      if (const auto at = t.find(p.stop); at != std::string::npos) {
        p.tokens = m;
        p.text = t.substr(0, at);
      }
    }
    if (p.tokens == j + 1) return p;
  }
  return std::nullopt;
}

constexpr int64_t kTextMaxTokens = 40;
const std::string kTextPrompt = "the other";

SamplingParams text_params() {
  auto p = greedy(kTextMaxTokens);
  p.ignore_eos = true;
  return p;
}

TEST_F(TextGeneration, PipelineStopsTheRequestAtAStopStringSpanningTwoTokens) {
  auto pipe = Pipeline::from_pretrained(dir_);
  const TextCodec& codec = pipe.codec();
  ASSERT_FALSE(codec.is_bytes()) << "from_pretrained did not take the folder's tokenizer";
  const auto full = pipe.generate_text({kTextPrompt}, text_params())[0];
  ASSERT_EQ(full.finish, FinishReason::kLength);
  ASSERT_EQ(full.tokens.size(), static_cast<size_t>(kTextMaxTokens));
  EXPECT_EQ(full.prompt_tokens, static_cast<int64_t>(codec.encode(kTextPrompt, true).size()));
  EXPECT_LT(full.prompt_tokens, static_cast<int64_t>(kTextPrompt.size())) << "the prompt was encoded as bytes";
  EXPECT_EQ(full.text, codec.decode(full.tokens));
  EXPECT_EQ(full.tokens, pipe.generate({codec.encode(kTextPrompt, true)}, text_params())[0].tokens);

  const auto pick = stop_inside_a_token(codec, full.tokens);
  ASSERT_TRUE(pick.has_value()) << "no two-character token after a letter in the greedy output: " << full.text;
  ASSERT_LT(pick->tokens, static_cast<size_t>(kTextMaxTokens));
  const auto before = pipe.engine().stats();
  const auto cut = pipe.generate_text({kTextPrompt}, text_params(), {"\x01never", pick->stop})[0];
  const auto after = pipe.engine().stats();
  EXPECT_EQ(cut.finish, FinishReason::kStop);
  EXPECT_EQ(cut.text, pick->text) << "stop " << pick->stop;
  EXPECT_EQ(cut.tokens, std::vector<int64_t>(full.tokens.begin(), full.tokens.begin() + static_cast<std::ptrdiff_t>(pick->tokens)));
  // The request ended in the engine at the token completing the stop string, not at max_tokens.
  EXPECT_EQ(after.generated_tokens - before.generated_tokens, static_cast<int64_t>(pick->tokens));
  EXPECT_LT(after.steps - before.steps, kTextMaxTokens);
  EXPECT_FALSE(pipe.engine().has_unfinished());
  EXPECT_EQ(after.kv_blocks_used, 0);
}

TEST(PipelineText, BytesAsTokensForACausalLM) {
  Pipeline pipe(tiny_gpt2(6));
  EXPECT_TRUE(pipe.codec().is_bytes());
  const auto ids = pipe.generate({{'H', 'i'}}, greedy(12))[0].tokens;
  const auto t = pipe.generate_text({"Hi"}, greedy(12))[0];
  EXPECT_EQ(t.tokens, ids);
  EXPECT_EQ(t.text, TextCodec::bytes().decode(ids));
  EXPECT_EQ(t.prompt_tokens, 2);
  EXPECT_EQ(t.finish, FinishReason::kLength);
}

serve::testing::CommandResult run_ds_generate(const std::string& args) {
  const auto bin = fs::path(DS_BINARY_DIR) / "tools/ds-generate";
  return serve::testing::run_command("'" + bin.string() + "' " + args + " 2>/dev/null");
}

TEST_F(TextGeneration, DsGenerateTakesTheFoldersTokenizerAndTextStopStrings) {
  auto pipe = Pipeline::from_pretrained(dir_);
  const auto full = pipe.generate_text({kTextPrompt}, text_params())[0];
  const std::string common = "--model-dir '" + dir_ + "' --prompt '" + kTextPrompt + "' --max-tokens " +
                             std::to_string(kTextMaxTokens) + " --temperature 0 --ignore-eos";
  const auto r = run_ds_generate(common + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"], full.tokens);
  EXPECT_EQ(j["text"], full.text);
  EXPECT_EQ(j["prompt_tokens"], full.prompt_tokens) << "the prompt's bytes were taken as token ids";
  EXPECT_EQ(j["finish_reason"], "length");

  const auto pick = stop_inside_a_token(pipe.codec(), full.tokens);
  ASSERT_TRUE(pick.has_value()) << full.text;
  const auto s = run_ds_generate(common + " --stop " + pick->stop + " --json");
  ASSERT_EQ(s.status, 0) << s.out;
  const auto js = nlohmann::json::parse(s.out);
  EXPECT_EQ(js["text"], pick->text) << "stop " << pick->stop;
  EXPECT_EQ(js["finish_reason"], "stop");
  EXPECT_EQ(js["tokens"].size(), pick->tokens);
  const auto line = run_ds_generate(common + " --stop " + pick->stop);
  EXPECT_NE(line.out.find("  (stop, " + std::to_string(pick->tokens) + " tokens)"), std::string::npos) << line.out;
}

}  // namespace
}  // namespace ds::inference::testing
