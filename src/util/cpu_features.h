// The CPU's vector features as CPUID and the OS report them (XGETBV: the OS must save the wide
// registers, or the instructions fault). Used to pick BLAS kernels (util/blas_core.h) and by ds-report.
#pragma once

#include <string>

namespace ds {

enum class CpuVendor { kIntel, kAmd, kOther };

struct CpuFeatures {
  CpuVendor vendor = CpuVendor::kOther;
  int family = 0;  // display family and model (CPUID leaf 1), e.g. Intel 6/207, AMD 26/2
  int model = 0;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512cd = false;
  bool avx512bf16 = false;
  bool amx_bf16 = false;  // AMX tiles with bf16 (oneDNN's avx512_core_amx)

  bool avx512_core() const { return avx512f && avx512bw && avx512dq && avx512vl && avx512cd; }
  // "AMD family 26 model 2: AVX2 FMA AVX-512 AVX512-BF16", "Intel family 6 model 207: ... AMX-BF16".
  std::string describe() const;
};

CpuFeatures detect_cpu_features();

}  // namespace ds
