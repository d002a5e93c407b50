// Rotary position embeddings as Hugging Face's Llama family computes them (modeling_rope_utils.py):
// inv_freq for the rope_scaling types default / linear / dynamic / llama3, cos and sin per
// position, and apply_rotary (rotate_half convention: the two halves of each head are the pairs).
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

namespace ds::models {

struct RopeScaling {
  std::string type = "default";  // "default" | "linear" | "dynamic" | "llama3"
  double factor = 1.0;
  // llama3 only:
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;

  bool operator==(const RopeScaling&) const = default;
};

// config.json's "rope_scaling" (null or absent → default). Accepts "rope_type" or the legacy
// "type". An unsupported type (yarn, longrope, ...) is ds::NotSupported naming it; a missing or
// bad parameter is ds::ConfigError("rope_scaling.<key>", ...). `source` names the file.
RopeScaling rope_scaling_from_json(const nlohmann::json& v, const std::string& source);
// null for default, else {"rope_type": ..., "type": ..., "factor": ..., [llama3 keys]}.
nlohmann::json rope_scaling_to_json(const RopeScaling& s);

// inv_freq, float32 [dim/2], exactly as transformers computes it (same op order, fp32). `seq_len`
// matters only for "dynamic" (NTK: the base grows once seq_len > max_position_embeddings).
torch::Tensor rope_inv_freq(int64_t dim, double theta, const RopeScaling& s, int64_t max_position_embeddings,
                            int64_t seq_len);

// One per model (all layers share it). cos/sin for positions 0..T-1 are cached per (T, dtype,
// device). For "dynamic", HF's state is kept: the frequencies grow with the longest sequence
// seen beyond max_position_embeddings and reset when a sequence shorter than it arrives.
class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_dim, double theta, RopeScaling scaling, int64_t max_position_embeddings);

  // cos, sin: [T, head_dim] in `dtype` on `device` (computed in fp32 without autograd).
  std::pair<torch::Tensor, torch::Tensor> cos_sin(int64_t t, torch::ScalarType dtype, torch::Device device);
  torch::Tensor inv_freq() const;

 private:
  int64_t dim_;
  double theta_;
  RopeScaling scaling_;
  int64_t max_positions_;
  mutable std::mutex mu_;
  torch::Tensor inv_freq_;
  int64_t max_seq_len_cached_;
  // cache of the last cos/sin
  int64_t cached_t_ = -1;
  torch::ScalarType cached_dtype_ = torch::kFloat;
  torch::Device cached_device_ = torch::kCPU;
  torch::Tensor cos_, sin_;
};

// x [B,H,T,D] with cos/sin [T,D]: x·cos + rotate_half(x)·sin, rotate_half(x) = cat(−x₂, x₁).
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace ds::models
