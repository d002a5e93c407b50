// The formulas follow transformers' modeling_rope_utils.py op for op (Python's `scalar / tensor`
// is `tensor.reciprocal() * scalar` there), so inv_freq is bit-identical to HF's in fp32.
#include "models/rope.h"

#include <cmath>
#include <numbers>

#include "nn/fused_ops.h"
#include "util/error.h"

namespace ds::models {
namespace {

double number(const nlohmann::json& v, const std::string& key, const std::string& source) {
  if (!v.contains(key) || v.at(key).is_null())
    throw ConfigError("rope_scaling." + key, "missing: rope_scaling of type \"" +
                                                 v.value("rope_type", v.value("type", std::string("?"))) +
                                                 "\" needs it (in " + source + ")");
  if (!v.at(key).is_number())
    throw ConfigError("rope_scaling." + key, "must be a number, got " + v.at(key).dump() + " (in " + source + ")");
  return v.at(key).get<double>();
}

}  // namespace

RopeScaling rope_scaling_from_json(const nlohmann::json& v, const std::string& source) {
  RopeScaling s;
  if (v.is_null()) return s;
  if (!v.is_object()) throw ConfigError("rope_scaling", "must be an object or null (in " + source + ")");
  const auto type_of = [&](const char* key) -> std::string {
    if (!v.contains(key) || v.at(key).is_null()) return "";
    if (!v.at(key).is_string())
      throw ConfigError(std::string("rope_scaling.") + key, "must be a string (in " + source + ")");
    return v.at(key).get<std::string>();
  };
  s.type = type_of("rope_type");
  if (s.type.empty()) s.type = type_of("type");
  if (s.type.empty()) throw ConfigError("rope_scaling", "needs \"rope_type\" (or \"type\") (in " + source + ")");
  if (s.type == "default") return s;
  DS_CHECK(s.type == "linear" || s.type == "dynamic" || s.type == "llama3", NotSupported,
           "rope_scaling type \"" + s.type + "\" is not supported (in " + source +
               "); supported: default, linear, dynamic, llama3");
  s.factor = number(v, "factor", source);
  if (!(s.factor >= 1.0))
    throw ConfigError("rope_scaling.factor", "must be >= 1, got " + std::to_string(s.factor) + " (in " + source + ")");
  if (s.type == "llama3") {
    s.low_freq_factor = number(v, "low_freq_factor", source);
    s.high_freq_factor = number(v, "high_freq_factor", source);
    const double orig = number(v, "original_max_position_embeddings", source);
    s.original_max_position_embeddings = static_cast<int64_t>(orig);
    if (!(s.high_freq_factor > s.low_freq_factor && s.original_max_position_embeddings > 0))
      throw ConfigError("rope_scaling", "llama3 needs high_freq_factor > low_freq_factor and "
                                        "original_max_position_embeddings > 0 (in " + source + ")");
  }
  return s;
}

nlohmann::json rope_scaling_to_json(const RopeScaling& s) {
  if (s.type == "default") return nullptr;
  nlohmann::json j = {{"rope_type", s.type}, {"type", s.type}, {"factor", s.factor}};
  if (s.type == "llama3") {
    j["low_freq_factor"] = s.low_freq_factor;
    j["high_freq_factor"] = s.high_freq_factor;
    j["original_max_position_embeddings"] = s.original_max_position_embeddings;
  }
  return j;
}

torch::Tensor rope_inv_freq(int64_t dim, double theta, const RopeScaling& s, int64_t max_position_embeddings,
                            int64_t seq_len) {
  torch::NoGradGuard no_grad;
  double base = theta;
  if (s.type == "dynamic") {
    const double len = static_cast<double>(seq_len > max_position_embeddings ? seq_len : max_position_embeddings);
    base = base * std::pow(s.factor * len / static_cast<double>(max_position_embeddings) - (s.factor - 1.0),
                           static_cast<double>(dim) / static_cast<double>(dim - 2));
  }
  // 1.0 / (base ** (arange(0, dim, 2).float() / dim))
  auto exponent = torch::arange(0, dim, 2, torch::kLong).to(torch::kFloat) / dim;
  auto inv_freq = torch::pow(base, exponent).reciprocal() * 1.0;
  if (s.type == "linear") inv_freq = inv_freq / s.factor;
  if (s.type == "llama3") {
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_freq_wavelen = old_len / s.low_freq_factor;
    const double high_freq_wavelen = old_len / s.high_freq_factor;
    auto wavelen = inv_freq.reciprocal() * (2 * std::numbers::pi);
    auto llama = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
    auto smooth = (wavelen.reciprocal() * old_len - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    auto smoothed = (1 - smooth) * llama / s.factor + smooth * llama;
    auto is_medium = (wavelen < high_freq_wavelen).logical_not().logical_and((wavelen > low_freq_wavelen).logical_not());
    inv_freq = torch::where(is_medium, smoothed, llama);
  }
  return inv_freq;
}

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, double theta, RopeScaling scaling, int64_t max_position_embeddings)
    : dim_(head_dim),
      theta_(theta),
      scaling_(std::move(scaling)),
      max_positions_(max_position_embeddings),
      inv_freq_(rope_inv_freq(dim_, theta_, scaling_, max_positions_, 0)),
      max_seq_len_cached_(max_position_embeddings) {}

torch::Tensor RotaryEmbedding::inv_freq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inv_freq_;
}

std::pair<torch::Tensor, torch::Tensor> RotaryEmbedding::cos_sin(int64_t t, torch::ScalarType dtype,
                                                                 torch::Device device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (scaling_.type == "dynamic") {  // transformers' dynamic_rope_update
    bool changed = false;
    if (t > max_seq_len_cached_) {
      inv_freq_ = rope_inv_freq(dim_, theta_, scaling_, max_positions_, t);
      max_seq_len_cached_ = t;
      changed = true;
    }
    if (t < max_positions_ && max_seq_len_cached_ > max_positions_) {
      inv_freq_ = rope_inv_freq(dim_, theta_, scaling_, max_positions_, 0);
      max_seq_len_cached_ = max_positions_;
      changed = true;
    }
    if (changed) cached_t_ = -1;
  }
  if (t != cached_t_ || dtype != cached_dtype_ || device != cached_device_) {
    torch::NoGradGuard no_grad;
    auto pos = torch::arange(t, torch::kLong).to(torch::kFloat);
    auto freqs = torch::outer(pos, inv_freq_);  // [T, D/2]: inv_freq[i]·t, one fp32 product each
    auto emb = torch::cat({freqs, freqs}, -1);  // [T, D]
    cos_ = emb.cos().to(device, dtype);
    sin_ = emb.sin().to(device, dtype);
    cached_t_ = t;
    cached_dtype_ = dtype;
    cached_device_ = device;
  }
  return {cos_, sin_};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  return nn::rotary(x, cos, sin);
}

}  // namespace ds::models
