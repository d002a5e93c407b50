#include "util/blas_core.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <iterator>

namespace ds {
namespace {

using NameFn = char* (*)();
using VersionFn = void (*)(char*, int);

// Asks the BLAS behind `handle` (RTLD_DEFAULT or a dlopen handle) who it is.
BlasInfo probe(void* handle) {
  BlasInfo info;
  void* sgemm = dlsym(handle, "sgemm_");
  Dl_info where{};
  if (sgemm != nullptr && dladdr(sgemm, &where) != 0 && where.dli_fname != nullptr) info.library = where.dli_fname;
  const auto corename = reinterpret_cast<NameFn>(dlsym(handle, "openblas_get_corename"));
  const auto config = reinterpret_cast<NameFn>(dlsym(handle, "openblas_get_config"));
  if (corename != nullptr && config != nullptr) {
    info.core = corename() != nullptr ? corename() : "";
    info.config = config() != nullptr ? config() : "";
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21"
    const size_t second_space = info.config.find(' ', info.config.find(' ') + 1);
    info.name = info.config.substr(0, second_space);
    if (info.name.empty()) info.name = "OpenBLAS";
    if (info.core.empty()) info.core = "unknown";
    return info;
  }
  if (dlsym(handle, "mkl_get_version_string") != nullptr || dlsym(handle, "MKL_Get_Version_String") != nullptr) {
    info.name = "Intel MKL";
  } else if (dlsym(handle, "bli_info_get_version_str") != nullptr) {
    info.name = "BLIS";
  } else if (info.library.find("/blas/libblas") != std::string::npos) {
    info.name = "reference BLAS (netlib)";  // Debian's libblas3 alternative
  } else {
    info.name = sgemm != nullptr ? "unknown BLAS" : "no BLAS loaded";
  }
  return info;
}

bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && strncasecmp(a.c_str(), b.c_str(), a.size()) == 0;
}

}  // namespace

BlasInfo probe_loaded_blas() { return probe(RTLD_DEFAULT); }

BlasInfo probe_blas_library(const char* soname) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return BlasInfo{"", std::string("no ") + soname + " found", "", ""};
  BlasInfo info = probe(handle);
  dlclose(handle);
  return info;
}

std::string best_openblas_core(const CpuFeatures& cpu) {
  if (cpu.avx512_core() && cpu.avx512bf16) return "Cooperlake";
  if (cpu.avx512_core()) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return cpu.vendor == CpuVendor::kAmd ? "Zen" : "Haswell";
  return "";
}

int openblas_core_tier(const std::string& core) {
  struct Tier {
    const char* name;
    int tier;
  };
  static const Tier kTiers[] = {
      {"Katmai", 0},      {"Coppermine", 0}, {"Northwood", 0},   {"Prescott", 0},    {"Banias", 0},
      {"Core2", 0},       {"Penryn", 0},     {"Dunnington", 0},  {"Nehalem", 0},     {"Atom", 0},
      {"Athlon", 0},      {"Opteron", 0},    {"Opteron_SSE3", 0}, {"Barcelona", 0},  {"Nano", 0},
      {"Bobcat", 0},      {"Sandybridge", 1}, {"Bulldozer", 1},  {"Piledriver", 1},  {"Steamroller", 1},
      {"Excavator", 1},   {"Haswell", 2},    {"Zen", 2},         {"SkylakeX", 3},    {"Cooperlake", 4},
      {"SapphireRapids", 5}};
  const auto it = std::find_if(std::begin(kTiers), std::end(kTiers), [&](const Tier& t) { return iequals(core, t.name); });
  return it == std::end(kTiers) ? -1 : it->tier;
}

double measured_core_speedup(int from_tier, int to_tier) {
  // 2048^3 sgemm, 1 thread, OpenBLAS 0.3.21 (docs/cpu-kernels.md): on AMD family 26 (AVX-512, BF16)
  // Prescott 38, Sandybridge 90, Haswell 100, SkylakeX/Cooperlake 187 GF/s; on Intel 6/207
  // Prescott 24, SkylakeX 128 GF/s.
  if (from_tier < 0 || to_tier <= from_tier) return 1.0;
  if (to_tier >= 3) return from_tier == 0 ? 5.0 : from_tier == 1 ? 2.1 : 1.8;
  if (to_tier == 2) return from_tier == 0 ? 2.6 : 1.1;
  return 1.0;
}

BlasCoreDecision decide_blas_core(const CpuFeatures& cpu, const BlasInfo& blas, const char* user_value) {
  BlasCoreDecision d;
  const std::string user = user_value != nullptr ? user_value : "";
  if (!blas.is_openblas()) {
    d.action = BlasCoreAction::kNotOpenBlas;
    d.message = fmt::format("the BLAS is {}{}, not OpenBLAS: no {} is set (its kernel choice is its own)", blas.name,
                            blas.library.empty() ? "" : " (" + blas.library + ")", kOpenBlasCoreVar);
    return d;
  }
  const std::string best = best_openblas_core(cpu);
  if (!user.empty()) {
    d.action = BlasCoreAction::kKeepUser;
    d.core = user;
    d.message = fmt::format("keeping {}={} set by the user ({} runs its {} kernels; the best for this CPU is {})",
                            kOpenBlasCoreVar, user, blas.name, blas.core, best.empty() ? "generic" : best);
    return d;
  }
  if (best.empty()) {
    d.action = BlasCoreAction::kNoVectorUnits;
    d.core = blas.core;
    d.message = fmt::format("this CPU has no AVX2 ({}): {}'s {} kernels are the best it runs; nothing to set",
                            cpu.describe(), blas.name, blas.core);
    return d;
  }
  const int running = openblas_core_tier(blas.core);
  const int wanted = openblas_core_tier(best);
  if (running < 0 || running >= wanted) {  // an unknown (newer) core is never replaced
    d.action = BlasCoreAction::kAlreadyBest;
    d.core = blas.core;
    d.message = fmt::format("{} runs its {} kernels, the best for this CPU ({})", blas.name, blas.core, cpu.describe());
    return d;
  }
  d.action = BlasCoreAction::kSet;
  d.core = best;
  d.speedup = measured_core_speedup(running, wanted);
  d.message = fmt::format("{} runs its {} kernels on this CPU ({}); {}={} selects its {} kernels, ~{:.1f}x faster fp32 GEMM (measured)",
                          blas.name, blas.core, cpu.describe(), kOpenBlasCoreVar, best, best, d.speedup);
  return d;
}

}  // namespace ds
