// Stage 0 (plain data parallelism): every rank holds full parameters, gradients and optimizer
// state; rank 0's parameters are broadcast at start and the accumulated gradients are averaged
// across ranks at the boundary in the communication dtype, reduce_bucket_size elements at a time.
#pragma once

#include "zero/model_states.h"
#include "zero/precision_buffers.h"

namespace ds::zero {

class ReplicatedStates final : public ModelStates {
 public:
  ReplicatedStates(const ModelStatesOptions& options, const std::vector<NamedParam>& params);

  int stage() const override { return 0; }
  void before_forward() override { flat_.rebind_grads(); }
  void after_backward() override { precision_->accumulate(); }
  void reduce_gradients() override;
  size_t num_groups() const override { return flat_.groups().size(); }
  const FlatGroup& local_layout(size_t g) const override { return flat_.groups()[g]; }
  torch::Tensor local_params(size_t g) const override { return precision_->storage(g); }
  torch::Tensor local_grads(size_t g) const override { return precision_->fp32_grads(g); }
  bool partitioned() const override { return false; }
  void write_back(const std::vector<torch::Tensor>& masters) override;
  void zero_grads() override { precision_->zero_grads(); }
  torch::Tensor accumulated_grad(const std::string& name) override { return precision_->accum_of(name); }
  int64_t numel() const override { return flat_.numel(); }
  const FlatParameters* flat() const override { return &flat_; }

 private:
  const Config& config_;
  comm::Communicator& comm_;
  FlatParameters flat_;
  std::unique_ptr<PrecisionBuffers> precision_;
};

// Shared by the stages that keep whole parameters: the compute copy is the storage (Params) or an
// extra buffer (Buffers) when the dtypes differ; records it in the ledger.
void account_compute_params(const FlatParameters& flat, const DtypePlan& plan, MemoryLedger& ledger, Tier tier);

}  // namespace ds::zero
