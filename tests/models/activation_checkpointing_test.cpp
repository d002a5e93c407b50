// Activation checkpointing over a LayerList: segmentation, GPT-2 training equivalence (bitwise),
// bytes kept for backward, dropout RNG replay, composition with stage-3-like hooks, evaluation.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "activation_checkpointing_test_util.h"
#include "config/loader.h"
#include "models/gpt2.h"
#include "nn/activation_checkpointing.h"
#include "util/error.h"

namespace {

using ds::ActivationCheckpointingConfig;
using ds::models::GPT2;
using ds::models::GPT2Config;
using ds::nn::checkpoint_segments;
using ds::test::CountingCpuAllocator;
using ds::test::FakeStage3Hooks;

constexpr GPT2Config kTiny{256, 64, 64, 2, 4};   // the "tiny" preset
constexpr GPT2Config kDeep{256, 64, 64, 4, 4};   // 6 layers in the list: embed, h.0..h.3, head

ActivationCheckpointingConfig ckpt(std::optional<int64_t> number_checkpoints = std::nullopt) {
  ActivationCheckpointingConfig c;
  c.number_checkpoints = number_checkpoints;
  return c;
}

struct Batch {
  torch::Tensor idx, targets;
};
Batch batch(int64_t b, int64_t t, uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randint(256, {b, t}, torch::kLong), torch::randint(256, {b, t}, torch::kLong)};
}

struct Trace {
  std::vector<float> losses;
  std::vector<std::map<std::string, torch::Tensor>> grads;  // per step, by parameter name
};

// `steps` AdamW steps on fixed batches; checkpointing applied when `config` is set.
Trace train(const GPT2Config& cfg, std::optional<ActivationCheckpointingConfig> config, int steps = 3) {
  torch::manual_seed(7);
  GPT2 model(cfg);
  if (config) ds::nn::apply_activation_checkpointing(model->layers(), *model, *config);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  Trace trace;
  for (int s = 0; s < steps; ++s) {
    Batch b = batch(4, 32, 100 + s);
    opt.zero_grad();
    auto loss = model->forward(b.idx, b.targets);
    loss.backward();
    trace.losses.push_back(loss.item<float>());
    std::map<std::string, torch::Tensor> g;
    for (const auto& item : model->named_parameters()) g[item.key()] = item.value().grad().clone();
    trace.grads.push_back(std::move(g));
    opt.step();
  }
  return trace;
}

// Bitwise: the recompute runs the same kernels on the same inputs, and every gradient sum has the
// same terms in the same order (parameters' gradients reach AccumulateGrad through the outer graph).
void expect_identical(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s) {
    EXPECT_EQ(a.losses[s], b.losses[s]) << "step " << s;
    for (const auto& [name, g] : a.grads[s]) {
      ASSERT_TRUE(g.defined()) << name;
      EXPECT_TRUE(torch::equal(g, b.grads[s].at(name))) << "step " << s << " " << name << " max diff "
                                                        << (g - b.grads[s].at(name)).abs().max().item<float>();
    }
  }
}

TEST(ActivationCheckpointing, Segments) {
  auto sizes = [](size_t n, std::optional<int64_t> k) {
    std::vector<size_t> out;
    for (const auto& s : checkpoint_segments(n, k)) out.push_back(s.end - s.begin);
    return out;
  };
  EXPECT_EQ(sizes(4, std::nullopt), (std::vector<size_t>{1, 1, 1, 1}));
  EXPECT_EQ(sizes(10, 4), (std::vector<size_t>{3, 3, 2, 2}));
  EXPECT_EQ(sizes(6, 2), (std::vector<size_t>{3, 3}));
  EXPECT_EQ(sizes(4, 1), (std::vector<size_t>{4}));
  EXPECT_EQ(sizes(4, 10), (std::vector<size_t>{1, 1, 1, 1}));  // more checkpoints than layers
  EXPECT_TRUE(checkpoint_segments(0, std::nullopt).empty());
  auto segs = checkpoint_segments(10, 4);
  EXPECT_EQ(segs.front().begin, 0u);
  EXPECT_EQ(segs.back().end, 10u);
  for (size_t i = 1; i < segs.size(); ++i) EXPECT_EQ(segs[i].begin, segs[i - 1].end);
  EXPECT_THROW(checkpoint_segments(4, 0), ds::ConfigError);
}

TEST(ActivationCheckpointing, Gpt2TinyTrainsIdentically) {
  const Trace plain = train(kTiny, std::nullopt);
  expect_identical(plain, train(kTiny, ckpt()));
}

TEST(ActivationCheckpointing, Gpt2DeepGroupedTrainsIdentically) {
  const Trace plain = train(kDeep, std::nullopt);
  for (int64_t k : {1, 2, 3, 4, 6}) {
    SCOPED_TRACE("number_checkpoints=" + std::to_string(k));
    expect_identical(plain, train(kDeep, ckpt(k)));
  }
}

TEST(ActivationCheckpointing, CountsSegmentsAndRecomputes) {
  torch::manual_seed(1);
  GPT2 model(kDeep);
  auto runner = ds::nn::apply_activation_checkpointing(model->layers(), *model, ckpt(4));
  ASSERT_EQ(runner->segments().size(), 4u);
  EXPECT_EQ(runner->describe(0), "segment 0 (layers embed..h.0)");
  EXPECT_EQ(runner->describe(3), "segment 3 (layers head)");
  Batch b = batch(2, 16, 3);
  model->forward(b.idx, b.targets).backward();
  EXPECT_EQ(runner->stats().forwards, 4);
  EXPECT_EQ(runner->stats().recomputes, 4);
  // Saved: the token ids [2,16] int64, then three [2,16,64] fp32 segment inputs.
  EXPECT_EQ(runner->stats().saved_bytes, 2 * 16 * 8 + 3 * 2 * 16 * 64 * 4);
  model->layers().set_runner(nullptr);  // off again: runs in place
  model->forward(b.idx, b.targets).backward();
  EXPECT_EQ(runner->stats().forwards, 4);
}

TEST(ActivationCheckpointing, EmbeddingSegmentWithoutGradInput) {
  // The only input is token ids (no grad): the parameters alone make the segment differentiable.
  torch::manual_seed(2);
  torch::nn::Embedding emb(16, 8);
  ds::nn::LayerList list;
  list.add("embed", [m = emb.ptr()](const torch::Tensor& idx) { return m->forward(idx); }, {"weight"});
  auto idx = torch::tensor({{1, 3, 3, 7}}, torch::kLong);
  auto plain = list.forward(idx).pow(2).sum();
  plain.backward();
  auto expected = emb->weight.grad().clone();
  emb->weight.mutable_grad() = torch::Tensor();
  ds::nn::apply_activation_checkpointing(list, *emb, ckpt());
  auto out = list.forward(idx);
  ASSERT_TRUE(out.requires_grad());
  out.pow(2).sum().backward();
  EXPECT_TRUE(torch::equal(emb->weight.grad(), expected));
}

TEST(ActivationCheckpointing, DropoutReplaysTheSameMask) {
  auto run = [](bool checkpointed, float* next_draw) {
    torch::manual_seed(5);
    torch::nn::Linear lin(32, 32);
    ds::nn::LayerList list;
    list.add("a", [m = lin.ptr()](const torch::Tensor& x) { return torch::dropout(m->forward(x), 0.5, true); },
             {"weight", "bias"});
    list.add("b", [](const torch::Tensor& x) { return torch::dropout(x.tanh(), 0.3, true); }, {});
    if (checkpointed) ds::nn::apply_activation_checkpointing(list, *lin, ckpt());
    auto x = torch::randn({16, 32}, torch::requires_grad());
    list.forward(x).sum().backward();
    *next_draw = torch::rand({1}).item<float>();  // the generator is left as the plain run leaves it
    return std::vector<torch::Tensor>{x.grad(), lin->weight.grad(), lin->bias.grad()};
  };
  float plain_draw = 0, ckpt_draw = 0;
  auto plain = run(false, &plain_draw);
  auto ckpt_grads = run(true, &ckpt_draw);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(torch::equal(plain[i], ckpt_grads[i])) << i;
  EXPECT_EQ(plain_draw, ckpt_draw);
}

TEST(ActivationCheckpointing, ComposesWithStage3StyleHooks) {
  // Hooks that, like ZeRO stage 3, release each layer's parameters (NaN) after it runs and gather
  // them again before its backward; each AccumulateGrad must fire exactly once (the tied wte too).
  for (std::optional<int64_t> k : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    SCOPED_TRACE(k ? "number_checkpoints=2" : "per layer");
    torch::manual_seed(9);
    GPT2 reference(kDeep);
    torch::manual_seed(9);
    GPT2 model(kDeep);
    Batch b = batch(2, 16, 4);
    reference->forward(b.idx, b.targets).backward();

    auto hooks = std::make_shared<FakeStage3Hooks>(model->layers(), *model);
    model->layers().set_hooks(hooks);
    ds::nn::apply_activation_checkpointing(model->layers(), *model, ckpt(k));
    auto loss = model->forward(b.idx, b.targets);
    EXPECT_TRUE(hooks->all_released());
    loss.backward();
    for (const auto& item : reference->named_parameters()) {
      const std::string& name = item.key();
      EXPECT_EQ(hooks->accumulate_fires(name), 1) << name;
      EXPECT_TRUE(torch::equal(item.value().grad(), hooks->grad(name))) << name;
    }
    // Backward gathered the layers last to first, as the plain stage-3 path does.
    EXPECT_EQ(hooks->backward_gathers(), (std::vector<size_t>{5, 4, 3, 2, 1, 0}));
  }
}

TEST(ActivationCheckpointing, KeepsFarFewerBytesForBackward) {
  // Bytes the CPU allocator holds after forward (the graph's saved tensors plus the loss) and the
  // peak over forward + backward, counted by a wrapping allocator: deterministic, unlike RSS.
  Batch b = batch(8, 64, 11);
  auto measure = [&](std::optional<int64_t> k, bool checkpointed) {
    torch::manual_seed(3);
    GPT2 model(kDeep);
    if (checkpointed) ds::nn::apply_activation_checkpointing(model->layers(), *model, ckpt(k));
    for (auto& p : model->parameters()) p.mutable_grad() = torch::zeros_like(p);  // not counted below
    CountingCpuAllocator::Scope counting;
    auto loss = model->forward(b.idx, b.targets);
    const int64_t after_forward = counting.live();
    loss.backward();
    return std::pair<int64_t, int64_t>{after_forward, counting.peak()};
  };
  const auto plain = measure(std::nullopt, false);
  const auto per_layer = measure(std::nullopt, true);
  const auto two = measure(2, true);
  std::printf("bytes after forward / peak: plain %lld / %lld, per layer %lld / %lld, 2 segments %lld / %lld\n",
              (long long)plain.first, (long long)plain.second, (long long)per_layer.first,
              (long long)per_layer.second, (long long)two.first, (long long)two.second);
  EXPECT_LT(per_layer.first * 4, plain.first);  // at least 4x fewer bytes kept for backward
  EXPECT_LT(two.first * 4, plain.first);
  EXPECT_LT(per_layer.second, plain.second);    // and a lower peak
}

// The figures in docs/activation_checkpointing.md: GPT-2 with 6 blocks, C=384, 6 heads, a vocabulary
// of 8192, B=4, T=256; run with --gtest_also_run_disabled_tests. Times are the best of 3 steps.
TEST(ActivationCheckpointing, DISABLED_DocFigures) {
  const GPT2Config cfg{8192, 256, 384, 6, 6};
  torch::manual_seed(12);
  auto idx = torch::randint(cfg.vocab_size, {4, 256}, torch::kLong);
  auto targets = torch::randint(cfg.vocab_size, {4, 256}, torch::kLong);
  for (std::optional<int64_t> k : {std::optional<int64_t>{-1}, std::optional<int64_t>{}, std::optional<int64_t>{4},
                                   std::optional<int64_t>{2}}) {
    torch::manual_seed(3);
    GPT2 model(cfg);
    const bool on = !(k && *k == -1);
    std::shared_ptr<ds::nn::ActivationCheckpointing> runner;
    if (on) runner = ds::nn::apply_activation_checkpointing(model->layers(), *model, ckpt(k));
    for (auto& p : model->parameters()) p.mutable_grad() = torch::zeros_like(p);
    int64_t after_forward = 0, peak = 0;
    {
      CountingCpuAllocator::Scope counting;
      auto loss = model->forward(idx, targets);
      after_forward = counting.live();
      loss.backward();
      peak = counting.peak();
    }
    double best = 1e30, recompute = 1e30;
    for (int r = 0; r < 3; ++r) {
      const double before = runner ? runner->stats().recompute_seconds : 0.0;
      auto t0 = std::chrono::steady_clock::now();
      model->forward(idx, targets).backward();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (runner) recompute = std::min(recompute, runner->stats().recompute_seconds - before);
    }
    const std::string label =
        !on ? "off" : (k ? "number_checkpoints=" + std::to_string(*k) : std::string("per layer (8 segments)"));
    std::printf("%-22s kept after forward %7.1f MiB  peak %7.1f MiB  step %7.1f ms  of which recompute %6.1f ms\n",
                label.c_str(), after_forward / 1048576.0, peak / 1048576.0, best * 1e3, runner ? recompute * 1e3 : 0.0);
  }
}

TEST(ActivationCheckpointing, EvaluationRunsInPlace) {
  torch::manual_seed(4);
  GPT2 model(kTiny);
  Batch b = batch(2, 8, 1);
  torch::Tensor plain;
  {
    torch::NoGradGuard no_grad;
    plain = model->forward(b.idx);
  }
  auto runner = ds::nn::apply_activation_checkpointing(model->layers(), *model, ckpt());
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(model->forward(b.idx), plain));
  EXPECT_EQ(runner->stats().forwards, 0);
}

TEST(ActivationCheckpointing, RejectsUnknownParameterAndResizedList) {
  torch::nn::Linear lin(2, 2);
  ds::nn::LayerList list;
  list.add("a", [m = lin.ptr()](const torch::Tensor& x) { return m->forward(x); }, {"weight", "no.such"});
  EXPECT_THROW(ds::nn::apply_activation_checkpointing(list, *lin, ckpt()), ds::Error);
  ds::nn::LayerList ok;
  ok.add("a", [m = lin.ptr()](const torch::Tensor& x) { return m->forward(x); }, {"weight", "bias"});
  auto runner = std::make_shared<ds::nn::ActivationCheckpointing>(ckpt(), ok, *lin);
  ok.add("b", [](const torch::Tensor& x) { return x; }, {});
  ok.set_runner(runner);
  EXPECT_THROW(ok.forward(torch::ones({1, 2})), ds::Error);
}

TEST(ActivationCheckpointing, RequestedWhenTheSectionSetsAKey) {
  auto requested = [](const std::string& json) {
    return ds::nn::activation_checkpointing_requested(ds::load_config_text(json, 1));
  };
  EXPECT_FALSE(requested(R"({"train_batch_size": 4})"));
  EXPECT_TRUE(requested(R"({"train_batch_size": 4, "activation_checkpointing": {"number_checkpoints": 2}})"));
  EXPECT_TRUE(requested(R"({"train_batch_size": 4, "activation_checkpointing": {"profile": true}})"));
}

}  // namespace
