// The fused Adam copy-out (updated parameters written as bf16/fp16 in the same pass) against a
// separate LibTorch cast, bit for bit on every path; the scalar 16-bit conversions against c10's
// over a sweep of fp32 bit patterns; and the scalar Adam against the §19 formulas written out here.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "optim/adam.h"
#include "optim/lion.h"
#include "optim/scalar_ops.h"
#include "optim/simd_path.h"

namespace ds::optim {
namespace {

const std::int64_t kLengths[] = {1, 7, 15, 16, 17, 63, 64, 65, 1000, 4099, 100003};
const SimdPath kAllPaths[] = {SimdPath::Scalar, SimdPath::Avx2, SimdPath::Avx512};

float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

std::vector<float> normal(std::int64_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& e : x) e = d(rng);
  return x;
}

// What LibTorch's own cast of the fp32 parameters gives, as raw 16-bit patterns.
std::vector<std::uint16_t> torch_cast(const std::vector<float>& p, HalfType t) {
  auto src = torch::from_blob(const_cast<float*>(p.data()), {static_cast<std::int64_t>(p.size())}, torch::kFloat);
  auto dst = src.to(t == HalfType::Bf16 ? torch::kBFloat16 : torch::kHalf).contiguous();
  std::vector<std::uint16_t> out(p.size());
  std::memcpy(out.data(), dst.data_ptr(), out.size() * 2);
  return out;
}

std::uint16_t c10_cast(float x, HalfType t) { return t == HalfType::Bf16 ? c10::BFloat16(x).x : c10::Half(x).x; }

const char* name(HalfType t) { return t == HalfType::Bf16 ? "bf16" : "fp16"; }

TEST(AdamCopyOut, EqualsTorchCastAndLeavesTheUpdateUnchanged) {
  for (SimdPath path : kAllPaths) {
    if (!cpu_supports(path)) continue;  // the supported paths are all checked; Scalar always is
    for (HalfType t : {HalfType::Bf16, HalfType::Fp16}) {
      for (std::int64_t n : kLengths) {
        AdamHyperparams h;
        h.lr = 0.05;
        h.weight_decay = 0.1;
        AdamStepState s;
        s.advance(1, h.beta1, h.beta2);
        auto p0 = normal(n, 1), m0 = normal(n, 2, 0.1f), v0 = normal(n, 3, 0.1f), g = normal(n, 4);
        for (auto& e : v0) e *= e;
        auto p1 = p0, m1 = m0, v1 = v0;
        std::vector<std::uint16_t> out(static_cast<size_t>(n), 0xDEAD);
        adam_update(p0.data(), g.data(), m0.data(), v0.data(), n, h, s, KernelOptions{SimdPath::Scalar, 0});
        adam_update_copy_out(p1.data(), g.data(), m1.data(), v1.data(), n, h, s, HalfSpan{out.data(), t},
                             KernelOptions{path, 0});
        const std::string what = std::string(to_string(path)) + " " + name(t) + " n=" + std::to_string(n);
        ASSERT_EQ(0, std::memcmp(p0.data(), p1.data(), p0.size() * 4)) << what;
        ASSERT_EQ(0, std::memcmp(m0.data(), m1.data(), m0.size() * 4)) << what;
        ASSERT_EQ(0, std::memcmp(v0.data(), v1.data(), v0.size() * 4)) << what;
        const auto want = torch_cast(p1, t);
        for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], want[i]) << what << " i=" << i << " p=" << p1[i];
      }
    }
  }
}

// Values where rounding is delicate, then random bit patterns (NaNs with payloads included):
// with lr = 0 the update leaves p as it is, so the copy-out sees exactly these.
std::vector<float> special_values(std::int64_t n) {
  std::vector<std::uint32_t> u = {
      0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF,
      0x7FA12345, 0x00000001, 0x807FFFFF, 0x00400000, 0x33000000, 0x33000001, 0xB3000000, 0x33800000,
      0x337FFFFF, 0x38800000, 0x387FFFFF, 0x387FE000, 0x387FF000, 0x477FE000, 0x477FEFFF, 0x477FF000,
      0xC77FF000, 0x477FF001, 0x47800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF, 0x7F7FFFFF,
      0x7F7F8000, 0xFF7F8000, 0x3F801000, 0x3F803000, 0x3F802000, 0x3F800FFF, 0x38000000, 0x37FFFFFF};
  std::mt19937 rng(99);
  while (static_cast<std::int64_t>(u.size()) < n) u.push_back(rng());
  std::vector<float> x(static_cast<size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) x[i] = from_bits(u[i]);
  return x;
}

TEST(AdamCopyOut, SpecialValuesEqualC10OnEveryPath) {
  const std::int64_t n = 4099;
  for (SimdPath path : kAllPaths) {
    if (!cpu_supports(path)) continue;
    for (HalfType t : {HalfType::Bf16, HalfType::Fp16}) {
      AdamHyperparams h;
      h.lr = 0.0;  // p unchanged (up to the sign of a zero): the copy-out sees the values above
      AdamStepState s;
      s.advance(1, h.beta1, h.beta2);
      auto p = special_values(n), m = normal(n, 5, 0.1f), v = normal(n, 6, 0.1f), g = normal(n, 7);
      for (auto& e : v) e *= e;  // a negative v would make every update NaN
      std::vector<std::uint16_t> out(static_cast<size_t>(n));
      adam_update_copy_out(p.data(), g.data(), m.data(), v.data(), n, h, s, HalfSpan{out.data(), t},
                           KernelOptions{path, 0});
      const auto before = special_values(n);
      for (std::int64_t i = 0; i < n; ++i) {
        if (!std::isnan(before[i])) {
          ASSERT_EQ(std::abs(p[i]), std::abs(before[i])) << i;
        }
        ASSERT_EQ(out[i], c10_cast(p[i], t)) << to_string(path) << " " << name(t) << " i=" << i << " bits=0x"
                                             << std::hex << bits(p[i]);
      }
    }
  }
}

// The scalar conversions alone, against c10 over every 4097th fp32 pattern and dense windows
// around each rounding boundary (fp16 subnormals, overflow, bf16 ties).
TEST(HalfConversion, ScalarMatchesC10) {
  std::vector<std::uint32_t> windows = {0x00000000, 0x33000000, 0x33800000, 0x38800000, 0x38000000, 0x477FF000,
                                        0x477FE000, 0x3F808000, 0x7F7F8000, 0x7F800000, 0x7FC00000, 0x3C000000};
  auto check = [](std::uint32_t u) {
    for (std::uint32_t s : {0u, 0x80000000u}) {
      const float x = from_bits(u ^ s);
      ASSERT_EQ(detail::fp32_to_bf16(x), c10::BFloat16(x).x) << std::hex << (u ^ s);
      ASSERT_EQ(detail::fp32_to_fp16(x), c10::Half(x).x) << std::hex << (u ^ s);
    }
  };
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4097) check(static_cast<std::uint32_t>(u));
  for (std::uint32_t w : windows) {
    for (std::uint32_t d = 0; d < 70000; ++d) {
      check(w + d);
      check(w - d);
    }
  }
  // Every fp16 subnormal and the whole fp32 range that rounds into it, at stride 7.
  for (std::uint32_t u = 0x32FFFFF0; u < 0x38800010; u += 7) check(u);
}

// The scalar reference against DeepSpeed's CPU-Adam arithmetic written out from reference §19.
TEST(AdamScalarReference, EqualsSection19Formulas) {
  for (bool adamw : {true, false}) {
    AdamHyperparams h;
    h.lr = 3e-3;
    h.beta1 = 0.85;
    h.beta2 = 0.995;
    h.eps = 1e-7;
    h.weight_decay = 0.2;
    h.adamw_mode = adamw;
    const std::int64_t n = 5;
    auto p = normal(n, 8), m = normal(n, 9, 0.1f), v = normal(n, 10, 0.1f), g = normal(n, 11);
    for (auto& e : v) e *= e;
    auto pe = p, me = m, ve = v;
    AdamStepState s;
    s.advance(6, h.beta1, h.beta2);  // a jump: beta^t from a double pow, rounded to fp32
    adam_update(p.data(), g.data(), m.data(), v.data(), n, h, s, KernelOptions{SimdPath::Scalar, 1});
    const float lr = float(h.lr), b1 = float(h.beta1), b2 = float(h.beta2);
    const float eps = float(h.eps), wd = float(h.weight_decay);
    const float b1t = float(std::pow(h.beta1, 6.0)), b2t = float(std::pow(h.beta2, 6.0));
    const float bc1 = 1.0f - b1t, bc2 = 1.0f / std::sqrt(1.0f - b2t);
    for (std::int64_t i = 0; i < n; ++i) {
      float gi = g[i];
      if (!adamw) gi = std::fma(pe[i], wd, gi);  // Adam (L2) mode: g + wd*p
      me[i] = std::fma(gi, 1.0f - b1, me[i] * b1);
      ve[i] = std::fma(gi * gi, 1.0f - b2, ve[i] * b2);
      const float d = std::fma(std::sqrt(ve[i]), bc2, eps);
      if (adamw) pe[i] = std::fma(pe[i], -lr * wd, pe[i]);
      pe[i] = std::fma(me[i] / d, -lr / bc1, pe[i]);
      EXPECT_EQ(bits(p[i]), bits(pe[i])) << "adamw=" << adamw << " i=" << i;
      EXPECT_EQ(bits(m[i]), bits(me[i])) << "adamw=" << adamw << " i=" << i;
      EXPECT_EQ(bits(v[i]), bits(ve[i])) << "adamw=" << adamw << " i=" << i;
    }
  }
}

TEST(LionScalarReference, EqualsDeepSpeedFormulas) {
  LionHyperparams h;
  h.lr = 2e-3;
  h.weight_decay = 0.3;
  const std::int64_t n = 5;
  auto p = normal(n, 12), m = normal(n, 13, 0.1f), g = normal(n, 14);
  auto pe = p, me = m;
  lion_update(p.data(), g.data(), m.data(), n, h, LionState{}, KernelOptions{SimdPath::Scalar, 1});
  const float lr = float(h.lr), b1 = float(h.beta1), b2 = float(h.beta2), wd = float(h.weight_decay);
  for (std::int64_t i = 0; i < n; ++i) {
    const float c = std::fma(g[i], 1.0f - b1, me[i] * b1);
    pe[i] = std::fma(pe[i], 1.0f - lr * wd, -std::copysign(lr, c));
    me[i] = std::fma(g[i], 1.0f - b2, me[i] * b2);
    EXPECT_EQ(bits(p[i]), bits(pe[i])) << i;
    EXPECT_EQ(bits(m[i]), bits(me[i])) << i;
  }
}

}  // namespace
}  // namespace ds::optim
