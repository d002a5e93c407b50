// splitmix64 (Steele, Lea and Flood, 2014): one step of the SplitMix generator, a fast and well-mixed
// hash of one 64-bit word. For draws that must be a pure function of their key: the batch sampler's
// windows, the distributed sampler's permutation, progressive layer drop's keep/drop decisions.
#pragma once

#include <cstdint>

namespace ds {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace ds
