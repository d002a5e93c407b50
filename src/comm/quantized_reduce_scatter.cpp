#include "comm/quantized_reduce_scatter.h"

#include <memory>
#include <numeric>

#include "comm/quantize.h"

namespace ds::comm {
namespace {

// int4 chunks and their scales, `count` of them back to back (one all-to-all block per peer).
struct QuantizedChunks {
  int64_t bytes = 0, groups = 0;  // per chunk
  std::vector<uint8_t> values;
  std::vector<float> scales;
  QuantizedChunks(std::span<const int64_t> group_len, int64_t count)
      : bytes(quant::int4_bytes(group_len)), groups(int64_t(group_len.size())),
        values(size_t(bytes * count)), scales(size_t(groups * count)) {}
  uint8_t* values_at(int64_t i) { return values.data() + i * bytes; }
  float* scales_at(int64_t i) { return scales.data() + i * groups; }
};

struct State {
  std::vector<int64_t> len;
  int64_t chunk = 0;
  std::unique_ptr<QuantizedChunks> sent, got;  // hop 1 (absent with one rank per node)
  Work values, scales;
  std::vector<float> node_sum;                 // [nodes, chunk]: this node's sums, per destination node
};

}  // namespace

std::function<void()> QuantizedReduceScatter::run_async(const float* in, std::vector<int64_t> group_len, float* out) {
  const NodeLayout& l = nodes_.layout();
  const int nodes = l.nodes, per_node = l.per_node;
  auto s = std::make_shared<State>();
  s->len = std::move(group_len);
  s->chunk = std::accumulate(s->len.begin(), s->len.end(), int64_t(0));
  auto chunk_for = [&](int node, int local) { return in + int64_t(l.rank_at(node, local)) * s->chunk; };
  if (per_node == 1) {  // nothing to reduce inside the node: its "sum" is this rank's own chunks
    s->node_sum.resize(size_t(nodes * s->chunk));
    for (int n = 0; n < nodes; ++n) std::copy_n(chunk_for(n, 0), s->chunk, s->node_sum.data() + n * s->chunk);
  } else {
    // Hop 1: the block for local rank j holds the chunks of destinations (node n, local j), n in order.
    s->sent = std::make_unique<QuantizedChunks>(s->len, int64_t(per_node) * nodes);
    s->got = std::make_unique<QuantizedChunks>(s->len, int64_t(per_node) * nodes);
    for (int j = 0; j < per_node; ++j)
      for (int n = 0; n < nodes; ++n) {
        const int64_t i = int64_t(j) * nodes + n;
        quant::quantize_int4(chunk_for(n, j), s->len, s->sent->values_at(i), s->sent->scales_at(i));
      }
    Communicator& local = nodes_.local();
    s->values = local.all_to_all_async(ConstBuffer(s->sent->values.data(), int64_t(s->sent->values.size())),
                                       Buffer(s->got->values.data(), int64_t(s->got->values.size())), "qgz_local_int4");
    s->scales = local.all_to_all_async(ConstBuffer(s->sent->scales.data(), int64_t(s->sent->scales.size())),
                                       Buffer(s->got->scales.data(), int64_t(s->got->scales.size())), "qgz_local_scales");
  }
  return [this, s, out, nodes, per_node] {
    if (s->got) {
      s->values.wait();
      s->scales.wait();
      s->node_sum.assign(size_t(nodes * s->chunk), 0.0f);
      for (int j = 0; j < per_node; ++j)  // from local rank j: its chunks for (node n, my local index)
        for (int n = 0; n < nodes; ++n) {
          const int64_t i = int64_t(j) * nodes + n;
          quant::dequantize_int4_add(s->got->values_at(i), s->len, s->got->scales_at(i), s->node_sum.data() + n * s->chunk);
        }
    }
    if (nodes == 1) {
      std::copy_n(s->node_sum.data(), s->chunk, out);
      return;
    }
    // Hop 2: the node sum for destination node n goes to node n's rank with this local index.
    QuantizedChunks sent(s->len, nodes), got(s->len, nodes);
    for (int n = 0; n < nodes; ++n)
      quant::quantize_int4(s->node_sum.data() + n * s->chunk, s->len, sent.values_at(n), sent.scales_at(n));
    Communicator& cross = nodes_.cross();
    Work values = cross.all_to_all_async(ConstBuffer(sent.values.data(), int64_t(sent.values.size())),
                                         Buffer(got.values.data(), int64_t(got.values.size())), "qgz_cross_int4");
    cross.all_to_all(ConstBuffer(sent.scales.data(), int64_t(sent.scales.size())),
                     Buffer(got.scales.data(), int64_t(got.scales.size())), "qgz_cross_scales");
    values.wait();
    std::fill_n(out, s->chunk, 0.0f);
    for (int n = 0; n < nodes; ++n) quant::dequantize_int4_add(got.values_at(n), s->len, got.scales_at(n), out);
  };
}

}  // namespace ds::comm
