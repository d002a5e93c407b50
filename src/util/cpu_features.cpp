#include "util/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <cstring>

namespace ds {

std::string CpuFeatures::describe() const {
  std::string s = vendor == CpuVendor::kIntel ? "Intel" : vendor == CpuVendor::kAmd ? "AMD" : "CPU";
  s += " family " + std::to_string(family) + " model " + std::to_string(model) + ":";
  const auto add = [&](bool on, const char* name) {
    if (on) s += std::string(" ") + name;
  };
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(avx512_core(), "AVX-512");
  add(avx512bf16, "AVX512-BF16");
  add(amx_bf16, "AMX-BF16");
  if (!avx2 && !avx512f) s += " no AVX2";
  return s;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return f;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  if (std::strcmp(vendor, "GenuineIntel") == 0) f.vendor = CpuVendor::kIntel;
  if (std::strcmp(vendor, "AuthenticAMD") == 0) f.vendor = CpuVendor::kAmd;

  __get_cpuid(1, &a, &b, &c, &d);
  const unsigned base_family = (a >> 8) & 0xf;
  f.family = static_cast<int>(base_family == 0xf ? base_family + ((a >> 20) & 0xff) : base_family);
  f.model = static_cast<int>(((a >> 4) & 0xf) | ((base_family == 6 || base_family == 0xf) ? ((a >> 12) & 0xf0) : 0));
  const bool osxsave = (c >> 27) & 1;
  const bool avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  // XCR0: bits 1-2 (SSE/AVX state) for AVX2; 5-7 (opmask, ZMM) for AVX-512; 17-18 (tiles) for AMX.
  std::uint64_t xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<std::uint64_t>(hi) << 32) | lo;
  }
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;
  const bool os_tiles = (xcr0 & 0x60000) == 0x60000;
  f.fma = f.fma && avx && os_ymm;
  if (max_leaf >= 7) {
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    f.avx2 = avx && os_ymm && ((b >> 5) & 1);
    f.avx512f = os_zmm && ((b >> 16) & 1);
    f.avx512dq = os_zmm && ((b >> 17) & 1);
    f.avx512cd = os_zmm && ((b >> 28) & 1);
    f.avx512bw = os_zmm && ((b >> 30) & 1);
    f.avx512vl = os_zmm && ((b >> 31) & 1);
    f.amx_bf16 = os_tiles && ((d >> 22) & 1) && ((d >> 24) & 1);  // AMX-BF16 and AMX-TILE
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    f.avx512bf16 = f.avx512f && ((a >> 5) & 1);
  }
#endif
  return f;
}

}  // namespace ds
