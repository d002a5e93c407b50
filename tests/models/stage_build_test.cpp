// Built-in models on pipeline stages without any rank holding the whole model (issue 17): GPT-2,
// Llama and OPT take a layer selection (nn/placeholder.h) and materialise only those layers, the
// others' tensors placeholders (their shapes, no storage); the selected layers hold exactly the
// values of the whole model built from the same seed, and the global generator ends where the whole
// build leaves it. initialize_pipeline(builder) builds a census (nothing materialised) and then the
// stage: at PP=2 (world 2) and PP=4 / PP=2 x DP=2 (world 4) its stage parameters and its losses
// equal the pipeline cut from the whole model bit for bit, for a random GPT-2 and for a Llama read by
// from_pretrained (which reads only the stage's tensors).
#include <deepspeed/deepspeed.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "comm/comm.h"
#include "comm/make_communicator.h"
#include "models/gpt2.h"
#include "models/lora.h"
#include "models/pretrained.h"
#include "nn/placeholder.h"
#include "runtime/pipeline_engine.h"
#include "util/error.h"

namespace ds::stage_build_test {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kMicro = 2, kSeq = 8, kVocab = 64;

nlohmann::json family_config(const std::string& type) {
  if (type == "gpt2")
    return {{"model_type", "gpt2"}, {"vocab_size", kVocab}, {"n_positions", 16}, {"n_embd", 32}, {"n_layer", 4},
            {"n_head", 4}};
  if (type == "llama")
    return {{"model_type", "llama"}, {"vocab_size", kVocab}, {"hidden_size", 32}, {"intermediate_size", 48},
            {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
            {"max_position_embeddings", 16}, {"tie_word_embeddings", false}};
  return {{"model_type", "opt"}, {"vocab_size", kVocab}, {"hidden_size", 32}, {"ffn_dim", 48}, {"num_hidden_layers", 4},
          {"num_attention_heads", 4}, {"max_position_embeddings", 16}};
}

std::shared_ptr<models::CausalLM> build(const std::string& type, const nn::LayerSelection& selection = {}) {
  torch::manual_seed(7);
  return models::from_config(family_config(type), "<" + type + ">", true, selection);
}

int64_t held_bytes(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += int64_t(p.storage().nbytes());
  return n;
}

// Layers 2 and 3 of 6 (blocks 1 and 2): the selected ones equal the whole model's, the rest are
// placeholders of the same shapes, running them throws, and the generator is where the whole build left it.
TEST(StageBuild, ModelsMaterialiseOnlyTheSelectedLayers) {
  for (const std::string type : {"gpt2", "llama", "opt"}) {
    auto whole = build(type);
    const double next_whole = torch::rand({1}).item<double>();
    auto part = build(type, nn::LayerSelection::range(2, 4));
    const double next_part = torch::rand({1}).item<double>();
    EXPECT_EQ(next_part, next_whole) << type << ": the generator moved on differently";
    std::set<std::string> selected;
    for (size_t i = 2; i < 4; ++i)
      for (const auto& n : part->layers()[i].param_names) selected.insert(n);
    const auto want = whole->named_parameters();
    for (const auto& p : part->named_parameters()) {
      const torch::Tensor& w = want[p.key()];
      EXPECT_EQ(p.value().sizes(), w.sizes()) << type << ": " << p.key();
      EXPECT_EQ(p.value().requires_grad(), w.requires_grad()) << type << ": " << p.key();
      if (selected.count(p.key())) {
        EXPECT_FALSE(nn::is_placeholder(p.value())) << type << ": " << p.key();
        EXPECT_TRUE(torch::equal(p.value(), w)) << type << ": " << p.key() << " differs from the whole model's";
      } else {
        EXPECT_TRUE(nn::is_placeholder(p.value())) << type << ": " << p.key() << " is materialised";
      }
    }
    EXPECT_LT(held_bytes(*part), held_bytes(*whole) / 2) << type;
    const auto x = torch::randint(0, kVocab, {1, 4}, torch::kInt64);
    EXPECT_THROW(part->forward(x), Error) << type << ": the embedding is not held";
    try {
      part->layers()[0].forward(x);
      ADD_FAILURE() << type << ": the embedding layer ran without its parameters";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("\"embed\" is not held by this process"), std::string::npos) << e.what();
    }
  }
}

// LoRA on a stage's build (adapters everywhere, the base frozen in bf16): the layers not held stay
// placeholders (in bf16), so a stage's LoRA model never holds the whole base either.
TEST(StageBuild, LoraKeepsThePlaceholders) {
  auto part = build("llama", nn::LayerSelection::range(2, 4));
  models::LoraConfig c;
  c.r = 4;
  c.target_modules = {"q_proj", "v_proj"};
  models::apply_lora(*part, c);
  int placeholders = 0;
  for (const auto& p : part->named_parameters()) {
    if (!nn::is_placeholder(p.value())) continue;
    ++placeholders;
    EXPECT_EQ(p.value().scalar_type(), torch::kBFloat16) << p.key();
    EXPECT_FALSE(p.value().requires_grad()) << p.key();
  }
  EXPECT_GT(placeholders, 10);
  EXPECT_LT(held_bytes(*part), held_bytes(*build("llama")) / 2);
}

std::string config(int stages, int gas) {
  return fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {},
      "pipeline": {{"stages": {}}}, "gradient_clipping": 1.0,
      "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-2, "weight_decay": 0.0}}}},
      "zero_optimization": {{"stage": {}}}}})",
                     kMicro, gas, stages, stages < comm::launcher_world_size() ? 1 : 0);
}

torch::Tensor micro_batch(int step, int k) {
  torch::manual_seed(300 + int64_t{step} * 64 + k);
  return torch::randint(0, kVocab, {kMicro, kSeq}, torch::kInt64);
}

std::vector<double> train(PipelineEngine& engine, int steps) {
  std::vector<double> losses;
  const int d = engine.topology().data().rank(), gas = engine.micro_batches();
  for (int s = 0; s < steps; ++s) {
    int m = 0;
    losses.push_back(engine.train_batch([&] {
      auto x = micro_batch(s, d * gas + m++);
      return PipeBatch{x, x};
    }));
  }
  return losses;
}

parallel::PipeLossFn lm_loss() { return models::lm_loss; }

// The pipeline from `make(selection)` against the pipeline cut from `make(all)`: the stage's
// parameters at the start and after 3 steps, and the losses, equal; the builder's stage model held
// no layer of another stage.
void expect_builder_equals_cut(const std::string& what, const std::function<std::shared_ptr<models::CausalLM>(
                                                            const nn::LayerSelection&)>& make,
                               int stages) {
  const int gas = 2;
  auto cfg = [&] { return load_config_text(config(stages, gas), comm::launcher_world_size(), "<stage build>"); };
  // Seeded once before each, as a user does: the builder's census must leave the generator as it found it.
  torch::manual_seed(11);
  auto cut = initialize_pipeline(make({}), cfg(), {"parameters", lm_loss()});
  torch::manual_seed(11);
  int builds = 0;
  int64_t stage_model_bytes = 0, whole_bytes = 0;
  auto built = initialize_pipeline(
      [&](const nn::LayerSelection& selection) {
        ++builds;
        auto m = make(selection);
        if (builds == 2) stage_model_bytes = held_bytes(*m);
        return parallel::BuiltModel{m, &m->layers()};
      },
      cfg(), {"parameters", lm_loss()});
  whole_bytes = held_bytes(*make({}));
  const std::string at = fmt::format("{}: PP {} x DP {}, stage {}", what, stages, built.topology().data().size(),
                                     built.stage_id());
  EXPECT_EQ(builds, 2) << at << ": the census and the stage";
  EXPECT_EQ(built.pipeline_module().parts(), cut.pipeline_module().parts()) << at;
  EXPECT_LT(stage_model_bytes, whole_bytes * 3 / 4) << at << ": the stage's build held most of the model";
  auto expect_equal_params = [&](const char* when) {
    const auto want = cut.pipeline_module().named_parameters();
    size_t n = 0;
    for (const auto& p : built.pipeline_module().named_parameters()) {
      ++n;
      ASSERT_NE(want.find(p.key()), nullptr) << at << ": " << p.key();
      EXPECT_TRUE(torch::equal(p.value(), want[p.key()])) << at << " " << when << ": " << p.key();
    }
    EXPECT_EQ(n, want.size()) << at;
  };
  expect_equal_params("at the start");
  EXPECT_EQ(train(built, 3), train(cut, 3)) << at;
  expect_equal_params("after 3 steps");
}

TEST(StageBuild, PipelineFromABuilderEqualsTheCutWholeModel) {
  const int world = comm::launcher_world_size();
  if (world != 2 && world != 4) GTEST_SKIP() << "worlds 2 and 4";
  auto gpt2 = [](const nn::LayerSelection& s) -> std::shared_ptr<models::CausalLM> {
    models::GPT2Config c;
    c.vocab_size = kVocab;
    c.n_positions = 16;
    c.n_embd = 32;
    c.n_layer = 4;
    c.n_head = 4;
    return models::GPT2(c, s).ptr();
  };
  expect_builder_equals_cut("GPT-2", gpt2, world);
  if (world == 4) expect_builder_equals_cut("GPT-2", gpt2, 2);
}

TEST(StageBuild, FromPretrainedReadsOnlyTheStage) {
  const int world = comm::launcher_world_size();
  if (world != 2 && world != 4) GTEST_SKIP() << "worlds 2 and 4";
  const std::string dir = ::testing::TempDir() + fmt::format("stage_build_llama_w{}", world);
  auto comm = comm::make_communicator();
  if (comm->rank() == 0) models::save_pretrained(*build("llama"), dir);
  comm->barrier();
  expect_builder_equals_cut(
      "Llama from_pretrained",
      [&](const nn::LayerSelection& s) { return models::from_pretrained(dir, {.selection = s}); }, world);
  comm->barrier();
  if (comm->rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace ds::stage_build_test
