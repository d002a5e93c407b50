// The optimizer over flat groups: per group an fp32 master span (the parameters themselves when
// they are fp32, else an fp32 copy) and its state spans (Adam's two moments, SGD's momentum,
// Adagrad's sum, ...), all [padded_numel]. It steps from fp32 gradient spans the caller hands in
// (already unscaled and clipped), so stage 0, ZeRO partitions and offload tiers share it.
#pragma once

#include <torch/torch.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "aio/aio_engine.h"
#include "config/aio_config.h"
#include "config/optimizer_config.h"
#include "config/zero_config.h"
#include "config/zero_plan.h"
#include "offload/optimizer_swapper.h"
#include "comm/communicator.h"
#include "optim/adam.h"
#include "optim/compressed_optimizer.h"
#include "util/memory_ledger.h"
#include "zero/flat_params.h"

namespace ds::zero {

// Per param-group settings; unset fields take the optimizer's config values.
struct GroupHyperparams {
  std::optional<double> lr;
  std::optional<double> weight_decay;
  torch::Tensor exp_avg_mask{};  // ParamGroup::exp_avg_mask (the 1-bit optimizers only)
};

// KernelCalls (config/zero_plan.h): how DeepSpeed calls its Adam kernel decides how beta^t is rounded
// (reference §19): stage 0 once per parameter tensor (the first tensor of a step advances beta^t by an
// fp32 multiply, the rest recompute it with pow()), ZeRO stages once per flat partition.

// How the master weights and state are held. Offloaded (tier Cpu), the fp32 master is always a host
// copy — never the device parameters, even when those are fp32 — in (pinned) host memory, and Adam
// steps the span in sub-groups of `sub_group_size` elements (DeepSpeed's sub_group_size), the unit
// the NVMe swapper streams.
struct MasterPlacement {
  bool alias_fp32 = true;
  bool pinned = false;
  int64_t sub_group_size = 0;  // 0: the whole span in one kernel call
  // ZeRO-Infinity (offload_optimizer.device "nvme"): master and state live in swap files and come
  // into RAM one sub-group at a time (offload::OptimizerSwapper over an aio::AioEngine).
  const OffloadOptimizerConfig* nvme = nullptr;
  AioConfig aio;
  // With nvme: where the initial master comes from, one sub-group at a time (group, offset, numel
  // → model-dtype tensor), so a caller whose parameters are on disk never reads them all at once;
  // unset: the `storage` tensors.
  std::function<torch::Tensor(size_t, int64_t, int64_t)> read_params;
  int zero_stage = 0;
  int rank = 0;
};

class FlatOptimizer {
 public:
  // `storage[g]` holds group g's parameters in the model dtype ([padded_numel]); the master copy is
  // made from it (or aliases it when fp32). With placement.read_params it may be undefined. `layout` gives the parameter segments (Lamb's norms).
  // The 1-bit family (OneBitAdam, ZeroOneAdam, OneBitLamb) exchanges over `data_parallel`, which must
  // then be given and outlive the optimizer; the others never communicate. `kept_apart` names the
  // parameters with copies on other pipeline stages (optim::ParamSpan::apart).
  FlatOptimizer(const OptimizerConfig& config, const std::vector<GroupHyperparams>& overrides,
                const std::vector<FlatGroup>& layout, const std::vector<torch::Tensor>& storage,
                MemoryLedger& ledger, Tier tier, KernelCalls calls = KernelCalls::PerPartition,
                MasterPlacement placement = {}, comm::Communicator* data_parallel = nullptr,
                const std::vector<std::string>& kept_apart = {});

  // Receives the updated fp32 master of [offset, offset + master.numel()) of group g: the whole
  // span in RAM, one sub-group at a time when swapped (valid only during the call).
  using MasterSink = std::function<void(size_t g, int64_t offset, const torch::Tensor& master)>;
  // One step of every group from fp32 gradient spans [padded_numel], one per group; `sink` (if
  // given) sees every updated master span — the only way to see them when swapped. pieces[g] > 0:
  // an elementwise optimizer steps group g that many elements at a time (front to back) and hands
  // each piece to the sink as soon as it is updated, so the parameters' exchange can start (the
  // numbers are the same: pieces are tile-aligned). Lamb and the 1-bit family step whole groups.
  void step(const std::vector<torch::Tensor>& fp32_grads, const MasterSink& sink = {},
            const std::vector<int64_t>& pieces = {});
  // The same step in pieces (ZeRO-Offload overlap): begin_step() once, then step_range over
  // disjoint ranges that together cover every group's span. `fp32_grads` is group g's whole span.
  // Not for Lamb (its trust ratio needs whole parameters).
  void begin_step();
  void step_range(size_t g, int64_t begin, int64_t end, const torch::Tensor& fp32_grads);

  OptimizerType type() const { return config_.type; }
  // Whether the gradients must be all-reduced before the next step (false while a 1-bit optimizer
  // exchanges its momenta itself).
  bool wants_reduced_gradients() const { return !compressed_ || compressed_->wants_reduced_gradients(); }
  // The 1-bit family's per-rank error buffers as an fp32 tensor for this rank's checkpoint file
  // (undefined for the others); load_rank_state restores them when they fit (same world size) and
  // zeroes them otherwise (undefined: DeepSpeed's reset). Returns whether they were restored.
  torch::Tensor rank_state() const;
  bool load_rank_state(const torch::Tensor& saved);
  // The 1-bit family's own state (phase, counters), or null for the others.
  const optim::CompressedOptimizer* compressed() const { return compressed_.get(); }
  size_t num_groups() const { return groups_.size(); }
  int64_t step_count() const { return steps_; }
  // Checkpoints: the step count and Adam's fp32 beta powers, restored exactly on load.
  optim::AdamStepState::Snapshot adam_state() const { return adam_state_.snapshot(); }
  // The step counters as the engine's checkpoint JSON holds them ({"type", "step", "adam": {...}}).
  nlohmann::json state_json() const;
  void load_state_json(const nlohmann::json& j);
  void restore_counters(int64_t steps, const optim::AdamStepState::Snapshot& adam) {
    steps_ = steps;
    adam_state_.restore(adam);
  }
  std::vector<double> lrs() const;
  std::vector<std::array<double, 2>> betas() const;
  void set_lr(size_t group, double lr);
  void set_betas(size_t group, std::array<double, 2> betas);

  // The fp32 master of group g; undefined when swapped (it lives in the swap files: step's sink,
  // read_sub_group).
  const torch::Tensor& master(size_t g) const { return groups_[g].master; }
  bool swapped() const { return swapper_ != nullptr; }
  // Swapped state, one sub-group at a time (checkpoints stream these): [offset, offset + numel) of
  // group `group`; read/write take 1 + state_names().size() pointers to numel floats each.
  struct SubGroupSpan {
    size_t group;
    int64_t offset, numel;
  };
  std::vector<SubGroupSpan> sub_group_spans() const;
  void read_sub_group(int64_t k, std::span<float* const> states) { swapper_->read_sub_group(k, states); }
  void write_sub_group(int64_t k, std::span<const float* const> states) { swapper_->write_sub_group(k, states); }
  // The swapper's counters (bytes moved, time waited), for the per-phase report; nullopt in RAM.
  std::optional<offload::SwapStats> swap_stats() const;
  void reset_swap_stats() {
    if (swapper_) swapper_->reset_stats();
  }
  std::vector<std::string> state_names() const { return state_names_; }
  bool master_aliases_storage(size_t g) const { return groups_[g].master_aliases; }
  // Named state spans of group g ("exp_avg", "exp_avg_sq", "momentum_buffer", "sum").
  const std::map<std::string, torch::Tensor>& state(size_t g) const { return groups_[g].state; }
  int64_t group_numel(size_t g) const { return groups_[g].numel; }

 private:
  struct Group {
    OptimizerParams hp;                          // effective hyperparameters of this group
    torch::Tensor master;                        // fp32 [padded_numel]
    bool master_aliases = false;
    std::map<std::string, torch::Tensor> state;  // fp32 [padded_numel] each
    std::vector<std::pair<int64_t, int64_t>> segments;  // (offset, numel) per parameter
    int64_t numel = 0;                           // padded_numel of the span
    torch::Tensor exp_avg_mask;                  // fp32 [padded_numel] (ParamGroup's), or undefined
  };
  struct SubGroup {  // one unit of the swapper: [offset, offset + numel) of group `group`
    size_t group;
    int64_t offset, numel;
  };
  void setup_swapper(const std::vector<torch::Tensor>& storage, const MasterPlacement& placement, MemoryLedger& ledger);
  void step_swapped(const std::vector<torch::Tensor>& fp32_grads, const MasterSink& sink);
  // Lamb and per-tensor Adam step each whole span in one call that walks its parameters (the trust
  // ratio, the per-tensor kernel calls); every other optimizer is elementwise and may be cut anywhere.
  bool steps_whole_spans() const;
  void step_group(Group& g, const torch::Tensor& grad);
  // step_group in pieces of at most `piece` elements (inside each sub-group), each handed to sink:
  // the same kernel calls cut shorter, so the same numbers.
  void step_group_in_pieces(size_t gi, const torch::Tensor& grad, int64_t piece, const MasterSink& sink);
  // One kernel call over [offset, offset + n). same_call: the continuation of the previous span's
  // call (a piece of one sub-group), so Adam's beta^t is not advanced again.
  void step_span(Group& g, const float* grad, int64_t offset, int64_t n, bool same_call = false);
  void step_compressed(const std::vector<torch::Tensor>& fp32_grads);

  OptimizerConfig config_;
  KernelCalls calls_;
  int64_t sub_group_size_ = 0;
  optim::AdamStepState adam_state_;  // one per optimizer object, as DeepSpeed's CPU Adam
  std::vector<Group> groups_;
  int64_t steps_ = 0;
  std::vector<std::string> state_names_;            // the optimizer's, e.g. {"exp_avg", "exp_avg_sq"}
  std::vector<SubGroup> sub_groups_;                // swapped only
  std::unique_ptr<aio::AioEngine> aio_;             // swapped only
  std::unique_ptr<offload::OptimizerSwapper> swapper_;
  std::unique_ptr<optim::CompressedOptimizer> compressed_;  // the 1-bit family only
  std::string compressed_phase_;                            // logged when it changes
};

}  // namespace ds::zero
