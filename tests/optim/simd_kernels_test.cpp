// Every SIMD path of the optimizer kernels against the scalar reference, bit for bit: Adam/AdamW
// (decay, L2 mode, bias correction on and off), Adagrad and Lion over span lengths that hit empty
// vector loops, exact multiples of 8/16/64 and ragged tails; plus the thread split and DS_SIMD.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/lion.h"
#include "optim/simd_path.h"
#include "optim/tiles.h"
#include "util/error.h"

namespace ds::optim {
namespace {

const std::int64_t kLengths[] = {1, 7, 15, 16, 17, 63, 64, 65, 1000, 4099, 100003};
constexpr int kSteps = 3;

std::vector<float> normal(std::int64_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& e : x) e = d(rng);
  return x;
}

std::vector<float> squares(std::int64_t n, unsigned seed) {
  auto x = normal(n, seed, 0.1f);
  for (auto& e : x) e *= e;
  return x;
}

// First differing index, reported with both bit patterns; a path that is wrong anywhere fails.
void expect_bits_equal(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    std::uint32_t a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    ASSERT_EQ(a, b) << what << ": element " << i << " of " << want.size() << " scalar " << want[i] << " path "
                    << got[i];
  }
}

class SimdPathTest : public ::testing::TestWithParam<SimdPath> {
 protected:
  void SetUp() override {
    if (!cpu_supports(GetParam())) GTEST_SKIP() << "CPU lacks " << to_string(GetParam());
  }
  KernelOptions path_opts(int threads = 0) const { return KernelOptions{GetParam(), threads}; }
};

struct AdamCase {
  bool adamw;
  double wd;
  bool bias_correction;
};

TEST_P(SimdPathTest, AdamBitIdenticalToScalar) {
  const AdamCase cases[] = {{true, 0.0, true},  {true, 0.1, true},  {false, 0.0, true}, {false, 0.1, true},
                            {true, 0.1, false}, {false, 0.1, false}, {true, 0.0, false}};
  for (const AdamCase& ac : cases) {
    AdamHyperparams h;
    h.lr = 1e-2;
    h.adamw_mode = ac.adamw;
    h.weight_decay = ac.wd;
    h.bias_correction = ac.bias_correction;
    for (std::int64_t n : kLengths) {
      auto p0 = normal(n, 1), m0 = normal(n, 2, 0.1f), v0 = squares(n, 3);
      auto p1 = p0, m1 = m0, v1 = v0;
      AdamStepState s;
      for (int t = 1; t <= kSteps; ++t) {
        const auto g = normal(n, 10 + t);
        s.advance(t, h.beta1, h.beta2);
        adam_update(p0.data(), g.data(), m0.data(), v0.data(), n, h, s, KernelOptions{SimdPath::Scalar, 0});
        // An odd thread count exercises unequal tiles; results must not depend on the split.
        adam_update(p1.data(), g.data(), m1.data(), v1.data(), n, h, s, path_opts(t == 2 ? 3 : 0));
      }
      const std::string what = std::string("adam adamw=") + (ac.adamw ? "1" : "0") + " wd=" + std::to_string(ac.wd) +
                               " bc=" + (ac.bias_correction ? "1" : "0") + " n=" + std::to_string(n);
      expect_bits_equal(p0, p1, what + " p");
      expect_bits_equal(m0, m1, what + " m");
      expect_bits_equal(v0, v1, what + " v");
    }
  }
}

TEST_P(SimdPathTest, AdagradBitIdenticalToScalar) {
  for (double wd : {0.0, 0.1}) {
    AdagradHyperparams h;
    h.lr = 0.05;
    h.lr_decay = 0.01;
    h.weight_decay = wd;
    for (std::int64_t n : kLengths) {
      auto p0 = normal(n, 4), sum0 = squares(n, 5);
      auto p1 = p0, sum1 = sum0;
      for (int t = 1; t <= kSteps; ++t) {
        const auto g = normal(n, 20 + t);
        adagrad_update(p0.data(), g.data(), sum0.data(), n, h, AdagradState{t}, KernelOptions{SimdPath::Scalar, 0});
        adagrad_update(p1.data(), g.data(), sum1.data(), n, h, AdagradState{t}, path_opts());
      }
      const std::string what = "adagrad wd=" + std::to_string(wd) + " n=" + std::to_string(n);
      expect_bits_equal(p0, p1, what + " p");
      expect_bits_equal(sum0, sum1, what + " sum");
    }
  }
}

TEST_P(SimdPathTest, LionBitIdenticalToScalar) {
  for (double wd : {0.0, 0.5}) {
    LionHyperparams h;
    h.lr = 1e-3;
    h.weight_decay = wd;
    for (std::int64_t n : kLengths) {
      auto p0 = normal(n, 6), m0 = normal(n, 7, 0.1f);
      if (n > 3) m0[1] = 0.0f;  // with g = 0 below: c = +0, which must step by -lr on every path
      auto p1 = p0, m1 = m0;
      for (int t = 1; t <= kSteps; ++t) {
        auto g = normal(n, 30 + t);
        if (n > 3 && t == 1) g[1] = 0.0f;
        lion_update(p0.data(), g.data(), m0.data(), n, h, LionState{}, KernelOptions{SimdPath::Scalar, 0});
        lion_update(p1.data(), g.data(), m1.data(), n, h, LionState{}, path_opts());
      }
      const std::string what = "lion wd=" + std::to_string(wd) + " n=" + std::to_string(n);
      expect_bits_equal(p0, p1, what + " p");
      expect_bits_equal(m0, m1, what + " m");
    }
  }
}

TEST_P(SimdPathTest, UnalignedSpansGiveTheSameBits) {
  // Sub-spans of a flat buffer (partitions, sub-groups) start anywhere: offset by 3 floats.
  const std::int64_t n = 4099;
  AdamHyperparams h;
  h.weight_decay = 0.01;
  AdamStepState s;
  s.advance(1, h.beta1, h.beta2);
  auto p0 = normal(n + 3, 8), m0 = normal(n + 3, 9, 0.1f), v0 = squares(n + 3, 10), g = normal(n + 3, 11);
  auto p1 = p0, m1 = m0, v1 = v0;
  adam_update(p0.data() + 3, g.data() + 3, m0.data() + 3, v0.data() + 3, n, h, s, KernelOptions{SimdPath::Scalar, 0});
  adam_update(p1.data() + 3, g.data() + 3, m1.data() + 3, v1.data() + 3, n, h, s, path_opts());
  expect_bits_equal(p0, p1, "offset p");
  expect_bits_equal(v0, v1, "offset v");
}

std::string path_name(const ::testing::TestParamInfo<SimdPath>& info) { return to_string(info.param); }

INSTANTIATE_TEST_SUITE_P(Paths, SimdPathTest, ::testing::Values(SimdPath::Avx2, SimdPath::Avx512), path_name);

// ---- thread split ----------------------------------------------------------------------------

TEST(SimdTiles, ContiguousCoverAlignedBoundaries) {
  for (std::int64_t n : {1LL, 100LL, 16384LL, 32768LL, 100003LL, 1000000LL}) {
    for (int threads : {0, 1, 2, 3, 8}) {
      std::mutex mu;
      std::vector<std::pair<std::int64_t, std::int64_t>> tiles;
      for_each_tile(n, threads, [&](std::int64_t b, std::int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        tiles.emplace_back(b, e);
      });
      std::sort(tiles.begin(), tiles.end());
      ASSERT_FALSE(tiles.empty());
      EXPECT_EQ(tiles.front().first, 0);
      EXPECT_EQ(tiles.back().second, n);
      if (threads > 0) {
        EXPECT_LE(tiles.size(), static_cast<size_t>(threads));
      }
      for (size_t k = 0; k < tiles.size(); ++k) {
        EXPECT_LT(tiles[k].first, tiles[k].second);
        if (k > 0) {
          EXPECT_EQ(tiles[k].first, tiles[k - 1].second) << "n=" << n << " threads=" << threads;
        }
        EXPECT_EQ(tiles[k].first % kTileAlign, 0) << "n=" << n << " threads=" << threads;
      }
      // Small spans stay on one thread: a fork would cost more than the pass.
      if (n < 2 * kMinTileElems) {
        EXPECT_EQ(tiles.size(), 1u) << "n=" << n;
      }
    }
  }
}

// ---- dispatch --------------------------------------------------------------------------------

// Sets DS_SIMD for one scope and restores the previous value.
class ScopedSimdEnv {
 public:
  explicit ScopedSimdEnv(const char* value) {
    if (const char* old = std::getenv("DS_SIMD")) old_ = old;
    setenv("DS_SIMD", value, 1);
  }
  ~ScopedSimdEnv() {
    if (old_) setenv("DS_SIMD", old_->c_str(), 1);
    else unsetenv("DS_SIMD");
  }

 private:
  std::optional<std::string> old_;
};

TEST(SimdDispatch, NamesRoundTripAndBestIsSupported) {
  for (SimdPath p : {SimdPath::Scalar, SimdPath::Avx2, SimdPath::Avx512}) EXPECT_EQ(parse_simd_path(to_string(p)), p);
  EXPECT_FALSE(parse_simd_path("sse2"));
  EXPECT_TRUE(cpu_supports(SimdPath::Scalar));
  EXPECT_TRUE(cpu_supports(best_simd_path()));
  if (cpu_supports(SimdPath::Avx512)) {
    EXPECT_TRUE(cpu_supports(SimdPath::Avx2));
  }
}

TEST(SimdDispatch, EnvOverridesAndEmptyMeansBest) {
  {
    ScopedSimdEnv env("");
    EXPECT_EQ(active_simd_path(), best_simd_path());
  }
  for (SimdPath p : {SimdPath::Scalar, SimdPath::Avx2, SimdPath::Avx512}) {
    ScopedSimdEnv env(to_string(p));
    if (cpu_supports(p)) {
      EXPECT_EQ(active_simd_path(), p);
    } else {
      EXPECT_THROW(active_simd_path(), NotSupported);
    }
  }
}

TEST(SimdDispatch, UnknownValueIsAnErrorNamingTheVariable) {
  ScopedSimdEnv env("avx9000");
  try {
    active_simd_path();
    FAIL() << "DS_SIMD=avx9000 must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("DS_SIMD"), std::string::npos) << e.what();
  }
  // The kernels refuse before touching memory; an explicit path in the options ignores the env.
  std::vector<float> p(4, 1.0f), g(4, 1.0f), m(4, 0.0f), v(4, 0.0f);
  AdamStepState s;
  s.advance(1, 0.9, 0.999);
  EXPECT_THROW(adam_update(p.data(), g.data(), m.data(), v.data(), 4, AdamHyperparams{}, s), ConfigError);
  EXPECT_EQ(p[0], 1.0f);
  adam_update(p.data(), g.data(), m.data(), v.data(), 4, AdamHyperparams{}, s, KernelOptions{SimdPath::Scalar, 0});
  EXPECT_NE(p[0], 1.0f);
}

TEST(SimdDispatch, ScalarEnvRunsTheScalarPathBitForBit) {
  const std::int64_t n = 1000;
  AdamHyperparams h;
  AdamStepState s;
  s.advance(1, h.beta1, h.beta2);
  auto p0 = normal(n, 12), m0 = normal(n, 13, 0.1f), v0 = squares(n, 14), g = normal(n, 15);
  auto p1 = p0, m1 = m0, v1 = v0;
  adam_update(p0.data(), g.data(), m0.data(), v0.data(), n, h, s, KernelOptions{SimdPath::Scalar, 0});
  ScopedSimdEnv env("scalar");
  adam_update(p1.data(), g.data(), m1.data(), v1.data(), n, h, s);
  expect_bits_equal(p0, p1, "DS_SIMD=scalar p");
}

}  // namespace
}  // namespace ds::optim
