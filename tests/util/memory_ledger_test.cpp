#include "util/memory_ledger.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace ds {

TEST(MemoryLedger, CountsPerTierAndKind) {
  MemoryLedger l;
  l.add(Tier::Device, MemKind::Params, 100);
  l.add(Tier::Device, MemKind::Grads, 40);
  l.add(Tier::Cpu, MemKind::OptimizerState, 800);
  l.add(Tier::Nvme, MemKind::OptimizerState, 8);
  EXPECT_EQ(l.bytes(Tier::Device, MemKind::Params), 100u);
  EXPECT_EQ(l.tier_total(Tier::Device), 140u);
  EXPECT_EQ(l.kind_total(MemKind::OptimizerState), 808u);
  EXPECT_EQ(l.total(), 948u);
  l.release(Tier::Cpu, MemKind::OptimizerState, 800);
  EXPECT_EQ(l.tier_total(Tier::Cpu), 0u);
  EXPECT_THROW(l.release(Tier::Cpu, MemKind::OptimizerState, 1), Error);
}

TEST(MemoryLedger, TableNamesEveryTierAndKind) {
  MemoryLedger l;
  l.add(Tier::Cpu, MemKind::Master, 3ull << 30);
  auto t = l.table();
  for (const char* s : {"device", "cpu", "nvme", "params", "grads", "master", "optim_state", "buffers", "3.00 GiB"})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
}

}  // namespace ds
