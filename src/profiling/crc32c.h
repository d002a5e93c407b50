// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecord framing uses, and
// TensorFlow's "masked" form of it. Table-driven: monitor records are a few hundred bytes per step,
// so the hardware instruction would buy nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

// CRC-32C of `n` bytes continuing from `crc` (0 to start): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// TensorFlow's mask (rotate right by 15, add 0xa282ead8), applied to the CRCs stored in TFRecord
// files because a CRC of data that itself holds CRCs is weak.
constexpr uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
constexpr uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace ds
