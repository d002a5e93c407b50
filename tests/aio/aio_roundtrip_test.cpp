// Byte-exact write→read round trips through both backends, for lengths on and off the 4 KiB and
// block grids, with small block sizes and queue depths so requests are split and queued.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <string>
#include <vector>

#include "aio/aio_engine.h"
#include "aio/uring_backend.h"
#include "aio_test_util.h"
#include "util/error.h"

namespace ds::aio {
namespace {

struct Variant {
  const char* name;
  Backend backend;
  int64_t block_size;
  int64_t queue_depth;
  int64_t threads;
  bool single_submit;
  bool overlap_events;
};

class RoundTrip : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    if (GetParam().backend == Backend::Uring && !uring_compiled_in()) GTEST_SKIP() << "no liburing";
  }
  AioOptions options() const {
    const Variant& v = GetParam();
    AioOptions o;
    o.backend = v.backend;
    o.block_size = v.block_size;
    o.queue_depth = v.queue_depth;
    o.intra_op_parallelism = v.threads;
    o.single_submit = v.single_submit;
    o.overlap_events = v.overlap_events;
    return o;
  }
};

int64_t file_size(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

TEST_P(RoundTrip, ByteExactForAlignedAndUnalignedLengths) {
  test::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  AioEngine engine(options());
  EXPECT_EQ(engine.backend(), GetParam().backend);
  const std::vector<int64_t> sizes = {1, 4095, 4096, (1 << 20) + 1, 5 * (1 << 20) + 123, 0};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t n = sizes[i];
    const std::string path = dir.file("f" + std::to_string(i));
    AlignedBuffer src(n), dst(n);
    if (n) test::fill_pattern(src.data(), n, static_cast<uint32_t>(i + 1));
    engine.write(path, src.data(), n);
    EXPECT_EQ(file_size(path), n) << "logical size after a padded write, n=" << n;
    engine.read(path, dst.data(), n);
    ASSERT_EQ(n ? std::memcmp(src.data(), dst.data(), static_cast<size_t>(n)) : 0, 0) << "n=" << n;
  }
}

TEST_P(RoundTrip, ManyConcurrentRequestsAndOffsets) {
  test::ScratchDir dir;
  AioEngine engine(options());
  constexpr int kFiles = 6;
  constexpr int64_t kBytes = 3 * 65536 + 4096 * 3;  // several blocks of the small variants
  std::vector<AlignedBuffer> src, dst;
  std::vector<IoHandle> hs;
  for (int i = 0; i < kFiles; ++i) {
    src.emplace_back(kBytes);
    dst.emplace_back(kBytes);
    test::fill_pattern(src.back().data(), kBytes, 100u + i);
  }
  // Two halves of one file at different offsets, plus whole files, all in flight together.
  const std::string shared = dir.file("shared");
  for (int i = 0; i < kFiles; ++i)
    hs.push_back(i < 2 ? engine.submit_write(shared, src[i].data(), kBytes, i * kBytes)
                       : engine.submit_write(dir.file("w" + std::to_string(i)), src[i].data(), kBytes));
  EXPECT_GT(engine.in_flight(), 0);
  for (IoHandle h : hs) engine.wait(h);
  for (int i = 0; i < kFiles; ++i)
    i < 2 ? (void)engine.submit_read(shared, dst[i].data(), kBytes, i * kBytes)
          : (void)engine.submit_read(dir.file("w" + std::to_string(i)), dst[i].data(), kBytes);
  engine.wait_all();
  EXPECT_EQ(engine.in_flight(), 0);
  for (int i = 0; i < kFiles; ++i)
    ASSERT_EQ(std::memcmp(src[i].data(), dst[i].data(), kBytes), 0) << i;
}

const Variant kVariants[] = {
    {"uring_default", Backend::Uring, 1 << 20, 8, 1, false, true},
    {"uring_split_q2", Backend::Uring, 65536, 2, 1, false, true},
    {"uring_split_t3", Backend::Uring, 16384, 4, 3, false, true},
    {"uring_single_submit_batches", Backend::Uring, 65536, 3, 2, true, false},
    {"threads_default", Backend::Threads, 1 << 20, 8, 1, false, true},
    {"threads_split", Backend::Threads, 16384, 2, 2, false, true},
};

INSTANTIATE_TEST_SUITE_P(Backends, RoundTrip, ::testing::ValuesIn(kVariants),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(AioOptions, RejectsBadKeysByName) {
  AioOptions o;
  o.block_size = 1000;
  try {
    AioEngine e(o);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "aio.block_size");
  }
  o = AioOptions{};
  o.queue_depth = 0;
  EXPECT_THROW(AioEngine{o}, ConfigError);
  o = AioOptions{};
  o.intra_op_parallelism = 0;
  EXPECT_THROW(AioEngine{o}, ConfigError);
}

TEST(AioOptions, FromConfigCopiesDeepSpeedKeys) {
  AioConfig c;
  c.block_size = 2 << 20;
  c.queue_depth = 32;
  c.intra_op_parallelism = 2;
  c.single_submit = true;
  c.overlap_events = false;
  const AioOptions o = AioOptions::from_config(c);
  EXPECT_EQ(o.block_size, 2 << 20);
  EXPECT_EQ(o.queue_depth, 32);
  EXPECT_EQ(o.intra_op_parallelism, 2);
  EXPECT_TRUE(o.single_submit);
  EXPECT_FALSE(o.overlap_events);
  EXPECT_EQ(o.backend, Backend::Auto);
}

}  // namespace
}  // namespace ds::aio
