// Transformer operators that run bf16 at the machine's speed on CPU. LibTorch 1.13's own bf16 GELU
// and LayerNorm take 2-5x the time of its fp32 ones, and its bf16 loss first copies the [tokens,
// vocab] logits to fp32 (measured on GPT-2 small: 0.9 s of a 3.7 s bf16 step, next to 1.7 s of
// GEMMs). These take bf16 CPU tensors through nn/bf16_kernels.h (AVX-512, fp32 arithmetic, bf16
// rounding as c10::BFloat16) and every other tensor, or a CPU without AVX-512, or the environment
// variable DS_BF16_KERNELS=0, through LibTorch's operators, so fp32 results are unchanged.
// Each has a first-order backward (no double backward through the bf16 path).
#pragma once

#include <torch/torch.h>

namespace ds::nn {

// GELU with the tanh approximation, torch::gelu(x, "tanh").
torch::Tensor gelu_tanh(const torch::Tensor& x);

// LayerNorm over the last dimension: torch::layer_norm(x, {x.size(-1)}, weight, bias, eps). The bf16
// path saves the parameters themselves for backward (not views), as nn/memory_efficient_linear.h.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps);
// A torch::nn::LayerNorm module's forward over the last dimension, through the function above.
torch::Tensor layer_norm(const torch::nn::LayerNorm& ln, const torch::Tensor& x);

// Mean cross-entropy of `logits` [N, V] against `targets` [N] (int64; -100 is ignored), as an fp32
// scalar: torch's cross_entropy over the logits in fp32. bf16 logits are read in place (no fp32
// copy of the logits, and a bf16 gradient written directly).
torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets);

// Causal attention probabilities from raw scores [..., Tq, Tk]: softmax(scale · scores) over each
// query's keys up to its own position (query i sees keys 0 .. i + Tk - Tq), 0 past them. The bf16
// path scales, masks and normalizes in one fp32 pass per row; others compute it with LibTorch.
torch::Tensor causal_softmax(const torch::Tensor& scores, double scale);

// Whether `t` goes through the bf16 kernels (a bf16 CPU tensor, kernels active): models keep their
// LibTorch operator sequence, bit for bit, for every other tensor.
bool uses_bf16_kernels(const torch::Tensor& t);

// Whether the bf16 kernels serve bf16 tensors in this process (the CPU has AVX-512 and
// DS_BF16_KERNELS is not 0); for reports.
bool bf16_kernels_active();

}  // namespace ds::nn
