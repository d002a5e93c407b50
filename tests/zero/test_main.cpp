// zero_tests' main: builds the world communicator and a topology over it once and runs the suite on
// every rank (tests/mpi_gtest.h).
#include <gtest/gtest.h>

#include "../mpi_gtest.h"
#include "comm/comm.h"
#include "zero_test_env.h"

namespace ds::zero::test {
namespace {
std::shared_ptr<parallel::Topology> g_topology;  // test-only process state: one world per run
}  // namespace

parallel::Topology& topology() { return *g_topology; }

}  // namespace ds::zero::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::shared_ptr<ds::comm::Communicator> world = ds::comm::make_communicator(ds::comm::Backend::Auto);
  ds::zero::test::g_topology = std::make_shared<ds::parallel::Topology>(world);
  const int rc = ds::test::run_all_tests_on_every_rank(*world, "zero_tests");
  ds::zero::test::g_topology.reset();
  return rc;
}
