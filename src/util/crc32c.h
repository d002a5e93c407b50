// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of checkpoint files
// (format/checksums.h) and of TFRecord framing (profiling/tf_record.*), with TensorFlow's
// "masked" form. On x86-64 with SSE4.2 it runs the crc32 instruction on three interleaved streams
// (~20 GB/s per core); elsewhere a slicing-by-8 table (~2-3 GB/s). The choice is made once, at
// the first call, from the CPU's flags.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

// CRC-32C of `n` bytes continuing from `crc` (0 to start): crc32c("123456789") == 0xE3069283,
// and crc32c(b, nb, crc32c(a, na)) == crc32c(a ++ b).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// The portable table version (the reference the tests hold the fast path to).
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);

// True when crc32c() uses the SSE4.2 instruction on this CPU.
bool crc32c_is_hardware();

// TensorFlow's mask (rotate right by 15, add 0xa282ead8), applied to the CRCs stored in TFRecord
// files because a CRC of data that itself holds CRCs is weak.
constexpr uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
constexpr uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace ds
