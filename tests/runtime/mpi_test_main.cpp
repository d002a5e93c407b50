// main() for tests run under mpirun: one communicator lives for the whole process (MPI can be
// initialized and finalized only once, and each engine makes and drops its own communicator), and
// the exit code is the worst rank's, so a failure on any rank fails the ctest entry.
#include <gtest/gtest.h>

#include "comm/comm.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = ds::comm::make_communicator(ds::comm::Backend::Auto);
  int32_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  comm->all_reduce(ds::comm::Buffer(&failed, 1), ds::comm::ReduceOp::Max);
  if (comm->rank() == 0 && failed) std::fprintf(stderr, "distributed tests: a rank failed\n");
  return failed;
}
