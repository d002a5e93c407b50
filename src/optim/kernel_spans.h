// Internal to src/optim: the per-ISA span kernels (kernels_scalar.cpp, kernels_avx2.cpp,
// kernels_avx512.cpp) and the fp32 coefficients the drivers (adam.cpp, adagrad.cpp, lion.cpp)
// compute once per call. The AVX files are compiled with -mavx2 / -mavx512f, so this header, like
// everything they include, must hold no inline function with external linkage: the linker could
// keep an AVX-encoded copy of it for the baseline code and fault on a CPU without AVX.
#pragma once

#include <cstdint>

#include "optim/half_type.h"

namespace ds::optim::detail {

// DeepSpeed CPU-Adam coefficients (reference §19), all rounded to fp32 by the driver.
struct AdamCoeffs {
  float b1, b2, one_minus_b1, one_minus_b2;
  float eps, wd, bc2;
  float step_size;  // -lr / bc1
  float decay;      // -lr * wd (AdamW)
  bool adamw_decay, l2_decay;
};
struct AdamSpans {
  float* p;
  const float* g;
  float* m;
  float* v;
  HalfSpan out;  // out.data == nullptr: no copy-out
};

struct AdagradCoeffs {
  float wd, eps, neg_clr;
  bool decay;
};
struct AdagradSpans {
  float* p;
  const float* g;
  float* sum;
};

struct LionCoeffs {
  float b1, b2, one_minus_b1, one_minus_b2;
  float alpha, after_decay;  // lr, 1 - lr * wd
  bool decay;
};
struct LionSpans {
  float* p;
  const float* g;
  float* m;
};

// Each updates elements [begin, end) on the calling thread; the drivers split the span into tiles.
// All paths give bit-identical results: the same fp32 operations in the same order, with fused
// multiply-adds exactly where the scalar reference has them.
void adam_scalar(const AdamSpans& s, const AdamCoeffs& c, std::int64_t begin, std::int64_t end);
void adagrad_scalar(const AdagradSpans& s, const AdagradCoeffs& c, std::int64_t begin, std::int64_t end);
void lion_scalar(const LionSpans& s, const LionCoeffs& c, std::int64_t begin, std::int64_t end);

#if defined(DS_OPTIM_X86_SIMD)
void adam_avx2(const AdamSpans& s, const AdamCoeffs& c, std::int64_t begin, std::int64_t end);
void adagrad_avx2(const AdagradSpans& s, const AdagradCoeffs& c, std::int64_t begin, std::int64_t end);
void lion_avx2(const LionSpans& s, const LionCoeffs& c, std::int64_t begin, std::int64_t end);

void adam_avx512(const AdamSpans& s, const AdamCoeffs& c, std::int64_t begin, std::int64_t end);
void adagrad_avx512(const AdagradSpans& s, const AdagradCoeffs& c, std::int64_t begin, std::int64_t end);
void lion_avx512(const LionSpans& s, const LionCoeffs& c, std::int64_t begin, std::int64_t end);
#endif

}  // namespace ds::optim::detail
