// Raw kernels behind nn/fused_ops.h: the element-wise and row-wise operators of a transformer step
// that LibTorch 1.13 runs as several passes over memory (or, in bf16, slowly: its bf16 GELU and
// LayerNorm take 2-5x the time of the fp32 ones, and a bf16 loss first copies the logits to fp32).
// Each exists for fp32 (`float`) and bf16 (`uint16_t`, the bits of c10::BFloat16): it reads the
// storage type, computes in fp32, and rounds bf16 results to nearest even as c10::BFloat16 does.
// AVX-512 only (fused_kernels_avx512.cpp, built with its own ISA flags); callers check
// fused_kernels_available() and otherwise use LibTorch's operators. Spans, no torch: each call
// covers a slice, the caller splits the work over threads.
#pragma once

#include <cstdint>

namespace ds::nn::kernels {

// True when this build has the AVX-512 kernels and the CPU runs them (AVX-512 F + BW).
bool fused_kernels_available();

// T is float (fp32) or uint16_t (bf16); both are instantiated in fused_kernels_avx512.cpp.

// GELU, tanh approximation (torch's gelu(x, "tanh")): y = x/2 · (1 + tanh(√(2/π)(x + 0.044715x³))).
template <class T>
void gelu_tanh_forward(const T* x, T* y, int64_t n);
// dx = dy · GELU'(x), the derivative torch's GeluBackward uses.
template <class T>
void gelu_tanh_backward(const T* dy, const T* x, T* dx, int64_t n);

// Cross-entropy rows: lse[r] = log Σ exp(x) (fp32) and loss[r] = lse[r] - x[target[r]] (0 where
// target[r] == ignore_index).
template <class T>
void cross_entropy_forward(const T* logits, const int64_t* target, float* lse, float* loss, int64_t rows, int64_t cols,
                           int64_t ignore_index);
// dx[r] = (softmax(x[r]) - onehot(target[r])) · scale, and 0 for ignored rows.
template <class T>
void cross_entropy_backward(const T* logits, const int64_t* target, const float* lse, T* dx, int64_t rows, int64_t cols,
                            int64_t ignore_index, float scale);

// Causal softmax of attention scores: `rows` rows of `cols` scores from global row `row0` on (the
// pointers already at that row), row r being query position r % queries, which sees keys
// [0, r % queries + cols - queries] (a square [T, T] score matrix sees its diagonal and below).
// probs = softmax(scale · scores) over the visible keys, 0 past them.
template <class T>
void causal_softmax_forward(const T* scores, T* probs, int64_t row0, int64_t rows, int64_t queries, int64_t cols,
                            float scale);
// dscores = scale · probs ⊙ (dprobs - Σ dprobs ⊙ probs) over the visible keys, 0 past them.
template <class T>
void causal_softmax_backward(const T* dprobs, const T* probs, T* dscores, int64_t row0, int64_t rows, int64_t queries,
                             int64_t cols, float scale);

// RMSNorm rows as Hugging Face's Llama computes it: n = x · rstd with rstd = 1/√(mean(x²) + eps) in
// fp32, n rounded to T, y = w · n. Writes each row's rstd for backward.
template <class T>
void rms_norm_forward(const T* x, const T* w, T* y, float* rstd, int64_t rows, int64_t cols, float eps);
// With g = dy ⊙ w: dx = rstd · (g - n · mean(g ⊙ n)), and dw_acc[j] += Σ over the rows of dy · n
// (fp32; each thread accumulates its own rows, the caller adds the threads' sums).
template <class T>
void rms_norm_backward(const T* dy, const T* x, const T* w, const float* rstd, T* dx, float* dw_acc, int64_t rows,
                       int64_t cols);

// SwiGLU, Llama's MLP gate: y = silu(g) · u = g · σ(g) · u.
template <class T>
void swiglu_forward(const T* g, const T* u, T* y, int64_t n);
// du = dy · silu(g); dg = dy · u · σ(g) · (1 + g · (1 - σ(g))).
template <class T>
void swiglu_backward(const T* dy, const T* g, const T* u, T* dg, T* du, int64_t n);

// Rotary position embedding, rotate-half convention (Hugging Face's Llama): with h = d/2,
// y[:h] = x[:h]·cos[:h] - x[h:]·sin[:h] and y[h:] = x[h:]·cos[h:] + x[:h]·sin[h:], for `rows` rows of
// d (d even); x rows `x_stride` elements apart, cos/sin/y rows contiguous.
template <class T>
void rotary_forward(const T* x, int64_t x_stride, const T* cos, const T* sin, T* y, int64_t rows, int64_t d);
// The transpose: dx[:h] = dy[:h]·cos[:h] + dy[h:]·sin[h:], dx[h:] = dy[h:]·cos[h:] - dy[:h]·sin[:h].
template <class T>
void rotary_backward(const T* dy, const T* cos, const T* sin, T* dx, int64_t rows, int64_t d);

// bf16 only (LibTorch's fp32 LayerNorm is already one vectorized pass): y = (x - mean)·rstd·w + b
// with the biased variance; writes each row's mean and rstd = 1/√(var + eps) rounded to bf16 (what
// torch's native_layer_norm_backward reads).
void layer_norm_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, uint16_t* mean,
                        uint16_t* rstd, int64_t rows, int64_t cols, float eps);

}  // namespace ds::nn::kernels
