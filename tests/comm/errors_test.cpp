// Argument errors become ds::CommError messages that name the sizes, and an MPI error becomes a
// ds::CommError carrying MPI's error string and the collective's name. Validation happens before
// anything is sent, so every rank throws the same error and stays in step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm_test_env.h"
#include "util/error.h"

namespace ds::comm::test {
namespace {

// The message of the CommError `f` throws ("" if it throws nothing).
template <class F>
std::string comm_error(F f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Errors, ReduceScatterNamesTheSizes) {
  Communicator& c = world();
  const int w = c.size();
  std::vector<float> in(size_t(3 * w + 1)), out(3);
  const std::string msg = comm_error([&] { c.reduce_scatter(ConstBuffer(in.data(), 3 * w + 1), Buffer(out.data(), 3)); });
  EXPECT_TRUE(contains(msg, "reduce_scatter")) << msg;
  EXPECT_TRUE(contains(msg, "input has " + std::to_string(3 * w + 1) + " fp32 elements")) << msg;
  EXPECT_TRUE(contains(msg, "3 x " + std::to_string(w) + " = " + std::to_string(3 * w))) << msg;
}

TEST(Errors, AllGatherNamesTheSizes) {
  Communicator& c = world();
  const int w = c.size();
  std::vector<float> in(5), out(size_t(5 * w + 2));
  const std::string msg = comm_error([&] { c.all_gather(ConstBuffer(in.data(), 5), Buffer(out.data(), 5 * w + 2)); });
  EXPECT_TRUE(contains(msg, "all_gather")) << msg;
  EXPECT_TRUE(contains(msg, "5 x " + std::to_string(w) + " = " + std::to_string(5 * w))) << msg;
}

TEST(Errors, AllToAllAndAllReduceSizeMismatch) {
  Communicator& c = world();
  std::vector<float> a(8), b(9);
  const std::string m1 = comm_error([&] { c.all_to_all(ConstBuffer(a.data(), 8), Buffer(b.data(), 9)); });
  EXPECT_TRUE(contains(m1, "all_to_all") && contains(m1, "8") && contains(m1, "9")) << m1;
  const std::string m2 = comm_error([&] { c.all_reduce(ConstBuffer(a.data(), 8), Buffer(b.data(), 9)); });
  EXPECT_TRUE(contains(m2, "all_reduce") && contains(m2, "8 fp32 elements") && contains(m2, "9")) << m2;
}

TEST(Errors, TypeMismatchRootAndNullBuffer) {
  Communicator& c = world();
  std::vector<float> f(4);
  std::vector<uint16_t> h(4);
  const std::string m1 = comm_error([&] { c.all_reduce(ConstBuffer(f.data(), 4), Buffer(h.data(), 4, ElemType::Bf16)); });
  EXPECT_TRUE(contains(m1, "input is fp32 but output is bf16")) << m1;
  const std::string m2 = comm_error([&] { c.broadcast(Buffer(f.data(), 4), c.size()); });
  EXPECT_TRUE(contains(m2, "root " + std::to_string(c.size()) + " is not a rank")) << m2;
  const std::string m3 = comm_error([&] { c.all_reduce(Buffer(static_cast<float*>(nullptr), 4)); });
  EXPECT_TRUE(contains(m3, "null")) << m3;
  const std::string m4 = comm_error([&] { c.broadcast(Buffer(f.data(), -1), 0); });
  EXPECT_TRUE(contains(m4, "negative")) << m4;
}

TEST(Errors, OverlappingBuffersAreRefused) {
  Communicator& c = world();
  std::vector<float> f(16 * size_t(c.size()));
  const std::string m1 = comm_error([&] { c.all_reduce(ConstBuffer(f.data(), 8), Buffer(f.data() + 4, 8)); });
  EXPECT_TRUE(contains(m1, "overlap")) << m1;
  // In place is fine only as exactly this rank's chunk.
  const int other = (c.rank() + 1) % c.size();
  if (c.size() > 1) {
    const std::string m2 =
        comm_error([&] { c.reduce_scatter(ConstBuffer(f.data(), 4 * c.size()), Buffer(f.data() + 4 * other, 4)); });
    EXPECT_TRUE(contains(m2, "chunk " + std::to_string(c.rank()))) << m2;
  }
  EXPECT_EQ(c.size() > 1 ? c.size() : 1, c.size());
}

TEST(Errors, NoCollectiveIsLoggedForARejectedCall) {
  Communicator& c = world();
  const uint64_t before = c.collective_log().last_seq();
  std::vector<float> f(3);
  EXPECT_THROW(c.reduce_scatter(ConstBuffer(f.data(), 3), Buffer(f.data(), 2)), CommError);
  EXPECT_EQ(c.collective_log().last_seq(), before);
}

// Ranks disagreeing on a size is an MPI-level error: rank 0 receives more than it expects. The ring
// waiting either way (spinning in MPI_Sendrecv, or sleeping between tests of MPI_Isend/MPI_Irecv).
TEST(Errors, MpiErrorCarriesMpiStringAndOpName) {
  if (world().size() != 2) GTEST_SKIP() << "needs the MPI ring communicators at world size 2";
  for (const Variant& v : variants()) {
    if (v.name != "mpi/ring" && v.name != "mpi/sleep") continue;
    Communicator& c = *v.comm;
    const int64_t chunk = c.rank() == 0 ? 30 : 31;  // rank 1 sends 31 elements where rank 0 expects 30
    std::vector<float> in(size_t(2 * chunk), 1.0f), out(static_cast<size_t>(chunk));
    const std::string msg =
        comm_error([&] { c.reduce_scatter(ConstBuffer(in.data(), 2 * chunk), Buffer(out.data(), chunk)); });
    if (c.rank() == 0) {
      EXPECT_TRUE(contains(msg, "reduce_scatter #")) << v.name << ": " << msg;
      EXPECT_TRUE(contains(msg, "the ring's exchange")) << v.name << ": " << msg;
      EXPECT_TRUE(contains(msg, "MPI_ERR_")) << v.name << ": " << msg;
      const auto last = c.last_collectives();
      ASSERT_FALSE(last.empty());
      EXPECT_EQ(last.back().state, CollectiveState::Failed);
    }
    c.barrier("after_truncation");  // the communicator still works
    float x = 1.0f;
    c.all_reduce(Buffer(&x, 1));
    EXPECT_EQ(x, 2.0f) << v.name;
  }
}

}  // namespace
}  // namespace ds::comm::test
