// The AVX-512 path of the span kernels: 16 fp32 lanes, each lane the scalar reference's exact
// operation sequence (_mm512_fmadd_ps where scalar_ops.h has __builtin_fmaf; sqrt and div are
// correctly rounded in both), then the scalar reference for the tail. Built with
// -mavx512f -mavx512bw -mavx512vl -mfma -mf16c -ffp-contract=off and entered only when
// cpu_supports(SimdPath::Avx512). Bit operations use the integer forms: the float ones need AVX512DQ.
#include <immintrin.h>

#include "optim/kernel_spans.h"
#include "optim/scalar_ops.h"

namespace ds::optim::detail {
namespace {

constexpr std::int64_t kW = 16;

// c10::BFloat16 rounding on 16 lanes: (u + 0x7FFF + ((u >> 16) & 1)) >> 16, NaN -> 0x7FC0.
inline __m256i to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
  return _mm512_cvtepi32_epi16(r);  // values fit in 16 bits: truncation is exact
}

// IEEE round-to-nearest-even as c10::Half; a NaN is first made the canonical quiet NaN of its
// sign, because vcvtps2ph keeps payload bits that c10 drops (c10 gives sign | 0x7E00).
inline __m256i to_fp16(__m512 x) {
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512i canon = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)),
                                        _mm512_set1_epi32(0x7FC00000));
  x = _mm512_mask_mov_ps(x, nan, _mm512_castsi512_ps(canon));
  return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

enum class Out { None, Bf16, Fp16 };

template <Out kOut>
void adam_loop(const AdamSpans& s, const AdamCoeffs& c, std::int64_t begin, std::int64_t end) {
  const __m512 b1 = _mm512_set1_ps(c.b1), b2 = _mm512_set1_ps(c.b2);
  const __m512 omb1 = _mm512_set1_ps(c.one_minus_b1), omb2 = _mm512_set1_ps(c.one_minus_b2);
  const __m512 eps = _mm512_set1_ps(c.eps), wd = _mm512_set1_ps(c.wd), bc2 = _mm512_set1_ps(c.bc2);
  const __m512 step_size = _mm512_set1_ps(c.step_size), decay = _mm512_set1_ps(c.decay);
  std::int64_t i = begin;
  for (; i + kW <= end; i += kW) {
    __m512 grad = _mm512_loadu_ps(s.g + i);
    __m512 param = _mm512_loadu_ps(s.p + i);
    if (c.l2_decay) grad = _mm512_fmadd_ps(param, wd, grad);
    const __m512 mi = _mm512_fmadd_ps(grad, omb1, _mm512_mul_ps(_mm512_loadu_ps(s.m + i), b1));
    const __m512 vi = _mm512_fmadd_ps(_mm512_mul_ps(grad, grad), omb2, _mm512_mul_ps(_mm512_loadu_ps(s.v + i), b2));
    const __m512 denom = _mm512_fmadd_ps(_mm512_sqrt_ps(vi), bc2, eps);
    if (c.adamw_decay) param = _mm512_fmadd_ps(param, decay, param);
    param = _mm512_fmadd_ps(_mm512_div_ps(mi, denom), step_size, param);
    _mm512_storeu_ps(s.p + i, param);
    _mm512_storeu_ps(s.m + i, mi);
    _mm512_storeu_ps(s.v + i, vi);
    if constexpr (kOut == Out::Bf16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.out.data + i), to_bf16(param));
    } else if constexpr (kOut == Out::Fp16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.out.data + i), to_fp16(param));
    }
  }
  for (; i < end; ++i) {
    const float p = adam_element(s, c, i);
    if constexpr (kOut != Out::None) s.out.data[i] = fp32_to_half(p, s.out.type);
  }
}

}  // namespace

void adam_avx512(const AdamSpans& s, const AdamCoeffs& c, std::int64_t begin, std::int64_t end) {
  if (s.out.data == nullptr) {
    adam_loop<Out::None>(s, c, begin, end);
  } else if (s.out.type == HalfType::Bf16) {
    adam_loop<Out::Bf16>(s, c, begin, end);
  } else {
    adam_loop<Out::Fp16>(s, c, begin, end);
  }
}

void adagrad_avx512(const AdagradSpans& s, const AdagradCoeffs& c, std::int64_t begin, std::int64_t end) {
  const __m512 wd = _mm512_set1_ps(c.wd), eps = _mm512_set1_ps(c.eps), neg_clr = _mm512_set1_ps(c.neg_clr);
  std::int64_t i = begin;
  for (; i + kW <= end; i += kW) {
    __m512 grad = _mm512_loadu_ps(s.g + i);
    const __m512 param = _mm512_loadu_ps(s.p + i);
    if (c.decay) grad = _mm512_fmadd_ps(param, wd, grad);
    const __m512 acc = _mm512_add_ps(_mm512_loadu_ps(s.sum + i), _mm512_mul_ps(grad, grad));
    const __m512 std_dev = _mm512_add_ps(_mm512_sqrt_ps(acc), eps);
    _mm512_storeu_ps(s.p + i, _mm512_add_ps(param, _mm512_div_ps(_mm512_mul_ps(neg_clr, grad), std_dev)));
    _mm512_storeu_ps(s.sum + i, acc);
  }
  for (; i < end; ++i) adagrad_element(s, c, i);
}

void lion_avx512(const LionSpans& s, const LionCoeffs& c, std::int64_t begin, std::int64_t end) {
  const __m512 b1 = _mm512_set1_ps(c.b1), b2 = _mm512_set1_ps(c.b2);
  const __m512 omb1 = _mm512_set1_ps(c.one_minus_b1), omb2 = _mm512_set1_ps(c.one_minus_b2);
  const __m512 after_decay = _mm512_set1_ps(c.after_decay);
  const __m512i sign = _mm512_set1_epi32(INT32_MIN);
  // -copysign(lr, x) = |lr| with the sign bit of x flipped.
  const __m512i abs_alpha = _mm512_set1_epi32(static_cast<int>(float_bits(c.alpha) & 0x7FFFFFFFu));
  std::int64_t i = begin;
  for (; i + kW <= end; i += kW) {
    const __m512 grad = _mm512_loadu_ps(s.g + i);
    const __m512 mi = _mm512_loadu_ps(s.m + i);
    const __m512 param = _mm512_loadu_ps(s.p + i);
    const __m512 interp = _mm512_fmadd_ps(grad, omb1, _mm512_mul_ps(mi, b1));
    const __m512i flipped = _mm512_xor_si512(_mm512_and_si512(_mm512_castps_si512(interp), sign), sign);
    const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(abs_alpha, flipped));
    _mm512_storeu_ps(s.p + i, c.decay ? _mm512_fmadd_ps(param, after_decay, step) : _mm512_add_ps(param, step));
    _mm512_storeu_ps(s.m + i, _mm512_fmadd_ps(grad, omb2, _mm512_mul_ps(mi, b2)));
  }
  for (; i < end; ++i) lion_element(s, c, i);
}

}  // namespace ds::optim::detail
