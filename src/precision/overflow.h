// Gradient overflow detection (inf/NaN) and ZeRO/FP16 unscale+clip over LibTorch tensors
// (reference §8.2, §10). Works for fp32, fp16 and bf16 on any device.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <optional>
#include <vector>

namespace ds::precision {

// True when t holds +inf, -inf or NaN. One min/max reduction (two passes for fp16 on CPU), no copy and no false positive from
// a large-but-finite sum (DeepSpeed's older float-sum test could overflow). Integer, bool and
// empty or undefined tensors are finite.
bool has_inf_or_nan(const torch::Tensor& t);

// Index of the first tensor holding inf/NaN, or nullopt. Reduces every tensor first and reads the
// flags back once, so a GPU step synchronises once rather than once per tensor.
std::optional<size_t> first_non_finite(const std::vector<torch::Tensor>& tensors);

// ZeRO/FP16 unscale+clip in place: g *= 1 / combined_unscale_factor(loss_scale, clip,
// total_norm_scaled) (see loss_scaler.h). Multiplies by the reciprocal, as DeepSpeed does.
// Returns the combined factor.
double unscale_and_clip(std::vector<torch::Tensor>& grads_fp32, double loss_scale, double clip,
                        double total_norm_scaled);

}  // namespace ds::precision
