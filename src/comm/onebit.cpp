// Sign packing with error feedback (see onebit.h). Byte-at-a-time loops over 8 floats: GCC
// vectorizes the float arithmetic; the bit gathering is a shift-or chain per byte.
#include "comm/onebit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ds::comm::onebit {
namespace {

inline uint8_t sign_byte(const float* c) {
  uint8_t b = 0;
  for (int k = 0; k < 8; ++k) b = uint8_t(b << 1) | uint8_t(!(c[k] < 0.0f));
  return b;
}

}  // namespace

void pack_signs(const float* x, int64_t n, uint8_t* bits) {
  const int64_t full = n / 8;
  for (int64_t i = 0; i < full; ++i) bits[i] = sign_byte(x + 8 * i);
  if (n % 8 != 0) {
    float tail[8];
    std::fill(tail, tail + 8, -1.0f);  // padding bits are 0
    std::memcpy(tail, x + 8 * full, sizeof(float) * size_t(n % 8));
    bits[full] = sign_byte(tail);
  }
}

// Byte by byte (8 outputs per byte, a loop GCC unrolls and vectorizes), then the partial last byte.
void unpack_signs(const uint8_t* bits, int64_t n, float scale, float* out) {
  const int64_t full = n / 8;
  for (int64_t b = 0; b < full; ++b)
    for (int k = 0; k < 8; ++k) out[8 * b + k] = (bits[b] >> (7 - k)) & 1 ? scale : -scale;
  for (int64_t i = 8 * full; i < n; ++i) out[i] = (bits[i >> 3] >> (7 - (i & 7))) & 1 ? scale : -scale;
}

void accumulate_signs(const uint8_t* bits, int64_t n, float scale, float* acc) {
  const int64_t full = n / 8;
  for (int64_t b = 0; b < full; ++b)
    for (int k = 0; k < 8; ++k) acc[8 * b + k] += (bits[b] >> (7 - k)) & 1 ? scale : -scale;
  for (int64_t i = 8 * full; i < n; ++i) acc[i] += (bits[i >> 3] >> (7 - (i & 7))) & 1 ? scale : -scale;
}

double feedback_sum_of_squares(const float* x, int64_t n_x, const float* error, int64_t n) {
  double sum = 0.0;
  const int64_t m = x ? n_x : 0;
  for (int64_t i = 0; i < m; ++i) {
    const float c = x[i] + error[i];
    sum += double(c) * double(c);
  }
  for (int64_t i = m; i < n; ++i) sum += double(error[i]) * double(error[i]);
  return sum;
}

float feedback_scale(double sum_of_squares, int64_t n) {
  if (n == 0) return 0.0f;
  return float(std::sqrt(sum_of_squares)) / float(std::sqrt(double(n)));
}

void pack_with_feedback(const float* x, int64_t n_x, float* error, int64_t n, float scale, uint8_t* bits) {
  const int64_t m = x ? n_x : 0;
  float c[8];
  for (int64_t b = 0; b < n / 8; ++b) {
    const int64_t i0 = 8 * b;
    for (int k = 0; k < 8; ++k) c[k] = (i0 + k < m ? x[i0 + k] : 0.0f) + error[i0 + k];
    bits[b] = sign_byte(c);
    for (int k = 0; k < 8; ++k) error[i0 + k] = c[k] - scale * (c[k] < 0.0f ? -1.0f : 1.0f);
  }
}

}  // namespace ds::comm::onebit
