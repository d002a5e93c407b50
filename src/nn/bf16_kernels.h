// Raw bf16 kernels behind nn/bf16_ops.h: the element-wise and row-wise operators of a transformer
// step that LibTorch 1.13 runs slowly in bf16 on CPU (its bf16 GELU and LayerNorm take 2-5x the
// time of the fp32 ones, and a bf16 loss first copies the logits to fp32). Each reads bf16, computes
// in fp32 and rounds to bf16 (round-to-nearest-even, as c10::BFloat16) where it writes bf16.
// AVX-512 only (bf16_kernels_avx512.cpp, built with its own ISA flags); callers check
// bf16_kernels_available() and otherwise use LibTorch's operators. Spans, no torch: each call
// covers a slice, the caller splits the work over threads.
#pragma once

#include <cstdint>

namespace ds::nn::kernels {

// True when this build has the AVX-512 kernels and the CPU runs them (AVX-512 F + BW).
bool bf16_kernels_available();

// GELU with the tanh approximation (torch's gelu(x, "tanh")): y = x/2 · (1 + tanh(√(2/π)(x + 0.044715x³))).
void gelu_tanh_forward(const uint16_t* x, uint16_t* y, int64_t n);
// dx = dy · GELU'(x), the derivative torch's GeluBackward uses.
void gelu_tanh_backward(const uint16_t* dy, const uint16_t* x, uint16_t* dx, int64_t n);

// LayerNorm over rows of `cols`: y = (x - mean)·rstd·w + b with the biased variance; writes each
// row's mean and rstd = 1/√(var + eps) rounded to bf16 (what torch's native_layer_norm_backward reads).
void layer_norm_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, uint16_t* mean,
                        uint16_t* rstd, int64_t rows, int64_t cols, float eps);

// Cross-entropy rows: for each row of `cols` logits, lse[r] = log Σ exp(x) (fp32) and
// loss[r] = lse[r] - x[target[r]] (0 where target[r] == ignore_index).
void cross_entropy_forward(const uint16_t* logits, const int64_t* target, float* lse, float* loss, int64_t rows,
                           int64_t cols, int64_t ignore_index);
// dx[r] = (softmax(x[r]) - onehot(target[r])) · scale, and 0 for ignored rows.
void cross_entropy_backward(const uint16_t* logits, const int64_t* target, const float* lse, uint16_t* dx, int64_t rows,
                            int64_t cols, int64_t ignore_index, float scale);

// Causal softmax of attention scores: `rows` rows of `cols` scores from global row `row0` on (the
// pointers already at that row), row r
// being query position r % queries, which sees keys [0, r % queries + cols - queries] (a square [T, T] score matrix sees
// its diagonal and below). probs = softmax(scale · scores) over the visible keys, 0 past them.
void causal_softmax_forward(const uint16_t* scores, uint16_t* probs, int64_t row0, int64_t rows, int64_t queries, int64_t cols,
                            float scale);
// dscores = scale · probs ⊙ (dprobs - Σ dprobs ⊙ probs) over the visible keys, 0 past them.
void causal_softmax_backward(const uint16_t* dprobs, const uint16_t* probs, uint16_t* dscores, int64_t row0,
                             int64_t rows, int64_t queries, int64_t cols, float scale);

}  // namespace ds::nn::kernels
