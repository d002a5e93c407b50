// parallel_tests' main: builds the world communicator once and runs the suite on every rank
// (tests/mpi_gtest.h).
#include <gtest/gtest.h>

#include "../mpi_gtest.h"
#include "comm/comm.h"
#include "parallel_test_env.h"

namespace ds::parallel::test {
namespace {
std::shared_ptr<comm::Communicator> g_world;  // test-only process state: one world per run
}  // namespace

std::shared_ptr<comm::Communicator> world() { return g_world; }

}  // namespace ds::parallel::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ds::parallel::test::g_world = ds::comm::make_communicator(ds::comm::Backend::Auto);
  const int rc = ds::test::run_all_tests_on_every_rank(*ds::parallel::test::g_world, "parallel_tests");
  ds::parallel::test::g_world.reset();
  return rc;
}
