#include "parallel/vocab_parallel.h"

#include <string>

#include "nn/tensor_buffer.h"
#include "parallel/autograd_group.h"
#include "parallel/tp_collectives.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Forward: the three per-token reductions over the group; backward: softmax − one-hot, locally.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& targets,
                               int64_t begin, int64_t end, comm::Communicator* tp) {
    torch::NoGradGuard no_grad;
    // A copy (the caller's logits stay as they were); it becomes the softmax backward reads.
    torch::Tensor x = logits.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();  // [N, V/tp]
    torch::Tensor max = std::get<0>(x.max(1)).contiguous();
    tp->all_reduce(nn::as_buffer(max), comm::ReduceOp::Max, "vocab_parallel_ce_max");
    x.sub_(max.unsqueeze(1));
    const torch::Tensor valid = targets != -100;
    const torch::Tensor mine = valid & (targets >= begin) & (targets < end);
    const torch::Tensor local = (targets - begin).masked_fill(~mine, 0);
    // [sum of exp, target logit] per token in one all-reduce.
    torch::Tensor sums = torch::empty({2, x.size(0)}, x.options());
    sums[1].copy_(x.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(~mine, 0.0));
    x.exp_();
    sums[0].copy_(x.sum(1));
    tp->all_reduce(nn::as_buffer(sums), comm::ReduceOp::Sum, "vocab_parallel_ce_sums");
    x.div_(sums[0].unsqueeze(1));  // this rank's columns of the softmax, for backward
    ctx->save_for_backward({x, local, mine, valid});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return (sums[0].log() - sums[1]).masked_fill(~valid, 0.0).sum();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    torch::Tensor g = saved[0].clone();
    const torch::Tensor& local = saved[1];
    g.scatter_add_(1, local.unsqueeze(1), -saved[2].to(g.dtype()).unsqueeze(1));
    g.mul_(saved[3].to(g.dtype()).unsqueeze(1) * grad[0].to(g.dtype()));
    const auto dtype = static_cast<c10::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {g.to(dtype), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight, VocabRange range,
                                       comm::Communicator& tp) {
  const torch::Tensor outside = (ids < range.begin) | (ids >= range.end);
  const torch::Tensor local = (ids - range.begin).masked_fill(outside, 0);
  torch::Tensor mine = torch::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0.0);
  return reduce_from_tp_region(mine, tp);
}

torch::Tensor vocab_parallel_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets,
                                               VocabRange range, comm::Communicator& tp) {
  DS_CHECK(logits.dim() == 2 && targets.dim() == 1 && logits.size(0) == targets.size(0) &&
               logits.size(1) == range.size(),
           Error,
           "vocab_parallel_cross_entropy: logits [" + std::to_string(logits.size(0)) + ", " +
               std::to_string(logits.size(-1)) + "] and " + std::to_string(targets.numel()) +
               " targets do not match a vocabulary range of " + std::to_string(range.size()) + " rows");
  return VocabParallelCrossEntropy::apply(logits, targets, range.begin, range.end, &tp);
}

}  // namespace ds::parallel
