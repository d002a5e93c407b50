// inf/NaN checks and unscale+clip (see overflow.h).
#include "precision/overflow.h"

#include "precision/loss_scaler.h"

namespace ds::precision {
namespace {

bool checkable(const torch::Tensor& t) {
  return t.defined() && t.numel() > 0 && t.is_floating_point();
}

// [min, max] of t as fp32 (fp16/bf16 inf and NaN survive the cast). NaN propagates through both,
// +inf shows in max and -inf in min, so both are finite exactly when t is. A float sum would give
// false alarms: 100000 fp16 values of 60000 sum to inf in fp16.
torch::Tensor min_max(const torch::Tensor& t) {
  if (t.scalar_type() == torch::kHalf && t.device().is_cpu()) {
    // LibTorch 1.13 has no CPU aminmax for Half; min and max are two passes, still no copy.
    return torch::stack({t.min(), t.max()}).to(torch::kFloat);
  }
  auto [lo, hi] = torch::aminmax(t);
  return torch::stack({lo, hi}).to(torch::kFloat);
}

}  // namespace

bool has_inf_or_nan(const torch::Tensor& t) {
  if (!checkable(t)) return false;
  return !torch::isfinite(min_max(t)).all().item<bool>();
}

std::optional<size_t> first_non_finite(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> flags;  // one per checkable tensor: true = holds inf/NaN
  std::vector<size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!checkable(tensors[i])) continue;
    auto mm = min_max(tensors[i]);
    if (!flags.empty() && mm.device() != flags.front().device()) mm = mm.to(flags.front().device());
    flags.push_back(torch::isfinite(mm).all().logical_not());
    index.push_back(i);
  }
  if (flags.empty()) return std::nullopt;
  auto bad = torch::stack(flags).to(torch::kCPU);  // the one device→host read
  const bool* p = bad.data_ptr<bool>();
  for (size_t k = 0; k < index.size(); ++k)
    if (p[k]) return index[k];
  return std::nullopt;
}

double unscale_and_clip(std::vector<torch::Tensor>& grads_fp32, double loss_scale, double clip,
                        double total_norm_scaled) {
  const double combined = combined_unscale_factor(loss_scale, clip, total_norm_scaled);
  if (combined == 1.0) return combined;  // bf16/fp32 without clipping: nothing to do
  const double inv = 1.0 / combined;
  torch::NoGradGuard no_grad;
  for (auto& g : grads_fp32)
    if (g.defined()) g.mul_(inv);
  return combined;
}

}  // namespace ds::precision
