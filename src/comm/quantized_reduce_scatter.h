// QuantizedReduceScatter: ZeRO++'s qgZ (DeepSpeed's all_to_all_quant_reduce), a reduce-scatter whose
// data moves as int4 with one fp32 scale per group, in two all-to-all hops over NodeGroups:
//   1. inside the node: every rank quantizes the chunks bound for each local index j (one per node)
//      and sends them to local rank j; each rank dequantizes and sums what its node sent it;
//   2. across nodes: each rank quantizes those node sums per destination node and sends each to the
//      rank with its own local index there; the destination dequantizes and sums the node sums.
// So every value is quantized twice (once per hop) and each hop moves an eighth of fp32's bytes, the
// slow cross-node hop only a chunk per node. DeepSpeed's kernel sums over a node's ranks and then
// averages over nodes, which leaves gradients ranks-per-node times too large; here the result is
// the plain sum (the caller pre-divides, as the ZeRO reduce-scatter does). With one rank per node
// hop 1 moves nothing and is skipped, values are quantized once.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "comm/node_groups.h"

namespace ds::comm {

class QuantizedReduceScatter {
 public:
  // `nodes` must outlive this object; `nodes.layout()` numbers the ranks of the group it was made over.
  explicit QuantizedReduceScatter(const NodeGroups& nodes) : nodes_(nodes) {}

  // `in`: one chunk per group rank, rank-major, each chunk the concatenation of groups of lengths
  // `group_len` (their quantization groups). Starts hop 1 now; the returned function (called once, in
  // the same order on every rank) completes both hops and writes this rank's chunk of the sum over
  // ranks to `out` [sum of group_len]. `in` may be reused once run_async returns; `out` must live
  // until the finisher ran.
  std::function<void()> run_async(const float* in, std::vector<int64_t> group_len, float* out);
  void run(const float* in, std::vector<int64_t> group_len, float* out) { run_async(in, std::move(group_len), out)(); }

 private:
  const NodeGroups& nodes_;
};

}  // namespace ds::comm
