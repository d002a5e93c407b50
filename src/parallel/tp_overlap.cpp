#include "parallel/tp_overlap.h"

#include "nn/tensor_buffer.h"
#include "parallel/autograd_group.h"

namespace ds::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct OverlappedColumnLinear : torch::autograd::Function<OverlappedColumnLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b, comm::Communicator* tp) {
    save_group(ctx, *tp);
    ctx->save_for_backward({x, w});
    ctx->saved_data["bias"] = b.defined();
    return torch::nn::functional::linear(x, w, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const torch::Tensor g = grad[0].reshape({-1, grad[0].size(-1)});  // [N, out/tp]
    // This rank's part of the input gradient, summed over the group while the weight gradient runs.
    torch::Tensor grad_x = g.mm(w).contiguous();  // [N, in]
    comm::Work sum = saved_group(ctx).all_reduce_async(nn::as_buffer(grad_x), comm::ReduceOp::Sum, "tp_overlap_all_reduce");
    const torch::Tensor grad_w = g.t().mm(x.reshape({-1, x.size(-1)}));
    const torch::Tensor grad_b = ctx->saved_data["bias"].toBool() ? g.sum(0) : torch::Tensor();
    sum.wait();
    return {grad_x.view(x.sizes()), grad_w, grad_b, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor column_parallel_linear_overlapped(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                                comm::Communicator& tp) {
  if (tp.size() == 1) return torch::nn::functional::linear(x, w, b);
  return OverlappedColumnLinear::apply(x, w, b, &tp);
}

}  // namespace ds::parallel
