#include "comm/quantize.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

int64_t int4_bytes(std::span<const int64_t> group_len) {
  int64_t bytes = 0;
  for (int64_t n : group_len) bytes += (n + 1) / 2;
  return bytes;
}

namespace {

// Where each group starts: elements and packed bytes.
struct GroupStarts {
  std::vector<int64_t> elem, byte;
  explicit GroupStarts(std::span<const int64_t> group_len) : elem(group_len.size()), byte(group_len.size()) {
    int64_t e = 0, b = 0;
    for (size_t g = 0; g < group_len.size(); ++g) {
      DS_ASSERT(group_len[g] > 0, "int4 groups are not empty");
      elem[g] = e;
      byte[g] = b;
      e += group_len[g];
      b += (group_len[g] + 1) / 2;
    }
  }
};

}  // namespace

void quantize_int4(const float* x, std::span<const int64_t> group_len, uint8_t* packed, float* inv_scales) {
  const GroupStarts at(group_len);
  const int64_t groups = static_cast<int64_t>(group_len.size());
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    const float* xg = x + at.elem[size_t(g)];
    const int64_t n = group_len[size_t(g)];
    float max = 0.0f;
    for (int64_t i = 0; i < n; ++i) max = std::max(max, std::abs(xg[i]));
    // 7 / max, not DeepSpeed's 16 / (2 max): its largest value would round to 8 and clip to 7,
    // shrinking every group's extremes by 1/8 (a bias of the gradient's norm, not just noise).
    const float scale = max == 0.0f ? 1.0f : 7.0f / max;
    uint8_t* out = packed + at.byte[size_t(g)];
    for (int64_t i = 0; i < n; i += 2) {
      uint8_t byte = 0;
      for (int64_t k = 0; k < 2 && i + k < n; ++k) {
        const float v = std::nearbyint(xg[i + k] * scale);
        const int q = std::isnan(v) ? 0 : int(std::clamp(v, -8.0f, 7.0f));
        byte |= uint8_t((q & 0xF) << (4 * k));
      }
      out[i / 2] = byte;
    }
    inv_scales[g] = 1.0f / scale;
  }
}

void dequantize_int4_add(const uint8_t* packed, std::span<const int64_t> group_len, const float* inv_scales,
                         float* out) {
  const GroupStarts at(group_len);
  const int64_t groups = static_cast<int64_t>(group_len.size());
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* in = packed + at.byte[size_t(g)];
    float* o = out + at.elem[size_t(g)];
    const int64_t n = group_len[size_t(g)];
    const float inv = inv_scales[g];
    for (int64_t i = 0; i < n; ++i) {
      const int nibble = (in[i / 2] >> (4 * (i & 1))) & 0xF;
      o[i] += float(nibble >= 8 ? nibble - 16 : nibble) * inv;  // sign-extend the 4 bits
    }
  }
}

}  // namespace ds::comm::quant
