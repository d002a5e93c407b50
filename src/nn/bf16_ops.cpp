#include "nn/bf16_ops.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "nn/bf16_kernels.h"
#include "util/error.h"

namespace ds::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kIgnoreIndex = -100;   // torch's cross_entropy default
constexpr int64_t kGrainElements = 32768;  // per thread chunk: well above the cost of a task

uint16_t* bits(const torch::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

torch::Tensor as_bf16(const torch::Tensor& t) { return t.to(torch::kBFloat16).contiguous(); }

// Rows of `cols` elements split over the intra-op threads in chunks of about kGrainElements.
template <class Fn>
void for_rows(int64_t rows, int64_t cols, const Fn& fn) {
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, cols)), fn);
}

struct GeluTanhBf16 : public torch::autograd::Function<GeluTanhBf16> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input) {
    const torch::Tensor x = input.contiguous();
    torch::Tensor y = torch::empty_like(x);
    at::parallel_for(0, x.numel(), kGrainElements,
                     [&](int64_t b, int64_t e) { kernels::gelu_tanh_forward(bits(x) + b, bits(y) + b, e - b); });
    ctx->save_for_backward({x});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const torch::Tensor dy = as_bf16(grads[0]);
    torch::Tensor dx = torch::empty_like(x);
    at::parallel_for(0, x.numel(), kGrainElements, [&](int64_t b, int64_t e) {
      kernels::gelu_tanh_backward(bits(dy) + b, bits(x) + b, bits(dx) + b, e - b);
    });
    return {dx};
  }
};

// Forward by the kernel; backward by torch's own native_layer_norm_backward from the saved row
// statistics (bf16, the dtype torch keeps them in for bf16 input).
struct LayerNormBf16 : public torch::autograd::Function<LayerNormBf16> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps) {
    const torch::Tensor x = input.contiguous(), w = weight.contiguous(), b = bias.contiguous();
    const int64_t cols = x.size(-1), rows = cols > 0 ? x.numel() / cols : 0;
    std::vector<int64_t> stat_shape(x.sizes().begin(), x.sizes().end());
    stat_shape.back() = 1;
    torch::Tensor y = torch::empty_like(x);
    torch::Tensor mean = torch::empty(stat_shape, x.options()), rstd = torch::empty(stat_shape, x.options());
    for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
      kernels::layer_norm_forward(bits(x) + r0 * cols, bits(w), bits(b), bits(y) + r0 * cols, bits(mean) + r0,
                                  bits(rstd) + r0, r1 - r0, cols, float(eps));
    });
    ctx->save_for_backward({x, weight, bias, mean, rstd});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    auto [dx, dw, db] = at::native_layer_norm_backward(as_bf16(grads[0]), s[0], {s[0].size(-1)}, s[3], s[4],
                                                       as_bf16(s[1]), as_bf16(s[2]), mask);
    return {dx, dw, db, torch::Tensor()};
  }
};

struct CrossEntropyBf16 : public torch::autograd::Function<CrossEntropyBf16> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input, const torch::Tensor& target) {
    const torch::Tensor x = input.contiguous(), t = target.contiguous();
    const int64_t rows = x.size(0), cols = x.size(1);
    torch::Tensor lse = torch::empty({rows}, x.options().dtype(torch::kFloat));
    torch::Tensor loss = torch::empty({rows}, lse.options());
    for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
      kernels::cross_entropy_forward(bits(x) + r0 * cols, t.data_ptr<int64_t>() + r0, lse.data_ptr<float>() + r0,
                                     loss.data_ptr<float>() + r0, r1 - r0, cols, kIgnoreIndex);
    });
    const int64_t counted = t.ne(kIgnoreIndex).sum().item<int64_t>();
    ctx->save_for_backward({x, t, lse});
    ctx->saved_data["counted"] = counted;
    // torch's mean reduction: the sum over counted rows / their number (nan when none counts).
    return loss.sum().div(static_cast<double>(counted));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const torch::Tensor &x = s[0], &t = s[1], &lse = s[2];
    const int64_t rows = x.size(0), cols = x.size(1);
    const float scale = grads[0].item<float>() / static_cast<float>(ctx->saved_data["counted"].toInt());
    torch::Tensor dx = torch::empty_like(x);
    for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
      kernels::cross_entropy_backward(bits(x) + r0 * cols, t.data_ptr<int64_t>() + r0, lse.data_ptr<float>() + r0,
                                      bits(dx) + r0 * cols, r1 - r0, cols, kIgnoreIndex, scale);
    });
    return {dx, torch::Tensor()};
  }
};

struct CausalSoftmaxBf16 : public torch::autograd::Function<CausalSoftmaxBf16> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& scores, double scale) {
    const torch::Tensor x = scores.contiguous();
    const int64_t queries = x.size(-2), cols = x.size(-1), rows = x.numel() / cols;
    torch::Tensor p = torch::empty_like(x);
    for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
      kernels::causal_softmax_forward(bits(x) + r0 * cols, bits(p) + r0 * cols, r0, r1 - r0, queries, cols, float(scale));
    });
    ctx->save_for_backward({p});
    ctx->saved_data["scale"] = scale;
    return p;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor p = ctx->get_saved_variables()[0];
    const torch::Tensor dp = as_bf16(grads[0]);
    const int64_t queries = p.size(-2), cols = p.size(-1), rows = p.numel() / cols;
    const float scale = float(ctx->saved_data["scale"].toDouble());
    torch::Tensor ds = torch::empty_like(p);
    for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
      kernels::causal_softmax_backward(bits(dp) + r0 * cols, bits(p) + r0 * cols, bits(ds) + r0 * cols, r0, r1 - r0,
                                       queries, cols, scale);
    });
    return {ds, torch::Tensor()};
  }
};

}  // namespace

namespace kernels {
bool bf16_kernels_available() {
#if defined(DS_NN_X86_SIMD)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
}  // namespace kernels

bool uses_bf16_kernels(const torch::Tensor& t) {
  return t.defined() && t.scalar_type() == torch::kBFloat16 && t.device().is_cpu() && bf16_kernels_active();
}

bool bf16_kernels_active() {
  static const bool active = [] {
    const char* env = std::getenv("DS_BF16_KERNELS");
    return kernels::bf16_kernels_available() && !(env != nullptr && std::strcmp(env, "0") == 0);
  }();
  return active;
}

torch::Tensor gelu_tanh(const torch::Tensor& x) {
  if (!uses_bf16_kernels(x)) return torch::gelu(x, "tanh");
  return GeluTanhBf16::apply(x);
}

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
  const bool kernel = uses_bf16_kernels(x) && weight.defined() && bias.defined() && weight.scalar_type() == torch::kBFloat16 &&
                      bias.scalar_type() == torch::kBFloat16 && x.dim() >= 1 && x.size(-1) > 0;
  if (!kernel) return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
  return LayerNormBf16::apply(x, weight, bias, eps);
}

torch::Tensor layer_norm(const torch::nn::LayerNorm& ln, const torch::Tensor& x) {
  if (ln->options.normalized_shape().size() != 1) return ln.ptr()->forward(x);
  return layer_norm(x, ln->weight, ln->bias, ln->options.eps());
}

torch::Tensor causal_softmax(const torch::Tensor& scores, double scale) {
  DS_CHECK(scores.dim() >= 2 && scores.size(-2) <= scores.size(-1), Error,
           "causal_softmax: expected scores [..., queries, keys] with queries <= keys");
  if (!uses_bf16_kernels(scores) || scores.numel() == 0) {
    const int64_t tq = scores.size(-2), tk = scores.size(-1);
    const auto future = torch::ones({tq, tk}, scores.options().dtype(torch::kBool)).triu(tk - tq + 1);
    return torch::softmax((scores * scale).masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
  }
  return CausalSoftmaxBf16::apply(scores, scale);
}

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  DS_CHECK(logits.dim() == 2 && targets.dim() == 1 && logits.size(0) == targets.size(0), Error,
           "cross_entropy: expected logits [N, V] and targets [N]");
  if (!uses_bf16_kernels(logits) || logits.size(1) == 0)
    return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), targets);
  DS_CHECK(targets.scalar_type() == torch::kLong, Error, "cross_entropy: targets must be int64");
  if (targets.numel() > 0) {  // the kernel indexes with them: check as torch's nll_loss does
    const auto bad = targets.ne(kIgnoreIndex).logical_and(targets.lt(0).logical_or(targets.ge(logits.size(1))));
    DS_CHECK(!bad.any().item<bool>(), Error,
             "cross_entropy: a target is outside [0, " + std::to_string(logits.size(1)) + ") and is not -100");
  }
  return CrossEntropyBf16::apply(logits, targets);
}

}  // namespace ds::nn
