// The world-1 backend and backend selection.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "comm_test_env.h"
#include "util/error.h"

namespace ds::comm::test {
namespace {

TEST(Single, EveryCollectiveIsACopyOrNoOp) {
  SingleCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  std::vector<float> in = {1, 2, 3}, out(3);
  c.all_reduce(ConstBuffer(in.data(), 3), Buffer(out.data(), 3));
  EXPECT_EQ(out, in);
  c.all_reduce(Buffer(in.data(), 3), ReduceOp::Max);
  EXPECT_EQ(in, (std::vector<float>{1, 2, 3}));
  std::fill(out.begin(), out.end(), 0.0f);
  c.reduce_scatter(ConstBuffer(in.data(), 3), Buffer(out.data(), 3));
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0.0f);
  c.all_gather(ConstBuffer(in.data(), 3), Buffer(out.data(), 3));
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0.0f);
  c.all_to_all(ConstBuffer(in.data(), 3), Buffer(out.data(), 3));
  EXPECT_EQ(out, in);
  c.broadcast(Buffer(in.data(), 3), 0);
  EXPECT_THROW(c.broadcast(Buffer(in.data(), 3), 1), CommError);
  Work w = c.all_reduce_async(Buffer(in.data(), 3));
  EXPECT_TRUE(w.is_completed());
  w.wait();
  c.barrier();
  EXPECT_EQ(c.last_collectives().size(), 8u);
  EXPECT_EQ(c.last_collectives().back().seq, 8u);
}

TEST(Single, AverageGradientsIsTheIdentityOverOneRank) {
  SingleCommunicator c;
  std::vector<float> g = {0.3f, -1.7f, 1e-8f};
  const std::vector<float> orig = g;
  average_gradients(c, Buffer(g.data(), 3));
  EXPECT_EQ(g, orig);
  average_gradients(c, Buffer(g.data(), 3), 3.0, false);  // x * fp32(1/3) * fp32(3/1)
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(g[i], (orig[i] * float(1.0 / 3.0)) * 3.0f);
}

TEST(Factory, ResolvesBackendsFromTheLauncher) {
  EXPECT_EQ(resolve_backend(Backend::Single), Backend::Single);
  EXPECT_EQ(resolve_backend(Backend::Mpi), Backend::Mpi);
  if (!launched_by_mpi()) {
    EXPECT_EQ(resolve_backend(Backend::Auto), Backend::Single);
    // WORLD_SIZE > 1 without an MPI launcher would make N independent single-rank runs: refused.
    ::setenv("WORLD_SIZE", "4", 1);
    try {
      resolve_backend(Backend::Auto);
      ADD_FAILURE() << "WORLD_SIZE=4 without mpirun was accepted";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("mpirun -np 4"), std::string::npos) << e.what();
    }
    ::unsetenv("WORLD_SIZE");
  } else {
    EXPECT_EQ(resolve_backend(Backend::Auto), world().size() > 1 ? Backend::Mpi : Backend::Single);
  }
  EXPECT_EQ(world().backend(), resolve_backend(Backend::Auto));
#ifndef DS_WITH_NCCL
  EXPECT_THROW(make_communicator(Backend::Nccl), NotSupported);
#endif
}

TEST(Factory, MpiCommunicatorReportsItsSetup) {
  if (world().backend() != Backend::Mpi) GTEST_SKIP() << "not launched by mpirun";
  auto& mpi = dynamic_cast<MpiCommunicator&>(world());
  EXPECT_GE(mpi.mpi_thread_level(), 2);  // MPI_THREAD_SERIALIZED or MULTIPLE
  EXPECT_GT(mpi.watchdog_timeout_s(), 0);
}

}  // namespace
}  // namespace ds::comm::test
