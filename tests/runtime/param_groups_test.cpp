#include "runtime/param_groups.h"

#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include "models/gpt2.h"

namespace ds {
namespace {

TEST(ParamGroups, NoDecaySplitsBiasesAndNormsFromWeights) {
  auto model = models::GPT2(models::GPT2Config::preset("tiny"));
  auto groups = no_decay_param_groups(*model);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 0.0);
  EXPECT_FALSE(groups[1].weight_decay.has_value());
  for (const auto& n : groups[0].params)
    EXPECT_TRUE(n.find("bias") != std::string::npos || n.find("ln_") != std::string::npos) << n;
  for (const auto& n : groups[1].params) EXPECT_EQ(n.find("bias"), std::string::npos) << n;
  EXPECT_NE(std::find(groups[1].params.begin(), groups[1].params.end(), "transformer.wte.weight"), groups[1].params.end());
  EXPECT_EQ(groups[0].params.size() + groups[1].params.size(), model->parameters().size());
}

struct Affine : torch::nn::Module {
  Affine() {
    weight = register_parameter("weight", torch::full({4}, 2.0));
    bias = register_parameter("bias", torch::full({4}, 2.0));
  }
  torch::Tensor forward(const torch::Tensor& x) { return (x * weight + bias).sum() * 0.0; }
  torch::Tensor weight, bias;
};

TEST(ParamGroups, EngineDecaysOnlyTheDecayGroup) {
  // Zero gradients: AdamW changes parameters only through decay, p *= 1 - lr * wd.
  auto model = std::make_shared<Affine>();
  auto engine = initialize(model, load_config_text(R"({"train_batch_size": 1,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.5, "weight_decay": 0.2}}})", 1),
                           no_decay_param_groups(*model));
  engine.backward(engine.forward(torch::ones({4})));
  engine.step();
  EXPECT_TRUE(torch::allclose(model->weight, torch::full({4}, 2.0 * (1 - 0.5 * 0.2))));
  EXPECT_TRUE(torch::equal(model->bias, torch::full({4}, 2.0)));
}

}  // namespace
}  // namespace ds
