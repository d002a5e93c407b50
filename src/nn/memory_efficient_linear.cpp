#include "nn/memory_efficient_linear.h"

#include <torch/csrc/autograd/custom_function.h>

namespace ds::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Gradients of y = x·Wᵀ (+ b) from the saved input and the parameter as it is now (re-gathered
// under stage 3). The operand orders of torch's addmm backward for x·Wᵀ (mm_mat1/mm_mat2_backward
// with a column-major Wᵀ), so they match torch's linear bit for bit.
variable_list linear_grads(AutogradContext* ctx, const torch::Tensor& grad, bool bias) {
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor& x = saved[0];
  const torch::Tensor& w = saved[1];
  const torch::Tensor g = grad.reshape({-1, grad.size(-1)});
  variable_list out(bias ? 3 : 2);
  if (ctx->needs_input_grad(0)) out[0] = g.mm(w).view(x.sizes());
  if (ctx->needs_input_grad(1)) out[1] = g.t().mm(x.reshape({-1, x.size(-1)}));
  if (bias && ctx->needs_input_grad(2)) out[2] = g.sum(0);
  return out;
}

// Two functions: a custom autograd function's inputs must all be defined tensors.
struct LinearSavingWeight : public torch::autograd::Function<LinearSavingWeight> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    ctx->save_for_backward({x, w});
    return torch::nn::functional::linear(x, w, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return linear_grads(ctx, grads[0], true); }
};

struct LinearSavingWeightNoBias : public torch::autograd::Function<LinearSavingWeightNoBias> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w) {
    ctx->save_for_backward({x, w});
    return torch::nn::functional::linear(x, w);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return linear_grads(ctx, grads[0], false); }
};

}  // namespace

torch::Tensor memory_efficient_linear(const torch::Tensor& input, const torch::Tensor& weight, const torch::Tensor& bias) {
  return bias.defined() ? LinearSavingWeight::apply(input, weight, bias) : LinearSavingWeightNoBias::apply(input, weight);
}

}  // namespace ds::nn
