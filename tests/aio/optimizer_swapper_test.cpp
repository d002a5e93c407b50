// OptimizerSwapper basics: folder layout and lifetime, byte-exact persistence of every state
// across for_each passes (all pipeline modes, both backends), checkpoint read/write, counters,
// buffer_count and free-space refusals, error propagation.
#include "offload/optimizer_swapper.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "aio_test_util.h"
#include "util/error.h"

namespace ds::offload {
namespace {

namespace fs = std::filesystem;
using aio::AioEngine;
using aio::AioOptions;
using aio::Backend;

// Caller-side copy of every state, to compare with what comes back from disk.
struct Model {
  std::vector<std::vector<std::vector<float>>> s;  // [k][state][i]
  Model(const SwapLayout& l, float seed) {
    for (size_t k = 0; k < l.sub_group_numel.size(); ++k) {
      s.emplace_back();
      for (int j = 0; j < l.num_states(); ++j) {
        std::vector<float> v(static_cast<size_t>(l.sub_group_numel[k]));
        for (size_t i = 0; i < v.size(); ++i) v[i] = seed + 1000.f * k + 100.f * j + 0.001f * i;
        s.back().push_back(std::move(v));
      }
    }
  }
  std::vector<const float*> ptrs(size_t k) const {
    std::vector<const float*> p;
    for (auto& v : s[k]) p.push_back(v.data());
    return p;
  }
};

SwapperOptions options_for(const std::string& dir, SwapLayout layout, bool pr, bool pw, int64_t bufs) {
  SwapperOptions o;
  o.nvme_path = dir;
  o.rank = 1;
  o.buffer_count = bufs;
  o.pipeline_read = pr;
  o.pipeline_write = pw;
  o.layout = std::move(layout);
  return o;
}

struct Mode {
  bool pipeline_read, pipeline_write;
  Backend backend;
};

class Persistence : public ::testing::TestWithParam<Mode> {};

TEST_P(Persistence, ByteExactAcrossPasses) {
  const Mode m = GetParam();
  aio::test::ScratchDir dir;
  AioOptions ao;
  ao.backend = m.backend;
  ao.block_size = 64 * 1024;  // several blocks per state file
  AioEngine io(ao);
  // Sizes on and off the 1024-float (4 KiB) grid, and an empty sub-group.
  SwapLayout layout{{50000, 1024, 1, 70001, 0}, {"fp32", "exp_avg", "exp_avg_sq"}};
  OptimizerSwapper sw(io, options_for(dir.path(), layout, m.pipeline_read, m.pipeline_write, 9));
  Model model(layout, 0.5f);
  for (int64_t k = 0; k < sw.num_sub_groups(); ++k) {
    auto p = model.ptrs(static_cast<size_t>(k));
    sw.write_sub_group(k, p);
  }
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<int64_t> seen;
    sw.for_each_sub_group([&](int64_t k, std::span<float* const> st) {
      seen.push_back(k);
      for (int j = 0; j < 3; ++j) {
        auto& want = model.s[static_cast<size_t>(k)][static_cast<size_t>(j)];
        ASSERT_EQ(std::memcmp(st[j], want.data(), want.size() * 4), 0) << "pass " << pass << " k " << k;
        for (size_t i = 0; i < want.size(); ++i) want[i] = st[j][i] = want[i] * 1.5f + j;  // "update"
      }
    });
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  }
  // Checkpoint-style read back of every sub-group.
  for (int64_t k = 0; k < sw.num_sub_groups(); ++k) {
    std::vector<std::vector<float>> out(3, std::vector<float>(static_cast<size_t>(sw.sub_group_numel(k))));
    std::vector<float*> p{out[0].data(), out[1].data(), out[2].data()};
    sw.read_sub_group(k, p);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(out[j], model.s[static_cast<size_t>(k)][static_cast<size_t>(j)]);
  }
  const SwapStats st = sw.stats();
  EXPECT_EQ(st.sub_group_reads, 3 * 5 + 5);
  EXPECT_EQ(st.sub_group_writes, 5 + 3 * 5);
  EXPECT_EQ(st.bytes_read, 4 * 3 * (50000 + 1024 + 1 + 70001) * (3 + 1));
  EXPECT_LE(st.max_live_buffers, sw.buffers_allocated());
}

INSTANTIATE_TEST_SUITE_P(Modes, Persistence,
                         ::testing::Values(Mode{false, false, Backend::Uring}, Mode{true, false, Backend::Uring},
                                           Mode{false, true, Backend::Uring}, Mode{true, true, Backend::Uring},
                                           Mode{true, true, Backend::Threads}, Mode{false, false, Backend::Threads}),
                         [](const auto& i) {
                           return std::string(i.param.pipeline_read ? "r" : "") +
                                  (i.param.pipeline_write ? "w" : "") + "_" + aio::to_string(i.param.backend);
                         });

TEST(OptimizerSwapper, FolderLayoutStaleFilesAndCleanup) {
  aio::test::ScratchDir dir;
  AioEngine io(AioOptions{});
  const std::string rank_dir = dir.path() + "/zero_stage_3/optimizer/rank1";
  fs::create_directories(rank_dir);
  std::ofstream(rank_dir + "/stale.swp") << "from a crashed run";
  {
    OptimizerSwapper sw(io, options_for(dir.path(), SwapLayout::with_states({10, 20}, 2), false, false, 4));
    EXPECT_EQ(sw.directory(), rank_dir);
    EXPECT_FALSE(fs::exists(rank_dir + "/stale.swp"));
    std::vector<float> a(20, 1.f);
    std::vector<const float*> p{a.data(), nullptr};  // nullptr: zeros
    sw.write_sub_group(1, p);
    EXPECT_EQ(sw.file_path(1, 0), rank_dir + "/sub_group_1.state0.tensor.swp");
    EXPECT_EQ(fs::file_size(sw.file_path(1, 0)), 80u);  // logical size, not padded
    EXPECT_EQ(fs::file_size(sw.file_path(1, 1)), 80u);
    std::vector<float> z(20, 7.f), y(20);
    std::vector<float*> q{y.data(), z.data()};
    sw.read_sub_group(1, q);
    EXPECT_EQ(z, std::vector<float>(20, 0.f));
    EXPECT_EQ(y, a);
    EXPECT_THROW(sw.read_sub_group(0, q), Error);  // never written
    EXPECT_THROW(sw.for_each_sub_group([](int64_t, std::span<float* const>) {}), Error);
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/zero_stage_3"));  // removed with its empty parents
}

TEST(OptimizerSwapper, OptionsFromTheOffloadConfig) {
  OffloadOptimizerConfig c;
  c.device = OffloadDevice::Nvme;
  EXPECT_THROW(swapper_options(c, 3, 0, SwapLayout::with_states({1}, 3)), ConfigError);  // no nvme_path
  c.nvme_path = "/mnt/nvme";
  c.buffer_count = 9;
  c.pipeline_read = c.pipeline_write = true;
  const SwapperOptions o = swapper_options(c, 3, 5, SwapLayout::with_states({7, 8}, 3));
  EXPECT_EQ(o.nvme_path, "/mnt/nvme");
  EXPECT_EQ(o.rank, 5);
  EXPECT_EQ(o.buffer_count, 9);
  EXPECT_TRUE(o.pipeline_read && o.pipeline_write);
  EXPECT_EQ(o.layout.num_states(), 3);
}

TEST(OptimizerSwapper, TooFewBuffersIsAConfigError) {
  aio::test::ScratchDir dir;
  AioEngine io(AioOptions{});
  try {
    OptimizerSwapper sw(io, options_for(dir.path(), SwapLayout::with_states({10}, 3), true, true, 4));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "zero_optimization.offload_optimizer.buffer_count");
    EXPECT_NE(std::string(e.what()).find("raise buffer_count to 9"), std::string::npos) << e.what();
  }
  // Exactly enough: 3 states, no pipelining → 3 buffers, never more.
  OptimizerSwapper sw(io, options_for(dir.path(), SwapLayout::with_states({10}, 3), false, false, 8));
  EXPECT_EQ(sw.buffers_allocated(), 3);
}

TEST(OptimizerSwapper, RefusesWhenTheDiskIsTooSmall) {
  aio::test::ScratchDir dir;
  AioEngine io(AioOptions{});
  const int64_t huge = int64_t{1} << 50;  // 4 PiB of fp32: more than any test disk
  try {
    // The layout is checked before any buffer is allocated.
    OptimizerSwapper sw(io, options_for(dir.path(), SwapLayout::with_states({huge}, 1), false, false, 4));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "zero_optimization.offload_optimizer.nvme_path");
    EXPECT_NE(std::string(e.what()).find("needs 4194304.0 GiB on "), std::string::npos) << e.what();
  }
  EXPECT_THROW(OptimizerSwapper(io, options_for("/no/such/dir", SwapLayout::with_states({1}, 1), false, false, 4)),
               ConfigError);
}

TEST(OptimizerSwapper, UpdateExceptionDrainsAndPropagates) {
  aio::test::ScratchDir dir;
  AioEngine io(AioOptions{});
  OptimizerSwapper sw(io, options_for(dir.path(), SwapLayout::with_states({4096, 4096, 4096}, 1), true, true, 3));
  std::vector<float> v(4096, 2.f);
  std::vector<const float*> p{v.data()};
  for (int k = 0; k < 3; ++k) sw.write_sub_group(k, p);
  EXPECT_THROW(sw.for_each_sub_group([](int64_t k, std::span<float* const>) {
    if (k == 1) throw std::runtime_error("optimizer failed");
  }), std::runtime_error);
  EXPECT_EQ(io.in_flight(), 0);
  // A missing swap file (deleted under us) is an IoError naming it; the swapper stays usable.
  fs::remove(sw.file_path(2, 0));
  try {
    sw.for_each_sub_group([](int64_t, std::span<float* const>) {});
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("sub_group_2.state0.tensor.swp"), std::string::npos) << e.what();
  }
  EXPECT_EQ(io.in_flight(), 0);
  sw.write_sub_group(2, p);
  int calls = 0;
  sw.for_each_sub_group([&](int64_t, std::span<float* const> s) { calls += s[0][5] == 2.f; });
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace ds::offload
