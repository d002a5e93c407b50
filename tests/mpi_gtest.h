// The main() body of the multi-rank gtest binaries: every rank runs the suite, rank 0 prints gtest's
// output, other ranks print only their failures ("[rank r] ..."), and every rank exits non-zero when
// any rank failed (so mpirun and ctest fail), naming the failing ranks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace ds::test {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.message());
  }

 private:
  int rank_;
};

// Call after ::testing::InitGoogleTest. Returns the process exit code, the same on every rank.
inline int run_all_tests_on_every_rank(comm::Communicator& world, const char* binary) {
  const int rank = world.rank();
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int64_t mine = RUN_ALL_TESTS() != 0 ? 1 : 0;
  std::vector<int64_t> failed(size_t(world.size()), 0);
  world.all_gather(comm::ConstBuffer(&mine, 1), comm::Buffer(failed.data(), int64_t(failed.size())), "test_result");
  std::string bad;
  for (size_t r = 0; r < failed.size(); ++r)
    if (failed[r]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (rank == 0)
    std::printf("[%s] world size %d: %s%s\n", binary, world.size(), bad.empty() ? "all ranks passed" : "FAILED on rank(s) ",
                bad.c_str());
  return bad.empty() ? 0 : 1;
}

}  // namespace ds::test
