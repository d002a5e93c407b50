// AlignedBuffer: alignment, padded capacity, zero fill, noexcept moves.
#include "aio/aligned_buffer.h"

#include <gtest/gtest.h>

#include <type_traits>
#include <utility>

namespace ds::aio {
namespace {

static_assert(std::is_nothrow_move_constructible_v<AlignedBuffer>);
static_assert(std::is_nothrow_move_assignable_v<AlignedBuffer>);
static_assert(!std::is_copy_constructible_v<AlignedBuffer>);

TEST(AlignedBuffer, AlignedAndPaddedToWholePages) {
  for (int64_t n : {1, 4095, 4096, 4097, 1 << 20}) {
    AlignedBuffer b(n);
    EXPECT_TRUE(is_aligned(b.data())) << n;
    EXPECT_EQ(b.size(), n);
    EXPECT_EQ(b.capacity(), align_up(n));
    for (int64_t i = 0; i < b.capacity(); ++i) ASSERT_EQ(b.data()[i], std::byte{0});
  }
  EXPECT_TRUE(AlignedBuffer(0).empty());
}

TEST(AlignedBuffer, MovesTransferOwnership) {
  AlignedBuffer a(100);
  std::byte* p = a.data();
  AlignedBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  AlignedBuffer c(10);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 100);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
}

TEST(AlignedBuffer, AlignUp) {
  EXPECT_EQ(align_up(0), 0);
  EXPECT_EQ(align_up(1), 4096);
  EXPECT_EQ(align_up(4096), 4096);
  EXPECT_EQ(align_up(4097), 8192);
}

}  // namespace
}  // namespace ds::aio
