#include "zero/flat_optimizer.h"

#include <cmath>

#include "util/error.h"

namespace ds::zero {
namespace {

// The same update with tensor ops, for parameters on an accelerator (CPU uses the span kernel).
void adam_update_tensors(torch::Tensor& p, const torch::Tensor& g, torch::Tensor& m, torch::Tensor& v,
                         const optim::AdamHyperparams& h, const optim::AdamStepState& s) {
  const double bc1 = h.bias_correction ? 1.0 - s.beta1_t() : 1.0;
  const double bc2 = h.bias_correction ? 1.0 / std::sqrt(1.0 - s.beta2_t()) : 1.0;
  torch::Tensor grad = g;
  if (!h.adamw_mode && h.weight_decay > 0) grad = g.add(p, h.weight_decay);
  m.mul_(h.beta1).add_(grad, 1.0 - h.beta1);
  v.mul_(h.beta2).addcmul_(grad, grad, 1.0 - h.beta2);
  auto denom = v.sqrt().mul_(bc2).add_(h.eps);
  if (h.adamw_mode && h.weight_decay > 0) p.mul_(1.0 - h.lr * h.weight_decay);
  p.addcdiv_(m, denom, -h.lr / bc1);
}

}  // namespace

FlatAdamOptimizer::FlatAdamOptimizer(FlatParameters& flat, FlatAdamOptions options,
                                     MemoryLedger& ledger, Tier tier)
    : flat_(flat) {
  torch::NoGradGuard no_grad;
  for (auto& fg : flat_.groups()) {
    Group g;
    g.hp = options.defaults;
    if (static_cast<size_t>(fg.param_group) < options.groups.size()) {
      const auto& over = options.groups[fg.param_group];
      if (over.lr) g.hp.lr = *over.lr;
      if (over.weight_decay) g.hp.weight_decay = *over.weight_decay;
    }
    auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(fg.params.device());
    g.master_aliases_params = fg.dtype == torch::kFloat32;
    g.master = g.master_aliases_params ? fg.params : fg.params.to(torch::kFloat32).contiguous();
    g.exp_avg = torch::zeros({fg.padded_numel}, f32);
    g.exp_avg_sq = torch::zeros({fg.padded_numel}, f32);
    const uint64_t state_bytes = 2ull * fg.padded_numel * sizeof(float);
    ledger.add(tier, MemKind::OptimizerState, state_bytes);
    if (!g.master_aliases_params) ledger.add(tier, MemKind::Master, fg.padded_numel * sizeof(float));
    groups_.push_back(std::move(g));
  }
}

void FlatAdamOptimizer::step() {
  torch::NoGradGuard no_grad;
  state_.advance(state_.step() + 1, groups_.empty() ? 0.9 : groups_[0].hp.beta1,
                 groups_.empty() ? 0.999 : groups_[0].hp.beta2);
  auto& fgs = flat_.groups();
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& g = groups_[i];
    FlatGroup& fg = fgs[i];
    torch::Tensor grad = fg.grads.scalar_type() == torch::kFloat32 ? fg.grads : fg.grads.to(torch::kFloat32);
    DS_ASSERT(g.master.is_contiguous() && grad.is_contiguous(), "flat spans must be contiguous");
    if (g.master.is_cpu()) {
      optim::adam_update(g.master.data_ptr<float>(), grad.data_ptr<float>(), g.exp_avg.data_ptr<float>(),
                         g.exp_avg_sq.data_ptr<float>(), fg.padded_numel, g.hp, state_);
    } else {
      adam_update_tensors(g.master, grad, g.exp_avg, g.exp_avg_sq, g.hp, state_);
    }
    if (!g.master_aliases_params) fg.params.copy_(g.master);
  }
}

std::vector<double> FlatAdamOptimizer::lrs() const {
  std::vector<double> out;
  for (const auto& g : groups_) out.push_back(g.hp.lr);
  return out;
}

void FlatAdamOptimizer::set_lr(size_t group, double lr) {
  DS_ASSERT(group < groups_.size(), "group index out of range");
  groups_[group].hp.lr = lr;
}

}  // namespace ds::zero
