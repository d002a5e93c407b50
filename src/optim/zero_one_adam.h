// 0/1 Adam (DeepSpeed's runtime/fp16/onebit/zoadam.py, arXiv:2202.06009); see compressed_optimizer.h.
//   step 1: set-up only.
//   until var_freeze_step: on steps that are multiples of var_interval, Adam's moments from the
//     all-reduced gradient; on the others only the momentum, from the compressed average of the local
//     gradients. var_interval doubles after every var_update_scaler variance updates.
//   after it (variance frozen): each rank steps locally, accumulating its updates; every
//     local_step_interval steps the ranks undo them, exchange the accumulated update (scaled back
//     to momentum units, compressed), re-derive the momentum from it and apply the common update.
//     local_step_interval doubles every local_step_scaler steps, up to local_step_clipper.
// DeepSpeed undoes the local steps by subtracting their accumulated sum, which in fp32 leaves each
// rank a few ulps from where the others are, a drift that grows with every sync. Here the parameters
// at the last sync are kept (one more fp32 copy) and the common update is applied to them, so the
// replicas are equal after every sync; the exchanged quantity is DeepSpeed's.
// Unlike DeepSpeed, a checkpoint restores the variance and local-step schedules where they were
// (DeepSpeed restarts them at interval 1 after a load) and, at the same world size, the error buffers;
// the updates accumulated since the last sync restart from zero (every rank resumes from data-parallel
// rank 0's parameters, which already hold its own).
#pragma once

#include "comm/compressed_allreduce.h"
#include "optim/compressed_optimizer.h"

namespace ds::optim {

struct ZeroOneAdamSchedule {
  int64_t var_freeze_step = 100000;
  int64_t var_update_scaler = 16;
  int64_t local_step_scaler = 32678;
  int64_t local_step_clipper = 16;
};

class ZeroOneAdam final : public CompressedOptimizer {
 public:
  ZeroOneAdam(const ZeroOneAdamSchedule& schedule, comm::Communicator& comm,
              const std::vector<std::vector<ParamSpan>>& params);
  bool wants_reduced_gradients() const override { return reduce_next_; }
  void step(std::span<const CompressedGroup> groups) override;
  nlohmann::json state_json() const override;
  void load_state_json(const nlohmann::json& j) override;
  std::string phase() const override { return frozen_ ? "local steps" : "variance schedule"; }
  int64_t held_bytes() const override;

 private:
  const comm::CompressedAllReduce& exchange() const override { return exchange_; }
  comm::CompressedAllReduce& exchange() override { return exchange_; }
  void exchange_field(std::span<const CompressedGroup> groups, float* CompressedGroup::*field);
  void sync_local_steps(std::span<const CompressedGroup> groups);
  void set_anchor(std::span<const CompressedGroup> groups);
  ZeroOneAdamSchedule schedule_;
  std::vector<std::vector<ParamSpan>> params_;
  comm::CompressedAllReduce exchange_;
  std::vector<std::vector<float>> accumulated_;  // per group ([numel] once stepped): -sum of lr * update since the last sync
  std::vector<std::vector<float>> anchor_;       // per group, once frozen: the parameters at the last sync
  std::vector<double> lr_sum_;                  // per group: sum of lr since the last sync
  bool frozen_ = false;
  bool reduce_next_ = true;
  int64_t var_interval_ = 1, var_counter_ = 0;
  int64_t local_interval_ = 1, local_counter_ = 0;
};

}  // namespace ds::optim
