// Stage 3: parameters, gradients and optimizer state all partitioned (reference §5). The model
// must be a LayerList (DESIGN §4) so the coordinator knows when each layer's parameters are used;
// gradients are taken as autograd completes them (GradientBuckets), reduce-scattered per bucket
// into each rank's shards (DeepSpeed's reduce_scatter_coalesced arithmetic: shards packed rank by
// rank, the packing divided by the world size, one reduce-scatter) and accumulated there. With
// zero_quantized_gradients over several nodes the matrices' gradients go as int4 instead (qgZ).
#pragma once

#include "parallel/tp_linear.h"
#include "zero/gradient_buckets.h"
#include "zero/model_states.h"
#include "zero/param_coordinator.h"
#include "zero/quantized_gradients.h"
#include "zero/released_read_watch.h"
#include "zero/sharded_params.h"
#include "zero/sub_group_tracker.h"

namespace ds::zero {

class ShardedStates final : public ModelStates {
 public:
  ShardedStates(const ModelStatesOptions& options, const std::vector<NamedParam>& params);
  ~ShardedStates() override;

  int stage() const override { return 3; }
  std::vector<const comm::Communicator*> own_communicators() const override;
  void forward_started() override;
  void forward_finished() override;
  void after_backward() override;
  void reduce_gradients() override {}
  size_t num_groups() const override { return params_->num_groups(); }
  const FlatGroup& local_layout(size_t g) const override { return params_->layout(g); }
  torch::Tensor local_params(size_t g) const override { return params_->storage(g); }  // NVMe: read
  torch::Tensor local_params_range(size_t g, int64_t offset, int64_t numel) const override {
    return params_->read_range(g, offset, numel);
  }
  bool params_on_nvme() const override { return params_->tier() == Tier::Nvme; }
  torch::Tensor local_grads(size_t g) const override;
  bool partitioned() const override { return true; }
  void write_back(const std::vector<torch::Tensor>& masters) override;
  void write_back_range(size_t g, int64_t offset, const torch::Tensor& master) override;
  void finish_write_back() override;
  std::optional<offload::ParamSwapStats> param_swap_stats() const override { return params_->swap_stats(); }
  void reset_param_swap_stats() override { params_->reset_swap_stats(); }
  void zero_grads() override;
  int64_t numel() const override { return params_->numel(); }
  void hold(const std::vector<std::string>& names) override;
  void unhold(const std::vector<std::string>& names) override;
  bool arm_sub_group_steps(std::function<void(size_t, int64_t, int64_t)> ready) override;

  const ShardedParameters& parameters() const { return *params_; }

 private:
  GradientBuckets::Finisher reduce_bucket(size_t index, const Bucket& bucket, const torch::Tensor& packed);
  // The plain reduce-scatter of `entries`' gradients (all of them without qgZ).
  GradientBuckets::Finisher reduce_exact(const std::vector<BucketEntry>& entries, const torch::Tensor& packed);
  void add_grad(size_t id, const torch::Tensor& shard);  // this rank's averaged shard of id's gradient
  std::vector<size_t> ids_of(const std::vector<std::string>& names) const;

  const Config& config_;
  comm::Communicator& comm_;
  DtypePlan plan_;
  nn::LayerList* layers_;
  std::unique_ptr<comm::Communicator> hpz_;  // zero_hpz_partition_size's group (before params_: it uses it)
  std::unique_ptr<ShardedParameters> params_;
  std::shared_ptr<ParamCoordinator> coordinator_;
  std::vector<torch::Tensor> part_accum_;  // per group [shard numel], grad_accum dtype
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<QuantizedGradients> qgz_;  // zero_quantized_gradients over several nodes
  std::unique_ptr<SubGroupTracker> tracker_;  // with offload overlap
  std::unique_ptr<ReleasedReadWatch> first_forward_watch_;  // until the first forward has finished
  std::vector<std::shared_ptr<parallel::TpLinearImpl>> efficient_linears_;  // switched on by memory_efficient_linear
};

}  // namespace ds::zero
