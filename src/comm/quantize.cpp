#include "comm/quantize.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "util/error.h"

namespace ds::comm::quant {

int64_t group_count(int64_t n) {
  constexpr int64_t kTarget = 8000;
  DS_CHECK(n > 0 && n % 8 == 0, CommError,
           "int8 quantization needs a positive multiple of 8 elements, got " + std::to_string(n));
  int64_t groups = (n + kTarget - 1) / kTarget;
  while (groups < n && n % (8 * groups) != 0) ++groups;
  while (n % (8 * groups * 2) == 0 && n / groups > kTarget) groups *= 2;
  DS_CHECK(n % (8 * groups) == 0 && n / groups < 16000, CommError,
           "int8 quantization: no group size below 16000 elements divides " + std::to_string(n));
  return groups;
}

void quantize_int8(const float* x, int64_t n, int64_t groups, int8_t* q, float* inv_scales) {
  DS_ASSERT(groups > 0 && n % groups == 0, "equal groups");
  const int64_t size = n / groups;
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    const float* xg = x + g * size;
    float max = 0.0f;
    for (int64_t i = 0; i < size; ++i) max = std::max(max, std::abs(xg[i]));
    const float scale = max == 0.0f ? 1.0f : 256.0f / (2.0f * max);  // (1 << bits) / (2 max)
    for (int64_t i = 0; i < size; ++i) {
      const float v = std::nearbyint(xg[i] * scale);  // __float2int_rn: nearest, ties to even
      q[g * size + i] = std::isnan(v) ? int8_t(0) : int8_t(std::clamp(v, -128.0f, 127.0f));
    }
    inv_scales[g] = 1.0f / scale;
  }
}

void dequantize_int8(const int8_t* q, int64_t n, int64_t groups, const float* inv_scales, float* out) {
  DS_ASSERT(groups > 0 && n % groups == 0, "equal groups");
  const int64_t size = n / groups;
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < size; ++i) out[g * size + i] = float(q[g * size + i]) * inv_scales[g];
}

}  // namespace ds::comm::quant
