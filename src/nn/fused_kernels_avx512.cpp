// AVX-512 bodies of nn/fused_kernels.h, each written once over the storage type (fp32 or bf16) by
// load/store overloads. Built with -mavx512f -mavx512bw -mavx512vl -mfma (see CMakeLists.txt) and
// entered only after fused_kernels_available() has checked the CPU.
#include "nn/fused_kernels.h"

// The two storage types of every templated kernel.
#define DS_INSTANTIATE(T)                                                                                            \
  template void gelu_tanh_forward(const T*, T*, int64_t);                                                            \
  template void gelu_tanh_backward(const T*, const T*, T*, int64_t);                                                 \
  template void cross_entropy_forward(const T*, const int64_t*, float*, float*, int64_t, int64_t, int64_t);          \
  template void cross_entropy_backward(const T*, const int64_t*, const float*, T*, int64_t, int64_t, int64_t, float); \
  template void causal_softmax_forward(const T*, T*, int64_t, int64_t, int64_t, int64_t, float);                     \
  template void causal_softmax_backward(const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, float);          \
  template void rms_norm_forward(const T*, const T*, T*, float*, int64_t, int64_t, float);                           \
  template void rms_norm_backward(const T*, const T*, const T*, const float*, T*, float*, int64_t, int64_t);         \
  template void swiglu_forward(const T*, const T*, T*, int64_t);                                                     \
  template void swiglu_backward(const T*, const T*, const T*, T*, T*, int64_t);                                      \
  template void rotary_forward(const T*, int64_t, const T*, const T*, T*, int64_t, int64_t);                         \
  template void rotary_backward(const T*, const T*, const T*, T*, int64_t, int64_t);

#if defined(__AVX512F__)
#include <immintrin.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <vector>

namespace ds::nn::kernels {
namespace {

constexpr int kLanes = 16;

__mmask16 tail_mask(int64_t left) { return left >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u); }

// bf16 is the top half of an fp32: widen by a 16-bit shift.
__m512 load(const uint16_t* p, __mmask16 m) {
  const __m256i v = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

// Round to nearest even, NaN kept quiet: c10::BFloat16's rounding, sixteen lanes at a time.
void store(uint16_t* p, __m512 f, __mmask16 m) {
  const __m512i bits = _mm512_castps_si512(f);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), r, _mm512_set1_epi32(0x7FC00000));
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
}

__m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
void store(float* p, __m512 f, __mmask16 m) { _mm512_mask_storeu_ps(p, m, f); }

// f as the storage type would hold it: itself in fp32, rounded to bf16 (and widened back) in bf16.
__m512 rounded(__m512 f, const float*) { return f; }
__m512 rounded(__m512 f, const uint16_t*) {
  alignas(64) uint16_t h[kLanes];
  store(h, f, 0xFFFF);
  return load(h, 0xFFFF);
}

uint16_t to_bf16(float f) {
  if (std::isnan(f)) return 0x7FC0;
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

float to_float(float f) { return f; }
float to_float(uint16_t h) { return from_bf16(h); }
void assign(float& dst, float f) { dst = f; }
void assign(uint16_t& dst, float f) { dst = to_bf16(f); }

// e^x for fp32 lanes: x = n·ln2 + r, |r| ≤ ln2/2, Cephes' degree-6 polynomial for e^r, 2^n by scalef
// (about 1 ulp; inputs clamped to ±88.38, where e^x leaves the fp32 range).
__m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f)), _mm512_set1_ps(-88.3762626647949f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2 in two parts: exact n·hi
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(e, n);
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
constexpr float kKappa = 0.044715f;

// With e = exp(2u), u = √(2/π)(x + κx³): 1 + tanh(u) = 2e/(e+1) and 1 - tanh(u)² = 4e/(e+1)²,
// forms without the cancellation of 1 - 2/(e+1) near u = 0.
__m512 gelu_e(__m512 x) {
  const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  const __m512 u = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi), _mm512_fmadd_ps(_mm512_set1_ps(kKappa), x3, x));
  return exp512(_mm512_add_ps(u, u));
}

}  // namespace

template <class T>
void gelu_tanh_forward(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = load(x + i, m);
    const __m512 e = gelu_e(v);
    store(y + i, _mm512_mul_ps(v, _mm512_div_ps(e, _mm512_add_ps(e, _mm512_set1_ps(1.0f)))), m);  // x·(e/(e+1)): no x·e overflow
  }
}

template <class T>
void gelu_tanh_backward(const T* dy, const T* x, T* dx, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = load(x + i, m), g = load(dy + i, m);
    const __m512 e = gelu_e(v);
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(e, one));  // 1/(e+1)
    const __m512 one_plus_t = _mm512_mul_ps(_mm512_set1_ps(2.0f), _mm512_mul_ps(e, s));
    const __m512 one_minus_t2 = _mm512_mul_ps(one_plus_t, _mm512_add_ps(s, s));
    // d/dx of x/2·(1+t): (1+t)/2 + x/2·(1-t²)·√(2/π)(1 + 3κx²)
    const __m512 inner_d = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                                         _mm512_fmadd_ps(_mm512_set1_ps(3.0f * kKappa), _mm512_mul_ps(v, v), one));
    const __m512 d = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(half, v), one_minus_t2), inner_d,
                                     _mm512_mul_ps(half, one_plus_t));
    store(dx + i, _mm512_mul_ps(g, d), m);
  }
}

void layer_norm_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, uint16_t* mean,
                        uint16_t* rstd, int64_t rows, int64_t cols, float eps) {
  std::vector<float> wf(static_cast<size_t>(cols)), bf(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) wf[size_t(j)] = from_bf16(w[j]), bf[size_t(j)] = from_bf16(b[j]);
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* xr = x + r * cols;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < cols; j += kLanes) acc = _mm512_add_ps(acc, load(xr + j, tail_mask(cols - j)));
    const float mu = _mm512_reduce_add_ps(acc) / float(cols);
    const __m512 vmu = _mm512_set1_ps(mu);
    acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __mmask16 m = tail_mask(cols - j);
      const __m512 d = _mm512_maskz_sub_ps(m, load(xr + j, m), vmu);
      acc = _mm512_fmadd_ps(d, d, acc);
    }
    const float rs = 1.0f / std::sqrt(_mm512_reduce_add_ps(acc) / float(cols) + eps);
    const __m512 vrs = _mm512_set1_ps(rs);
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __mmask16 m = tail_mask(cols - j);
      const __m512 norm = _mm512_mul_ps(_mm512_sub_ps(load(xr + j, m), vmu), vrs);
      store(y + r * cols + j,
            _mm512_fmadd_ps(norm, _mm512_maskz_loadu_ps(m, wf.data() + j), _mm512_maskz_loadu_ps(m, bf.data() + j)), m);
    }
    mean[r] = to_bf16(mu);
    rstd[r] = to_bf16(rs);
  }
}

template <class T>
void cross_entropy_forward(const T* logits, const int64_t* target, float* lse, float* loss, int64_t rows, int64_t cols,
                           int64_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = logits + r * cols;
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __mmask16 m = tail_mask(cols - j);
      mx = _mm512_mask_max_ps(mx, m, mx, load(xr + j, m));
    }
    const float row_max = _mm512_reduce_max_ps(mx);
    const __m512 vmax = _mm512_set1_ps(row_max);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __mmask16 m = tail_mask(cols - j);
      sum = _mm512_mask_add_ps(sum, m, sum, exp512(_mm512_sub_ps(load(xr + j, m), vmax)));
    }
    lse[r] = row_max + std::log(_mm512_reduce_add_ps(sum));
    const int64_t t = target[r];
    loss[r] = t == ignore_index ? 0.0f : lse[r] - to_float(xr[t]);
  }
}

template <class T>
void cross_entropy_backward(const T* logits, const int64_t* target, const float* lse, T* dx, int64_t rows, int64_t cols,
                            int64_t ignore_index, float scale) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = logits + r * cols;
    T* dr = dx + r * cols;
    const int64_t t = target[r];
    if (t == ignore_index) {
      std::memset(dr, 0, size_t(cols) * sizeof(T));
      continue;
    }
    const __m512 vlse = _mm512_set1_ps(lse[r]);
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __mmask16 m = tail_mask(cols - j);
      store(dr + j, _mm512_mul_ps(exp512(_mm512_sub_ps(load(xr + j, m), vlse)), vscale), m);
    }
    assign(dr[t], (std::exp(to_float(xr[t]) - lse[r]) - 1.0f) * scale);
  }
}

template <class T>
void causal_softmax_forward(const T* scores, T* probs, int64_t row0, int64_t rows, int64_t queries, int64_t cols,
                            float scale) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = scores + r * cols;
    T* pr = probs + r * cols;
    const int64_t visible = std::clamp<int64_t>((row0 + r) % queries + 1 + cols - queries, 0, cols);
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < visible; j += kLanes) {
      const __mmask16 m = tail_mask(visible - j);
      mx = _mm512_mask_max_ps(mx, m, mx, _mm512_mul_ps(load(xr + j, m), vscale));
    }
    const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < visible; j += kLanes) {
      const __mmask16 m = tail_mask(visible - j);
      sum = _mm512_mask_add_ps(sum, m, sum, exp512(_mm512_fmsub_ps(load(xr + j, m), vscale, vmax)));
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int64_t j = 0; j < visible; j += kLanes) {
      const __mmask16 m = tail_mask(visible - j);
      store(pr + j, _mm512_mul_ps(exp512(_mm512_fmsub_ps(load(xr + j, m), vscale, vmax)), inv), m);
    }
    if (visible < cols) std::memset(pr + visible, 0, size_t(cols - visible) * sizeof(T));
  }
}

template <class T>
void causal_softmax_backward(const T* dprobs, const T* probs, T* dscores, int64_t row0, int64_t rows, int64_t queries,
                             int64_t cols, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *gr = dprobs + r * cols, *pr = probs + r * cols;
    T* dr = dscores + r * cols;
    const int64_t visible = std::clamp<int64_t>((row0 + r) % queries + 1 + cols - queries, 0, cols);
    __m512 dot = _mm512_setzero_ps();
    for (int64_t j = 0; j < visible; j += kLanes) {
      const __mmask16 m = tail_mask(visible - j);
      dot = _mm512_fmadd_ps(load(gr + j, m), load(pr + j, m), dot);
    }
    const __m512 vdot = _mm512_set1_ps(_mm512_reduce_add_ps(dot)), vscale = _mm512_set1_ps(scale);
    for (int64_t j = 0; j < visible; j += kLanes) {
      const __mmask16 m = tail_mask(visible - j);
      const __m512 p = load(pr + j, m);
      store(dr + j, _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(load(gr + j, m), vdot)), vscale), m);
    }
    if (visible < cols) std::memset(dr + visible, 0, size_t(cols - visible) * sizeof(T));
  }
}

template <class T>
void rms_norm_forward(const T* x, const T* w, T* y, float* rstd, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __m512 v = load(xr + j, tail_mask(cols - j));
      acc = _mm512_fmadd_ps(v, v, acc);
    }
    const float rs = 1.0f / std::sqrt(_mm512_reduce_add_ps(acc) / float(cols) + eps);
    const __m512 vrs = _mm512_set1_ps(rs);
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __mmask16 m = tail_mask(cols - j);
      store(y + r * cols + j, _mm512_mul_ps(load(w + j, m), rounded(_mm512_mul_ps(load(xr + j, m), vrs), x)), m);
    }
    rstd[r] = rs;
  }
}

template <class T>
void rms_norm_backward(const T* dy, const T* x, const T* w, const float* rstd, T* dx, float* dw_acc, int64_t rows,
                       int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols, *gr = dy + r * cols;
    const __m512 vrs = _mm512_set1_ps(rstd[r]);
    __m512 dot = _mm512_setzero_ps();
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __mmask16 m = tail_mask(cols - j);
      const __m512 n = _mm512_mul_ps(load(xr + j, m), vrs), g = load(gr + j, m);
      dot = _mm512_fmadd_ps(_mm512_mul_ps(g, load(w + j, m)), n, dot);
      _mm512_mask_storeu_ps(dw_acc + j, m, _mm512_fmadd_ps(g, rounded(n, x), _mm512_maskz_loadu_ps(m, dw_acc + j)));
    }
    const __m512 vmean = _mm512_set1_ps(_mm512_reduce_add_ps(dot) / float(cols));
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __mmask16 m = tail_mask(cols - j);
      const __m512 n = _mm512_mul_ps(load(xr + j, m), vrs);
      const __m512 g = _mm512_mul_ps(load(gr + j, m), load(w + j, m));
      store(dx + r * cols + j, _mm512_mul_ps(vrs, _mm512_fnmadd_ps(n, vmean, g)), m);
    }
  }
}

// σ(g) = 1/(1 + e^-g); e^-g saturates at e^88 for very negative g, where σ is 0 to fp32's precision.
__m512 sigmoid512(__m512 g) {
  return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
}

template <class T>
void swiglu_forward(const T* g, const T* u, T* y, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 vg = load(g + i, m);
    store(y + i, _mm512_mul_ps(_mm512_mul_ps(vg, sigmoid512(vg)), load(u + i, m)), m);
  }
}

template <class T>
void swiglu_backward(const T* dy, const T* g, const T* u, T* dg, T* du, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 vg = load(g + i, m), vd = load(dy + i, m);
    const __m512 s = sigmoid512(vg), silu = _mm512_mul_ps(vg, s);
    store(du + i, _mm512_mul_ps(vd, silu), m);
    // σ(g)·(1 + g·(1 - σ(g))) = σ(g) + silu·(1 - σ(g))
    const __m512 dsilu = _mm512_fmadd_ps(silu, _mm512_sub_ps(one, s), s);
    store(dg + i, _mm512_mul_ps(_mm512_mul_ps(vd, load(u + i, m)), dsilu), m);
  }
}

DS_INSTANTIATE(float)
DS_INSTANTIATE(uint16_t)

template <class T>
void rotary_forward(const T* x, int64_t x_stride, const T* cos, const T* sin, T* y, int64_t rows, int64_t d) {
  const int64_t h = d / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * x_stride, *c = cos + r * d, *s = sin + r * d;
    T* yr = y + r * d;
    for (int64_t j = 0; j < h; j += kLanes) {
      const __mmask16 m = tail_mask(h - j);
      const __m512 x1 = load(xr + j, m), x2 = load(xr + h + j, m);
      store(yr + j, _mm512_fnmadd_ps(x2, load(s + j, m), _mm512_mul_ps(x1, load(c + j, m))), m);
      store(yr + h + j, _mm512_fmadd_ps(x1, load(s + h + j, m), _mm512_mul_ps(x2, load(c + h + j, m))), m);
    }
  }
}

template <class T>
void rotary_backward(const T* dy, const T* cos, const T* sin, T* dx, int64_t rows, int64_t d) {
  const int64_t h = d / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const T *g = dy + r * d, *c = cos + r * d, *s = sin + r * d;
    T* dr = dx + r * d;
    for (int64_t j = 0; j < h; j += kLanes) {
      const __mmask16 m = tail_mask(h - j);
      const __m512 g1 = load(g + j, m), g2 = load(g + h + j, m);
      store(dr + j, _mm512_fmadd_ps(g2, load(s + h + j, m), _mm512_mul_ps(g1, load(c + j, m))), m);
      store(dr + h + j, _mm512_fnmadd_ps(g1, load(s + j, m), _mm512_mul_ps(g2, load(c + h + j, m))), m);
    }
  }
}

}  // namespace ds::nn::kernels
#else  // not an AVX-512 build: fused_kernels_available() is false, so nothing below is ever called
#include <cstdlib>

namespace ds::nn::kernels {
template <class T>
void gelu_tanh_forward(const T*, T*, int64_t) { std::abort(); }
template <class T>
void gelu_tanh_backward(const T*, const T*, T*, int64_t) { std::abort(); }
template <class T>
void cross_entropy_forward(const T*, const int64_t*, float*, float*, int64_t, int64_t, int64_t) { std::abort(); }
template <class T>
void cross_entropy_backward(const T*, const int64_t*, const float*, T*, int64_t, int64_t, int64_t, float) { std::abort(); }
template <class T>
void causal_softmax_forward(const T*, T*, int64_t, int64_t, int64_t, int64_t, float) { std::abort(); }
template <class T>
void causal_softmax_backward(const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, float) { std::abort(); }
template <class T>
void rms_norm_forward(const T*, const T*, T*, float*, int64_t, int64_t, float) { std::abort(); }
template <class T>
void rms_norm_backward(const T*, const T*, const T*, const float*, T*, float*, int64_t, int64_t) { std::abort(); }
template <class T>
void swiglu_forward(const T*, const T*, T*, int64_t) { std::abort(); }
template <class T>
void swiglu_backward(const T*, const T*, const T*, T*, T*, int64_t) { std::abort(); }
template <class T>
void rotary_forward(const T*, int64_t, const T*, const T*, T*, int64_t, int64_t) { std::abort(); }
template <class T>
void rotary_backward(const T*, const T*, const T*, T*, int64_t, int64_t) { std::abort(); }
void layer_norm_forward(const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*, uint16_t*, uint16_t*, int64_t,
                        int64_t, float) {
  std::abort();
}
DS_INSTANTIATE(float)
DS_INSTANTIATE(uint16_t)
}  // namespace ds::nn::kernels
#endif
