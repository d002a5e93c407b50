#include "nn/fused_ops.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "nn/fused_kernels.h"
#include "util/error.h"

namespace ds::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kIgnoreIndex = -100;     // torch's cross_entropy default
constexpr int64_t kGrainElements = 32768;  // per thread chunk: well above the cost of a task

// The kernels' storage pointer: float for fp32, the uint16_t bits of c10::BFloat16 for bf16.
template <class T>
T* data(const torch::Tensor& t) {
  if constexpr (std::is_same_v<T, float>) return t.data_ptr<float>();
  else return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>());
}

// Calls fn(T{}) with T the storage type of `t` (fp32 or bf16, as uses_fused_kernels admits).
template <class Fn>
void with_storage(const torch::Tensor& t, const Fn& fn) {
  if (t.scalar_type() == torch::kFloat) fn(float{});
  else fn(uint16_t{});
}

// An incoming gradient in the dtype and layout the kernels read.
torch::Tensor like(const torch::Tensor& grad, const torch::Tensor& t) { return grad.to(t.scalar_type()).contiguous(); }

// Rows of `cols` elements split over the intra-op threads in chunks of about kGrainElements.
template <class Fn>
void for_rows(int64_t rows, int64_t cols, const Fn& fn) {
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, cols)), fn);
}

struct GeluTanh : public torch::autograd::Function<GeluTanh> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input) {
    const torch::Tensor x = input.contiguous();
    torch::Tensor y = torch::empty_like(x);
    with_storage(x, [&](auto tag) {
      using T = decltype(tag);
      at::parallel_for(0, x.numel(), kGrainElements,
                       [&](int64_t b, int64_t e) { kernels::gelu_tanh_forward(data<T>(x) + b, data<T>(y) + b, e - b); });
    });
    ctx->save_for_backward({x});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const torch::Tensor dy = like(grads[0], x);
    torch::Tensor dx = torch::empty_like(x);
    with_storage(x, [&](auto tag) {
      using T = decltype(tag);
      at::parallel_for(0, x.numel(), kGrainElements, [&](int64_t b, int64_t e) {
        kernels::gelu_tanh_backward(data<T>(dy) + b, data<T>(x) + b, data<T>(dx) + b, e - b);
      });
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
      kernels::layer_norm_forward(data<uint16_t>(x) + r0 * cols, data<uint16_t>(w), data<uint16_t>(b),
                                  data<uint16_t>(y) + r0 * cols, data<uint16_t>(mean) + r0, data<uint16_t>(rstd) + r0,
                                  r1 - r0, cols, float(eps));
    });
    ctx->save_for_backward({x, weight, bias, mean, rstd});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    auto [dx, dw, db] = at::native_layer_norm_backward(like(grads[0], s[0]), s[0], {s[0].size(-1)}, s[3], s[4],
                                                       like(s[1], s[0]), like(s[2], s[0]), mask);
    return {dx, dw, db, torch::Tensor()};
  }
};

struct RmsNorm : public torch::autograd::Function<RmsNorm> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input, const torch::Tensor& weight, double eps) {
    const torch::Tensor x = input.contiguous(), w = weight.contiguous();
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    torch::Tensor y = torch::empty_like(x), rstd = torch::empty({rows}, x.options().dtype(torch::kFloat));
    with_storage(x, [&](auto tag) {
      using T = decltype(tag);
      for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
        kernels::rms_norm_forward(data<T>(x) + r0 * cols, data<T>(w), data<T>(y) + r0 * cols, rstd.data_ptr<float>() + r0,
                                  r1 - r0, cols, float(eps));
      });
    });
    ctx->save_for_backward({x, weight, rstd});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const torch::Tensor &x = s[0], &rstd = s[2];
    const torch::Tensor w = s[1].contiguous(), dy = like(grads[0], x);
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    // Each chunk of rows sums its weight gradient into its own fp32 row; the rows are added after.
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), rows));
    torch::Tensor dw_parts = torch::zeros({chunks, cols}, x.options().dtype(torch::kFloat));
    torch::Tensor dx = torch::empty_like(x);
    with_storage(x, [&](auto tag) {
      using T = decltype(tag);
      at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
          kernels::rms_norm_backward(data<T>(dy) + r0 * cols, data<T>(x) + r0 * cols, data<T>(w),
                                     rstd.data_ptr<float>() + r0, data<T>(dx) + r0 * cols,
                                     dw_parts.data_ptr<float>() + c * cols, r1 - r0, cols);
        }
      });
    });
    torch::Tensor dw = ctx->needs_input_grad(1) ? dw_parts.sum(0).to(w.scalar_type()) : torch::Tensor();
    return {dx, dw, torch::Tensor()};
  }
};

struct SwiGlu : public torch::autograd::Function<SwiGlu> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate, const torch::Tensor& up) {
    const torch::Tensor g = gate.contiguous(), u = up.contiguous();
    torch::Tensor y = torch::empty_like(g);
    with_storage(g, [&](auto tag) {
      using T = decltype(tag);
      at::parallel_for(0, g.numel(), kGrainElements, [&](int64_t b, int64_t e) {
        kernels::swiglu_forward(data<T>(g) + b, data<T>(u) + b, data<T>(y) + b, e - b);
      });
    });
    ctx->save_for_backward({g, u});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const torch::Tensor &g = s[0], &u = s[1];
    const torch::Tensor dy = like(grads[0], g);
    torch::Tensor dg = torch::empty_like(g), du = torch::empty_like(u);
    with_storage(g, [&](auto tag) {
      using T = decltype(tag);
      at::parallel_for(0, g.numel(), kGrainElements, [&](int64_t b, int64_t e) {
        kernels::swiglu_backward(data<T>(dy) + b, data<T>(g) + b, data<T>(u) + b, data<T>(dg) + b, data<T>(du) + b, e - b);
      });
    });
    return {dg, du};
  }
};

struct Rotary : public torch::autograd::Function<Rotary> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos_in,
                               const torch::Tensor& sin_in) {
    const torch::Tensor cos = cos_in.contiguous(), sin = sin_in.contiguous();
    const int64_t heads = x.size(1), t = x.size(2), d = x.size(3), blocks = x.size(0) * heads;
    torch::Tensor y = torch::empty(x.sizes(), x.options());  // contiguous
    with_storage(x, [&](auto tag) {
      using T = decltype(tag);
      at::parallel_for(0, blocks, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, t * d)), [&](int64_t b0, int64_t b1) {
        for (int64_t bh = b0; bh < b1; ++bh) {
          const T* xp = data<T>(x) + (bh / heads) * x.stride(0) + (bh % heads) * x.stride(1);
          kernels::rotary_forward(xp, x.stride(2), data<T>(cos), data<T>(sin), data<T>(y) + bh * t * d, t, d);
        }
      });
    });
    ctx->save_for_backward({cos, sin});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const torch::Tensor &cos = s[0], &sin = s[1];
    const torch::Tensor dy = like(grads[0], cos);
    const int64_t t = dy.size(2), d = dy.size(3), blocks = dy.size(0) * dy.size(1);
    torch::Tensor dx = torch::empty_like(dy);
    with_storage(dy, [&](auto tag) {
      using T = decltype(tag);
      at::parallel_for(0, blocks, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, t * d)), [&](int64_t b0, int64_t b1) {
        for (int64_t bh = b0; bh < b1; ++bh)
          kernels::rotary_backward(data<T>(dy) + bh * t * d, data<T>(cos), data<T>(sin), data<T>(dx) + bh * t * d, t, d);
      });
    });
    return {dx, torch::Tensor(), torch::Tensor()};
  }
};

struct CrossEntropy : public torch::autograd::Function<CrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input, const torch::Tensor& target) {
    const torch::Tensor x = input.contiguous(), t = target.contiguous();
    const int64_t rows = x.size(0), cols = x.size(1);
    torch::Tensor lse = torch::empty({rows}, x.options().dtype(torch::kFloat));
    torch::Tensor loss = torch::empty({rows}, lse.options());
    with_storage(x, [&](auto tag) {
      using T = decltype(tag);
      for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
        kernels::cross_entropy_forward(data<T>(x) + r0 * cols, t.data_ptr<int64_t>() + r0, lse.data_ptr<float>() + r0,
                                       loss.data_ptr<float>() + r0, r1 - r0, cols, kIgnoreIndex);
      });
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
    with_storage(x, [&](auto tag) {
      using T = decltype(tag);
      for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
        kernels::cross_entropy_backward(data<T>(x) + r0 * cols, t.data_ptr<int64_t>() + r0, lse.data_ptr<float>() + r0,
                                        data<T>(dx) + r0 * cols, r1 - r0, cols, kIgnoreIndex, scale);
      });
    });
    return {dx, torch::Tensor()};
  }
};

struct CausalSoftmax : public torch::autograd::Function<CausalSoftmax> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& scores, double scale) {
    const torch::Tensor x = scores.contiguous();
    const int64_t queries = x.size(-2), cols = x.size(-1), rows = x.numel() / cols;
    torch::Tensor p = torch::empty_like(x);
    with_storage(x, [&](auto tag) {
      using T = decltype(tag);
      for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
        kernels::causal_softmax_forward(data<T>(x) + r0 * cols, data<T>(p) + r0 * cols, r0, r1 - r0, queries, cols,
                                        float(scale));
      });
    });
    ctx->save_for_backward({p});
    ctx->saved_data["scale"] = scale;
    return p;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor p = ctx->get_saved_variables()[0];
    const torch::Tensor dp = like(grads[0], p);
    const int64_t queries = p.size(-2), cols = p.size(-1), rows = p.numel() / cols;
    const float scale = float(ctx->saved_data["scale"].toDouble());
    torch::Tensor ds = torch::empty_like(p);
    with_storage(p, [&](auto tag) {
      using T = decltype(tag);
      for_rows(rows, cols, [&](int64_t r0, int64_t r1) {
        kernels::causal_softmax_backward(data<T>(dp) + r0 * cols, data<T>(p) + r0 * cols, data<T>(ds) + r0 * cols, r0,
                                         r1 - r0, queries, cols, scale);
      });
    });
    return {ds, torch::Tensor()};
  }
};

}  // namespace

namespace kernels {
bool fused_kernels_available() {
#if defined(DS_NN_X86_SIMD)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
}  // namespace kernels

bool fused_kernels_active() {
  static const bool active = [] {
    const char* env = std::getenv("DS_FUSED_KERNELS");
    return kernels::fused_kernels_available() && !(env != nullptr && std::strcmp(env, "0") == 0);
  }();
  return active;
}

bool uses_fused_kernels(const torch::Tensor& t) {
  return t.defined() && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16) &&
         t.device().is_cpu() && fused_kernels_active();
}

// Each operator below runs inside a RecordFunction named "ds::<operator>", whichever path it takes,
// so profilers see one operator (profiling/op_flops.cpp counts it as the LibTorch ones it fuses).
torch::Tensor gelu_tanh(const torch::Tensor& x) {
  RECORD_FUNCTION("ds::gelu_tanh", std::vector<c10::IValue>({x}));
  if (!uses_fused_kernels(x)) return torch::gelu(x, "tanh");
  return GeluTanh::apply(x);
}

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
  RECORD_FUNCTION("ds::layer_norm", std::vector<c10::IValue>({x, weight, bias}));
  const bool kernel = uses_fused_kernels(x) && x.scalar_type() == torch::kBFloat16 && weight.defined() &&
                      bias.defined() && weight.scalar_type() == torch::kBFloat16 &&
                      bias.scalar_type() == torch::kBFloat16 && x.dim() >= 1 && x.size(-1) > 0;
  if (!kernel) return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
  return LayerNormBf16::apply(x, weight, bias, eps);
}

torch::Tensor layer_norm(const torch::nn::LayerNorm& ln, const torch::Tensor& x) {
  if (ln->options.normalized_shape().size() != 1) return ln.ptr()->forward(x);
  return layer_norm(x, ln->weight, ln->bias, ln->options.eps());
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  RECORD_FUNCTION("ds::rms_norm", std::vector<c10::IValue>({x, weight}));
  const bool kernel = uses_fused_kernels(x) && weight.defined() && weight.scalar_type() == x.scalar_type() &&
                      x.dim() >= 1 && x.size(-1) > 0 && weight.dim() == 1 && weight.size(0) == x.size(-1);
  if (!kernel) {  // Hugging Face's LlamaRMSNorm, op for op
    auto h = x.to(torch::kFloat);
    h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return weight * h.to(x.scalar_type());
  }
  return RmsNorm::apply(x, weight, eps);
}

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  RECORD_FUNCTION("ds::swiglu", std::vector<c10::IValue>({gate, up}));
  const bool kernel = uses_fused_kernels(gate) && up.scalar_type() == gate.scalar_type() && up.sizes() == gate.sizes() &&
                      up.device() == gate.device();
  if (!kernel) return torch::silu(gate) * up;
  return SwiGlu::apply(gate, up);
}

torch::Tensor rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  RECORD_FUNCTION("ds::rotary", std::vector<c10::IValue>({x, cos, sin}));
  const bool kernel = uses_fused_kernels(x) && x.dim() == 4 && x.size(3) % 2 == 0 && x.stride(3) == 1 &&
                      cos.dim() == 2 && sin.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == x.size(2) &&
                      cos.size(1) == x.size(3) && cos.scalar_type() == x.scalar_type() &&
                      sin.scalar_type() == x.scalar_type() && !cos.requires_grad() && !sin.requires_grad();
  if (!kernel) {
    const int64_t half = x.size(-1) / 2;
    auto x1 = x.narrow(-1, 0, half);
    auto x2 = x.narrow(-1, half, x.size(-1) - half);
    return x * cos + torch::cat({-x2, x1}, -1) * sin;
  }
  return Rotary::apply(x, cos, sin);
}

torch::Tensor causal_softmax(const torch::Tensor& scores, double scale) {
  DS_CHECK(scores.dim() >= 2 && scores.size(-2) <= scores.size(-1), Error,
           "causal_softmax: expected scores [..., queries, keys] with queries <= keys");
  RECORD_FUNCTION("ds::causal_softmax", std::vector<c10::IValue>({scores}));
  if (!uses_fused_kernels(scores) || scores.numel() == 0) {
    const int64_t tq = scores.size(-2), tk = scores.size(-1);
    const auto future = torch::ones({tq, tk}, scores.options().dtype(torch::kBool)).triu(tk - tq + 1);
    return torch::softmax((scores * scale).masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
  }
  return CausalSoftmax::apply(scores, scale);
}

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  DS_CHECK(logits.dim() == 2 && targets.dim() == 1 && logits.size(0) == targets.size(0), Error,
           "cross_entropy: expected logits [N, V] and targets [N]");
  if (!uses_fused_kernels(logits) || logits.size(1) == 0)
    return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), targets);
  DS_CHECK(targets.scalar_type() == torch::kLong, Error, "cross_entropy: targets must be int64");
  if (targets.numel() > 0) {  // the kernel indexes with them: check as torch's nll_loss does
    const auto bad = targets.ne(kIgnoreIndex).logical_and(targets.lt(0).logical_or(targets.ge(logits.size(1))));
    DS_CHECK(!bad.any().item<bool>(), Error,
             "cross_entropy: a target is outside [0, " + std::to_string(logits.size(1)) + ") and is not -100");
  }
  return CrossEntropy::apply(logits, targets);
}

}  // namespace ds::nn
