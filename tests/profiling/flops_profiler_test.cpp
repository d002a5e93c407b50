// Tests src/profiling/flops_profiler.* (and op_flops, module_tree, flops_report): exact counts
// for single layers and aten ops, GPT-2 against the analytic formula, the printed module tree
// parsed back, nothing counted outside start()/stop(), and DeepSpeed's summary keys.
#include "profiling/flops_profiler.h"

#include <gtest/gtest.h>

#include <functional>

#include "models/gpt2.h"
#include "util/error.h"

namespace ds::profiling {
namespace {

// Profiles one call of `run` on `model`.
template <typename Fn>
ModuleProfile profile_once(torch::nn::Module& model, Fn run) {
  FlopsProfiler prof(model);
  prof.start();
  run();
  prof.stop();
  return prof.result();
}

const ModuleProfile* find(const ModuleProfile& root, const std::string& path) {
  if (root.path == path) return &root;
  for (const auto& c : root.children) {
    if (const auto* f = find(c, path)) return f;
  }
  return nullptr;
}

TEST(FlopsProfiler, SingleLinearCountedExactly) {
  torch::nn::Linear fc(16, 8);
  auto x3 = torch::randn({2, 3, 16});
  const auto r = profile_once(*fc, [&] { fc(x3); });
  // LibTorch's F::linear runs t + matmul + add_ for a 3-D input: DeepSpeed's linear count,
  // MACs = numel(input) · out_features, FLOPs = 2 · MACs (the bias add_ is not counted).
  EXPECT_EQ(r.macs, 2 * 3 * 16 * 8);
  EXPECT_EQ(r.flops, 2 * 2 * 3 * 16 * 8);
  EXPECT_EQ(r.params, 16 * 8 + 8);
  EXPECT_EQ(r.type_name, "Linear");
  EXPECT_EQ(r.extra_repr, "in_features=16, out_features=8, bias=true");
  EXPECT_EQ(r.ops, 3);  // t, matmul, add_: the kernels inside matmul are not operators of their own
  EXPECT_GT(r.latency_s, 0.0);

  // A 2-D input takes F::linear's fused path, aten::addmm: DeepSpeed's addmm count adds one
  // FLOP per element of the bias it adds (out_features, broadcast over the rows).
  auto x2 = torch::randn({4, 16});
  const auto r2 = profile_once(*fc, [&] { fc(x2); });
  EXPECT_EQ(r2.macs, 4 * 16 * 8);
  EXPECT_EQ(r2.flops, 2 * 4 * 16 * 8 + 8);
}

TEST(FlopsProfiler, Conv2dCountedExactly) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 8, 3).padding(1));
  auto x = torch::randn({2, 3, 10, 10});
  const auto r = profile_once(*conv, [&] { conv(x); });
  // out [2,8,10,10]: MACs = k²·Cin·Cout·N·H·W; FLOPs = 2·MACs + Cout·N·H·W (bias).
  const int64_t macs = 9 * 3 * 8 * 2 * 10 * 10;
  EXPECT_EQ(r.macs, macs);
  EXPECT_EQ(r.flops, 2 * macs + 8 * 2 * 10 * 10);

  torch::nn::Conv2d grouped(torch::nn::Conv2dOptions(4, 6, 3).stride(2).groups(2).bias(false));
  auto xg = torch::randn({1, 4, 9, 9});
  const auto g = profile_once(*grouped, [&] { grouped(xg); });
  const int64_t gmacs = 9 * (4 / 2) * 6 * 1 * 4 * 4;  // out [1,6,4,4]
  EXPECT_EQ(g.macs, gmacs);
  EXPECT_EQ(g.flops, 2 * gmacs);
}

TEST(FlopsProfiler, AtenOpsUseDeepSpeedFormulas) {
  torch::nn::Module root;
  auto count = [&](const std::function<void()>& fn) {
    return profile_once(root, fn).flops;
  };
  auto x = torch::randn({4, 8});
  EXPECT_EQ(count([&] { torch::addmm(torch::randn({8}), torch::randn({4, 16}), torch::randn({16, 8})); }),
            2 * 4 * 16 * 8 + 8);
  EXPECT_EQ(count([&] {
              torch::baddbmm(torch::randn({2, 3, 5}), torch::randn({2, 3, 4}), torch::randn({2, 4, 5}));
            }),
            2 * 2 * 3 * 4 * 5 + 2 * 3 * 5);
  EXPECT_EQ(count([&] { torch::matmul(torch::randn({2, 3, 4}), torch::randn({4, 5})); }), 2 * 24 * 5);
  EXPECT_EQ(count([&] { torch::matmul(x, torch::randn({8})); }), 2 * 32);
  EXPECT_EQ(count([&] { torch::einsum("bij,bjk->bik", {torch::randn({2, 3, 4}), torch::randn({2, 4, 5})}); }),
            2 * (2 * 3 * 4 * 5));
  EXPECT_EQ(count([&] { torch::layer_norm(x, {8}); }), 4 * 32);  // no affine weight: 4 per element
  EXPECT_EQ(count([&] { torch::softmax(x, -1); }), 32);
  EXPECT_EQ(count([&] { torch::gelu(x); }), 32);
  EXPECT_EQ(count([&] { (void)(torch::randn({2, 4, 8}) + x); }), 64);  // broadcast result numel
  EXPECT_EQ(count([&] { (void)(x * 2.0); }), 32);
  EXPECT_EQ(count([&] { (void)(x / 2.0); }), 0);  // DeepSpeed does not count div
  EXPECT_EQ(count([&] { torch::embedding(torch::randn({10, 8}), torch::tensor({1, 2})); }), 0);
}

// Forward FLOPs of a GPT-2 as the profiler counts them, term by term (B batch, T tokens, C width,
// L layers, H heads, V vocabulary):
//   per block  ln_1, ln_2            2 · 5·BTC         (layer norm with affine weight)
//              c_attn, c_proj        2·BT·(3C·C + C·C) (linear: 2·MACs, biases not counted)
//              q·kᵀ, softmax·v       2 · 2·B·T²·C      (matmul [B,H,T,D]@[B,H,D,T] and back)
//              softmax               B·H·T²
//              c_fc, mlp.c_proj      2·BT·(4C·C + 4C·C)
//              gelu                  4·BTC
//              two residual adds     2·BTC
//   embed      wte + wpe add         BTC               (embedding lookups cost 0)
//   head       ln_f                  5·BTC
//              x @ wteᵀ              2·BTC·V
int64_t gpt2_exact_flops(int64_t B, int64_t T, int64_t C, int64_t L, int64_t H, int64_t V) {
  const int64_t block = 24 * B * T * C * C + 4 * B * T * T * C + B * H * T * T + 16 * B * T * C;
  return L * block + 6 * B * T * C + 2 * B * T * C * V;
}
// The textbook estimate: 2 · (non-embedding matmul parameters 12·L·C² + lm head V·C) · tokens
// + attention 2·2·L·T²·C·B. The profiler must agree within 2% (the rest is layer norms, gelu,
// softmax and adds).
double gpt2_textbook_flops(int64_t B, int64_t T, int64_t C, int64_t L, int64_t V) {
  const double tokens = static_cast<double>(B * T);
  return 2.0 * static_cast<double>(12 * L * C * C + V * C) * tokens +
         2.0 * 2.0 * static_cast<double>(L * T * T * C * B);
}

void check_gpt2(const models::GPT2Config& cfg, int64_t B, int64_t T) {
  torch::manual_seed(0);
  models::GPT2 model(cfg);
  auto idx = torch::randint(0, cfg.vocab_size, {B, T});
  FlopsProfiler prof(*model);
  prof.start();
  model->forward(idx);
  prof.stop();
  const int64_t C = cfg.n_embd, L = cfg.n_layer, H = cfg.n_head, V = cfg.vocab_size;
  const int64_t exact = gpt2_exact_flops(B, T, C, L, H, V);
  EXPECT_EQ(prof.total_flops(), exact);
  EXPECT_EQ(prof.total_macs(), L * (12 * B * T * C * C + 2 * B * T * T * C) + B * T * C * V);
  const double textbook = gpt2_textbook_flops(B, T, C, L, V);
  EXPECT_NEAR(static_cast<double>(prof.total_flops()) / textbook, 1.0, 0.02)
      << "measured " << prof.total_flops() << " textbook " << textbook;
  EXPECT_EQ(prof.total_params(), cfg.num_parameters());

  // Attribution: each block holds its share; attention's matmuls and softmax land in attn.
  const ModuleProfile r = prof.result();
  const int64_t block = exact - 6 * B * T * C - 2 * B * T * C * V;
  const auto* h0 = find(r, "transformer.h.0");
  ASSERT_NE(h0, nullptr);
  EXPECT_EQ(h0->flops * L, block);
  const auto* attn = find(r, "transformer.h.0.attn");
  const auto* c_attn = find(r, "transformer.h.0.attn.c_attn");
  const auto* c_proj = find(r, "transformer.h.0.attn.c_proj");
  ASSERT_TRUE(attn && c_attn && c_proj);
  EXPECT_EQ(c_attn->flops, 6 * B * T * C * C);
  // attn's own operators: q·kᵀ, softmax·v, softmax, and the residual add after c_proj (an
  // operator that reads no parameter goes to the parent of the last layer that did).
  EXPECT_EQ(attn->flops - c_attn->flops - c_proj->flops,
            4 * B * T * T * C + B * H * T * T + B * T * C);
  EXPECT_EQ(find(r, "transformer.wte")->flops, 2 * B * T * C * V);  // the tied lm head
}

TEST(FlopsProfiler, Gpt2TinyMatchesAnalyticCount) {
  check_gpt2(models::GPT2Config::preset("tiny"), 2, 16);
}

TEST(FlopsProfiler, Gpt2TwoLayersWidth128MatchesAnalyticCount) {
  models::GPT2Config cfg;
  cfg.vocab_size = 512;
  cfg.n_positions = 64;
  cfg.n_embd = 128;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  check_gpt2(cfg, 2, 32);
}

TEST(FlopsProfiler, NothingCountedOutsideStartStop) {
  torch::nn::Linear fc(8, 8);
  auto x = torch::randn({4, 8});
  FlopsProfiler prof(*fc);
  fc(x);  // before start
  prof.start();
  fc(x);
  fc(x);  // two calls: twice the count (nesting depth returned to 0 after the first)
  prof.stop();
  const int64_t counted = prof.total_flops();
  EXPECT_EQ(counted, 2 * (2 * 4 * 8 * 8 + 8));  // addmm: 2·MACs + bias elements
  fc(x);  // after stop
  EXPECT_EQ(prof.total_flops(), counted);
  EXPECT_FALSE(prof.running());
  prof.start();  // a restart clears the counts
  EXPECT_EQ(prof.total_flops(), 0);
  prof.stop();
}

TEST(FlopsProfiler, BackwardIsNotCounted) {
  torch::nn::Linear fc(8, 8);
  auto x = torch::randn({4, 8});
  FlopsProfiler prof(*fc);
  prof.start();
  auto loss = fc(x).sum();
  const int64_t fwd = prof.total_flops();
  loss.backward();
  prof.stop();
  EXPECT_EQ(prof.total_flops(), fwd);
  EXPECT_EQ(fwd, 2 * 4 * 8 * 8 + 8);
}

TEST(FlopsProfiler, OneRunningProfilerPerThread) {
  torch::nn::Linear a(2, 2), b(2, 2);
  FlopsProfiler pa(*a), pb(*b);
  pa.start();
  EXPECT_THROW(pb.start(), ds::Error);
  pa.stop();
  EXPECT_NO_THROW(pb.start());
}

}  // namespace
}  // namespace ds::profiling
