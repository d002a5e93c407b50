// nn/fused_ops.h: each kernel's forward and backward, in bf16 and in fp32, against the same operator
// in float64 on the same inputs, required to be as close to it as LibTorch's own operator in that
// dtype is (or within the dtype's rounding: 2^-8 of the largest value in bf16, 1e-6 in fp32); and a
// bf16 GPT-2 step under ds::initialize runs every matrix product of forward and backward in bf16.
#include "nn/fused_ops.h"

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

// ours at least as close to the float64 reference as LibTorch's operator in the same dtype, or
// within that dtype's rounding.
void expect_close(const Tensor& ours, const Tensor& torch_same_dtype, const Tensor& ref, const char* what) {
  const bool bf16 = ours.scalar_type() == torch::kBFloat16;
  const double mine = rel_err(ours, ref), theirs = rel_err(torch_same_dtype, ref);
  EXPECT_LE(mine, bf16 ? std::max(1.25 * theirs, 1.0 / 256) : std::max(2.0 * theirs, 1e-6))
      << what << " (" << ours.scalar_type() << "): ours " << mine << ", LibTorch " << theirs;
}

const torch::ScalarType kKernelDtypes[] = {torch::kBFloat16, torch::kFloat};

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

#define SKIP_WITHOUT_KERNELS() \
  if (!ds::nn::fused_kernels_active()) GTEST_SKIP() << "this CPU runs no fused kernels (no AVX-512)"

TEST(FusedOps, GeluTanhForwardAndBackward) {
  SKIP_WITHOUT_KERNELS();
  for (const auto dtype : kKernelDtypes) {
    torch::manual_seed(1);
    const Tensor x = (torch::randn({3, 1037}) * 3).to(dtype);  // a tail past the 16 lanes
    const Tensor up = torch::randn({3, 1037});
    auto ours = run([](auto& in) { return ds::nn::gelu_tanh(in[0]); }, {x}, up, dtype);
    auto lib = run([](auto& in) { return torch::gelu(in[0], "tanh"); }, {x}, up, dtype);
    auto ref = run([](auto& in) { return torch::gelu(in[0], "tanh"); }, {x}, up.to(dtype), torch::kDouble);
    EXPECT_EQ(ours.out.scalar_type(), dtype);
    expect_close(ours.out, lib.out, ref.out, "gelu");
    expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "gelu dx");
  }
}

TEST(FusedOps, LayerNormForwardAndBackward) {
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
  // fp32 LayerNorm stays LibTorch's (one vectorized pass already): bit for bit.
  const Tensor xf = x.to(torch::kFloat), wf = w.to(torch::kFloat), bf = b.to(torch::kFloat);
  EXPECT_TRUE(torch::equal(ds::nn::layer_norm(xf, wf, bf, 1e-5), torch::layer_norm(xf, {771}, wf, bf, 1e-5)));
}

// Hugging Face's LlamaRMSNorm, op for op (the reference the kernel must match).
Tensor hf_rms_norm(const Tensor& x, const Tensor& w, double eps) {
  auto h = x.to(x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat);
  h = h * torch::rsqrt(h.pow(2).mean(-1, true) + eps);
  return w * h.to(x.scalar_type());
}

TEST(FusedOps, RmsNormForwardAndBackward) {
  SKIP_WITHOUT_KERNELS();
  for (const auto dtype : kKernelDtypes) {
    torch::manual_seed(7);
    const Tensor x = (torch::randn({3, 7, 531}) * 2 + 0.3).to(dtype);  // 21 rows over the threads, a lane tail
    const Tensor w = (torch::randn({531}) * 0.5 + 1).to(dtype);
    const Tensor up = torch::randn({3, 7, 531});
    auto ours = run([](auto& in) { return ds::nn::rms_norm(in[0], in[1], 1e-6); }, {x, w}, up, dtype);
    auto lib = run([](auto& in) { return hf_rms_norm(in[0], in[1], 1e-6); }, {x, w}, up, dtype);
    auto ref = run([](auto& in) { return hf_rms_norm(in[0], in[1], 1e-6); }, {x, w}, up.to(dtype), torch::kDouble);
    EXPECT_EQ(ours.out.scalar_type(), dtype);
    expect_close(ours.out, lib.out, ref.out, "rms_norm");
    expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "rms_norm dx");
    expect_close(ours.grads[1], lib.grads[1], ref.grads[1], "rms_norm dweight");
  }
}

TEST(FusedOps, SwiGluForwardAndBackward) {
  SKIP_WITHOUT_KERNELS();
  for (const auto dtype : kKernelDtypes) {
    torch::manual_seed(8);
    const Tensor g = (torch::randn({5, 1037}) * 4).to(dtype), u = torch::randn({5, 1037}).to(dtype);
    const Tensor up = torch::randn({5, 1037});
    auto swiglu = [](auto& in) { return torch::silu(in[0]) * in[1]; };
    auto ours = run([](auto& in) { return ds::nn::swiglu(in[0], in[1]); }, {g, u}, up, dtype);
    auto lib = run(swiglu, {g, u}, up, dtype);
    auto ref = run(swiglu, {g, u}, up.to(dtype), torch::kDouble);
    expect_close(ours.out, lib.out, ref.out, "swiglu");
    expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "swiglu dgate");
    expect_close(ours.grads[1], lib.grads[1], ref.grads[1], "swiglu dup");
  }
}

// x as the attention reads it: a [B, H, T, D] head view of a [B, T, H·D] projection (not contiguous).
TEST(FusedOps, RotaryForwardAndBackward) {
  SKIP_WITHOUT_KERNELS();
  for (const auto dtype : kKernelDtypes) {
    SCOPED_TRACE(testing::Message() << dtype);
    torch::manual_seed(9);
    const int64_t b = 2, t = 11, h = 3, d = 40;  // d/2 = 20: a lane tail
    const Tensor proj = torch::randn({b, t, h * d});
    const Tensor cos = torch::randn({t, d}), sin = torch::randn({t, d});
    const Tensor up = torch::randn({b, h, t, d});
    auto heads = [&](const Tensor& p) { return p.view({b, t, h, d}).transpose(1, 2); };
    auto reference = [&](auto& in) {
      auto x = heads(in[0]);
      auto x1 = x.narrow(-1, 0, d / 2), x2 = x.narrow(-1, d / 2, d / 2);
      return x * in[1] + torch::cat({-x2, x1}, -1) * in[2];
    };
    auto ours = run([&](auto& in) { return ds::nn::rotary(heads(in[0]), in[1].detach(), in[2].detach()); },
                    {proj, cos, sin}, up, dtype);
    auto lib = run(reference, {proj, cos, sin}, up, dtype);
    auto ref = run(reference, {proj, cos, sin}, up.to(dtype), torch::kDouble);
    EXPECT_TRUE(ours.out.is_contiguous());
    expect_close(ours.out, lib.out, ref.out, "rotary");
    expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "rotary dx");
  }
}

// Scores [B, H, Tq, Tk]: square (training) and Tq < Tk (queries at the end of the keys).
TEST(FusedOps, CausalSoftmaxForwardAndBackward) {
  SKIP_WITHOUT_KERNELS();
  for (const auto dtype : kKernelDtypes) {
    for (const auto& [tq, tk] : {std::pair<int64_t, int64_t>{37, 37}, {5, 21}}) {
      SCOPED_TRACE(testing::Message() << dtype << ", Tq " << tq << ", Tk " << tk);
      torch::manual_seed(3);
      const Tensor s = (torch::randn({2, 3, tq, tk}) * 4).to(dtype);
      const Tensor up = torch::randn({2, 3, tq, tk});
      const double scale = 0.125;
      const Tensor future = torch::ones({tq, tk}, torch::kBool).triu(tk - tq + 1);
      auto masked = [&](auto& in) {
        return torch::softmax((in[0] * scale).masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
      };
      auto ours = run([&](auto& in) { return ds::nn::causal_softmax(in[0], scale); }, {s}, up, dtype);
      auto lib = run(masked, {s}, up, dtype);
      auto ref = run(masked, {s}, up.to(dtype), torch::kDouble);
      expect_close(ours.out, lib.out, ref.out, "probs");
      expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "dscores");
      // Past each query's position: exactly 0, in the probabilities and their gradient.
      EXPECT_EQ(ours.out.masked_select(future).abs().max().item<float>(), 0.0f);
      EXPECT_EQ(ours.grads[0].masked_select(future).abs().max().item<float>(), 0.0f);
    }
  }
}

TEST(FusedOps, CrossEntropyReadsLogitsInPlace) {
  SKIP_WITHOUT_KERNELS();
  for (const auto dtype : kKernelDtypes) {
    SCOPED_TRACE(testing::Message() << dtype);
    torch::manual_seed(4);
    const Tensor logits = (torch::randn({9, 1003}) * 3).to(dtype);
    Tensor targets = torch::randint(0, 1003, {9}, torch::kLong);
    targets[2] = -100;  // ignored: no loss, no gradient
    targets[7] = -100;
    const Tensor up = torch::full({}, 0.75);
    auto ours = run([&](auto& in) { return ds::nn::cross_entropy(in[0], targets); }, {logits}, up, dtype);
    auto lib = run([&](auto& in) { return torch::nn::functional::cross_entropy(in[0].to(torch::kFloat), targets); },
                   {logits}, up, dtype);
    auto ref = run([&](auto& in) { return torch::nn::functional::cross_entropy(in[0], targets); }, {logits}, up,
                   torch::kDouble);
    EXPECT_EQ(ours.out.scalar_type(), torch::kFloat);
    EXPECT_NEAR(ours.out.item<double>(), ref.out.item<double>(), 1e-5 * std::abs(ref.out.item<double>()));
    EXPECT_EQ(ours.grads[0].scalar_type(), dtype);
    expect_close(ours.grads[0], lib.grads[0], ref.grads[0], "dlogits");
    EXPECT_EQ(ours.grads[0][2].abs().max().item<float>(), 0.0f);

    Tensor bad = targets.clone();
    bad[0] = 1003;
    EXPECT_THROW(ds::nn::cross_entropy(logits, bad), ds::Error);
  }
}

// Tensors the kernels do not take (here float64) run LibTorch's operators: identical results.
TEST(FusedOps, OtherDtypesAreLibTorchBitForBit) {
  torch::manual_seed(5);
  const auto f64 = torch::kDouble;
  const Tensor x = torch::randn({4, 6, 40}, f64), w = torch::randn({40}, f64), b = torch::randn({40}, f64);
  EXPECT_TRUE(torch::equal(ds::nn::gelu_tanh(x), torch::gelu(x, "tanh")));
  EXPECT_TRUE(torch::equal(ds::nn::layer_norm(x, w, b, 1e-5), torch::layer_norm(x, {40}, w, b, 1e-5)));
  EXPECT_TRUE(torch::equal(ds::nn::rms_norm(x, w, 1e-6), w * (x.to(torch::kFloat) * torch::rsqrt(x.to(torch::kFloat).pow(2).mean(-1, true) + 1e-6)).to(f64)));
  EXPECT_TRUE(torch::equal(ds::nn::swiglu(x, x * 2), torch::silu(x) * (x * 2)));
  const Tensor logits = torch::randn({6, 40}, f64), t = torch::randint(0, 40, {6}, torch::kLong);
  EXPECT_TRUE(torch::equal(ds::nn::cross_entropy(logits, t), torch::nn::functional::cross_entropy(logits.to(torch::kFloat), t)));
  const Tensor s = torch::randn({2, 6, 6}, f64);
  const Tensor future = torch::ones({6, 6}, torch::kBool).triu(1);
  EXPECT_TRUE(torch::equal(ds::nn::causal_softmax(s, 0.5),
                           torch::softmax((s * 0.5).masked_fill(future, -std::numeric_limits<double>::infinity()), -1)));
}

// bf16.enabled: every matrix product of a GPT-2 step, forward and backward (attention and the
// tied head included), runs with bf16 operands, none falls back to fp32.
TEST(FusedOps, Bf16StepRunsEveryMatrixProductInBf16) {
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
