// ZeRO stages 1-2: the all-gather of the updated partitions, started while the optimizer is still
// stepping. The optimizer hands this rank's partition over front to back (ModelStates::
// write_back_range); as soon as the updated prefix covers the next chunk — allgather_bucket_size
// elements in all, the same offsets of every rank's partition —
// that chunk's all-gather starts, and the optimizer goes on with the next piece while it travels.
// Over a slow link the step then costs about the all-gather alone instead of optimizer + gather.
//
// One chunk is in flight at a time (one staging buffer, as the gather inside the step used): it is landed
// — the other ranks' pieces copied into place — when the next chunk starts or at finish(). Every
// rank starts the same chunks in the same order, whatever sizes its pieces come in. A partition
// that fits one chunk is gathered in place at finish(), as before.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "zero/partition.h"
#include "zero/precision_buffers.h"

namespace ds::zero {

class StreamedParamGather {
 public:
  // `partitions[g]` splits `precision.storage(g)`; `bucket`: allgather_bucket_size (elements).
  StreamedParamGather(comm::Communicator& comm, PrecisionBuffers& precision, const std::vector<FlatPartition>& partitions,
                      int64_t bucket);
  ~StreamedParamGather();

  // Elements of one chunk of this rank's partition of group g (a multiple of 64 unless it is the
  // whole partition): the piece size that lets a chunk start as early as possible.
  int64_t chunk(size_t g) const { return chunk_[g]; }
  // [offset, offset + numel) of this rank's partition of group g now holds updated values in
  // storage. Pieces of a group come in order (offset = the end of the previous one).
  void updated(size_t g, int64_t offset, int64_t numel);
  // Every chunk of every group gathered and in place (compute copies refreshed).
  void finish();

 private:
  void start(size_t g, int64_t offset, int64_t numel);
  void land();

  comm::Communicator& comm_;
  PrecisionBuffers& precision_;
  const std::vector<FlatPartition>& partitions_;
  std::vector<int64_t> chunk_;
  std::vector<int64_t> updated_;  // per group: the updated prefix of this rank's partition
  std::vector<int64_t> started_;  // per group: the prefix whose all-gathers have started
  torch::Tensor staging_;         // world · chunk elements of the in-flight chunk (per dtype: bytes)
  struct InFlight {
    size_t group = 0;
    int64_t offset = 0, numel = 0;
    bool in_place = false;
  };
  std::vector<InFlight> in_flight_;  // at most one
  comm::Work work_;
};

}  // namespace ds::zero
