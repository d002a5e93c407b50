// parallel_tests' main: builds the world communicator once, runs the gtest suite on every rank, and
// exits non-zero on every rank when any rank failed (so mpirun and ctest fail). Rank 0 prints gtest's
// output; other ranks print only their failures, prefixed "[rank r]".
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "parallel_test_env.h"

namespace ds::parallel::test {
namespace {

std::shared_ptr<comm::Communicator> g_world;  // test-only process state: one world per run

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

std::shared_ptr<comm::Communicator> world() { return g_world; }

}  // namespace ds::parallel::test

int main(int argc, char** argv) {
  using namespace ds::comm;
  using ds::parallel::test::g_world;
  ::testing::InitGoogleTest(&argc, argv);
  g_world = make_communicator(Backend::Auto);
  const int rank = g_world->rank();
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ds::parallel::test::RankFailurePrinter(rank));
  }
  const int rc = RUN_ALL_TESTS();

  std::vector<int64_t> failed(size_t(g_world->size()), 0);
  int64_t mine = rc != 0 ? 1 : 0;
  g_world->all_gather(ConstBuffer(&mine, 1), Buffer(failed.data(), int64_t(failed.size())), "test_result");
  std::string bad;
  for (size_t r = 0; r < failed.size(); ++r)
    if (failed[r]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (rank == 0)
    std::printf("[parallel_tests] world size %d: %s%s\n", g_world->size(), bad.empty() ? "all ranks passed" : "FAILED on rank(s) ",
                bad.c_str());
  g_world.reset();
  return bad.empty() ? 0 : 1;
}
