// The optimizer over flat groups: per group an fp32 master span (the parameters themselves when
// they are fp32, else an fp32 copy written back after each step), and fp32 optimizer state in
// flat buffers of the same length. Stage 0 runs it on whole groups; ZeRO runs it on partitions.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "optim/adam.h"
#include "util/memory_ledger.h"
#include "zero/flat_params.h"

namespace ds::zero {

// Per param-group settings; unset fields take the optimizer's defaults.
struct GroupHyperparams {
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

struct FlatAdamOptions {
  optim::AdamHyperparams defaults;
  std::vector<GroupHyperparams> groups;  // indexed by FlatGroup::param_group; may be shorter
};

class FlatAdamOptimizer {
 public:
  FlatAdamOptimizer(FlatParameters& flat, FlatAdamOptions options, MemoryLedger& ledger, Tier tier);

  // One Adam step over every group from its gradient buffer (already averaged and clipped).
  void step();

  // Learning rate per FlatGroup (what get_lr reports; schedulers set it).
  std::vector<double> lrs() const;
  void set_lr(size_t group, double lr);
  size_t num_groups() const { return groups_.size(); }
  std::int64_t step_count() const { return state_.step(); }

  // Optimizer state tensors of a group, for checkpoints and tests.
  const torch::Tensor& master(size_t g) const { return groups_[g].master; }
  const torch::Tensor& exp_avg(size_t g) const { return groups_[g].exp_avg; }
  const torch::Tensor& exp_avg_sq(size_t g) const { return groups_[g].exp_avg_sq; }

 private:
  struct Group {
    optim::AdamHyperparams hp;
    torch::Tensor master;      // fp32 [padded_numel]; aliases FlatGroup::params when fp32
    torch::Tensor exp_avg;     // fp32 [padded_numel]
    torch::Tensor exp_avg_sq;  // fp32 [padded_numel]
    bool master_aliases_params = false;
  };
  FlatParameters& flat_;
  std::vector<Group> groups_;
  optim::AdamStepState state_;
};

}  // namespace ds::zero
