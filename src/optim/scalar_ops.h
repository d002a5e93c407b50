// Internal to src/optim: the one-element reference operations every kernel path shares. The scalar
// path loops over them; the AVX paths use them for their tails and mirror them lane by lane.
// Everything here is `static inline` and uses compiler builtins only (no std:: inline functions),
// so each kernel file gets its own copy compiled with its own ISA flags (see kernel_spans.h).
// __builtin_fmaf is one correctly rounded fused multiply-add whether it becomes vfmadd (with
// -mfma) or a call to libm's fmaf (baseline x86-64), so all copies round alike.
#pragma once

#include <cstdint>

#include "optim/kernel_spans.h"

namespace ds::optim::detail {

// Adam/AdamW, DeepSpeed's arithmetic (reference §19): m = fma(g, 1-b1, m*b1);
// v = fma(g*g, 1-b2, v*b2); d = fma(sqrt(v), bc2, eps); AdamW p = fma(p, -lr*wd, p);
// p = fma(m/d, -lr/bc1, p). L2 mode adds wd*p to the gradient first. Returns the new p.
static inline float adam_element(const AdamSpans& s, const AdamCoeffs& c, std::int64_t i) {
  float grad = s.g[i];
  float param = s.p[i];
  if (c.l2_decay) grad = __builtin_fmaf(param, c.wd, grad);
  const float mi = __builtin_fmaf(grad, c.one_minus_b1, s.m[i] * c.b1);
  const float vi = __builtin_fmaf(grad * grad, c.one_minus_b2, s.v[i] * c.b2);
  const float denom = __builtin_fmaf(__builtin_sqrtf(vi), c.bc2, c.eps);
  if (c.adamw_decay) param = __builtin_fmaf(param, c.decay, param);
  param = __builtin_fmaf(mi / denom, c.step_size, param);
  s.p[i] = param;
  s.m[i] = mi;
  s.v[i] = vi;
  return param;
}

// torch.optim.Adagrad (dense): g += wd*p (fused, as torch's add with alpha); sum += g*g;
// p += (-clr * g) / (sqrt(sum) + eps), in that order, no other fusion.
static inline void adagrad_element(const AdagradSpans& s, const AdagradCoeffs& c, std::int64_t i) {
  float grad = s.g[i];
  const float param = s.p[i];
  if (c.decay) grad = __builtin_fmaf(param, c.wd, grad);
  const float acc = s.sum[i] + grad * grad;
  const float std_dev = __builtin_sqrtf(acc) + c.eps;
  s.p[i] = param + c.neg_clr * grad / std_dev;
  s.sum[i] = acc;
}

// DeepSpeed CPU Lion: c = fma(g, 1-b1, m*b1); p += -copysign(lr, c) (decay: fma(p, 1-lr*wd, step));
// m = fma(g, 1-b2, m*b2).
static inline void lion_element(const LionSpans& s, const LionCoeffs& c, std::int64_t i) {
  const float grad = s.g[i];
  const float mi = s.m[i];
  const float interp = __builtin_fmaf(grad, c.one_minus_b1, mi * c.b1);
  const float step = -__builtin_copysignf(c.alpha, interp);
  s.p[i] = c.decay ? __builtin_fmaf(s.p[i], c.after_decay, step) : s.p[i] + step;
  s.m[i] = __builtin_fmaf(grad, c.one_minus_b2, mi * c.b2);
}

static inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
}

// c10::BFloat16(float): round to nearest even on the fp32 bits; every NaN becomes 0x7FC0.
static inline std::uint16_t fp32_to_bf16(float x) {
  if (x != x) return 0x7FC0;
  const std::uint32_t u = float_bits(x);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// c10::Half(float): IEEE binary16, round to nearest even, overflow to inf, subnormals kept; a NaN
// becomes sign | 0x7E00. Integer-only, so the scalar path needs no F16C.
static inline std::uint16_t fp32_to_fp16(float x) {
  const std::uint32_t u = float_bits(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;    // NaN
  if (a >= 0x477FF000u) return sign | 0x7C00u;   // >= 65520 rounds past 65504: inf (or inf itself)
  if (a >= 0x38800000u) {                        // normal in binary16 (>= 2^-14)
    // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even; a carry out
    // of the mantissa correctly bumps the exponent.
    const std::uint32_t rounded = a + 0xFFFu + ((a >> 13) & 1u);
    return sign | static_cast<std::uint16_t>((rounded - 0x38000000u) >> 13);
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25: ties to even go to zero
  // Subnormal binary16: value = mant * 2^(e-150) in units of 2^-24 is mant >> (126 - e).
  const std::uint32_t e = a >> 23;
  const std::uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // 14..24 here
  std::uint32_t h = mant >> shift;
  const std::uint32_t rest = mant & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (h & 1u))) ++h;  // may carry into the smallest normal: right
  return sign | static_cast<std::uint16_t>(h);
}

static inline std::uint16_t fp32_to_half(float x, HalfType t) {
  return t == HalfType::Bf16 ? fp32_to_bf16(x) : fp32_to_fp16(x);
}

}  // namespace ds::optim::detail
