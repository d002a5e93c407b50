// Gradient averaging and the coalesced reduce-scatter (see gradients.h).
#include "comm/gradients.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "comm/kernels.h"
#include "util/error.h"

namespace ds::comm {

void average_gradients(Communicator& comm, Buffer grads, double predivide_factor, bool prescale,
                       std::string_view tag) {
  DS_CHECK(predivide_factor > 0, CommError,
           "gradient_predivide_factor must be > 0 (got " + std::to_string(predivide_factor) + ")");
  const double n = comm.size();
  if (prescale) {
    scale_elements(grads, 1.0 / n);
    comm.all_reduce(grads, ReduceOp::Sum, tag);
    return;
  }
  if (predivide_factor != 1.0) scale_elements(grads, 1.0 / predivide_factor);
  comm.all_reduce(grads, ReduceOp::Sum, tag);
  if (predivide_factor != n) scale_elements(grads, predivide_factor / n);
}

int64_t coalesced_shard_size(int64_t numel, int world) noexcept { return (numel + world - 1) / world; }

int64_t coalesced_shard_count(int64_t numel, int world, int rank) noexcept {
  const int64_t shard = coalesced_shard_size(numel, world);
  return std::clamp<int64_t>(numel - int64_t(rank) * shard, 0, shard);
}

void reduce_scatter_coalesced(Communicator& comm, std::span<const ConstBuffer> inputs,
                              std::span<const Buffer> outputs, std::string_view tag) {
  const int world = comm.size(), rank = comm.rank();
  DS_CHECK(inputs.size() == outputs.size(), CommError,
           "reduce_scatter_coalesced: " + std::to_string(inputs.size()) + " inputs but " +
               std::to_string(outputs.size()) + " outputs (one output shard per input)");
  if (inputs.empty()) return;
  const ElemType type = inputs[0].type;
  const std::size_t es = elem_size(type);
  std::vector<int64_t> offset(inputs.size());  // of each input's shard inside one rank's partition
  int64_t partition = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    DS_CHECK(inputs[i].type == type && outputs[i].type == type, CommError,
             "reduce_scatter_coalesced: buffer " + std::to_string(i) + " is " +
                 std::string(to_string(inputs[i].type)) + "/" + std::string(to_string(outputs[i].type)) +
                 " but buffer 0 is " + std::string(to_string(type)) + " (all must share one type)");
    const int64_t want = coalesced_shard_count(inputs[i].count, world, rank);
    DS_CHECK(outputs[i].count == want, CommError,
             "reduce_scatter_coalesced: output " + std::to_string(i) + " has " + std::to_string(outputs[i].count) +
                 " elements but rank " + std::to_string(rank) + "'s shard of an input of " +
                 std::to_string(inputs[i].count) + " elements over " + std::to_string(world) + " ranks has " +
                 std::to_string(want));
    offset[i] = partition;
    partition += coalesced_shard_size(inputs[i].count, world);
  }
  // Rank-major packing: [rank 0: shard 0 of each input | rank 1: shard 1 of each input | ...].
  std::unique_ptr<char[]> flat_mem(new char[size_t(partition * world) * es]);
  const Buffer flat(flat_mem.get(), partition * world, type);
  zero_elements(flat);
  for (int q = 0; q < world; ++q)
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const int64_t shard = coalesced_shard_size(inputs[i].count, world);
      const int64_t n = coalesced_shard_count(inputs[i].count, world, q);
      copy_elements(flat.slice(int64_t(q) * partition + offset[i], n), inputs[i].slice(int64_t(q) * shard, n));
    }
  divide_elements(flat, world);  // DeepSpeed pre-divides the packed buffer by the world size
  const Buffer mine = flat.slice(int64_t(rank) * partition, partition);
  comm.reduce_scatter(flat, mine, ReduceOp::Sum, tag);
  for (std::size_t i = 0; i < inputs.size(); ++i)
    copy_elements(outputs[i], mine.slice(offset[i], outputs[i].count));
}

}  // namespace ds::comm
