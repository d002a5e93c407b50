// Batched matrix products for attention's small per-head matrices. LibTorch 1.13's CPU bmm (built
// without MKL) loops over the batch calling a multi-threaded BLAS GEMM per matrix: for a [256, 64] x
// [64, 256] head the threads meet at a barrier every few microseconds of work (GPT-2 small's
// attention products ran at ~55 GF/s where its other GEMMs ran at ~200). This splits the batch over
// the intra-op threads instead, each running single-threaded GEMMs on its own matrices.
#pragma once

#include <torch/torch.h>

namespace ds::nn {

// a [..., M, K] @ b [..., K, N] with equal leading (batch) dimensions, differentiable in both, as
// torch::matmul. fp32 CPU tensors take the batch-parallel path (transposed views are read in place);
// every other tensor, and DS_FUSED_KERNELS=0, torch::matmul.
torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace ds::nn
