// Run-time choice of the optimizer kernels' instruction set (see simd_path.h).
#include "optim/simd_path.h"

#include <cstdlib>

#include "util/error.h"

namespace ds::optim {

bool cpu_supports(SimdPath path) {
#if defined(DS_OPTIM_X86_SIMD)
  switch (path) {
    case SimdPath::Scalar:
      return true;
    case SimdPath::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case SimdPath::Avx512:
      // The AVX-512 file is also built with -mfma -mf16c, so it needs the AVX2 set too.
      return cpu_supports(SimdPath::Avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return path == SimdPath::Scalar;
#endif
}

SimdPath best_simd_path() {
  if (cpu_supports(SimdPath::Avx512)) return SimdPath::Avx512;
  if (cpu_supports(SimdPath::Avx2)) return SimdPath::Avx2;
  return SimdPath::Scalar;
}

const char* to_string(SimdPath path) {
  switch (path) {
    case SimdPath::Scalar: return "scalar";
    case SimdPath::Avx2: return "avx2";
    case SimdPath::Avx512: return "avx512";
  }
  return "unknown";
}

std::optional<SimdPath> parse_simd_path(const std::string& name) {
  for (SimdPath p : {SimdPath::Scalar, SimdPath::Avx2, SimdPath::Avx512}) {
    if (name == to_string(p)) return p;
  }
  return std::nullopt;
}

namespace {

// `who` names what asked for the path; `fix` says what to change.
void require_supported(SimdPath p, const std::string& who, const std::string& fix) {
  if (!cpu_supports(p)) {
    throw NotSupported(who + " asks for the " + to_string(p) + " optimizer kernels, but this CPU lacks " +
                       (p == SimdPath::Avx512 ? "avx512f/avx512bw/avx512vl" : "avx2/fma/f16c") +
                       " (the best it has is " + to_string(best_simd_path()) + "; " + fix + ")");
  }
}

}  // namespace

SimdPath active_simd_path() {
  const char* env = std::getenv("DS_SIMD");
  if (env == nullptr || *env == '\0') return best_simd_path();
  const auto p = parse_simd_path(env);
  if (!p) {
    throw ConfigError("DS_SIMD", std::string("\"") + env +
                                     "\" is not an optimizer kernel path (use scalar, avx2 or avx512, or unset it)");
  }
  require_supported(*p, std::string("DS_SIMD=") + env,
                    std::string("set DS_SIMD=") + to_string(best_simd_path()) + " or unset it");
  return *p;
}

SimdPath resolve_simd_path(const KernelOptions& o) {
  if (!o.path) return active_simd_path();
  require_supported(*o.path, "KernelOptions::path", "check cpu_supports() before asking for a path");
  return *o.path;
}

}  // namespace ds::optim
