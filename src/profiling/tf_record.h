// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data |
//   uint32 masked CRC-32C of data
// so a reader can tell a torn or corrupted record from a good one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds {

// One framed record holding `payload`.
std::string encode_tfrecord(std::string_view payload);

// The payloads of a whole file's bytes, in order. Any bad length CRC, data CRC or truncated
// record throws IoError naming `origin` and the byte offset.
std::vector<std::string> decode_tfrecords(std::string_view bytes, const std::string& origin);

}  // namespace ds
