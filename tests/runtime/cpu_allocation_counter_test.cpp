// CountingCpuAllocator (ds-autotune's activation profile): counts tensors' bytes, and serves
// LibTorch's raw_allocate path, which asserts a DataPtr's context is its data pointer; oneDNN's bf16
// matrix products take their scratch buffers that way (an assert once ended every bf16 profile run).
#include "runtime/cpu_allocation_counter.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ds {
namespace {

TEST(CountingCpuAllocator, CountsTensorsAndRawAllocations) {
  torch::Tensor kept;
  {
    CountingCpuAllocator::Scope counting;
    kept = torch::empty({1000}, torch::kFloat32);
    EXPECT_EQ(counting.live(), 4000);
    void* raw = c10::GetCPUAllocator()->raw_allocate(512);
    EXPECT_EQ(counting.live(), 4512);
    c10::GetCPUAllocator()->raw_deallocate(raw);
    EXPECT_EQ(counting.live(), 4000);
    EXPECT_EQ(counting.peak(), 4512);
    // bf16 products go through oneDNN, whose scratch memory is raw_allocate'd.
    auto a = torch::randn({64, 96}).to(torch::kBFloat16), b = torch::randn({96, 32}).to(torch::kBFloat16);
    auto c = torch::matmul(a, b);
    EXPECT_TRUE(torch::allclose(c.to(torch::kFloat32), torch::matmul(a.to(torch::kFloat32), b.to(torch::kFloat32)),
                                1e-2, 1e-2));
  }
  kept = torch::Tensor();  // freed after the scope: the counter's deleter still runs
  EXPECT_EQ(c10::GetCPUAllocator()->raw_deleter() != nullptr, true);
}

}  // namespace
}  // namespace ds
