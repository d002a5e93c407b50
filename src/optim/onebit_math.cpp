#include "optim/onebit_math.h"

namespace ds::optim::onebit_math {

double norm(const float* x, int64_t n) {
  double sum = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  return std::sqrt(sum);
}

}  // namespace ds::optim::onebit_math
