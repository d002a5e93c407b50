// TFRecord framing catching every kind of damage (the masked CRC-32C itself: tests/util/crc32c_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "profiling/tf_record.h"
#include "profiling_test_util.h"
#include "util/error.h"

namespace ds::test {
namespace {

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
