// Every collective over every element type, on every communicator variant (comm_test_env.h), at
// sizes that do and do not divide by the world size, in and out of place. Values are small
// integers, so every type must reproduce the exact result.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "comm_test_env.h"

namespace ds::comm::test {
namespace {

double reduce_expected(ElemType t, ReduceOp op, int world, int64_t i) {
  double acc = sample(t, 0, i);
  for (int r = 1; r < world; ++r) {
    const double v = sample(t, r, i);
    acc = op == ReduceOp::Sum ? acc + v : op == ReduceOp::Max ? std::max(acc, v) : std::min(acc, v);
  }
  return acc;
}

TEST(Collectives, AllReduceEveryTypeOpAndSize) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    const int w = c.size(), r = c.rank();
    for (ElemType t : kAllTypes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
        for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(1001), int64_t(70001)}) {
          TypedVec in(t, n), out(t, n), inplace(t, n);
          for (int64_t i = 0; i < n; ++i) in.set(i, sample(t, r, i)), inplace.set(i, sample(t, r, i));
          c.all_reduce(in.cbuf(), out.buf(), op, "test");
          c.all_reduce(inplace.buf(), op);
          auto want = [&](int64_t i) { return reduce_expected(t, op, w, i); };
          EXPECT_TRUE(all_equal(n, [&](int64_t i) { return out.get(i); }, want)) << where(v, t, n) << " " << to_string(op);
          EXPECT_TRUE(all_equal(n, [&](int64_t i) { return inplace.get(i); }, want))
              << where(v, t, n) << " in place " << to_string(op);
          EXPECT_TRUE(all_equal(n, [&](int64_t i) { return in.get(i); }, [&](int64_t i) { return sample(t, r, i); }))
              << where(v, t, n) << ": the input changed";
        }
  }
}

TEST(Collectives, ReduceScatterEveryTypeAndChunk) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    const int w = c.size(), r = c.rank();
    for (ElemType t : kAllTypes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
        for (int64_t chunk : {int64_t(0), int64_t(1), int64_t(3), int64_t(1001), int64_t(40001)}) {
          TypedVec in(t, chunk * w), out(t, chunk), inplace(t, chunk * w);
          for (int64_t i = 0; i < chunk * w; ++i) in.set(i, sample(t, r, i)), inplace.set(i, sample(t, r, i));
          c.reduce_scatter(in.cbuf(), out.buf(), op, "test");
          c.reduce_scatter(inplace.cbuf(), inplace.buf().slice(chunk * r, chunk), op, "in_place");
          auto want = [&](int64_t i) { return reduce_expected(t, op, w, chunk * r + i); };
          EXPECT_TRUE(all_equal(chunk, [&](int64_t i) { return out.get(i); }, want)) << where(v, t, chunk);
          EXPECT_TRUE(all_equal(chunk, [&](int64_t i) { return inplace.get(chunk * r + i); }, want))
              << where(v, t, chunk) << " in place";
          EXPECT_TRUE(all_equal(chunk * w, [&](int64_t i) { return in.get(i); }, [&](int64_t i) { return sample(t, r, i); }))
              << where(v, t, chunk) << ": the input changed";
        }
  }
}

TEST(Collectives, AllGatherEveryTypeAndChunk) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    const int w = c.size(), r = c.rank();
    for (ElemType t : kAllTypes)
      for (int64_t chunk : {int64_t(0), int64_t(1), int64_t(5), int64_t(1001), int64_t(40001)}) {
        TypedVec in(t, chunk), out(t, chunk * w), inplace(t, chunk * w);
        for (int64_t i = 0; i < chunk; ++i) in.set(i, sample(t, r, i)), inplace.set(chunk * r + i, sample(t, r, i));
        c.all_gather(in.cbuf(), out.buf(), "test");
        c.all_gather(inplace.cbuf().slice(chunk * r, chunk), inplace.buf(), "in_place");
        auto want = [&](int64_t i) { return sample(t, int(i / std::max<int64_t>(chunk, 1)), i % std::max<int64_t>(chunk, 1)); };
        EXPECT_TRUE(all_equal(chunk * w, [&](int64_t i) { return out.get(i); }, want)) << where(v, t, chunk);
        EXPECT_TRUE(all_equal(chunk * w, [&](int64_t i) { return inplace.get(i); }, want)) << where(v, t, chunk) << " in place";
      }
  }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    for (ElemType t : kAllTypes)
      for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(100003)})
        for (int root = 0; root < c.size(); ++root) {
          TypedVec b(t, n);
          for (int64_t i = 0; i < n; ++i) b.set(i, sample(t, c.rank(), i));
          c.broadcast(b.buf(), root, "test");
          EXPECT_TRUE(all_equal(n, [&](int64_t i) { return b.get(i); }, [&](int64_t i) { return sample(t, root, i); }))
              << where(v, t, n) << " root " << root;
        }
  }
}

// The root gets op over ranks; every other rank's buffer is left exactly as it was.
TEST(Collectives, ReduceToEveryRootLeavesTheOthersAlone) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    const int w = c.size(), r = c.rank();
    for (ElemType t : kAllTypes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
        for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(100003)})
          for (int root = 0; root < w; ++root) {
            TypedVec b(t, n);
            for (int64_t i = 0; i < n; ++i) b.set(i, sample(t, r, i));
            c.reduce(b.buf(), root, op, "test");
            if (r == root)
              EXPECT_TRUE(all_equal(n, [&](int64_t i) { return b.get(i); },
                                    [&](int64_t i) { return reduce_expected(t, op, w, i); }))
                  << where(v, t, n) << " root " << root << " " << to_string(op);
            else
              EXPECT_TRUE(all_equal(n, [&](int64_t i) { return b.get(i); }, [&](int64_t i) { return sample(t, r, i); }))
                  << where(v, t, n) << " root " << root << ": a non-root buffer changed";
          }
  }
}

TEST(Collectives, AllToAllEveryTypeAndChunk) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    const int w = c.size(), r = c.rank();
    // Element i of the chunk rank `from` sends to rank `to`.
    auto value = [](int from, int to, int64_t i) { return double((from * 3 + to * 5 + i) % 11); };
    for (ElemType t : kAllTypes)
      for (int64_t chunk : {int64_t(0), int64_t(1), int64_t(5), int64_t(1001)}) {
        TypedVec in(t, chunk * w), out(t, chunk * w), inplace(t, chunk * w);
        for (int j = 0; j < w; ++j)
          for (int64_t i = 0; i < chunk; ++i) in.set(chunk * j + i, value(r, j, i)), inplace.set(chunk * j + i, value(r, j, i));
        c.all_to_all(in.cbuf(), out.buf(), "test");
        c.all_to_all(inplace.cbuf(), inplace.buf(), "in_place");
        auto want = [&](int64_t i) { return value(int(i / chunk), r, i % chunk); };
        EXPECT_TRUE(all_equal(chunk * w, [&](int64_t i) { return out.get(i); }, want)) << where(v, t, chunk);
        EXPECT_TRUE(all_equal(chunk * w, [&](int64_t i) { return inplace.get(i); }, want)) << where(v, t, chunk) << " in place";
      }
  }
}

TEST(Collectives, BarrierAndRankSize) {
  for (const Variant& v : variants()) {
    EXPECT_GE(v.comm->size(), 1);
    EXPECT_GE(v.comm->rank(), 0);
    EXPECT_LT(v.comm->rank(), v.comm->size());
    EXPECT_EQ(v.comm->rank(), world().rank()) << v.name;
    EXPECT_EQ(v.comm->size(), launcher_world_size()) << v.name;
    v.comm->barrier("test");
  }
}

// Every rank must end an all_reduce with the same bits, or data-parallel replicas drift apart.
TEST(Collectives, AllReduceResultIsBitwiseIdenticalOnEveryRank) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    for (ElemType t : {ElemType::Fp32, ElemType::Bf16, ElemType::Fp16})
      for (int64_t n : {int64_t(37), int64_t(200003)}) {
        TypedVec x(t, n);
        for (int64_t i = 0; i < n; ++i) x.set(i, std::sin(double(i) * 0.37 + c.rank() * 1.3) * 3.0);
        c.all_reduce(x.buf());
        const int64_t bytes = x.buf().bytes();
        std::vector<uint8_t> all(size_t(bytes * c.size()));
        c.all_gather(ConstBuffer(x.raw().data(), bytes, ElemType::UInt8), Buffer(all.data(), int64_t(all.size())));
        for (int q = 0; q < c.size(); ++q)
          EXPECT_EQ(0, std::memcmp(all.data() + q * bytes, all.data(), size_t(bytes)))
              << where(v, t, n) << ": rank " << q << " differs from rank 0";
      }
  }
}

// The reduce chain (sleeping waits) adds in a fixed order, root+1, root+2, ..., root, whatever the
// timing: the root's result is that float sum bit for bit.
TEST(Collectives, ReduceChainSumsInChainOrder) {
  for (const Variant& v : variants()) {
    if (v.name != "mpi/sleep") continue;
    Communicator& c = *v.comm;
    const int w = c.size(), r = c.rank();
    const int64_t n = 100003;  // 7 slices of 16384 floats (mpi/sleep's 64 KiB)
    auto x = [](int rank, int64_t i) { return float(std::sin(double(i) * 0.37 + rank * 1.3) * 3.0); };
    for (int root = 0; root < w; ++root) {
      std::vector<float> b(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) b[size_t(i)] = x(r, i);
      c.reduce(Buffer(b.data(), n), root, ReduceOp::Sum, "chain");
      if (r != root) continue;
      int64_t bad = -1;
      for (int64_t i = 0; i < n && bad < 0; ++i) {
        float want = x((root + 1) % w, i);
        for (int k = 2; k <= w; ++k) want += x((root + k) % w, i);
        if (w == 1) want = x(root, i);
        if (std::memcmp(&want, &b[size_t(i)], 4) != 0) bad = i;
      }
      EXPECT_EQ(bad, -1) << "root " << root << ": element " << bad << " is not the chain-order sum";
    }
  }
}

// Ranks wait by sleeping exactly when every rank of the communicator has a host of its own (MPI's
// processor names all differ), unless the options or DS_COMM_WAIT say otherwise.
TEST(CommWait, AutoSleepsExactlyWhenEveryRankHasItsOwnHost) {
  if (world().backend() != Backend::Mpi) GTEST_SKIP() << "MPI only";
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<char> names(size_t(MPI_MAX_PROCESSOR_NAME) * size_t(world().size()));
  world().all_gather(ConstBuffer(name, MPI_MAX_PROCESSOR_NAME, ElemType::UInt8),
                     Buffer(names.data(), int64_t(names.size()), ElemType::UInt8), "names");
  std::set<std::string> hosts;
  for (int q = 0; q < world().size(); ++q) hosts.insert(names.data() + size_t(q) * MPI_MAX_PROCESSOR_NAME);
  const bool own_hosts = world().size() > 1 && int(hosts.size()) == world().size();
  EXPECT_EQ(static_cast<MpiCommunicator&>(world()).sleeps_while_waiting(), own_hosts);
  for (const Variant& v : variants())
    EXPECT_EQ(static_cast<MpiCommunicator*>(v.comm)->sleeps_while_waiting(), v.name == "mpi/sleep" || own_hosts)
        << v.name;
  auto pair = world().split(world().rank() / 2, world().rank());  // {0, 1}, {2, 3}: hosts of their own too
  EXPECT_EQ(static_cast<MpiCommunicator&>(*pair).sleeps_while_waiting(), own_hosts && pair->size() > 1);

  ::setenv("DS_COMM_WAIT", "sleep", 1);
  EXPECT_TRUE(MpiCommunicator().sleeps_while_waiting());
  MpiOptions spin;
  spin.wait = MpiWaitChoice::Spin;  // the options win over the environment
  EXPECT_FALSE(MpiCommunicator(spin).sleeps_while_waiting());
  ::setenv("DS_COMM_WAIT", "spin", 1);
  EXPECT_FALSE(MpiCommunicator().sleeps_while_waiting());
  ::setenv("DS_COMM_WAIT", "nap", 1);
  try {
    MpiCommunicator bad;
    ADD_FAILURE() << "DS_COMM_WAIT=nap was taken";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("DS_COMM_WAIT='nap'"), std::string::npos) << e.what();
  }
  ::unsetenv("DS_COMM_WAIT");
}

}  // namespace
}  // namespace ds::comm::test
