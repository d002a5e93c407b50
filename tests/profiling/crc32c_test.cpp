// CRC-32C against the published test vectors (RFC 3720 appendix B.4 and the "123456789" check
// value), the mask round trip, and TFRecord framing catching every kind of damage.
#include <gtest/gtest.h>

#include <string>

#include "profiling/crc32c.h"
#include "profiling/tf_record.h"
#include "profiling_test_util.h"
#include "util/error.h"

namespace ds::test {
namespace {

uint32_t crc_of(const std::string& s) { return crc32c(s.data(), s.size()); }

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc_of(""), 0x00000000u);
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up += static_cast<char>(i);
    down += static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc_of(up), 0x46DD794Eu);
  EXPECT_EQ(crc_of(down), 0x113FDB5Cu);
}

TEST(Crc32c, ExtendsAcrossPieces) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  const uint32_t head = crc32c(s.data(), 10);
  EXPECT_EQ(crc32c(s.data() + 10, s.size() - 10, head), crc_of(s));
}

TEST(Crc32c, MaskRoundTrips) {
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x80000000u}) EXPECT_EQ(unmask_crc32c(mask_crc32c(c)), c);
  // TensorFlow's masked CRC of the 8 length bytes of an empty record.
  const std::string zero8(8, '\0');
  EXPECT_EQ(mask_crc32c(crc_of(zero8)), ((crc_of(zero8) >> 15 | crc_of(zero8) << 17) + 0xa282ead8u));
}

TEST(TfRecord, FramesAndUnframes) {
  const std::string a = encode_tfrecord("hello"), b = encode_tfrecord(""), c = encode_tfrecord(std::string(300, 'x'));
  ASSERT_EQ(a.size(), 16u + 5u);
  EXPECT_EQ(a.substr(0, 8), std::string("\x05\0\0\0\0\0\0\0", 8));  // little-endian length
  EXPECT_EQ(a.substr(12, 5), "hello");
  const auto records = decode_tfrecords(a + b + c, "mem");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], "hello");
  EXPECT_EQ(records[1], "");
  EXPECT_EQ(records[2], std::string(300, 'x'));
}

TEST(TfRecord, DamageIsReportedWithItsOffset) {
  const std::string good = encode_tfrecord("first") + encode_tfrecord("second");
  auto error_of = [](const std::string& bytes) {
    try {
      decode_tfrecords(bytes, "f.tfevents");
    } catch (const IoError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string flipped_data = good;
  flipped_data[21 + 12] ^= 0x01;  // a data byte of the second record
  EXPECT_CONTAINS(error_of(flipped_data), "f.tfevents: bad data CRC in the TFRecord at byte 21");
  std::string flipped_len = good;
  flipped_len[21] ^= 0x01;
  EXPECT_CONTAINS(error_of(flipped_len), "bad length CRC in the TFRecord at byte 21");
  EXPECT_CONTAINS(error_of(good.substr(0, good.size() - 1)), "truncated data");
  EXPECT_CONTAINS(error_of(good.substr(0, 25)), "truncated header");
}

}  // namespace
}  // namespace ds::test
