// TFRecord framing and unframing (tensorflow/core/lib/io/record_writer.cc's layout). All integers
// are little-endian; we build them byte by byte so the code does not depend on the host order.
#include "profiling/tf_record.h"

#include <cstdint>

#include "util/crc32c.h"
#include "util/error.h"

namespace ds {
namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFFu);
}

uint64_t get_le(std::string_view b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(b[at + i])} << (8 * i);
  return v;
}

}  // namespace

std::string encode_tfrecord(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  put_le(out, payload.size(), 8);
  put_le(out, mask_crc32c(crc32c(out.data(), 8)), 4);
  out.append(payload);
  put_le(out, mask_crc32c(crc32c(payload.data(), payload.size())), 4);
  return out;
}

std::vector<std::string> decode_tfrecords(std::string_view bytes, const std::string& origin) {
  std::vector<std::string> records;
  size_t at = 0;
  auto fail = [&](const std::string& what) {
    throw IoError(origin + ": " + what + " in the TFRecord at byte " + std::to_string(at) +
                  " (the file is truncated or corrupted, or is not a TensorBoard event file)");
  };
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) fail("truncated header");
    const uint64_t len = get_le(bytes, at, 8);
    if (mask_crc32c(crc32c(bytes.data() + at, 8)) != get_le(bytes, at + 8, 4)) fail("bad length CRC");
    if (len > bytes.size() - at - 12 || bytes.size() - at - 12 - len < 4) fail("truncated data");
    const std::string_view data = bytes.substr(at + 12, len);
    if (mask_crc32c(crc32c(data.data(), data.size())) != get_le(bytes, at + 12 + len, 4)) fail("bad data CRC");
    records.emplace_back(data);
    at += 16 + len;
  }
  return records;
}

}  // namespace ds
