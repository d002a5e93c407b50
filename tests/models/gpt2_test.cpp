// GPT-2 model: Hugging Face parameter names, GPT-2 init, determinism, the LayerList contract,
// causality, input checks, loss, dtypes, and that it learns.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "models/gpt2.h"
#include "util/error.h"

namespace {

using ds::models::GPT2;
using ds::models::GPT2Config;

GPT2 tiny_model(uint64_t seed = 0) {
  torch::manual_seed(seed);
  return GPT2(GPT2Config::preset("tiny"));
}

torch::Tensor random_tokens(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(vocab, {b, t}, torch::kLong);
}

std::vector<std::string> param_names(torch::nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& item : m.named_parameters()) names.push_back(item.key());
  return names;
}

TEST(GPT2, ParameterNamesAreHuggingFaces) {
  auto model = tiny_model();
  std::vector<std::string> expected = {"transformer.wte.weight", "transformer.wpe.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    for (const char* s : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                          "mlp.c_proj.bias"}) {
      expected.push_back(p + s);
    }
  }
  expected.push_back("transformer.ln_f.weight");
  expected.push_back("transformer.ln_f.bias");
  EXPECT_EQ(param_names(*model), expected);
  // torch Linear layout [out, in] (HF Conv1D is [in, out]: export transposes).
  auto params = model->named_parameters();
  EXPECT_EQ(params["transformer.h.0.attn.c_attn.weight"].sizes(), torch::IntArrayRef({192, 64}));
  EXPECT_EQ(params["transformer.h.0.mlp.c_proj.weight"].sizes(), torch::IntArrayRef({64, 256}));
  EXPECT_EQ(params["transformer.wpe.weight"].sizes(), torch::IntArrayRef({64, 64}));
}

TEST(GPT2, InitStatistics) {
  torch::manual_seed(3);
  GPT2Config cfg{512, 128, 256, 8, 8};
  GPT2 model(cfg);
  const double residual_std = 0.02 / std::sqrt(2.0 * 8);
  std::vector<torch::Tensor> residual, plain;
  for (const auto& item : model->named_parameters()) {
    const std::string& n = item.key();
    const auto& p = item.value();
    if (n.ends_with(".bias")) {
      EXPECT_EQ(p.abs().max().item<float>(), 0.0f) << n;
    } else if (n.find(".ln_") != std::string::npos) {
      EXPECT_TRUE(torch::all(p == 1).item<bool>()) << n;
    } else if (n.ends_with("c_proj.weight")) {
      residual.push_back(p.flatten());
    } else {
      plain.push_back(p.flatten());
      EXPECT_NEAR(p.std().item<double>(), 0.02, 0.02 * 0.05) << n;
    }
  }
  ASSERT_EQ(residual.size(), 16u);
  const auto r = torch::cat(residual);
  EXPECT_NEAR(r.std().item<double>(), residual_std, residual_std * 0.01);
  EXPECT_NEAR(r.mean().item<double>(), 0.0, residual_std * 0.01);
  EXPECT_NEAR(torch::cat(plain).std().item<double>(), 0.02, 0.02 * 0.01);
}

TEST(GPT2, DeterministicUnderManualSeed) {
  auto a = tiny_model(7), b = tiny_model(7), c = tiny_model(8);
  auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  bool any_diff = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
    any_diff = any_diff || !torch::equal(pa[i], pc[i]);
  }
  EXPECT_TRUE(any_diff);
}

TEST(GPT2, LayerListShapeAndNames) {
  auto model = tiny_model();
  const auto& layers = model->layers();
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0].name, "embed");
  EXPECT_EQ(layers[1].name, "h.0");
  EXPECT_EQ(layers[2].name, "h.1");
  EXPECT_EQ(layers[3].name, "head");

  auto params = model->named_parameters();
  std::set<std::string> real;
  for (const auto& item : params) real.insert(item.key());
  for (const auto& layer : layers) {
    for (const auto& n : layer.param_names) EXPECT_TRUE(real.count(n)) << layer.name << ": " << n;
  }
  const auto all = layers.all_param_names();
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()), real);
  EXPECT_EQ(all.size(), real.size());
  auto has = [](const ds::nn::Layer& l, const std::string& n) {
    return std::find(l.param_names.begin(), l.param_names.end(), n) != l.param_names.end();
  };
  EXPECT_TRUE(has(layers[0], "transformer.wte.weight"));
  EXPECT_TRUE(has(layers[3], "transformer.wte.weight"));  // tied
  EXPECT_TRUE(has(layers[3], "transformer.ln_f.bias"));
  EXPECT_EQ(layers[1].param_names.size(), 12u);
}

TEST(GPT2, LayerByLayerEqualsModelForward) {
  auto model = tiny_model();
  auto idx = random_tokens(2, 16, 256, 1);
  torch::Tensor h = idx;
  for (const auto& layer : model->layers()) h = layer.forward(h);
  auto logits = model->forward(idx);
  EXPECT_EQ(logits.sizes(), torch::IntArrayRef({2, 16, 256}));
  EXPECT_TRUE(torch::equal(h, logits));
}

// The contract "every parameter a layer uses is in its param_names": a parameter that gets a
// gradient from layer i alone must be listed by layer i.
TEST(GPT2, LayersUseOnlyListedParameters) {
  auto model = tiny_model();
  auto idx = random_tokens(2, 8, 256, 2);
  std::vector<torch::Tensor> inputs = {idx};
  {
    torch::NoGradGuard ng;
    for (size_t i = 0; i + 1 < model->layers().size(); ++i)
      inputs.push_back(model->layers()[i].forward(inputs.back()));
  }
  auto params = model->named_parameters();
  for (size_t i = 0; i < model->layers().size(); ++i) {
    const auto& layer = model->layers()[i];
    model->zero_grad();
    auto x = inputs[i].is_floating_point() ? inputs[i].clone().requires_grad_(true) : inputs[i];
    layer.forward(x).pow(2).sum().backward();
    std::set<std::string> listed(layer.param_names.begin(), layer.param_names.end());
    for (const auto& item : params) {
      const auto& g = item.value().grad();
      const bool used = g.defined() && g.abs().sum().item<double>() > 0;
      EXPECT_EQ(used, listed.count(item.key()) == 1) << layer.name << ": " << item.key();
    }
  }
}

TEST(GPT2, LayerHooksSeeEveryLayer) {
  struct Counter : ds::nn::LayerHooks {
    std::vector<size_t> before, after;
    void before_forward(size_t i) override { before.push_back(i); }
    void after_forward(size_t i) override { after.push_back(i); }
  };
  auto model = tiny_model();
  auto hooks = std::make_shared<Counter>();
  model->layers().set_hooks(hooks);
  model->forward(random_tokens(1, 4, 256, 3));
  EXPECT_EQ(hooks->before, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(hooks->after, (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(GPT2, Causal) {
  auto model = tiny_model();
  auto idx = random_tokens(1, 32, 256, 4);
  torch::NoGradGuard ng;
  auto base = model->forward(idx);
  for (int64_t t : {0, 5, 31}) {
    auto changed = idx.clone();
    changed[0][t] = (changed[0][t].item<int64_t>() + 1) % 256;
    auto out = model->forward(changed);
    using torch::indexing::None;
    using torch::indexing::Slice;
    EXPECT_TRUE(torch::equal(out.index({Slice(), Slice(0, t)}), base.index({Slice(), Slice(0, t)})))
        << "logits before position " << t << " changed";
    EXPECT_FALSE(torch::allclose(out.index({Slice(), Slice(t, None)}),
                                 base.index({Slice(), Slice(t, None)})))
        << "logits from position " << t << " on did not change";
  }
}

TEST(GPT2, RejectsBadInputs) {
  auto model = tiny_model();
  try {
    model->forward(torch::zeros({1, 65}, torch::kLong));
    FAIL() << "expected ds::Error";
  } catch (const ds::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("65"), std::string::npos) << msg;
    EXPECT_NE(msg.find("64"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(model->forward(torch::zeros({1, 64}, torch::kLong)));
  EXPECT_THROW(model->forward(torch::zeros({1, 4}, torch::kFloat)), ds::Error);
  EXPECT_THROW(model->forward(torch::zeros({4}, torch::kLong)), ds::Error);
  EXPECT_THROW(model->forward(torch::full({1, 4}, 256, torch::kLong)), ds::Error);
  EXPECT_THROW(model->forward(torch::zeros({1, 4}, torch::kLong), torch::zeros({1, 5}, torch::kLong)),
               ds::Error);
}

TEST(GPT2, LossIsMeanCrossEntropy) {
  auto model = tiny_model();
  auto idx = random_tokens(2, 16, 256, 5);
  auto targets = random_tokens(2, 16, 256, 6);
  auto loss = model->forward(idx, targets);
  EXPECT_EQ(loss.dim(), 0);
  // -mean log p(target), written independently of the model's loss.
  auto logp = torch::log_softmax(model->forward(idx), -1);
  auto manual = -logp.gather(-1, targets.unsqueeze(-1)).mean();
  EXPECT_NEAR(loss.item<double>(), manual.item<double>(), 1e-5);
  // Small init → near-uniform predictions: loss ≈ ln(V).
  EXPECT_NEAR(loss.item<double>(), std::log(256.0), 0.3);
}

TEST(GPT2, ComputesInParameterDtype) {
  auto model = tiny_model();
  auto idx = random_tokens(2, 16, 256, 7);
  torch::NoGradGuard ng;
  auto ref = model->forward(idx);
  EXPECT_EQ(ref.scalar_type(), torch::kFloat);

  model->to(torch::kDouble);
  auto f64 = model->forward(idx);
  EXPECT_EQ(f64.scalar_type(), torch::kDouble);
  EXPECT_LT((f64 - ref.to(torch::kDouble)).abs().max().item<double>(), 1e-5);

  model->to(torch::kBFloat16);
  auto bf16 = model->forward(idx);
  EXPECT_EQ(bf16.scalar_type(), torch::kBFloat16);
  const double err = (bf16.to(torch::kFloat) - ref).abs().max().item<double>();
  EXPECT_LT(err, 0.05 * ref.abs().max().item<double>() + 1e-2);
  auto loss = model->forward(idx, idx);
  EXPECT_EQ(loss.scalar_type(), torch::kFloat);  // loss upcast for 16-bit logits
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
}

TEST(GPT2, LearnsARepeatedSequence) {
  auto model = tiny_model(11);
  auto idx = random_tokens(4, 32, 256, 12);
  auto targets = torch::roll(idx, -1, 1);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(3e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    auto loss = model->forward(idx, targets);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.5) << "first " << first << " last " << last;
}

}  // namespace
