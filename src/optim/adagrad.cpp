// Adagrad driver: from_config checks, the fp32 scalars torch uses, the SIMD path and thread split;
// the elementwise work is in kernels_*.cpp.
#include "optim/adagrad.h"

#include <string>

#include "optim/hyperparam_checks.h"
#include "optim/kernel_spans.h"
#include "optim/tiles.h"
#include "util/error.h"

namespace ds::optim {

AdagradHyperparams AdagradHyperparams::from_config(const OptimizerParams& p) {
  require_non_negative(p.lr, "lr", "learning rate", "Adagrad");
  require_non_negative(p.lr_decay, "lr_decay", "lr_decay value", "Adagrad");
  require_non_negative(p.weight_decay, "weight_decay", "weight_decay value", "Adagrad");
  require_non_negative(p.initial_accumulator_value, "initial_accumulator_value", "initial_accumulator_value", "Adagrad");
  require_non_negative(p.eps, "eps", "epsilon value", "Adagrad");
  AdagradHyperparams h;
  h.lr = p.lr;
  h.lr_decay = p.lr_decay;
  h.weight_decay = p.weight_decay;
  h.initial_accumulator_value = p.initial_accumulator_value;
  h.eps = p.eps;
  return h;
}

void adagrad_init_state(float* sum, std::int64_t n, const AdagradHyperparams& h) {
  const float init = static_cast<float>(h.initial_accumulator_value);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) sum[i] = init;
}

void adagrad_update(float* p, const float* g, float* sum, std::int64_t n, const AdagradHyperparams& h,
                    const AdagradState& s, const KernelOptions& o) {
  DS_ASSERT(s.step >= 1, "adagrad_update: increment AdagradState::step before the step's updates");
  using Kernel = void (*)(const detail::AdagradSpans&, const detail::AdagradCoeffs&, std::int64_t, std::int64_t);
  Kernel kernel = detail::adagrad_scalar;
#if defined(DS_OPTIM_X86_SIMD)
  switch (resolve_simd_path(o)) {
    case SimdPath::Avx512: kernel = detail::adagrad_avx512; break;
    case SimdPath::Avx2: kernel = detail::adagrad_avx2; break;
    case SimdPath::Scalar: break;
  }
#else
  resolve_simd_path(o);  // still refuses a path this build lacks
#endif
  // clr in double as torch computes it, then rounded to fp32 when it becomes the addcdiv Scalar.
  const double clr = h.lr / (1.0 + static_cast<double>(s.step - 1) * h.lr_decay);
  detail::AdagradCoeffs c{};
  c.neg_clr = static_cast<float>(-clr);
  c.wd = static_cast<float>(h.weight_decay);
  c.eps = static_cast<float>(h.eps);
  c.decay = h.weight_decay != 0.0;
  const detail::AdagradSpans spans{p, g, sum};
  for_each_tile(n, o.threads, [&](std::int64_t begin, std::int64_t end) { kernel(spans, c, begin, end); });
}

}  // namespace ds::optim
