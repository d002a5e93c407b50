// Adam/AdamW driver: fp32 coefficients from the hyperparameters (reference §19), the SIMD path
// from simd_path.h, the thread split from tiles.h; the elementwise work is in kernels_*.cpp.
#include "optim/adam.h"

#include <cmath>

#include "optim/kernel_spans.h"
#include "optim/tiles.h"
#include "util/error.h"

namespace ds::optim {

void AdamStepState::advance(std::int64_t step, double beta1, double beta2) {
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  if (step == step_ + 1 && b1 == beta1_ && b2 == beta2_) {
    beta1_t_ *= b1;
    beta2_t_ *= b2;
  } else {
    beta1_t_ = static_cast<float>(std::pow(beta1, static_cast<double>(step)));
    beta2_t_ = static_cast<float>(std::pow(beta2, static_cast<double>(step)));
  }
  step_ = step;
  beta1_ = b1;
  beta2_ = b2;
}

namespace {

using AdamKernel = void (*)(const detail::AdamSpans&, const detail::AdamCoeffs&, std::int64_t, std::int64_t);

AdamKernel adam_kernel(SimdPath path) {
  switch (path) {
#if defined(DS_OPTIM_X86_SIMD)
    case SimdPath::Avx512: return detail::adam_avx512;
    case SimdPath::Avx2: return detail::adam_avx2;
#endif
    default: return detail::adam_scalar;
  }
}

// Every scalar DeepSpeed rounds to fp32 before the loop, computed here once per call.
detail::AdamCoeffs adam_coeffs(const AdamHyperparams& h, const AdamStepState& s) {
  detail::AdamCoeffs c{};
  const float lr = static_cast<float>(h.lr);
  c.b1 = static_cast<float>(h.beta1);
  c.b2 = static_cast<float>(h.beta2);
  c.eps = static_cast<float>(h.eps);
  c.wd = static_cast<float>(h.weight_decay);
  c.one_minus_b1 = 1.0f - c.b1;
  c.one_minus_b2 = 1.0f - c.b2;
  float bc1 = 1.0f;
  c.bc2 = 1.0f;
  if (h.bias_correction) {
    bc1 = 1.0f - s.beta1_t();
    c.bc2 = 1.0f / std::sqrt(1.0f - s.beta2_t());
  }
  c.step_size = -lr / bc1;
  c.decay = -lr * c.wd;
  c.adamw_decay = h.adamw_mode && c.wd > 0.0f;
  c.l2_decay = !h.adamw_mode && c.wd > 0.0f;
  return c;
}

void run_adam(const detail::AdamSpans& spans, std::int64_t n, const AdamHyperparams& h, const AdamStepState& s,
              const KernelOptions& o) {
  const AdamKernel kernel = adam_kernel(resolve_simd_path(o));  // may throw: before any thread starts
  const detail::AdamCoeffs c = adam_coeffs(h, s);
  for_each_tile(n, o.threads, [&](std::int64_t begin, std::int64_t end) { kernel(spans, c, begin, end); });
}

}  // namespace

void adam_update(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamHyperparams& h,
                 const AdamStepState& s, const KernelOptions& o) {
  run_adam(detail::AdamSpans{p, g, m, v, HalfSpan{}}, n, h, s, o);
}

void adam_update_copy_out(float* p, const float* g, float* m, float* v, std::int64_t n,
                          const AdamHyperparams& h, const AdamStepState& s, HalfSpan out,
                          const KernelOptions& o) {
  DS_ASSERT(out.data != nullptr || n == 0, "adam_update_copy_out: null output span");
  run_adam(detail::AdamSpans{p, g, m, v, out}, n, h, s, o);
}

}  // namespace ds::optim
