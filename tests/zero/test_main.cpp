// zero_tests' main: builds the world communicator and a topology over it once, runs the gtest suite
// on every rank, and exits non-zero on every rank when any rank failed (so mpirun and ctest fail).
// Rank 0 prints gtest's output; other ranks print only their failures, prefixed "[rank r]".
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/comm.h"
#include "zero_test_env.h"

namespace ds::zero::test {
namespace {

std::shared_ptr<parallel::Topology> g_topology;  // test-only process state: one world per run

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

}  // namespace

parallel::Topology& topology() { return *g_topology; }

}  // namespace ds::zero::test

int main(int argc, char** argv) {
  using namespace ds::comm;
  using ds::zero::test::g_topology;
  ::testing::InitGoogleTest(&argc, argv);
  std::shared_ptr<Communicator> world = make_communicator(Backend::Auto);
  g_topology = std::make_shared<ds::parallel::Topology>(world);
  const int rank = world->rank();
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ds::zero::test::RankFailurePrinter(rank));
  }
  int32_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  world->all_reduce(Buffer(&failed, 1), ReduceOp::Max, "test_result");
  if (rank == 0)
    std::printf("[zero_tests] world size %d: %s\n", world->size(), failed ? "FAILED on a rank" : "all ranks passed");
  g_topology.reset();
  world.reset();
  return failed;
}
