// ZeRO stage 3's memory-efficient linear (DeepSpeed's LinearFunctionForZeroStage3, switched by
// zero_optimization.memory_efficient_linear): y = x·Wᵀ + b whose backward reads W itself, not a
// saved view of it. torch's linear saves Wᵀ, a view that pins the storage W had in forward until
// backward runs, so under stage 3 every layer's gathered weights stay alive through the whole
// forward and backward re-gathers them next to the pinned copies. This function saves the
// parameter (a leaf: autograd keeps the variable, not its storage), so a released weight really is
// freed and backward computes with the copy the coordinator re-gathered for it.
// Forward and gradients are the same kernels torch's linear runs (addmm / mm with the same
// operand order), so results are bit-identical to torch::nn::functional::linear.
#pragma once

#include <torch/torch.h>

namespace ds::nn {

// `bias` may be undefined.
torch::Tensor memory_efficient_linear(const torch::Tensor& input, const torch::Tensor& weight,
                                      const torch::Tensor& bias = {});

}  // namespace ds::nn
