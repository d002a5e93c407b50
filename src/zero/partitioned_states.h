// Stages 1 and 2: whole 16-bit parameters on every rank; each flat group padded to a multiple of
// 2·world elements and split into world equal partitions (reference §4.1); this rank's optimizer
// (fp32 master and state) covers only its partition. After the step the updated partitions are
// all-gathered (allgather_bucket_size elements at a time), each chunk as soon as the optimizer has
// updated it, while it steps the rest (streamed_param_gather.h) or, with zero_overlap_param_gather,
// behind the next forward (overlapped_param_gather.h).
//   stage 1: full gradients accumulate across micro-steps as at stage 0; at the boundary they are
//            reduce-scattered (reduce_bucket_size) so each rank holds its partition's average.
//   stage 2: no full gradient buffer. GradientBuckets takes each gradient as autograd completes it;
//            every full bucket (reduce_bucket_size) is reduce-scattered at once, and the rank adds
//            its pieces into its partition's accumulator, the only gradients kept between micro-steps.
#pragma once

#include "zero/gradient_buckets.h"
#include "zero/model_states.h"
#include "zero/overlapped_param_gather.h"
#include "zero/partition.h"
#include "zero/precision_buffers.h"
#include "zero/streamed_param_gather.h"
#include "zero/sub_group_tracker.h"
#include "zero/unused_parameters.h"

namespace ds::zero {

class PartitionedStates final : public ModelStates {
 public:
  PartitionedStates(const ModelStatesOptions& options, const std::vector<NamedParam>& params);
  ~PartitionedStates() override;

  int stage() const override { return stage_; }
  void before_forward() override { flat_.rebind_grads(); }
  void forward_finished() override { settle_params(); }
  void settle_params() override;
  std::vector<const comm::Communicator*> own_communicators() const override;
  void after_backward() override;
  void reduce_gradients() override;
  size_t num_groups() const override { return flat_.groups().size(); }
  const FlatGroup& local_layout(size_t g) const override { return layouts_[g]; }
  torch::Tensor local_params(size_t g) const override;
  torch::Tensor local_grads(size_t g) const override;
  bool partitioned() const override { return true; }
  void write_back(const std::vector<torch::Tensor>& masters) override;
  std::vector<int64_t> write_back_pieces() const override;
  void write_back_range(size_t g, int64_t offset, const torch::Tensor& master) override;
  void finish_write_back() override;
  void zero_grads() override;
  torch::Tensor accumulated_grad(const std::string& name) override;
  int64_t numel() const override { return flat_.numel(); }
  bool arm_sub_group_steps(std::function<void(size_t, int64_t, int64_t)> ready) override;
  const FlatParameters* flat() const override { return &flat_; }

  const FlatPartition& partition(size_t g) const { return partitions_[g]; }

 private:
  GradientBuckets::Finisher reduce_bucket(size_t index, const Bucket& bucket, const torch::Tensor& packed);
  struct Piece {
    size_t group;
    int64_t part_offset, bucket_offset, numel;
  };
  // The pieces of `bucket` that fall in each rank's partition (index: rank).
  std::vector<std::vector<Piece>> pieces_of(const Bucket& bucket) const;

  const Config& config_;
  comm::Communicator& comm_;
  int stage_;
  DtypePlan plan_;
  bool offload_;
  FlatParameters flat_;
  std::unique_ptr<PrecisionBuffers> precision_;
  std::vector<FlatPartition> partitions_;
  std::vector<FlatGroup> layouts_;            // this rank's partition of each group
  std::vector<torch::Tensor> reduced_;        // stage 1: the reduced partition, after reduce_gradients
  std::vector<torch::Tensor> host_grads_;     // stage 1 offload: [partition] fp32 host copies
  std::vector<torch::Tensor> part_accum_;     // stage 2: [partition] in grad_accum dtype
  std::vector<std::pair<size_t, size_t>> slot_of_;  // stage 2: bucket param index → (group, slot)
  std::unique_ptr<GradientBuckets> buckets_;  // stage 2
  std::unique_ptr<SubGroupTracker> tracker_;  // stage 2 with offload overlap
  std::unique_ptr<UnusedParameterCheck> unused_;  // ignore_unused_parameters false
  nn::LayerList* layers_ = nullptr;
  // zero_overlap_param_gather: the gather on a communicator of its own, so its buckets, issued as
  // the forward reaches each layer (at times that differ between ranks), never interleave with
  // other collectives of the data-parallel group; and the layers' hooks that wait for them.
  std::unique_ptr<comm::Communicator> gather_comm_;
  std::shared_ptr<OverlappedParamGather> gather_;
  std::unique_ptr<StreamedParamGather> streamed_;  // otherwise: the gather inside the step
};

// The named pieces of `partition`'s share of rank `rank`, as a layout whose offsets are relative
// to the partition's start (what the optimizer and the norm see).
FlatGroup partition_layout(const FlatGroup& group, const FlatPartition& partition, int rank);

}  // namespace ds::zero
