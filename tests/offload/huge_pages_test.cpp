// The huge-page CPU allocator: large LibTorch tensors come 2 MiB-aligned (advised MADV_HUGEPAGE),
// small ones from LibTorch's own allocator; tensors from before the switch still free correctly;
// values are untouched. Where the kernel's THP mode is "never" (or DS_HUGE_PAGES=0) it must leave
// the allocator alone and say so.
#include "offload/huge_pages.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>

#include "util/host_alloc.h"

namespace ds::offload {
namespace {

bool huge_expected() {
  const char* env = std::getenv("DS_HUGE_PAGES");
  const std::string mode = thp_mode();
  return !(env != nullptr && std::string(env) == "0") && !mode.empty() && mode != "never";
}

TEST(HugePages, LargeCpuTensorsAreHugePageAlignedAndSmallOnesAreNot) {
  auto before = torch::arange(3 << 20, torch::kFloat32);  // 12 MiB, LibTorch's own allocator
  const std::string line = enable_huge_pages_for_cpu_tensors();
  EXPECT_EQ(enable_huge_pages_for_cpu_tensors(), line) << "every caller sees the same line";
  if (!huge_expected()) {
    EXPECT_NE(line.find("4 KiB pages"), std::string::npos) << line;
    GTEST_SKIP() << line;
  }
  EXPECT_NE(line.find("huge pages"), std::string::npos) << line;
  auto large = torch::ones({5 << 20}, torch::kFloat32);  // 20 MiB
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.data_ptr()) % kHugePage, 0u);
  EXPECT_EQ(large.sum().item<double>(), double(5 << 20));
  auto small = torch::ones({1000}, torch::kFloat32);
  EXPECT_EQ(small.sum().item<double>(), 1000.0);
  EXPECT_EQ(before[(3 << 20) - 1].item<float>(), float((3 << 20) - 1));
  before = torch::Tensor();  // freed by the allocator that made it
  large = torch::Tensor();
}

TEST(HugePages, HostAllocRespectsAlignmentBelowTheThreshold) {
  void* p = alloc_host(8192, 4096);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0u);
  std::free(p);
  void* q = alloc_host(kHugePageMinBytes, 4096);  // large: raised to 2 MiB alignment
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % kHugePage, 0u);
  std::free(q);
}

}  // namespace
}  // namespace ds::offload
