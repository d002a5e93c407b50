// The AVX2 path of the span kernels: 8 fp32 lanes, each lane the scalar reference's exact
// operation sequence (_mm256_fmadd_ps where scalar_ops.h has __builtin_fmaf; sqrt and div are
// correctly rounded in both), then the scalar reference for the tail. Built with
// -mavx2 -mfma -mf16c -ffp-contract=off and entered only when cpu_supports(SimdPath::Avx2).
#include <immintrin.h>

#include "optim/kernel_spans.h"
#include "optim/scalar_ops.h"

namespace ds::optim::detail {
namespace {

constexpr std::int64_t kW = 8;

// Packs 8 lanes holding values < 2^16 into 8 uint16 (packus saturates nothing here).
inline __m128i narrow(__m256i r) {
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

// c10::BFloat16 rounding on 8 lanes: (u + 0x7FFF + ((u >> 16) & 1)) >> 16, NaN -> 0x7FC0.
inline __m128i to_bf16(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(nan));
  return narrow(r);
}

// IEEE round-to-nearest-even as c10::Half; a NaN is first made the canonical quiet NaN of its
// sign, because vcvtps2ph keeps payload bits that c10 drops (c10 gives sign | 0x7E00).
inline __m128i to_fp16(__m256 x) {
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 canon = _mm256_or_ps(_mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN))),
                                    _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
  x = _mm256_blendv_ps(x, canon, nan);
  return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

enum class Out { None, Bf16, Fp16 };

template <Out kOut>
void adam_loop(const AdamSpans& s, const AdamCoeffs& c, std::int64_t begin, std::int64_t end) {
  const __m256 b1 = _mm256_set1_ps(c.b1), b2 = _mm256_set1_ps(c.b2);
  const __m256 omb1 = _mm256_set1_ps(c.one_minus_b1), omb2 = _mm256_set1_ps(c.one_minus_b2);
  const __m256 eps = _mm256_set1_ps(c.eps), wd = _mm256_set1_ps(c.wd), bc2 = _mm256_set1_ps(c.bc2);
  const __m256 step_size = _mm256_set1_ps(c.step_size), decay = _mm256_set1_ps(c.decay);
  std::int64_t i = begin;
  for (; i + kW <= end; i += kW) {
    __m256 grad = _mm256_loadu_ps(s.g + i);
    __m256 param = _mm256_loadu_ps(s.p + i);
    if (c.l2_decay) grad = _mm256_fmadd_ps(param, wd, grad);
    const __m256 mi = _mm256_fmadd_ps(grad, omb1, _mm256_mul_ps(_mm256_loadu_ps(s.m + i), b1));
    const __m256 vi = _mm256_fmadd_ps(_mm256_mul_ps(grad, grad), omb2, _mm256_mul_ps(_mm256_loadu_ps(s.v + i), b2));
    const __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(vi), bc2, eps);
    if (c.adamw_decay) param = _mm256_fmadd_ps(param, decay, param);
    param = _mm256_fmadd_ps(_mm256_div_ps(mi, denom), step_size, param);
    _mm256_storeu_ps(s.p + i, param);
    _mm256_storeu_ps(s.m + i, mi);
    _mm256_storeu_ps(s.v + i, vi);
    if constexpr (kOut == Out::Bf16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(s.out.data + i), to_bf16(param));
    } else if constexpr (kOut == Out::Fp16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(s.out.data + i), to_fp16(param));
    }
  }
  for (; i < end; ++i) {
    const float p = adam_element(s, c, i);
    if constexpr (kOut != Out::None) s.out.data[i] = fp32_to_half(p, s.out.type);
  }
}

}  // namespace

void adam_avx2(const AdamSpans& s, const AdamCoeffs& c, std::int64_t begin, std::int64_t end) {
  if (s.out.data == nullptr) {
    adam_loop<Out::None>(s, c, begin, end);
  } else if (s.out.type == HalfType::Bf16) {
    adam_loop<Out::Bf16>(s, c, begin, end);
  } else {
    adam_loop<Out::Fp16>(s, c, begin, end);
  }
}

void adagrad_avx2(const AdagradSpans& s, const AdagradCoeffs& c, std::int64_t begin, std::int64_t end) {
  const __m256 wd = _mm256_set1_ps(c.wd), eps = _mm256_set1_ps(c.eps), neg_clr = _mm256_set1_ps(c.neg_clr);
  std::int64_t i = begin;
  for (; i + kW <= end; i += kW) {
    __m256 grad = _mm256_loadu_ps(s.g + i);
    const __m256 param = _mm256_loadu_ps(s.p + i);
    if (c.decay) grad = _mm256_fmadd_ps(param, wd, grad);
    const __m256 acc = _mm256_add_ps(_mm256_loadu_ps(s.sum + i), _mm256_mul_ps(grad, grad));
    const __m256 std_dev = _mm256_add_ps(_mm256_sqrt_ps(acc), eps);
    _mm256_storeu_ps(s.p + i, _mm256_add_ps(param, _mm256_div_ps(_mm256_mul_ps(neg_clr, grad), std_dev)));
    _mm256_storeu_ps(s.sum + i, acc);
  }
  for (; i < end; ++i) adagrad_element(s, c, i);
}

void lion_avx2(const LionSpans& s, const LionCoeffs& c, std::int64_t begin, std::int64_t end) {
  const __m256 b1 = _mm256_set1_ps(c.b1), b2 = _mm256_set1_ps(c.b2);
  const __m256 omb1 = _mm256_set1_ps(c.one_minus_b1), omb2 = _mm256_set1_ps(c.one_minus_b2);
  const __m256 after_decay = _mm256_set1_ps(c.after_decay);
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  // -copysign(lr, x) = |lr| with the sign bit of x flipped.
  const __m256 abs_alpha = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(float_bits(c.alpha) & 0x7FFFFFFFu)));
  std::int64_t i = begin;
  for (; i + kW <= end; i += kW) {
    const __m256 grad = _mm256_loadu_ps(s.g + i);
    const __m256 mi = _mm256_loadu_ps(s.m + i);
    const __m256 param = _mm256_loadu_ps(s.p + i);
    const __m256 interp = _mm256_fmadd_ps(grad, omb1, _mm256_mul_ps(mi, b1));
    const __m256 step = _mm256_or_ps(abs_alpha, _mm256_xor_ps(_mm256_and_ps(interp, sign), sign));
    _mm256_storeu_ps(s.p + i, c.decay ? _mm256_fmadd_ps(param, after_decay, step) : _mm256_add_ps(param, step));
    _mm256_storeu_ps(s.m + i, _mm256_fmadd_ps(grad, omb2, _mm256_mul_ps(mi, b2)));
  }
  for (; i < end; ++i) lion_element(s, c, i);
}

}  // namespace ds::optim::detail
