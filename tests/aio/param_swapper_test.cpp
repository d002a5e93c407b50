// ParamSwapper (offload_param.device "nvme"): one file per shard under DeepSpeed's folder, byte-exact
// round trips for sizes that are and are not 4 KiB multiples, reads into caller buffers at aligned
// offsets (as stage 3's all-gather buffer), a read after a pending write of the same shard sees the
// new bytes, the write-in-flight bound, and errors that name the key or the file.
#include "offload/param_swapper.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "aio_test_util.h"
#include "util/error.h"

namespace ds::offload {
namespace {

namespace fs = std::filesystem;

ParamSwapperOptions options_for(const std::string& dir, std::vector<int64_t> shards) {
  ParamSwapperOptions o;
  o.nvme_path = dir;
  o.rank = 2;
  o.dtype_name = "bfloat16";
  o.element_size = 2;
  for (size_t i = 0; i < shards.size(); ++i) o.names.push_back("h." + std::to_string(i) + ".attn.c_attn.weight");
  o.shard_numel = std::move(shards);
  o.buffer_count = 2;
  o.buffer_size = 6000;
  return o;
}

TEST(ParamSwapper, RoundTripsEveryShardIntoOneAlignedBuffer) {
  aio::test::ScratchDir dir;
  aio::AioEngine io;
  const std::vector<int64_t> shards{1, 1000, 2048, 2049, 5000};  // bytes 2 .. 10000: aligned and not
  std::string folder;
  {
    ParamSwapper swapper(io, options_for(dir.path(), shards));
    folder = swapper.directory();
    EXPECT_EQ(folder, dir.path() + "/zero_stage_3/bfloat16params/rank2");
    std::vector<std::vector<std::byte>> want;
    for (size_t id = 0; id < shards.size(); ++id) {
      want.emplace_back(size_t(swapper.shard_bytes(id)));
      aio::test::fill_pattern(want.back().data(), int64_t(want.back().size()), uint32_t(id));
      swapper.write(id, want.back().data());
      EXPECT_EQ(int64_t(fs::file_size(swapper.file(id))), swapper.shard_bytes(id));
    }
    // All shards at once into one buffer, each at a 4 KiB-aligned slot (stage 3's gather layout).
    std::vector<int64_t> slot;
    int64_t total = 0;
    for (size_t id = 0; id < shards.size(); ++id) {
      slot.push_back(total);
      total += aio::align_up(swapper.shard_bytes(id));
    }
    aio::AlignedBuffer buf(total);
    std::vector<aio::IoHandle> reads;
    for (size_t id = 0; id < shards.size(); ++id) reads.push_back(swapper.read_async(id, buf.data() + slot[id]));
    for (auto h : reads) swapper.wait_read(h);
    for (size_t id = 0; id < shards.size(); ++id)
      EXPECT_EQ(std::memcmp(buf.data() + slot[id], want[id].data(), want[id].size()), 0) << "shard " << id;
    const auto st = swapper.stats();
    EXPECT_EQ(st.shard_reads, int64_t(shards.size()));
    EXPECT_EQ(st.shard_writes, int64_t(shards.size()));
    EXPECT_EQ(st.bytes_read, st.bytes_written);
    EXPECT_EQ(st.bytes_read, (1 + 1000 + 2048 + 2049 + 5000) * 2);
  }
  EXPECT_FALSE(fs::exists(folder)) << "swap files outlived the swapper";
}

TEST(ParamSwapper, AReadAfterAPendingWriteSeesTheNewBytesAndWritesInFlightAreBounded) {
  aio::test::ScratchDir dir;
  aio::AioEngine io;
  ParamSwapper swapper(io, options_for(dir.path(), {5000, 5000, 5000, 5000}));
  const int64_t bound = 2 * 6000 * 2;  // buffer_count × buffer_size × element size
  for (int round = 0; round < 3; ++round)
    for (size_t id = 0; id < swapper.size(); ++id) {
      aio::AlignedBuffer b = swapper.write_buffer(id);
      std::memset(b.data(), 0x10 * round + int(id), size_t(swapper.shard_bytes(id)));
      swapper.write_async(id, std::move(b));
      EXPECT_LE(swapper.writes_in_flight_bytes(), bound);
    }
  aio::AlignedBuffer back(swapper.shard_bytes(3));
  swapper.wait_read(swapper.read_async(3, back.data()));  // its write may still be in flight
  for (int64_t i = 0; i < swapper.shard_bytes(3); ++i) ASSERT_EQ(int(back.data()[i]), 0x20 + 3) << i;
  swapper.flush();
  EXPECT_EQ(swapper.writes_in_flight_bytes(), 0);
}

TEST(ParamSwapper, AShardLargerThanBufferSizeIsRefusedNamingTheKey) {
  aio::test::ScratchDir dir;
  aio::AioEngine io;
  try {
    ParamSwapper swapper(io, options_for(dir.path(), {100, 6001}));
    ADD_FAILURE() << "a 6001-element shard was accepted with buffer_size 6000";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("zero_optimization.offload_param.buffer_size"), std::string::npos) << what;
    EXPECT_NE(what.find("h.1.attn.c_attn.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("6001"), std::string::npos) << what;
  }
}

TEST(ParamSwapper, AMissingPathAndAShortReadNameTheCause) {
  aio::test::ScratchDir dir;
  aio::AioEngine io;
  try {
    ParamSwapper swapper(io, options_for(dir.path() + "/absent", {10}));
    ADD_FAILURE() << "a missing nvme_path was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("zero_optimization.offload_param.nvme_path"), std::string::npos) << e.what();
  }
  ParamSwapper swapper(io, options_for(dir.path(), {3000}));
  std::vector<std::byte> data(size_t(swapper.shard_bytes(0)), std::byte{7});
  swapper.write(0, data.data());
  fs::resize_file(swapper.file(0), 100);  // the disk lost the tail
  aio::AlignedBuffer back(swapper.shard_bytes(0));
  try {
    swapper.wait_read(swapper.read_async(0, back.data()));
    ADD_FAILURE() << "a truncated shard file was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(swapper.file(0)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds::offload
