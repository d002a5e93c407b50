// FlatOptimizer with its state on NVMe (ZeRO-Infinity, offload_optimizer.device "nvme"): every
// group's span is cut into sub-groups of sub_group_size elements; the fp32 master and the
// optimizer's states of each live in swap files (offload::OptimizerSwapper) and are streamed through
// a few aligned buffers — read k+1 while updating k while writing k-1. The optimizer holds no fp32
// state in RAM beyond those buffers: each sub-group's updated master goes to the step's sink (the
// 16-bit write-back) while it is in its buffer.
#include <fmt/format.h>

#include "optim/adagrad.h"
#include "util/error.h"
#include "util/logging.h"
#include "zero/flat_optimizer.h"

namespace ds::zero {

void FlatOptimizer::setup_swapper(const std::vector<torch::Tensor>& storage, const MasterPlacement& placement,
                                  MemoryLedger& ledger) {
  DS_CHECK(config_.type != OptimizerType::Lamb, NotSupported,
           "zero_optimization.offload_optimizer.device: \"nvme\" steps sub-groups one at a time; Lamb needs whole "
           "parameters (use Adam/AdamW/Lion/Adagrad/SGD)");
  DS_CHECK(calls_ == KernelCalls::PerPartition, NotSupported,
           "zero_optimization.offload_optimizer.device: \"nvme\" needs a ZeRO stage >= 1");
  offload::SwapLayout layout;
  layout.state_names.push_back("fp32");
  for (const auto& n : state_names_) layout.state_names.push_back(n);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int64_t n = groups_[g].numel;
    const int64_t sub = placement.sub_group_size > 0 ? placement.sub_group_size : std::max<int64_t>(n, 1);
    for (int64_t off = 0; off < n; off += sub) {
      sub_groups_.push_back({g, off, std::min(sub, n - off)});
      layout.sub_group_numel.push_back(sub_groups_.back().numel);
    }
  }
  aio_ = std::make_unique<aio::AioEngine>(aio::AioOptions::from_config(placement.aio));
  swapper_ = std::make_unique<offload::OptimizerSwapper>(
      *aio_, offload::swapper_options(*placement.nvme, placement.zero_stage, placement.rank, layout));
  // Initial values: the master from the parameters, zero moments (Adagrad: its initial sum).
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < sub_groups_.size(); ++k) {
    const SubGroup& sg = sub_groups_[k];
    std::vector<torch::Tensor> init;
    const torch::Tensor params = placement.read_params ? placement.read_params(sg.group, sg.offset, sg.numel)
                                                       : storage[sg.group].narrow(0, sg.offset, sg.numel);
    init.push_back(params.to(torch::kCPU, torch::kFloat32).contiguous());
    for (const auto& name : state_names_) {
      init.push_back(torch::zeros({sg.numel}, torch::kFloat32));
      if (name == "sum") optim::adagrad_init_state(init.back().data_ptr<float>(), sg.numel,
                                                   optim::AdagradHyperparams::from_config(groups_[sg.group].hp));
    }
    std::vector<const float*> ptrs;
    for (const auto& t : init) ptrs.push_back(t.data_ptr<float>());
    swapper_->write_sub_group(int64_t(k), ptrs);
  }
  int64_t total = 0;
  for (const auto& g : groups_) total += g.numel;
  ledger.add(Tier::Nvme, MemKind::Master, total * int64_t(sizeof(float)));
  ledger.add(Tier::Nvme, MemKind::OptimizerState, total * int64_t(sizeof(float) * state_names_.size()));
  ledger.add(Tier::Cpu, MemKind::Buffers, swapper_->buffers_allocated() * swapper_->buffer_bytes());
  log::info("ZeRO-Infinity: optimizer state of {} elements in {} sub-group(s) under {} ({} swap buffers of {} bytes, "
            "aio backend {})",
            total, sub_groups_.size(), swapper_->directory(), swapper_->buffers_allocated(), swapper_->buffer_bytes(),
            aio::to_string(aio_->backend()));
  swapper_->reset_stats();  // the report counts training traffic, not these initial writes
}

void FlatOptimizer::step_swapped(const std::vector<torch::Tensor>& grads, const MasterSink& sink) {
  begin_step();
  swapper_->for_each_sub_group([&](int64_t k, std::span<float* const> states) {
    const SubGroup& sg = sub_groups_[size_t(k)];
    Group& g = groups_[sg.group];
    // The kernels read master and state through the group's tensors: point them at the buffers.
    Group view = g;
    view.master = torch::from_blob(states[0], {sg.numel}, torch::kFloat32);
    for (size_t j = 0; j < state_names_.size(); ++j)
      view.state[state_names_[j]] = torch::from_blob(states[j + 1], {sg.numel}, torch::kFloat32);
    step_span(view, grads[sg.group].data_ptr<float>() + sg.offset, 0, sg.numel);
    if (sink) sink(sg.group, sg.offset, view.master);
  });
}

std::vector<FlatOptimizer::SubGroupSpan> FlatOptimizer::sub_group_spans() const {
  std::vector<SubGroupSpan> out;
  for (const auto& sg : sub_groups_) out.push_back({sg.group, sg.offset, sg.numel});
  return out;
}

std::optional<offload::SwapStats> FlatOptimizer::swap_stats() const {
  if (!swapper_) return std::nullopt;
  return swapper_->stats();
}

}  // namespace ds::zero
