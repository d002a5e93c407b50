// fp32 <-> bf16 and fp32 <-> fp16 conversions in plain C++ (no F16C): round to nearest, ties to
// even; infinities kept; NaN stays NaN (quieted, sign kept). The 16-bit values are raw uint16_t
// bit patterns, which is how the communication layer carries them (it has no LibTorch).
#pragma once

#include <bit>
#include <cstdint>

namespace ds::comm {

inline float bf16_to_float(uint16_t h) noexcept { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  // A NaN must not round into infinity (0x7f800001 + 0x7fff would): quiet it instead.
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);  // ties go to the even result
  return uint16_t(rounded >> 16);
}

inline float fp16_to_float(uint16_t h) noexcept {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in fp32.
    const float mag = float(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));        // rebias 15 -> 127
}

inline uint16_t float_to_fp16(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // quiet NaN
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 (half-way past 65504): inf
  if (ax >= 0x38800000u) {                                  // normal fp16 (>= 2^-14)
    ax += 0xfffu + ((ax >> 13) & 1u);                       // round mantissa to 10 bits, ties even
    ax -= 0x38000000u;                                      // rebias exponent 127 -> 15
    return uint16_t(sign | (ax >> 13));
  }
  // Subnormal or zero: adding 0.5f aligns the fp16 subnormal spacing (2^-24) with fp32's ulp at
  // 0.5, so the hardware add performs the round-to-nearest-even; subtracting 0.5f's bits leaves
  // the fp16 bit pattern (1024 = the smallest normal, which is also right).
  constexpr uint32_t kHalfBits = 0x3f000000u;  // 0.5f
  const float t = std::bit_cast<float>(ax) + 0.5f;
  return uint16_t(sign | (std::bit_cast<uint32_t>(t) - kHalfBits));
}

}  // namespace ds::comm
