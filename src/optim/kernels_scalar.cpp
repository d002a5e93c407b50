// The scalar reference path of the span kernels: one element at a time through scalar_ops.h.
// Built for baseline x86-64 (no AVX, no F16C); the AVX paths must match it bit for bit.
#include "optim/kernel_spans.h"
#include "optim/scalar_ops.h"

namespace ds::optim::detail {

void adam_scalar(const AdamSpans& s, const AdamCoeffs& c, std::int64_t begin, std::int64_t end) {
  if (s.out.data == nullptr) {
    for (std::int64_t i = begin; i < end; ++i) adam_element(s, c, i);
    return;
  }
  for (std::int64_t i = begin; i < end; ++i) s.out.data[i] = fp32_to_half(adam_element(s, c, i), s.out.type);
}

void adagrad_scalar(const AdagradSpans& s, const AdagradCoeffs& c, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) adagrad_element(s, c, i);
}

void lion_scalar(const LionSpans& s, const LionCoeffs& c, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) lion_element(s, c, i);
}

}  // namespace ds::optim::detail
