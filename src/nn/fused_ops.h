// Transformer operators fused into one pass each on CPU. LibTorch 1.13 runs them as chains of
// element-wise operators (RMSNorm is six passes over the activations forward and more backward,
// the loss a log-softmax that writes the logits' size twice) and, in bf16, slowly: its bf16 GELU
// and LayerNorm take 2-5x the time of the fp32 ones and a bf16 loss first copies the [tokens,
// vocab] logits to fp32. These take fp32 and bf16 CPU tensors through nn/fused_kernels.h (AVX-512,
// fp32 arithmetic, bf16 rounding as c10::BFloat16), and every other tensor, a CPU without AVX-512,
// or DS_FUSED_KERNELS=0 in the environment through LibTorch's operators. fp32 results agree with
// LibTorch's to fp32 rounding (a sum in another order, exp to 1 ulp), not bit for bit.
// Each has a first-order backward (no double backward through the kernels).
#pragma once

#include <torch/torch.h>

namespace ds::nn {

// GELU with the tanh approximation, torch::gelu(x, "tanh").
torch::Tensor gelu_tanh(const torch::Tensor& x);

// LayerNorm over the last dimension: torch::layer_norm(x, {x.size(-1)}, weight, bias, eps). The
// kernel serves bf16 only (LibTorch's fp32 LayerNorm is one vectorized pass already) and saves the
// parameters themselves for backward (not views), as nn/memory_efficient_linear.h.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps);
// A torch::nn::LayerNorm module's forward over the last dimension, through the function above.
torch::Tensor layer_norm(const torch::nn::LayerNorm& ln, const torch::Tensor& x);

// Hugging Face Llama's RMSNorm over the last dimension: weight · (x·rsqrt(mean(x²) + eps) in fp32,
// cast back to x's dtype). One pass forward, two backward; saves x and one fp32 per row.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// Llama's gated MLP activation: silu(gate) · up, saving only the two inputs.
torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);

// Rotary position embedding, rotate-half convention: x·cos + rotate_half(x)·sin with
// rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]). The kernel takes x [B, H, T, D] in any layout
// with unit stride along D (a head view of a projection) and cos/sin [T, D], and writes a
// contiguous [B, H, T, D] (what the attention products read); others go through LibTorch's ops.
torch::Tensor rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// Mean cross-entropy of `logits` [N, V] against `targets` [N] (int64; -100 is ignored), as an fp32
// scalar: torch's cross_entropy over the logits in fp32. Logits are read in place (no log-softmax
// of their size; bf16 ones are not copied to fp32) and the gradient written in their dtype.
torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets);

// Causal attention probabilities from raw scores [..., Tq, Tk]: softmax(scale · scores) over each
// query's keys up to its own position (query i sees keys 0 .. i + Tk - Tq), 0 past them. The kernel
// scales, masks and normalizes in one pass per row.
torch::Tensor causal_softmax(const torch::Tensor& scores, double scale);

// Whether `t` goes through the fused kernels (an fp32 or bf16 CPU tensor, kernels active).
bool uses_fused_kernels(const torch::Tensor& t);

// Whether the fused kernels serve fp32 and bf16 tensors in this process (the CPU has AVX-512 and
// DS_FUSED_KERNELS is not 0); for reports.
bool fused_kernels_active();

}  // namespace ds::nn
