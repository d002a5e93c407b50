// util/blas_core.h's decision table, one row per CPU/BLAS/environment case (issue 15 item 1), and
// the environment rules of util/blas_core_select.h that ds-run applies for its ranks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "util/blas_core.h"
#include "util/blas_core_select.h"

namespace ds {
namespace {

CpuFeatures sse_only() { return CpuFeatures{CpuVendor::kIntel, 6, 15}; }

CpuFeatures avx2(CpuVendor vendor) {
  CpuFeatures f{vendor, vendor == CpuVendor::kAmd ? 23 : 6, vendor == CpuVendor::kAmd ? 49 : 63};
  f.avx2 = f.fma = true;
  return f;
}

CpuFeatures avx512(bool bf16, CpuVendor vendor = CpuVendor::kIntel) {
  CpuFeatures f = avx2(vendor);
  f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512cd = true;
  f.avx512bf16 = bf16;
  return f;
}

CpuFeatures xeon_207() {  // the machine: Intel family 6 model 207, AVX-512, AVX512-BF16, AMX
  CpuFeatures f = avx512(true);
  f.model = 207;
  f.amx_bf16 = true;
  return f;
}

BlasInfo openblas(const std::string& core) {
  return {"/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3", "OpenBLAS 0.3.21",
          "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP " + core + " MAX_THREADS=64", core};
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(BlasCore, GenericCoreOnAnAvx512Bf16XeonIsReplacedByCooperlake) {
  const auto d = decide_blas_core(xeon_207(), openblas("Prescott"), nullptr);
  EXPECT_EQ(d.action, BlasCoreAction::kSet);
  EXPECT_EQ(d.core, "Cooperlake");
  EXPECT_DOUBLE_EQ(d.speedup, 5.0);
  EXPECT_TRUE(has(d.message, "OPENBLAS_CORETYPE=Cooperlake")) << d.message;
  EXPECT_TRUE(has(d.message, "Prescott")) << d.message;
  EXPECT_TRUE(has(d.message, "family 6 model 207")) << d.message;
}

TEST(BlasCore, BestCorePerFeatureSet) {
  EXPECT_EQ(decide_blas_core(avx512(false), openblas("Prescott"), nullptr).core, "SkylakeX");
  EXPECT_EQ(decide_blas_core(avx2(CpuVendor::kIntel), openblas("Nehalem"), nullptr).core, "Haswell");
  EXPECT_EQ(decide_blas_core(avx2(CpuVendor::kAmd), openblas("Barcelona"), nullptr).core, "Zen");
  // AMD with AVX-512 (Zen 4/5) runs OpenBLAS's AVX-512 kernels 1.8x faster than its Zen/Haswell ones.
  const auto zen5 = decide_blas_core(avx512(true, CpuVendor::kAmd), openblas("Haswell"), nullptr);
  EXPECT_EQ(zen5.action, BlasCoreAction::kSet);
  EXPECT_EQ(zen5.core, "Cooperlake");
  EXPECT_DOUBLE_EQ(zen5.speedup, 1.8);
  // AVX-512 needs all of F, BW, DQ, VL and CD for OpenBLAS's SkylakeX kernels.
  CpuFeatures partial = avx512(false);
  partial.avx512bw = false;
  EXPECT_EQ(decide_blas_core(partial, openblas("Prescott"), nullptr).core, "Haswell");
}

TEST(BlasCore, BestOrNewerCoreIsLeftAlone) {
  EXPECT_EQ(decide_blas_core(xeon_207(), openblas("Cooperlake"), nullptr).action, BlasCoreAction::kAlreadyBest);
  EXPECT_EQ(decide_blas_core(avx512(false), openblas("SkylakeX"), nullptr).action, BlasCoreAction::kAlreadyBest);
  EXPECT_EQ(decide_blas_core(xeon_207(), openblas("SapphireRapids"), nullptr).action, BlasCoreAction::kAlreadyBest);
  // A name this table does not know (a newer OpenBLAS) is never replaced by an older one.
  const auto unknown = decide_blas_core(xeon_207(), openblas("GraniteRapids"), nullptr);
  EXPECT_EQ(unknown.action, BlasCoreAction::kAlreadyBest);
  EXPECT_EQ(unknown.core, "GraniteRapids");
}

TEST(BlasCore, CpuWithoutAvx2HasNothingToFixAndSaysSo) {
  const auto d = decide_blas_core(sse_only(), openblas("Prescott"), nullptr);
  EXPECT_EQ(d.action, BlasCoreAction::kNoVectorUnits);
  EXPECT_TRUE(has(d.message, "no AVX2")) << d.message;
  EXPECT_TRUE(has(d.message, "nothing to set")) << d.message;
}

TEST(BlasCore, ReferenceBlasGetsNoCoreAndSaysWhichBlas) {
  const BlasInfo reference{"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", "reference BLAS (netlib)", "", ""};
  const auto d = decide_blas_core(xeon_207(), reference, nullptr);
  EXPECT_EQ(d.action, BlasCoreAction::kNotOpenBlas);
  EXPECT_TRUE(d.core.empty());
  EXPECT_TRUE(has(d.message, "reference BLAS (netlib)")) << d.message;
  EXPECT_TRUE(has(d.message, "/blas/libblas.so.3")) << d.message;
  EXPECT_TRUE(has(d.message, "no OPENBLAS_CORETYPE is set")) << d.message;
  // Even a user's value does not matter then: no OpenBLAS reads it.
  EXPECT_EQ(decide_blas_core(xeon_207(), reference, "SkylakeX").action, BlasCoreAction::kNotOpenBlas);
}

TEST(BlasCore, UserValueIsKeptAndNamed) {
  const auto d = decide_blas_core(xeon_207(), openblas("Haswell"), "Haswell");
  EXPECT_EQ(d.action, BlasCoreAction::kKeepUser);
  EXPECT_EQ(d.core, "Haswell");
  EXPECT_TRUE(has(d.message, "keeping OPENBLAS_CORETYPE=Haswell set by the user")) << d.message;
  EXPECT_TRUE(has(d.message, "best for this CPU is Cooperlake")) << d.message;
}

TEST(BlasCore, AnEmptyValueIsNeverKeptOrSet) {
  const auto d = decide_blas_core(xeon_207(), openblas("Prescott"), "");
  EXPECT_EQ(d.action, BlasCoreAction::kSet);
  EXPECT_EQ(d.core, "Cooperlake");
  const CpuFeatures cpus[] = {sse_only(), avx2(CpuVendor::kIntel), avx2(CpuVendor::kAmd), avx512(false), xeon_207()};
  const char* cores[] = {"Prescott", "Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake", "unknown"};
  for (const auto& cpu : cpus)
    for (const char* core : cores)
      for (const char* env : {static_cast<const char*>(nullptr), ""}) {
        const auto r = decide_blas_core(cpu, openblas(core), env);
        if (r.action == BlasCoreAction::kSet) {
          EXPECT_FALSE(r.core.empty()) << cpu.describe() << " " << core;
        }
        EXPECT_FALSE(r.message.empty());
      }
}

TEST(BlasCore, TiersAreCaseInsensitive) {
  EXPECT_EQ(openblas_core_tier("skylakex"), 3);
  EXPECT_EQ(openblas_core_tier("PRESCOTT"), 0);
  EXPECT_EQ(openblas_core_tier("Zen"), 2);
  EXPECT_EQ(openblas_core_tier(""), -1);
}

// ds-run's rule for its ranks, on this machine's libblas.so.3: a user's value stays as it is.
TEST(BlasCoreSelect, RanksKeepTheUsersValue) {
  setenv(kOpenBlasCoreVar, "SkylakeX", 1);
  unsetenv(kCoreChosenVar);
  export_blas_core_for_ranks("blas_core_test");
  EXPECT_STREQ(std::getenv(kOpenBlasCoreVar), "SkylakeX");
  EXPECT_EQ(std::getenv(kCoreChosenVar), nullptr);
  unsetenv(kOpenBlasCoreVar);
}

// A value a ds program chose (DS_OPENBLAS_CORETYPE_CHOSEN names it) is re-decided for this CPU: a
// generic one is replaced by the best, as on a machine where OpenBLAS fell back to Prescott.
TEST(BlasCoreSelect, RanksGetTheBestCoreInPlaceOfAGenericChosenOne) {
  const std::string best = best_openblas_core(detect_cpu_features());
  setenv(kOpenBlasCoreVar, "Prescott", 1);
  setenv(kCoreChosenVar, "Prescott", 1);
  const BlasInfo blas = probe_blas_library();  // loads with Prescott: what a rank would run
  if (!blas.is_openblas() || best.empty()) GTEST_SKIP() << "needs OpenBLAS and AVX2: " << blas.name;
  ASSERT_EQ(blas.core, "Prescott");
  export_blas_core_for_ranks("blas_core_test");
  EXPECT_EQ(std::string(std::getenv(kOpenBlasCoreVar)), best);
  EXPECT_EQ(std::string(std::getenv(kCoreChosenVar)), best);
  unsetenv(kOpenBlasCoreVar);
  unsetenv(kCoreChosenVar);
}

}  // namespace
}  // namespace ds
