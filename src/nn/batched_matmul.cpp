#include "nn/batched_matmul.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "nn/fused_ops.h"

namespace ds::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// out[i] = a[i] @ b[i] for the 3-D views a [n, M, K], b [n, K, N]: the matrices split over the
// threads, each product a single-threaded GEMM (the OpenMP OpenBLAS scripts/setup.sh installs runs
// one thread inside a parallel region).
torch::Tensor products(const torch::Tensor& a, const torch::Tensor& b) {
  const int64_t n = a.size(0);
  torch::Tensor out = torch::empty({n, a.size(1), b.size(2)}, a.options());
  at::parallel_for(0, n, 1, [&](int64_t i0, int64_t i1) {
    at::NoGradGuard no_grad;  // worker threads do not inherit the caller's (autograd-off) mode
    for (int64_t i = i0; i < i1; ++i) {
      torch::Tensor o = out.select(0, i);
      at::mm_out(o, a.select(0, i), b.select(0, i));
    }
  });
  return out;
}

// [..., R, C] as [batch, R, C]: a view when the leading dimensions flatten (contiguous or a
// transpose of the last two), a copy otherwise.
torch::Tensor as_3d(const torch::Tensor& t) { return t.reshape({-1, t.size(-2), t.size(-1)}); }

struct BatchedMatmul : public torch::autograd::Function<BatchedMatmul> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b) {
    const torch::Tensor a3 = as_3d(a), b3 = as_3d(b);
    ctx->save_for_backward({a3, b3});  // the 3-D operands the products read (copies only where needed)
    ctx->saved_data["a_shape"] = a.sizes().vec();
    ctx->saved_data["b_shape"] = b.sizes().vec();
    std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end());
    shape.back() = b.size(-1);
    return products(a3, b3).view(shape);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const torch::Tensor &a = s[0], &b = s[1], g = as_3d(grads[0].contiguous());
    torch::Tensor da, db;
    if (ctx->needs_input_grad(0)) da = products(g, b.transpose(1, 2)).view(ctx->saved_data["a_shape"].toIntVector());
    if (ctx->needs_input_grad(1)) db = products(a.transpose(1, 2), g).view(ctx->saved_data["b_shape"].toIntVector());
    return {da, db};
  }
};

}  // namespace

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  // One operator for profilers, whichever path (profiling/op_flops.cpp counts it as a matmul): the
  // per-matrix products inside, on whichever thread, are not counted again.
  RECORD_FUNCTION("ds::batched_matmul", std::vector<c10::IValue>({a, b}));
  const bool parallel = a.dim() >= 3 && a.dim() == b.dim() && a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2) &&
                        a.size(-1) == b.size(-2) && a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat &&
                        a.device().is_cpu() && b.device().is_cpu() && fused_kernels_active() && a.numel() > 0 && b.numel() > 0;
  if (!parallel) return torch::matmul(a, b);
  return BatchedMatmul::apply(a, b);
}

}  // namespace ds::nn
