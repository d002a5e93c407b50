// comm_tests' main: builds the communicators once, runs the gtest suite on every rank, and makes the
// process exit non-zero on every rank when any rank failed (so `mpirun` and ctest fail). Rank 0
// prints gtest's normal output; other ranks print only their failures, prefixed "[rank r]".
//
// `--ds-stall-test` (used by the watchdog ctest entry): rank 1 stops issuing collectives while the
// others enter a barrier; their watchdog (DS_COMM_TIMEOUT_S) must abort the job with a diagnostic.
// `--ds-die-test`: rank 1 dies (exits without finalizing MPI) while the others wait in a barrier;
// the job must end non-zero on its own (mpirun tears down the survivors), with no watchdog set.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "comm_test_env.h"

namespace ds::comm::test {
namespace {

std::unique_ptr<Communicator> g_world;  // test-only process state: one communicator per run
std::unique_ptr<Communicator> g_native;
std::unique_ptr<Communicator> g_ring;
std::unique_ptr<Communicator> g_sleep;
std::vector<Variant> g_variants;

// Non-zero ranks: print each failed assertion and failed test with the rank, nothing else.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

int stall_test() {
  Communicator& comm = world();
  if (comm.rank() == 1) {
    std::fprintf(stderr, "[rank 1] stall test: not entering the barrier\n");
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 0;
  }
  comm.barrier("stall_test_barrier");
  std::fprintf(stderr, "[rank %d] stall test: barrier returned, the watchdog did not fire\n", comm.rank());
  return 0;
}

int die_test() {
  Communicator& comm = world();
  if (comm.rank() == 1) {
    std::fprintf(stderr, "[rank 1] die test: exiting abruptly\n");
    std::_Exit(7);
  }
  comm.barrier("die_test_barrier");
  std::fprintf(stderr, "[rank %d] die test: barrier returned without rank 1\n", comm.rank());
  return 0;
}

}  // namespace

Communicator& world() { return *g_world; }
const std::vector<Variant>& variants() { return g_variants; }

}  // namespace ds::comm::test

int main(int argc, char** argv) {
  using namespace ds::comm;
  using namespace ds::comm::test;
  ::testing::InitGoogleTest(&argc, argv);
  bool stall = false, die = false;
  for (int i = 1; i < argc; ++i) {
    stall = stall || std::strcmp(argv[i], "--ds-stall-test") == 0;
    die = die || std::strcmp(argv[i], "--ds-die-test") == 0;
  }

  g_world = make_communicator(Backend::Auto);
  const int rank = g_world->rank();
  if (stall) return stall_test();
  if (die) return die_test();
  g_variants.push_back({"world/" + std::string(to_string(g_world->backend())), g_world.get()});
  if (g_world->backend() == Backend::Mpi) {
    MpiOptions native;
    native.algorithm = MpiAlgorithmChoice::Native;
    g_native = std::make_unique<MpiCommunicator>(native);
    MpiOptions ring;
    ring.algorithm = MpiAlgorithmChoice::Ring;
    ring.ring_slice_bytes = 1000;  // many slices even for small buffers; not a multiple of 8
    g_ring = std::make_unique<MpiCommunicator>(ring);
    MpiOptions sleep;  // the waits of ranks on hosts of their own: the ring and the reduce chain
    sleep.wait = MpiWaitChoice::Sleep;
    sleep.ring_threshold_bytes = 64;  // all but the smallest buffers leave MPI's own calls
    sleep.ring_slice_bytes = 1 << 16;  // several slices for the larger sizes; each wait may sleep 100 us
    g_sleep = std::make_unique<MpiCommunicator>(sleep);
    g_variants.push_back({"mpi/native", g_native.get()});
    g_variants.push_back({"mpi/ring", g_ring.get()});
    g_variants.push_back({"mpi/sleep", g_sleep.get()});
  }

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int rc = RUN_ALL_TESTS();

  // Every rank learns which ranks failed, so all of them exit non-zero together.
  std::vector<int64_t> failed(size_t(g_world->size()), 0);
  int64_t mine = rc != 0 ? 1 : 0;
  g_world->all_gather(ConstBuffer(&mine, 1), Buffer(failed.data(), int64_t(failed.size())), "test_result");
  std::string bad;
  for (size_t r = 0; r < failed.size(); ++r)
    if (failed[r]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (rank == 0) {
    if (bad.empty())
      std::printf("[comm_tests] world size %d: all ranks passed\n", g_world->size());
    else
      std::printf("[comm_tests] world size %d: FAILED on rank(s) %s\n", g_world->size(), bad.c_str());
  }
  g_sleep.reset();
  g_ring.reset();
  g_native.reset();
  g_world.reset();
  return bad.empty() ? 0 : 1;
}
