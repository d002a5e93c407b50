// The sample tensors the round-trip and Python tests share: one [2, 3] tensor per dtype plus a
// 0-d and two empty tensors. Element i holds a value from a formula the Python side repeats
// (safetensors_python_test.cpp), so each side checks the other's bytes without trusting them.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "format/safetensors.h"

namespace ds::test {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; so are these samples");

struct Sample {
  std::string name;
  format::StDtype dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// IEEE half bits of `f`, exact for the normal values with few mantissa bits used here.
inline uint16_t half_bits(float f) {
  if (f == 0.0f) return std::signbit(f) ? 0x8000 : 0;
  const uint16_t sign = f < 0 ? 0x8000 : 0;
  int exp = 0;
  const float frac = std::frexp(std::fabs(f), &exp);  // |f| = frac * 2^exp, frac in [0.5, 1)
  const auto mantissa = static_cast<uint16_t>(std::lround((frac * 2.0f - 1.0f) * 1024.0f));
  return static_cast<uint16_t>(sign | ((exp - 1 + 15) << 10) | mantissa);
}

template <typename T>
void append(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

// Element i of a sample: float types hold i * 0.5 - 1, signed ints i - 2, U* i * 40 (mod width),
// BOOL i % 2 == 0, fp8 the raw byte i * 7.
inline std::string sample_bytes(format::StDtype dtype, int64_t numel) {
  using format::StDtype;
  std::string out;
  for (int64_t i = 0; i < numel; ++i) {
    const double f = static_cast<double>(i) * 0.5 - 1.0;
    const int64_t s = i - 2;
    const uint64_t u = static_cast<uint64_t>(i) * 40;
    switch (dtype) {
      case StDtype::F64: append<double>(out, f); break;
      case StDtype::F32: append<float>(out, static_cast<float>(f)); break;
      case StDtype::F16: append<uint16_t>(out, half_bits(static_cast<float>(f))); break;
      case StDtype::BF16: append<uint16_t>(out, static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(f)) >> 16)); break;
      case StDtype::I64: append<int64_t>(out, s); break;
      case StDtype::I32: append<int32_t>(out, static_cast<int32_t>(s)); break;
      case StDtype::I16: append<int16_t>(out, static_cast<int16_t>(s)); break;
      case StDtype::I8: append<int8_t>(out, static_cast<int8_t>(s)); break;
      case StDtype::U8: append<uint8_t>(out, static_cast<uint8_t>(u)); break;
      case StDtype::BOOL: append<uint8_t>(out, i % 2 == 0 ? 1 : 0); break;
      case StDtype::U64: append<uint64_t>(out, u); break;
      case StDtype::U32: append<uint32_t>(out, static_cast<uint32_t>(u)); break;
      case StDtype::U16: append<uint16_t>(out, static_cast<uint16_t>(u)); break;
      case StDtype::F8_E4M3:
      case StDtype::F8_E5M2: append<uint8_t>(out, static_cast<uint8_t>(i * 7)); break;
    }
  }
  return out;
}

inline Sample make_sample(std::string name, format::StDtype dtype, std::vector<int64_t> shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::string bytes = sample_bytes(dtype, numel);
  return Sample{std::move(name), dtype, std::move(shape), std::move(bytes)};
}

// The ten dtypes LibTorch has (numpy has all but BF16, which Python handles as uint16 bits),
// then the three unsigned ones numpy also has, then the shape edge cases.
inline std::vector<Sample> numpy_samples() {
  using format::StDtype;
  std::vector<Sample> out;
  const std::pair<const char*, StDtype> kinds[] = {
      {"f64", StDtype::F64}, {"f32", StDtype::F32}, {"f16", StDtype::F16}, {"bf16", StDtype::BF16},
      {"i64", StDtype::I64}, {"i32", StDtype::I32}, {"i16", StDtype::I16}, {"i8", StDtype::I8},
      {"u8", StDtype::U8},   {"bool", StDtype::BOOL}, {"u64", StDtype::U64}, {"u32", StDtype::U32},
      {"u16", StDtype::U16}};
  for (const auto& [name, dtype] : kinds) out.push_back(make_sample(name, dtype, {2, 3}));
  out.push_back(make_sample("scalar", StDtype::F32, {}));        // 0-d: one element
  out.push_back(make_sample("empty", StDtype::I64, {0}));
  out.push_back(make_sample("empty3d", StDtype::F16, {3, 0, 2}));
  return out;
}

}  // namespace ds::test
