// OPT: HF parameter names (opt-125m and opt-350m layouts), counts, the position offset, the
// LayerList contract, post-LN, config errors, and the sequence-length limit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <string>
#include <vector>

#include "models/opt.h"
#include "util/error.h"

namespace {

using ds::models::OPT;
using ds::models::OPTConfig;
using nlohmann::json;

json opt_json(bool opt350 = false) {
  json j = {{"model_type", "opt"},       {"vocab_size", 50},         {"hidden_size", 32},
            {"ffn_dim", 48},             {"num_hidden_layers", 2},   {"num_attention_heads", 4},
            {"max_position_embeddings", 16}};
  if (opt350) {
    j["do_layer_norm_before"] = false;
    j["word_embed_proj_dim"] = 16;
  }
  return j;
}

OPT tiny(bool opt350 = false, uint64_t seed = 0) {
  torch::manual_seed(seed);
  return OPT(OPTConfig::from_hf_json(opt_json(opt350)));
}

std::set<std::string> names(torch::nn::Module& m) {
  std::set<std::string> out;
  for (const auto& item : m.named_parameters()) out.insert(item.key());
  return out;
}

TEST(OPT, Opt125mLayoutNamesAndCount) {
  auto model = tiny();
  std::vector<std::string> ordered;
  for (const auto& item : model->named_parameters()) ordered.push_back(item.key());
  // HF's order: embed_tokens, embed_positions, final_layer_norm, then the layers.
  ASSERT_GE(ordered.size(), 4u);
  EXPECT_EQ(ordered[0], "model.decoder.embed_tokens.weight");
  EXPECT_EQ(ordered[1], "model.decoder.embed_positions.weight");
  EXPECT_EQ(ordered[2], "model.decoder.final_layer_norm.weight");
  auto n = names(*model);
  for (const char* s : {"self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
                        "self_attn.q_proj.weight", "self_attn.out_proj.bias", "self_attn_layer_norm.weight",
                        "self_attn_layer_norm.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                        "final_layer_norm.weight", "final_layer_norm.bias"})
    EXPECT_TRUE(n.count(std::string("model.decoder.layers.1.") + s)) << s;
  EXPECT_FALSE(n.count("lm_head.weight"));  // tied
  EXPECT_FALSE(n.count("model.decoder.project_in.weight"));
  auto params = model->named_parameters();
  EXPECT_EQ(params["model.decoder.embed_positions.weight"].sizes(), torch::IntArrayRef({18, 32}));  // 16 + 2
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, model->config().num_parameters());
}

TEST(OPT, Opt350mLayoutHasProjectionsAndNoFinalNorm) {
  auto model = tiny(true);
  auto n = names(*model);
  EXPECT_TRUE(n.count("model.decoder.project_in.weight"));
  EXPECT_TRUE(n.count("model.decoder.project_out.weight"));
  EXPECT_FALSE(n.count("model.decoder.final_layer_norm.weight"));  // post-LN models have none
  auto params = model->named_parameters();
  EXPECT_EQ(params["model.decoder.embed_tokens.weight"].sizes(), torch::IntArrayRef({50, 16}));
  EXPECT_EQ(params["model.decoder.project_in.weight"].sizes(), torch::IntArrayRef({32, 16}));
  EXPECT_EQ(params["model.decoder.project_out.weight"].sizes(), torch::IntArrayRef({16, 32}));
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, model->config().num_parameters());
}

TEST(OPT, PositionsStartAtRowTwo) {
  auto model = tiny();
  auto x = torch::randint(50, {2, 5}, torch::kLong);
  model->forward(x).sum().backward();
  auto g = model->model->decoder->embed_positions->weight.grad();
  EXPECT_EQ(g.narrow(0, 0, 2).abs().sum().item<double>(), 0.0);  // offset rows unused
  EXPECT_GT(g[2].abs().sum().item<double>(), 0.0);                // position 0
  EXPECT_GT(g[6].abs().sum().item<double>(), 0.0);                // position 4
  EXPECT_EQ(g.narrow(0, 7, 11).abs().sum().item<double>(), 0.0);
  // pad_token_id 1 (HF default): its row gets gradient only from the tied head.
  EXPECT_EQ(model->model->decoder->embed_tokens->weight[1].abs().sum().item<double>(), 0.0);
}

TEST(OPT, LayersUseOnlyListedParameters) {
  for (bool opt350 : {false, true}) {
    auto model = tiny(opt350);
    auto params = model->named_parameters();
    const auto& layers = model->layers();
    for (size_t i = 0; i < layers.size(); ++i) {
      model->zero_grad();
      torch::Tensor in = i == 0 ? torch::randint(2, 50, {2, 6}, torch::kLong) : torch::randn({2, 6, 32});
      layers[i].forward(in).sum().backward();
      std::set<std::string> got;
      for (const auto& item : params)
        if (item.value().grad().defined() && item.value().grad().abs().sum().item<double>() > 0) got.insert(item.key());
      const std::set<std::string> listed(layers[i].param_names.begin(), layers[i].param_names.end());
      EXPECT_EQ(got, listed) << layers[i].name << (opt350 ? " (opt-350m)" : "");
    }
    EXPECT_EQ(layers.all_param_names().size(), params.size());
  }
}

TEST(OPT, CausalInBothNormPlacements) {
  for (bool opt350 : {false, true}) {
    auto model = tiny(opt350);
    torch::NoGradGuard ng;
    auto x = torch::randint(2, 50, {1, 10}, torch::kLong);
    auto y = x.clone();
    y.index_put_({0, 6}, (x[0][6].item<int64_t>() - 1) % 48 + 2);  // another id in [2, 50)
    auto a = model->forward(x), b = model->forward(y);
    EXPECT_TRUE(torch::equal(a.narrow(1, 0, 6), b.narrow(1, 0, 6)));
    EXPECT_FALSE(torch::equal(a.narrow(1, 6, 4), b.narrow(1, 6, 4)));
  }
}

TEST(OPT, LongerThanMaxPositionsIsAClearError) {
  auto model = tiny();
  try {
    model->forward(torch::zeros({1, 17}, torch::kLong));
    ADD_FAILURE() << "a sequence of 17 ran on 16 positions";
  } catch (const ds::Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings 16"), std::string::npos) << e.what();
  }
}

TEST(OPT, ConfigErrorsNameTheField) {
  json j = opt_json();
  j.erase("ffn_dim");
  try {
    OPTConfig::from_hf_json(j, "/m/config.json");
    ADD_FAILURE();
  } catch (const ds::ConfigError& e) {
    EXPECT_EQ(e.path(), "ffn_dim");
    EXPECT_NE(std::string(e.what()).find("/m/config.json"), std::string::npos) << e.what();
  }
  j = opt_json();
  j["activation_function"] = "gelu";
  EXPECT_THROW(OPTConfig::from_hf_json(j), ds::NotSupported);
  j = opt_json();
  j["num_attention_heads"] = 5;
  EXPECT_THROW(OPTConfig::from_hf_json(j), ds::ConfigError);
  auto c = OPTConfig::from_hf_json(opt_json(true));
  EXPECT_EQ(OPTConfig::from_hf_json(c.to_hf_json()).to_hf_json(), c.to_hf_json());
}

}  // namespace
