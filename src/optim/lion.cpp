// Lion driver: config mapping, the fp32 scalars DeepSpeed CPU Lion uses, the SIMD path and thread
// split; the elementwise work is in kernels_*.cpp.
#include "optim/lion.h"

#include "optim/kernel_spans.h"
#include "optim/tiles.h"

namespace ds::optim {

LionHyperparams LionHyperparams::from_config(const OptimizerParams& p) {
  LionHyperparams h;
  h.lr = p.lr;
  h.beta1 = p.betas[0];
  h.beta2 = p.betas[1];
  h.weight_decay = p.weight_decay;
  return h;
}

void lion_update(float* p, const float* g, float* m, std::int64_t n, const LionHyperparams& h,
                 const LionState&, const KernelOptions& o) {
  using Kernel = void (*)(const detail::LionSpans&, const detail::LionCoeffs&, std::int64_t, std::int64_t);
  Kernel kernel = detail::lion_scalar;
#if defined(DS_OPTIM_X86_SIMD)
  switch (resolve_simd_path(o)) {
    case SimdPath::Avx512: kernel = detail::lion_avx512; break;
    case SimdPath::Avx2: kernel = detail::lion_avx2; break;
    case SimdPath::Scalar: break;
  }
#else
  resolve_simd_path(o);  // still refuses a path this build lacks
#endif
  detail::LionCoeffs c{};
  c.b1 = static_cast<float>(h.beta1);
  c.b2 = static_cast<float>(h.beta2);
  c.one_minus_b1 = 1.0f - c.b1;
  c.one_minus_b2 = 1.0f - c.b2;
  c.alpha = static_cast<float>(h.lr);
  const float wd = static_cast<float>(h.weight_decay);
  c.after_decay = 1.0f - c.alpha * wd;
  c.decay = wd > 0.0f;
  const detail::LionSpans spans{p, g, m};
  for_each_tile(n, o.threads, [&](std::int64_t begin, std::int64_t end) { kernel(spans, c, begin, end); });
}

}  // namespace ds::optim
