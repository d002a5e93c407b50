// ZeRO++ qgZ's exchange (comm/quantized_reduce_scatter.h) over NodeGroups, at every node shape the
// world allows: each rank simulates every rank's inputs (generated from the rank number) and the two
// int4 hops with the same kernels, so the real exchange is checked bit for bit; the result is also
// within the quantization bound of the exact sum. Plus node layouts and their refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "comm/node_groups.h"
#include "comm/quantize.h"
#include "comm/quantized_reduce_scatter.h"
#include "util/error.h"
#include "comm_test_env.h"

namespace ds::comm::test {
namespace {

TEST(NodeLayout, NumbersNodesByTheirLowestRank) {
  const NodeLayout l = node_layout({5, 5, 2, 2, 9, 9}, "k");
  EXPECT_EQ(l.nodes, 3);
  EXPECT_EQ(l.per_node, 2);
  EXPECT_EQ(l.node_of, (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(l.local_of, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(l.rank_at(2, 1), 5);
  const NodeLayout strided = node_layout({0, 1, 0, 1}, "k");  // ranks of a node need not be adjacent
  EXPECT_EQ(strided.rank_at(0, 1), 2);
}

TEST(NodeLayout, UnequalNodesAreRefusedNamingTheKey) {
  try {
    node_layout({0, 0, 1}, "zero_optimization.zero_quantized_gradients");
    FAIL() << "3 ranks on nodes of 2 and 1";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "zero_optimization.zero_quantized_gradients");
    EXPECT_NE(std::string(e.what()).find("2/1"), std::string::npos) << e.what();
  }
}

std::vector<float> rank_input(int rank, int world, int64_t chunk) {
  std::mt19937 gen(uint32_t(100 + rank));
  std::normal_distribution<float> normal(0.0f, 1.0f + float(rank));
  std::vector<float> v(size_t(world * chunk));
  for (auto& x : v) x = normal(gen);
  return v;
}

// What destination `dest` receives: per node, the int4 round trip of each of its ranks' chunks summed
// in local order (raw chunks with one rank per node), then the int4 round trip of each node sum,
// summed in node order (the node sum itself with one node).
std::vector<float> simulate(const NodeLayout& l, int dest, const std::vector<int64_t>& len, int64_t chunk) {
  const int world = l.nodes * l.per_node;
  auto round_trip_add = [&](const float* x, float* acc) {
    std::vector<uint8_t> q(size_t(quant::int4_bytes(len)));
    std::vector<float> s(len.size());
    quant::quantize_int4(x, len, q.data(), s.data());
    quant::dequantize_int4_add(q.data(), len, s.data(), acc);
  };
  std::vector<std::vector<float>> node_sum(size_t(l.nodes), std::vector<float>(size_t(chunk), 0.0f));
  for (int n = 0; n < l.nodes; ++n)
    for (int j = 0; j < l.per_node; ++j) {
      const auto in = rank_input(l.rank_at(n, j), world, chunk);
      const float* x = in.data() + dest * chunk;
      if (l.per_node == 1) std::copy_n(x, chunk, node_sum[size_t(n)].begin());
      else round_trip_add(x, node_sum[size_t(n)].data());
    }
  if (l.nodes == 1) return node_sum[0];
  std::vector<float> out(size_t(chunk), 0.0f);
  for (int n = 0; n < l.nodes; ++n) round_trip_add(node_sum[size_t(n)].data(), out.data());
  return out;
}

TEST(QuantizedReduceScatter, EqualsTheTwoHopSimulationAtEveryNodeShape) {
  Communicator& w = world();
  const int p = w.size();
  const std::vector<int64_t> len = {64, 64, 33, 128, 7};
  const int64_t chunk = 296;
  for (int per_node = 1; per_node <= p; ++per_node) {
    if (p % per_node != 0) continue;
    NodeGroups nodes(w, w.rank() / per_node, "test");
    ASSERT_EQ(nodes.layout().per_node, per_node);
    QuantizedReduceScatter qgz(nodes);
    const auto in = rank_input(w.rank(), p, chunk);
    std::vector<float> out(size_t(chunk), -1.0f);
    qgz.run(in.data(), len, out.data());
    const auto want = simulate(nodes.layout(), w.rank(), len, chunk);
    for (int64_t i = 0; i < chunk; ++i) ASSERT_EQ(out[size_t(i)], want[size_t(i)]) << "per node " << per_node << " i " << i;
    // Each hop's rounding is at most half a step of its group: far below the sum's own size.
    double err = 0, norm = 0;
    for (int64_t i = 0; i < chunk; ++i) {
      double exact = 0;
      for (int r = 0; r < p; ++r) exact += rank_input(r, p, chunk)[size_t(w.rank() * chunk + i)];
      err += (out[size_t(i)] - exact) * (out[size_t(i)] - exact);
      norm += exact * exact;
    }
    EXPECT_LT(std::sqrt(err / norm), p == 1 ? 1e-7 : 0.25) << "per node " << per_node;
  }
}

TEST(QuantizedReduceScatter, MovesAnEighthOfFp32) {
  Communicator& w = world();
  const int p = w.size();
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  NodeGroups nodes(w, w.rank() / (p % 2 == 0 && p > 2 ? 2 : 1), "test");
  QuantizedReduceScatter qgz(nodes);
  const int64_t chunk = 4096;
  const std::vector<int64_t> len(8, 512);
  const auto in = rank_input(w.rank(), p, chunk);
  std::vector<float> out(static_cast<size_t>(chunk));
  const int64_t before = nodes.local().collective_log().sum_wire_bytes("qgz") + nodes.cross().collective_log().sum_wire_bytes("qgz");
  qgz.run(in.data(), len, out.data());
  const int64_t moved = nodes.local().collective_log().sum_wire_bytes("qgz") +
                        nodes.cross().collective_log().sum_wire_bytes("qgz") - before;
  const double fp32 = double(wire_bytes(OpKind::ReduceScatter, int64_t(p) * chunk * 4, p));
  EXPECT_GT(moved, 0);
  EXPECT_LE(moved / fp32, 0.3) << "qgZ wire bytes vs an fp32 reduce-scatter";
}

}  // namespace
}  // namespace ds::comm::test
