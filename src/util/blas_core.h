// Which OpenBLAS kernels ("core") this process should run. Debian's OpenBLAS 0.3.21 is a
// DYNAMIC_ARCH build that picks its kernels at load from the CPU model; on CPUs newer than it (Intel
// family 6 model 207, AMD family 26) it falls back to generic SSE3 'Prescott' or AVX2 'Haswell'
// kernels, 1.8-5x slower than the AVX-512 ones the CPU can run. OPENBLAS_CORETYPE, read once by a
// constructor when the library loads, overrides the choice. decide_blas_core is pure (features,
// BLAS, environment in; decision out) so every case is tested without the hardware;
// tools/blas_core_select.h acts on it (re-exec) and ds::initialize warns with it.
#pragma once

#include <string>

#include "util/cpu_features.h"

namespace ds {

inline constexpr const char* kOpenBlasCoreVar = "OPENBLAS_CORETYPE";
// Set next to OPENBLAS_CORETYPE when a ds tool or ds-run chose the value (not the user): it stops
// the re-exec from looping and tells the ranks the value is ours.
inline constexpr const char* kCoreChosenVar = "DS_OPENBLAS_CORETYPE_CHOSEN";

struct BlasInfo {
  std::string library;  // the file that holds sgemm_ ("" when unknown)
  std::string name;     // "OpenBLAS 0.3.21", "reference BLAS (netlib)", "Intel MKL", "BLIS", or "unknown BLAS"
  std::string config;   // openblas_get_config() ("" when not OpenBLAS)
  std::string core;     // openblas_get_corename(): the kernels it runs ("" when not OpenBLAS)
  bool is_openblas() const { return !core.empty(); }
};

// The BLAS already loaded in this process (dlsym over the global scope): what LibTorch calls.
BlasInfo probe_loaded_blas();
// The BLAS a program linking `soname` would get, loaded here to ask it (ds-run links no BLAS).
BlasInfo probe_blas_library(const char* soname = "libblas.so.3");

// The best OpenBLAS 0.3.21 core for these features: Cooperlake (AVX512-BF16), SkylakeX (AVX-512),
// Haswell (Intel AVX2) or Zen (AMD AVX2); "" when the CPU has no AVX2.
std::string best_openblas_core(const CpuFeatures& cpu);

// What the kernels of `core` need: 0 SSE-only (Prescott, Nehalem, Barcelona, ...), 1 AVX
// (Sandybridge, Bulldozer family), 2 AVX2 (Haswell, Zen), 3 AVX-512 (SkylakeX), 4 AVX512-BF16
// (Cooperlake), 5 newer (SapphireRapids); -1 a name this table does not know.
int openblas_core_tier(const std::string& core);

enum class BlasCoreAction {
  kSet,            // set OPENBLAS_CORETYPE=core (the running core is below what the CPU allows)
  kAlreadyBest,    // OpenBLAS already runs the best core (or one newer than this table knows)
  kKeepUser,       // the user set OPENBLAS_CORETYPE: keep it
  kNotOpenBlas,    // another BLAS: no core to set
  kNoVectorUnits,  // no AVX2: the generic kernels are the best this CPU runs
};

struct BlasCoreDecision {
  BlasCoreAction action = BlasCoreAction::kAlreadyBest;
  std::string core;        // the value to set (kSet), the user's value (kKeepUser), else the running core
  double speedup = 1.0;    // measured fp32 GEMM gain of `core` over the running one (kSet)
  std::string message;     // one line for the user
};

// user_value: getenv(OPENBLAS_CORETYPE) (nullptr or "" = not set; an empty value is never kept or set).
BlasCoreDecision decide_blas_core(const CpuFeatures& cpu, const BlasInfo& blas, const char* user_value);

// The measured fp32 GEMM gain (2048^3, 1 thread) of a `to_tier` core over a `from_tier` one.
double measured_core_speedup(int from_tier, int to_tier);

}  // namespace ds
