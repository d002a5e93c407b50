// The world-1 backend and backend selection.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <optional>
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

// An unsigned MCA variable as MPI initialized it, through MPI's tool interface; nullopt where this
// MPI has no variable of that name (not Open MPI, or the component not loaded).
std::optional<unsigned> mpi_control_variable(const char* wanted) {
  int provided = 0, count = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return std::nullopt;
  std::optional<unsigned> value;
  MPI_T_cvar_get_num(&count);
  for (int i = 0; i < count && !value; ++i) {
    char name[256], desc[8];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, binding = 0, scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &binding, &scope) !=
            MPI_SUCCESS ||
        std::strcmp(name, wanted) != 0 || (type != MPI_UNSIGNED && type != MPI_INT))
      continue;
    MPI_T_cvar_handle handle;
    int n = 0;
    unsigned v = 0;
    if (MPI_T_cvar_handle_alloc(i, nullptr, &handle, &n) != MPI_SUCCESS) continue;
    if (n == 1 && MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) value = v;
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
}

// Between hosts the TCP transport must move large messages by send/receive, not its emulated RDMA
// put, under which two messages crossing one link in opposite directions took turns (comm.md).
TEST(Factory, OpenMpiTcpTransportLeavesOutItsEmulatedPut) {
  if (world().backend() != Backend::Mpi) GTEST_SKIP() << "not launched by mpirun";
  const char* env = std::getenv("OMPI_MCA_btl_tcp_flags");
  ASSERT_NE(env, nullptr) << "the communicator exports OMPI_MCA_btl_tcp_flags before MPI_Init";
  if (std::string(env) != "send,inplace,need-ack,need-csum") GTEST_SKIP() << "the environment sets it: " << env;
  const auto flags = mpi_control_variable("btl_tcp_flags");
  if (!flags) GTEST_SKIP() << "this MPI has no btl_tcp_flags variable (not Open MPI, or no TCP transport)";
  EXPECT_EQ(*flags & 0x1u, 0x1u) << "send";  // Open MPI's MCA_BTL_FLAGS_SEND
  EXPECT_EQ(*flags & 0x2u, 0u) << "put left in: flags " << *flags;  // MCA_BTL_FLAGS_PUT
}

}  // namespace
}  // namespace ds::comm::test
