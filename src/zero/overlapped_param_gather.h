// ZeRO stages 1-2 with zero_overlap_param_gather (ours; Megatron's overlap_param_gather): the
// all-gather of the updated partitions runs behind the next forward instead of inside step().
//
// The gather is cut into buckets of allgather_bucket_size elements, each covering the same offsets
// of every rank's partition (StreamedParamGather cuts its chunks so too, tile-aligned), and the
// buckets are issued in the order the layers first read them, the same order on every rank. Before layer i runs (LayerList hook)
// the buckets it reads from other ranks' partitions are waited for and copied into place; at most
// kInFlight buckets' staging buffers exist, refilled as buckets land. finish() makes every
// parameter current: the engine calls it after each forward and before anything else reads or
// writes parameters (checkpoints, exports, the next step).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "nn/layer_list.h"
#include "zero/flat_params.h"
#include "zero/precision_buffers.h"

namespace ds::zero {

class OverlappedParamGather final : public nn::LayerHooks {
 public:
  static constexpr size_t kInFlight = 2;  // staging buffers: one bucket on the wire, the next queued

  // `flat` and `precision` hold the groups (each world equal partitions); `layers` names what
  // each layer reads. All must outlive this object.
  OverlappedParamGather(comm::Communicator& comm, const FlatParameters& flat, PrecisionBuffers& precision,
                        const nn::LayerList& layers, int64_t bucket);
  ~OverlappedParamGather() override;

  // This rank's partitions were updated: start gathering the others' (no-op at world 1).
  void start();
  // Every bucket gathered and in place; the parameters are current.
  void finish();

  // The staging buffers' bytes (for the memory ledger).
  uint64_t staging_bytes() const;

  void before_forward(size_t layer) override;

 private:
  struct Bucket {
    size_t group;
    int64_t offset, numel;  // the same [offset, offset + numel) of every rank's partition
  };
  void issue();               // the next bucket in order into a free staging buffer
  void land();                // waits for the oldest bucket in flight and copies it into place
  void land_until(size_t n);  // until the first n buckets of order_ are in place
  int64_t chunk(size_t group) const;

  comm::Communicator& comm_;
  const FlatParameters& flat_;
  PrecisionBuffers& precision_;
  std::vector<Bucket> order_;           // issue order: by the first layer reading each bucket
  std::vector<size_t> needed_before_;   // layer i: buckets of order_ it needs landed (a prefix)
  std::vector<torch::Tensor> staging_;  // kInFlight buffers of world · max bucket elements, per dtype
  std::vector<comm::Work> work_;        // declared after staging_: destroyed (waited) first
  size_t issued_ = 0, done_ = 0;
  bool started_ = false;
};

}  // namespace ds::zero
