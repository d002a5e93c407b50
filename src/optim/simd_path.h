// Which instruction set the flat-span optimizer kernels run with, chosen at run time: the shipped
// build targets baseline x86-64, and the AVX2 / AVX-512 kernels (compiled per file with their own
// flags) are only entered on a CPU that has them. DS_SIMD=scalar|avx2|avx512 overrides the choice.
#pragma once

#include <optional>
#include <string>

namespace ds::optim {

enum class SimdPath { Scalar, Avx2, Avx512 };

// Avx2 needs avx2 + fma + f16c; Avx512 needs avx512f + avx512bw + avx512vl (and the Avx2 set).
// False for both where the build has no x86 SIMD kernels (another architecture).
bool cpu_supports(SimdPath path);

// The widest path this CPU supports.
SimdPath best_simd_path();

// best_simd_path(), or the path named by DS_SIMD. Throws ds::ConfigError for a value that is not a
// path and ds::NotSupported (naming DS_SIMD) when the CPU lacks the requested one. Read on every
// call (one getenv), so a test or a launcher can change it without restarting anything.
SimdPath active_simd_path();

const char* to_string(SimdPath path);            // "scalar", "avx2", "avx512"
std::optional<SimdPath> parse_simd_path(const std::string& name);  // inverse of to_string

// Per-call knobs of the kernels. Defaults give the production behaviour.
struct KernelOptions {
  std::optional<SimdPath> path;  // unset: active_simd_path(); set: that path or ds::NotSupported
  int threads = 0;               // 0: omp_get_max_threads() (the engine sets it with torch's)
};

// The path a call with these options runs: o.path if the CPU has it, else active_simd_path().
SimdPath resolve_simd_path(const KernelOptions& o);

}  // namespace ds::optim
