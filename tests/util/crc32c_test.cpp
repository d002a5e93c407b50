// CRC-32C against the published test vectors (RFC 3720 appendix B.4 and the "123456789" check
// value), the hardware path against the portable tables at every alignment and length class, and
// the mask round trip. Built into checkpoint_tests (the checkpoint layer is its main user).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "util/crc32c.h"

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

TEST(Crc32c, FastPathEqualsPortableTables) {
  // Every alignment, and lengths around the 8-byte word and both interleaved block sizes (3 x 256, 3 x 8192).
  std::vector<unsigned char> buf(3 * 8192 * 2 + 64);
  std::mt19937 gen(7);
  for (auto& b : buf) b = static_cast<unsigned char>(gen());
  for (size_t off = 0; off < 8; ++off)
    for (size_t n : {0, 1, 7, 8, 9, 255, 767, 768, 769, 1000, 24575, 24576, 24577, 49152 + 31})
      for (uint32_t seed : {0u, 0xE3069283u})
        ASSERT_EQ(crc32c(buf.data() + off, n, seed), crc32c_portable(buf.data() + off, n, seed))
            << "offset " << off << " length " << n << " seed " << seed;
  EXPECT_EQ(crc32c_portable("123456789", 9), 0xE3069283u);
}

}  // namespace
}  // namespace ds::test
