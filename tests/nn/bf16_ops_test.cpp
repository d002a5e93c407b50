// nn/bf16_ops.h: each bf16 kernel's forward and backward against the same operator in float64 on
// the same bf16 inputs, required to be as close to it as LibTorch's own bf16 operator is (or within
// bf16's rounding, 2^-8 of the largest value); fp32 goes through LibTorch bit for bit; and a bf16
// GPT-2 step under ds::initialize runs every matrix product of forward and backward in bf16.
#include "nn/bf16_ops.h"

#include <ATen/record_function.h>
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <limits>
#include <mutex>
#include <set>

#include "models/gpt2.h"

namespace {

using torch::Tensor;

// Largest |got - ref| over the largest |ref|.
double rel_err(const Tensor& got, const Tensor& ref) {
  return (got.to(torch::kDouble) - ref).abs().max().item<double>() / std::max(ref.abs().max().item<double>(), 1e-30);
}

// ours at least as close to the float64 reference as LibTorch's bf16 operator, or within bf16 rounding.
void expect_close(const Tensor& ours, const Tensor& torch_bf16, const Tensor& ref, const char* what) {
  const double mine = rel_err(ours, ref), theirs = rel_err(torch_bf16, ref);
  EXPECT_LE(mine, std::max(1.25 * theirs, 1.0 / 256)) << what << ": ours " << mine << ", LibTorch bf16 " << theirs;
}

struct Run {
  Tensor out;
  std::vector<Tensor> grads;
};

// Runs f on leaf copies of `inputs` in `dtype`, backward with `upstream` (cast alike), and returns
// the output and the inputs' gradients.
template <class F>
Run run(F f, const std::vector<Tensor>& inputs, const Tensor& upstream, torch::ScalarType dtype) {
  std::vector<Tensor> leaves;
  for (const auto& t : inputs) leaves.push_back(t.to(dtype).detach().requires_grad_(t.is_floating_point()));
  Tensor out = f(leaves);
  out.backward(upstream.to(out.scalar_type()));
  Run r{out.detach(), {}};
  for (const auto& l : leaves) r.grads.push_back(l.grad());
  return r;
}

#define SKIP_WITHOUT_KERNELS()                                                          \
  if (!ds::nn::bf16_kernels_active()) GTEST_SKIP() << "this CPU runs no bf16 kernels (no AVX-512)"

TEST(Bf16Ops, GeluTanhForwardAndBackward) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(1);
  const Tensor x = (torch::randn({3, 1037}) * 3).to(torch::kBFloat16);  // a tail past the 16 lanes
  const Tensor up = torch::randn({3, 1037});
  auto ours = run([](auto& in) { return ds::nn::gelu_tanh(in[0]); }, {x}, up, torch::kBFloat16);
  auto lib = run([](auto& in) { return torch::gelu(in[0], "tanh"); }, {x}, up, torch::kBFloat16);
  auto ref = run([](auto& in) { return torch::gelu(in[0], "tanh"); }, {x}, up.to(torch::kBFloat16), torch::kDouble);
  EXPECT_EQ(ours.out.scalar_type(), torch::kBFloat16);
  expect_close(ours.out, lib.out, ref.out, "gelu");
  expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "gelu dx");
}

TEST(Bf16Ops, LayerNormForwardAndBackward) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(2);
  const Tensor x = (torch::randn({2, 5, 771}) * 2 + 0.5).to(torch::kBFloat16);
  const Tensor w = (torch::randn({771}) * 0.5 + 1).to(torch::kBFloat16), b = torch::randn({771}).to(torch::kBFloat16);
  const Tensor up = torch::randn({2, 5, 771});
  auto ours = run([](auto& in) { return ds::nn::layer_norm(in[0], in[1], in[2], 1e-5); }, {x, w, b}, up, torch::kBFloat16);
  auto lib = run([](auto& in) { return torch::layer_norm(in[0], {771}, in[1], in[2], 1e-5); }, {x, w, b}, up,
                 torch::kBFloat16);
  auto ref = run([](auto& in) { return torch::layer_norm(in[0], {771}, in[1], in[2], 1e-5); }, {x, w, b},
                 up.to(torch::kBFloat16), torch::kDouble);
  expect_close(ours.out, lib.out, ref.out, "layer_norm");
  const char* names[] = {"dx", "dweight", "dbias"};
  for (size_t i = 0; i < 3; ++i) expect_close(ours.grads[i], lib.grads[i], ref.grads[i], names[i]);
}

// Scores [B, H, Tq, Tk]: square (training) and Tq < Tk (queries at the end of the keys).
TEST(Bf16Ops, CausalSoftmaxForwardAndBackward) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(3);
  for (const auto& [tq, tk] : {std::pair<int64_t, int64_t>{37, 37}, {5, 21}}) {
    SCOPED_TRACE(testing::Message() << "Tq " << tq << ", Tk " << tk);
    const Tensor s = (torch::randn({2, 3, tq, tk}) * 4).to(torch::kBFloat16);
    const Tensor up = torch::randn({2, 3, tq, tk});
    const double scale = 0.125;
    const Tensor future = torch::ones({tq, tk}, torch::kBool).triu(tk - tq + 1);
    auto masked = [&](auto& in) {
      return torch::softmax((in[0] * scale).masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
    };
    auto ours = run([&](auto& in) { return ds::nn::causal_softmax(in[0], scale); }, {s}, up, torch::kBFloat16);
    auto lib = run(masked, {s}, up, torch::kBFloat16);
    auto ref = run(masked, {s}, up.to(torch::kBFloat16), torch::kDouble);
    expect_close(ours.out, lib.out, ref.out, "probs");
    expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "dscores");
    // Past each query's position: exactly 0, in the probabilities and their gradient.
    EXPECT_EQ(ours.out.masked_select(future).abs().max().item<float>(), 0.0f);
    EXPECT_EQ(ours.grads[0].masked_select(future).abs().max().item<float>(), 0.0f);
  }
}

TEST(Bf16Ops, CrossEntropyReadsBf16LogitsInPlace) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(4);
  const Tensor logits = (torch::randn({9, 1003}) * 3).to(torch::kBFloat16);
  Tensor targets = torch::randint(0, 1003, {9}, torch::kLong);
  targets[2] = -100;  // ignored: no loss, no gradient
  targets[7] = -100;
  const Tensor up = torch::full({}, 0.75);
  auto ours = run([&](auto& in) { return ds::nn::cross_entropy(in[0], targets); }, {logits}, up, torch::kBFloat16);
  auto lib = run([&](auto& in) { return torch::nn::functional::cross_entropy(in[0].to(torch::kFloat), targets); },
                 {logits}, up, torch::kBFloat16);
  auto ref = run([&](auto& in) { return torch::nn::functional::cross_entropy(in[0], targets); }, {logits}, up,
                 torch::kDouble);
  EXPECT_EQ(ours.out.scalar_type(), torch::kFloat);
  EXPECT_NEAR(ours.out.item<double>(), ref.out.item<double>(), 1e-5 * std::abs(ref.out.item<double>()));
  EXPECT_EQ(ours.grads[0].scalar_type(), torch::kBFloat16);
  expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "dlogits");
  EXPECT_EQ(ours.grads[0][2].abs().max().item<float>(), 0.0f);

  Tensor bad = targets.clone();
  bad[0] = 1003;
  EXPECT_THROW(ds::nn::cross_entropy(logits, bad), ds::Error);
}

// fp32 (and every tensor the kernels do not take) runs LibTorch's operators: identical results.
TEST(Bf16Ops, Fp32IsLibTorchBitForBit) {
  torch::manual_seed(5);
  const Tensor x = torch::randn({4, 6, 40}), w = torch::randn({40}), b = torch::randn({40});
  EXPECT_TRUE(torch::equal(ds::nn::gelu_tanh(x), torch::gelu(x, "tanh")));
  EXPECT_TRUE(torch::equal(ds::nn::layer_norm(x, w, b, 1e-5), torch::layer_norm(x, {40}, w, b, 1e-5)));
  const Tensor logits = torch::randn({6, 40}), t = torch::randint(0, 40, {6}, torch::kLong);
  EXPECT_TRUE(torch::equal(ds::nn::cross_entropy(logits, t), torch::nn::functional::cross_entropy(logits, t)));
  const Tensor s = torch::randn({2, 6, 6});
  const Tensor future = torch::ones({6, 6}, torch::kBool).triu(1);
  EXPECT_TRUE(torch::equal(ds::nn::causal_softmax(s, 0.5),
                           torch::softmax((s * 0.5).masked_fill(future, -std::numeric_limits<double>::infinity()), -1)));
}

// bf16.enabled: every matrix product of a GPT-2 step, forward and backward (attention and the
// tied head included), runs with bf16 operands, none falls back to fp32.
TEST(Bf16Ops, Bf16StepRunsEveryMatrixProductInBf16) {
  torch::manual_seed(6);
  auto model = ds::models::GPT2(ds::models::GPT2Config::preset("tiny")).ptr();
  auto engine = ds::initialize(model, nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "bf16": {"enabled": true}})"));
  static std::mutex mu;
  static std::set<std::string> seen;  // "op dtype" of every matrix product
  seen.clear();
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        const std::string name = fn.name();
        static const std::set<std::string> products = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm",
                                                       "aten::addbmm"};
        if (products.count(name) == 0) return nullptr;
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& v : fn.inputs())
          if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point())
            seen.insert(name + " " + c10::toString(v.toTensor().scalar_type()));
        return nullptr;
      }).needsInputs(true));
  const Tensor idx = torch::randint(0, 256, {2, 32}, torch::kLong);
  auto loss = engine.forward(idx, idx);
  engine.backward(loss);
  at::removeCallback(handle);
  engine.step();
  ASSERT_FALSE(seen.empty());
  for (const auto& s : seen) EXPECT_NE(s.find("BFloat16"), std::string::npos) << s << " ran in another dtype";
  EXPECT_TRUE(seen.count("aten::bmm BFloat16")) << "attention's products were not seen";
}

}  // namespace
