// GPT2Config: presets, the analytic parameter count against Hugging Face's published counts and
// against real models, validation messages.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "models/gpt2.h"
#include "util/error.h"

namespace {

using ds::models::GPT2;
using ds::models::GPT2Config;

int64_t real_count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(GPT2Config, PresetCountsMatchHuggingFace) {
  // GPT2LMHeadModel.num_parameters() for gpt2, gpt2-medium, gpt2-large, gpt2-xl.
  EXPECT_EQ(GPT2Config::preset("small").num_parameters(), 124'439'808);
  EXPECT_EQ(GPT2Config::preset("medium").num_parameters(), 354'823'168);
  EXPECT_EQ(GPT2Config::preset("large").num_parameters(), 774'030'080);
  EXPECT_EQ(GPT2Config::preset("xl").num_parameters(), 1'557'611'200);
  EXPECT_EQ(GPT2Config::preset("gpt2-xl").n_embd, 1600);
}

TEST(GPT2Config, PresetShapes) {
  const auto tiny = GPT2Config::preset("tiny");
  EXPECT_EQ(tiny.vocab_size, 256);
  EXPECT_EQ(tiny.n_positions, 64);
  EXPECT_EQ(tiny.n_embd, 64);
  EXPECT_EQ(tiny.n_layer, 2);
  EXPECT_EQ(tiny.n_head, 4);
  const auto medium = GPT2Config::preset("medium");
  EXPECT_EQ(medium.n_embd, 1024);
  EXPECT_EQ(medium.n_layer, 24);
  EXPECT_EQ(medium.n_head, 16);
  const auto large = GPT2Config::preset("large");
  EXPECT_EQ(large.n_embd, 1280);
  EXPECT_EQ(large.n_layer, 36);
  EXPECT_EQ(large.n_head, 20);
  for (const auto& name : GPT2Config::preset_names()) {
    EXPECT_NO_THROW(GPT2Config::preset(name).validate()) << name;
  }
}

TEST(GPT2Config, AnalyticCountEqualsRealCount) {
  for (const char* name : {"tiny", "small"}) {
    GPT2 model(GPT2Config::preset(name));
    EXPECT_EQ(real_count(*model), GPT2Config::preset(name).num_parameters()) << name;
  }
  // An odd shape too, so the formula is not tuned to the presets.
  GPT2Config odd{97, 33, 24, 3, 6};
  GPT2 model(odd);
  EXPECT_EQ(real_count(*model), odd.num_parameters());
}

TEST(GPT2Config, UnknownPresetListsAllowed) {
  try {
    GPT2Config::preset("huge");
    FAIL() << "expected ds::ConfigError";
  } catch (const ds::ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\"huge\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("tiny, small, medium, large, xl"), std::string::npos) << msg;
  }
}

TEST(GPT2Config, ValidateNamesTheField) {
  GPT2Config c = GPT2Config::preset("tiny");
  c.n_head = 5;  // 64 % 5 != 0
  try {
    c.validate();
    FAIL() << "expected ds::ConfigError";
  } catch (const ds::ConfigError& e) {
    EXPECT_EQ(e.path(), "n_embd");
    EXPECT_NE(std::string(e.what()).find("n_head = 5"), std::string::npos) << e.what();
  }
  c = GPT2Config::preset("tiny");
  c.n_layer = 0;
  try {
    c.validate();
    FAIL() << "expected ds::ConfigError";
  } catch (const ds::ConfigError& e) {
    EXPECT_EQ(e.path(), "n_layer");
  }
  c = GPT2Config::preset("tiny");
  c.vocab_size = -1;
  EXPECT_THROW(GPT2 bad(c), ds::ConfigError);  // the model validates too
}

TEST(GPT2Config, DescribeMentionsShapeAndCount) {
  const std::string d = GPT2Config::preset("small").describe();
  EXPECT_NE(d.find("n_layer=12"), std::string::npos) << d;
  EXPECT_NE(d.find("n_embd=768"), std::string::npos) << d;
  EXPECT_NE(d.find("124.44M"), std::string::npos) << d;
}

}  // namespace
