#include "zero/flat_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/lamb.h"
#include "optim/lion.h"
#include "optim/sgd.h"
#include "optim/tiles.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::zero {
namespace {

std::vector<std::string> state_names_for(OptimizerType t, const OptimizerParams& p) {
  if (is_onebit(t)) return optim::compressed_state_names(t);
  switch (t) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
    case OptimizerType::Lamb: return {"exp_avg", "exp_avg_sq"};
    case OptimizerType::SGD: return p.momentum != 0.0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
    case OptimizerType::Adagrad: return {"sum"};
    case OptimizerType::Lion: return {"exp_avg"};
    default: break;
  }
  return {};
}

float* f32(const torch::Tensor& t) { return t.data_ptr<float>(); }

// ParamGroup::exp_avg_mask laid over a flat group: the mask under each parameter, 1 on padding.
torch::Tensor flat_exp_avg_mask(OptimizerType type, const FlatGroup& fg, const torch::Tensor& mask) {
  if (!is_onebit(type))
    throw ConfigError("optimizer.type", fmt::format("exp_avg_mask (param group {}) is read by the 1-bit optimizers only "
                                                    "(OneBitAdam, ZeroOneAdam, OneBitLamb), not {}",
                                                    fg.param_group, to_string(type)));
  torch::Tensor flat = torch::ones({fg.padded_numel}, torch::kFloat32);
  const torch::Tensor m = mask.detach().to(torch::kCPU, torch::kFloat32).contiguous().reshape({-1});
  for (const auto& s : fg.slots) {
    DS_CHECK(s.param_offset == 0 && m.numel() == s.numel, Error,
             fmt::format("exp_avg_mask (param group {}): {} elements, but parameter {} has {}{}; a group's mask has "
                         "the shape of each of its parameters (give a masked parameter a group of its own)",
                         fg.param_group, m.numel(), s.name, s.numel, s.param_offset ? " (a partition's piece)" : ""));
    flat.narrow(0, s.offset, s.numel).copy_(m);
  }
  return flat;
}

}  // namespace

FlatOptimizer::FlatOptimizer(const OptimizerConfig& config, const std::vector<GroupHyperparams>& overrides,
                             const std::vector<FlatGroup>& layout, const std::vector<torch::Tensor>& storage,
                             MemoryLedger& ledger, Tier tier, KernelCalls calls, MasterPlacement placement,
                             comm::Communicator* data_parallel, const std::vector<std::string>& kept_apart)
    : config_(config), calls_(calls), sub_group_size_(placement.sub_group_size) {
  DS_ASSERT(layout.size() == storage.size(), "one storage tensor per flat group");
  if (is_onebit(config.type)) {
    DS_ASSERT(data_parallel != nullptr, "the 1-bit optimizers need the data-parallel communicator");
    DS_CHECK(!placement.nvme && tier != Tier::Cpu, NotSupported,
             "optimizer.type: " + to_string(config.type) + " runs without ZeRO and without offload");
    std::vector<std::vector<optim::ParamSpan>> params;
    for (const FlatGroup& fg : layout) {
      params.emplace_back();
      for (const auto& s : fg.slots)
        params.back().push_back(
            {s.offset, s.numel, std::find(kept_apart.begin(), kept_apart.end(), s.name) != kept_apart.end()});
    }
    compressed_ = optim::make_compressed_optimizer(config, *data_parallel, params);
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < layout.size(); ++i) {
    const FlatGroup& fg = layout[i];
    Group g;
    g.hp = config.params;
    if (static_cast<size_t>(fg.param_group) < overrides.size()) {
      const auto& o = overrides[fg.param_group];
      if (o.lr) g.hp.lr = *o.lr;
      if (o.weight_decay) g.hp.weight_decay = *o.weight_decay;
      if (o.exp_avg_mask.defined()) g.exp_avg_mask = flat_exp_avg_mask(config.type, fg, o.exp_avg_mask);
    }
    DS_CHECK(!storage[i].defined() || storage[i].is_cpu() || tier == Tier::Cpu, NotSupported,
             "the flat optimizer kernels run on CPU tensors; accelerator master weights arrive with the CUDA build");
    g.numel = fg.padded_numel;
    for (const auto& s : fg.slots) g.segments.emplace_back(s.offset, s.numel);
    if (placement.nvme) {  // master and state go to swap files below
      groups_.push_back(std::move(g));
      continue;
    }
    g.master_aliases = placement.alias_fp32 && storage[i].scalar_type() == torch::kFloat32;
    auto host = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU).pinned_memory(placement.pinned);
    if (g.master_aliases) {
      g.master = storage[i];
    } else {
      g.master = torch::empty({storage[i].numel()}, host);
      g.master.copy_(storage[i]);  // device → host, rounded up to fp32
      ledger.add(tier, MemKind::Master, g.master.numel() * sizeof(float));
    }
    for (const auto& name : state_names_for(config.type, g.hp)) {
      g.state[name] = torch::zeros({fg.padded_numel}, host);
      ledger.add(tier, MemKind::OptimizerState, fg.padded_numel * sizeof(float));
    }
    if (config.type == OptimizerType::Adagrad) {
      auto h = optim::AdagradHyperparams::from_config(g.hp);
      optim::adagrad_init_state(f32(g.state["sum"]), fg.padded_numel, h);
    }
    groups_.push_back(std::move(g));
  }
  if (!groups_.empty()) state_names_ = state_names_for(config.type, groups_.front().hp);
  if (compressed_) ledger.add(tier, MemKind::OptimizerState, compressed_->held_bytes());  // error buffers
  if (placement.nvme) setup_swapper(storage, placement, ledger);
  // Validate hyperparameters now (the kernels' from_config throw ConfigError), not at step 1.
  for (auto& g : groups_) {
    switch (config_.type) {
      case OptimizerType::SGD: (void)optim::SgdHyperparams::from_config(g.hp); break;
      case OptimizerType::Adagrad: (void)optim::AdagradHyperparams::from_config(g.hp); break;
      case OptimizerType::Lamb: (void)optim::LambHyperparams::from_config(g.hp); break;
      case OptimizerType::Lion: (void)optim::LionHyperparams::from_config(g.hp); break;
      default: break;
    }
  }
}

void FlatOptimizer::step(const std::vector<torch::Tensor>& grads, const MasterSink& sink,
                         const std::vector<int64_t>& pieces) {
  DS_ASSERT(grads.size() == groups_.size(), "one gradient span per group");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < groups_.size(); ++i)
    DS_ASSERT(grads[i].scalar_type() == torch::kFloat32 && grads[i].is_contiguous() && grads[i].numel() == groups_[i].numel,
              "gradient spans must be contiguous fp32 of the group's length");
  if (swapper_) {
    step_swapped(grads, sink);
    return;
  }
  if (compressed_) {
    step_compressed(grads);
    if (sink)
      for (size_t i = 0; i < groups_.size(); ++i) sink(i, 0, groups_[i].master);
    return;
  }
  begin_step();
  for (size_t i = 0; i < groups_.size(); ++i) {
    const int64_t piece = i < pieces.size() ? pieces[i] : 0;
    if (sink && !steps_whole_spans() && piece > 0 && piece < groups_[i].numel) {
      step_group_in_pieces(i, grads[i], piece, sink);
      continue;
    }
    step_group(groups_[i], grads[i]);
    if (sink) sink(i, 0, groups_[i].master);
  }
}

void FlatOptimizer::step_group_in_pieces(size_t gi, const torch::Tensor& grad, int64_t piece, const MasterSink& sink) {
  DS_ASSERT(piece % optim::kTileAlign == 0, "pieces start where a whole-span pass starts a tile");
  Group& g = groups_[gi];
  const int64_t n = g.master.numel();
  const int64_t sub = sub_group_size_ > 0 ? sub_group_size_ : std::max<int64_t>(n, 1);
  for (int64_t s = 0; s < n; s += sub) {
    const int64_t end = std::min(s + sub, n);
    for (int64_t off = s; off < end; off += piece) {
      const int64_t len = std::min(piece, end - off);
      step_span(g, grad.data_ptr<float>(), off, len, /*same_call=*/off > s);
      sink(gi, off, g.master.narrow(0, off, len));
    }
  }
}

void FlatOptimizer::begin_step() {
  DS_ASSERT(!compressed_, "the 1-bit optimizers step all groups at once (step), never by range");
  ++steps_;
}

void FlatOptimizer::step_compressed(const std::vector<torch::Tensor>& grads) {
  ++steps_;
  std::vector<optim::CompressedGroup> views;
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& g = groups_[i];
    optim::CompressedGroup v;
    v.param = f32(g.master);
    v.grad = grads[i].data_ptr<float>();
    v.exp_avg = f32(g.state.at("exp_avg"));
    v.exp_avg_sq = f32(g.state.at("exp_avg_sq"));
    if (auto it = g.state.find("exp_avg_sq_fresh"); it != g.state.end()) v.exp_avg_sq_fresh = f32(it->second);
    if (g.exp_avg_mask.defined()) v.exp_avg_mask = f32(g.exp_avg_mask);
    v.numel = g.numel;
    v.lr = g.hp.lr;
    v.weight_decay = g.hp.weight_decay;
    v.beta1 = g.hp.betas[0];
    v.beta2 = g.hp.betas[1];
    v.eps = g.hp.eps;
    views.push_back(v);
  }
  compressed_->step(views);
  if (compressed_->phase() != compressed_phase_) {
    if (!compressed_phase_.empty())
      log::info("{}: {} from step {} on", to_string(config_.type), compressed_->phase(), compressed_->steps() + 1);
    compressed_phase_ = compressed_->phase();
  }
}

void FlatOptimizer::step_range(size_t gi, int64_t begin, int64_t end, const torch::Tensor& grad) {
  DS_ASSERT(gi < groups_.size() && 0 <= begin && begin <= end && end <= groups_[gi].master.numel() &&
                grad.scalar_type() == torch::kFloat32 && grad.is_contiguous() && grad.numel() == groups_[gi].master.numel(),
            "step_range over a contiguous fp32 gradient span of the group's length");
  DS_ASSERT(config_.type != OptimizerType::Lamb, "Lamb needs whole parameters; it never steps by range");
  DS_ASSERT(!swapper_, "swapped optimizer state steps sub-group by sub-group, not by range");
  torch::NoGradGuard no_grad;
  step_span(groups_[gi], grad.data_ptr<float>(), begin, end - begin);
}

bool FlatOptimizer::steps_whole_spans() const {
  const bool adam = config_.type == OptimizerType::Adam || config_.type == OptimizerType::AdamW;
  return config_.type == OptimizerType::Lamb || (adam && calls_ == KernelCalls::PerTensor);
}

void FlatOptimizer::step_group(Group& g, const torch::Tensor& grad) {
  const int64_t n = g.master.numel();
  const float* gr = grad.data_ptr<float>();
  if (steps_whole_spans()) {
    step_span(g, gr, 0, n);  // per-parameter structure handled inside
    return;
  }
  // One kernel call per sub-group (the whole span without sub-groups).
  const int64_t sub = sub_group_size_ > 0 ? sub_group_size_ : std::max<int64_t>(n, 1);
  for (int64_t off = 0; off < n; off += sub) step_span(g, gr, off, std::min(sub, n - off));
}

void FlatOptimizer::step_span(Group& g, const float* grad, int64_t off, int64_t n, bool same_call) {
  float* p = f32(g.master) + off;
  const float* gr = grad + off;
  auto state = [&](const char* name) { return f32(g.state[name]) + off; };
  switch (config_.type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW: {
      optim::AdamHyperparams h;
      h.lr = g.hp.lr;
      h.beta1 = g.hp.betas[0];
      h.beta2 = g.hp.betas[1];
      h.eps = g.hp.eps;
      h.weight_decay = g.hp.weight_decay;
      h.bias_correction = g.hp.bias_correction;
      h.adamw_mode = config_.type == OptimizerType::AdamW || g.hp.adam_w_mode;
      float* m = state("exp_avg");
      float* v = state("exp_avg_sq");
      if (calls_ == KernelCalls::PerPartition) {
        if (!same_call) adam_state_.advance(steps_, h.beta1, h.beta2);
        optim::adam_update(p, gr, m, v, n, h, adam_state_);
      } else {
        for (auto [s_off, len] : g.segments) {  // stage 0: per tensor (off is 0 here)
          adam_state_.advance(steps_, h.beta1, h.beta2);
          optim::adam_update(p + s_off, gr + s_off, m + s_off, v + s_off, len, h, adam_state_);
        }
      }
      break;
    }
    case OptimizerType::SGD: {
      auto h = optim::SgdHyperparams::from_config(g.hp);
      optim::SgdState s{steps_ > 1};
      float* buf = g.state.count("momentum_buffer") ? state("momentum_buffer") : nullptr;
      optim::sgd_update(p, gr, buf, n, h, s);
      break;
    }
    case OptimizerType::Adagrad: {
      auto h = optim::AdagradHyperparams::from_config(g.hp);
      optim::adagrad_update(p, gr, state("sum"), n, h, optim::AdagradState{steps_});
      break;
    }
    case OptimizerType::Lamb: {
      auto h = optim::LambHyperparams::from_config(g.hp);
      std::vector<optim::LambSegment> segs;
      for (auto [s_off, len] : g.segments) segs.push_back({s_off, len});
      optim::lamb_update(p, gr, state("exp_avg"), state("exp_avg_sq"), n, segs, h, optim::LambState{steps_});
      break;
    }
    case OptimizerType::Lion: {
      auto h = optim::LionHyperparams::from_config(g.hp);
      optim::lion_update(p, gr, state("exp_avg"), n, h);
      break;
    }
    default: DS_ASSERT(false, "the 1-bit optimizers step in step_compressed");
  }
}

std::vector<double> FlatOptimizer::lrs() const {
  std::vector<double> out;
  for (const auto& g : groups_) out.push_back(g.hp.lr);
  return out;
}

std::vector<std::array<double, 2>> FlatOptimizer::betas() const {
  std::vector<std::array<double, 2>> out;
  for (const auto& g : groups_) out.push_back(g.hp.betas);
  return out;
}

void FlatOptimizer::set_lr(size_t group, double lr) {
  DS_ASSERT(group < groups_.size(), "group index out of range");
  groups_[group].hp.lr = lr;
}

void FlatOptimizer::set_betas(size_t group, std::array<double, 2> betas) {
  DS_ASSERT(group < groups_.size(), "group index out of range");
  groups_[group].hp.betas = betas;
}

}  // namespace ds::zero
